/**
 * Client address tests in a translated match (Cloudflare's `ip.src`, AWS WAF's IP sets): the ranges a rule applies
 * to (`match.address`) and those it never applies to (`match.except_address`), combined as AND and NOT combine them.
 */

/** The address part of a translated match. */
export interface AddressScope {
  readonly addresses?: readonly string[];
  readonly exceptAddresses?: readonly string[];
}

/** Whether a match tests the client address. */
export const byAddress = (s: AddressScope): boolean => s.addresses !== undefined || s.exceptAddresses !== undefined;

/** Both hold: excepted ranges add up; two lists of ranges a client must be in are refused (the reason). */
export function bothAddresses(a: AddressScope, b: AddressScope): AddressScope | string {
  if (a.addresses !== undefined && b.addresses !== undefined)
    return "two client address tests that must both hold: only the ranges both take, which the import does not work out";
  const addresses = a.addresses ?? b.addresses;
  const exceptAddresses = [...(a.exceptAddresses ?? []), ...(b.exceptAddresses ?? [])];
  return {
    ...(addresses === undefined ? {} : { addresses }),
    ...(exceptAddresses.length === 0 ? {} : { exceptAddresses }),
  };
}

/**
 * NOT of one address test: every client but those ranges, or only them (a request without an address passes the
 * first, as in the gateway); `null` when it tests both ways at once.
 */
export function negatedAddresses(s: AddressScope): AddressScope | null {
  if (s.addresses !== undefined && s.exceptAddresses === undefined) return { exceptAddresses: s.addresses };
  if (s.addresses === undefined && s.exceptAddresses !== undefined) return { addresses: s.exceptAddresses };
  return null;
}
