/**
 * Who a request is, per identity kind (`api_key`, `ip`, `user`). Pure: headers in, keys out; unit-tested in plain Node.
 *
 * One request is one identity of each kind. A request an upstream could read as someone else than Sluice counted
 * (RFC 9110 and the request-smuggling literature treat two readings of one header as an attack) is refused with the
 * reason, never counted as nobody; each reader below says what it refuses. An identity that is absent is `null`:
 * rules keyed on it do not apply to the request.
 */
import { parseIpv6 } from "../rules/address_range.ts";
import type { Identity } from "../rules/types.ts";

export type Identities = { readonly [K in Identity]: string | null };

const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const MAX_KEY_CHARS = 512;
const MAX_USER_CHARS = 256;
const PRINTABLE = /^[\x21-\x7e][\x20-\x7e]*$/;

export interface IdentityOptions {
  /** Lower-case name of the trusted user header. */
  readonly userHeader: string;
  /** IPv6 prefix length that makes one client. */
  readonly ipv6PrefixBits: number;
  /** Query parameters that carry an API key (`API_KEY_QUERY`, default `api_key`); none when empty. */
  readonly apiKeyQuery?: readonly string[];
}

/** A request's identities, or why it names more than one of a kind. */
export type IdentitiesResult =
  | { readonly ok: true; readonly ids: Identities }
  | { readonly ok: false; readonly detail: string };

type One = string | null | { readonly error: string };
const failed = (v: One): v is { readonly error: string } => v !== null && typeof v === "object";

export function identitiesOf(
  headers: Headers,
  options: IdentityOptions,
  query: URLSearchParams = new URLSearchParams(),
): IdentitiesResult {
  const api_key = apiKeyOf(headers, query, options.apiKeyQuery ?? []);
  const ip = clientAddressOf(headers, options.ipv6PrefixBits);
  const user = userHeaderOf(headers.get(options.userHeader), options.userHeader);
  for (const v of [api_key, ip, user]) if (failed(v)) return { ok: false, detail: v.error };
  return { ok: true, ids: { api_key: api_key as string | null, ip: ip as string | null, user: user as string | null } };
}

const BEARER_ANYWHERE = /(?:^|,)[ \t]*bearer(?:[ \t]|$)/i;
const ONE_BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * The request's API key, `null` without one, or why it names more than one. Its places, the ones upstreams read keys
 * from: `Authorization: Bearer <key>`, `X-API-Key: <key>`, `Authorization: Basic base64(<key>:)` (the key as the user
 * with an empty password, as Stripe's API takes it, or as the password with an empty user), and the query parameters
 * `queryNames` (`?api_key=<key>`). A key must be a token68 of at most 512 characters; a Basic credential with both a
 * user and a password is a login, not a key; a malformed key alone counts as no key. Refused: a header repeated (its
 * values joined by `,`, which no key contains: Go's `Header.Get` would read the first), two credentials in one
 * `Authorization`, and two places naming different keys, or a malformed key beside a key (an upstream may prefer
 * either).
 */
export function apiKeyOf(
  headers: Headers,
  query: URLSearchParams = new URLSearchParams(),
  queryNames: readonly string[] = [],
): string | null | { readonly error: string } {
  const auth = headers.get("authorization")?.trim() ?? null;
  const header = headers.get("x-api-key")?.trim() ?? null;
  // Each place's key: "" for a malformed one (it still counts as a second key beside a real one).
  const named: string[] = [];
  if (auth !== null && BEARER_ANYWHERE.test(auth)) {
    const token = ONE_BEARER.exec(auth)?.[1];
    if (token?.includes(",")) return TWO_KEYS("Authorization is repeated");
    if (token === undefined && auth.includes(",")) return TWO_KEYS("Authorization holds more than one credential");
    named.push(token !== undefined && validKey(token) ? token : "");
  } else if (auth !== null && BASIC_ANYWHERE.test(auth)) {
    if (auth.includes(",")) return TWO_KEYS("Authorization holds more than one credential");
    const key = basicKeyOf(auth);
    if (key !== null) named.push(key);
  }
  if (header?.includes(",")) return TWO_KEYS("X-API-Key is repeated");
  if (header !== null) named.push(validKey(header) ? header : "");
  for (const name of queryNames) {
    for (const raw of query.getAll(name)) {
      const value = raw.trim();
      if (value !== "") named.push(validKey(value) ? value : "");
    }
  }
  const distinct = new Set(named);
  if (distinct.size > 1) return TWO_KEYS(`${placesOf(auth, header, query, queryNames)} name different keys`);
  const [key] = distinct;
  return key === undefined || key === "" ? null : key;
}

const BASIC_ANYWHERE = /^basic(?:[ \t]|$)/i;
const ONE_BASIC = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

/** The key a Basic credential carries (`key:` or `:key`), `""` when it is malformed, `null` for a user's login. */
function basicKeyOf(auth: string): string | null {
  const encoded = ONE_BASIC.exec(auth)?.[1];
  if (encoded === undefined) return "";
  const bare = encoded.replace(/=+$/, "");
  // What atob would throw on: a length of 4n+1, or padding that does not make a multiple of 4.
  if (bare.length % 4 === 1 || (bare !== encoded && encoded.length % 4 !== 0)) return "";
  const decoded = atob(encoded);
  const colon = decoded.indexOf(":");
  if (colon < 0) return "";
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (user !== "" && password !== "") return null;
  const key = user === "" ? password : user;
  return validKey(key) ? key : "";
}

/** The places a request carries keys in, for the 400's detail (never the keys themselves). */
function placesOf(auth: string | null, header: string | null, query: URLSearchParams, names: readonly string[]) {
  const places: string[] = [];
  if (auth !== null) places.push(`Authorization: ${auth.split(/[ \t]/)[0]}`);
  if (header !== null) places.push("X-API-Key");
  for (const name of names) if (query.has(name)) places.push(`?${name}=`);
  return places.join(" and ");
}

const TWO_KEYS = (why: string) => ({
  error: `This request names more than one API key (${why}); send one key, in one place (Authorization: Bearer, X-API-Key, Authorization: Basic or the query).`,
});

/**
 * The client address key (`clientIpKey`), `null` without the header, or why the header is not one address.
 * `CF-Connecting-IP` only: `X-Forwarded-For` and friends are client-controlled and never read. A value that is not
 * exactly one address (repeated, a port, brackets, a zone id) is refused: Cloudflare never sends one, so it comes from
 * a proxy in front or a test, and counting it as no address would turn every `ip` rule off.
 */
export function clientAddressOf(headers: Headers, ipv6PrefixBits: number): string | null | { readonly error: string } {
  const value = headers.get("cf-connecting-ip");
  if (value === null) return null;
  const key = clientIpKey(value, ipv6PrefixBits);
  if (key !== null) return key;
  return {
    error: `CF-Connecting-IP must be one IPv4 or IPv6 address (no port, brackets, zone or list), got ${JSON.stringify(value.slice(0, 64))}.`,
  };
}

/** The user id from the trusted header set by the auth layer in front (`X-User-Id` by default); repeated is refused. */
function userHeaderOf(value: string | null, name: string): string | null | { readonly error: string } {
  if (value?.includes(",")) return { error: `${name} is repeated or holds a list; send one user id.` };
  return userOf(value);
}

/**
 * A raw identity value as the gateway would key it (the admin API's X-Sluice-Key header): an API key or user id as
 * given if the gateway would accept it, an address normalised (IPv6 grouped by prefix); `null` if the gateway never
 * produces such a key.
 */
export function identityKey(identity: Identity, raw: string, options: IdentityOptions): string | null {
  switch (identity) {
    case "api_key":
      return validKey(raw) ? raw : null;
    case "ip":
      return clientIpKey(raw, options.ipv6PrefixBits);
    case "user":
      return userOf(raw);
    default: {
      const never: never = identity;
      return never;
    }
  }
}

function validKey(key: string): boolean {
  return key.length <= MAX_KEY_CHARS && TOKEN68.test(key);
}

function userOf(value: string | null): string | null {
  const user = value?.trim();
  if (user === undefined || user.length === 0 || user.length > MAX_USER_CHARS || !PRINTABLE.test(user)) return null;
  return user;
}

/**
 * The rate-limit key for a client address: dotted IPv4, or the IPv6 prefix as `2001:db8:1:2::/64`; `null` if invalid.
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`) is the IPv4 address; other IPv6 addresses are grouped by prefix (a /64 by
 * default: one subscriber usually holds a whole /64, so per-address keys would let it rotate freely).
 */
export function clientIpKey(value: string | null, ipv6PrefixBits: number): string | null {
  if (value === null) return null;
  const text = value.trim();
  const v4 = parseIpv4(text);
  if (v4 !== null) return formatIpv4(v4);
  const v6 = parseIpv6(text);
  if (v6 === null) return null;
  if (isV4Mapped(v6)) return formatIpv4([v6[6]! >> 8, v6[6]! & 0xff, v6[7]! >> 8, v6[7]! & 0xff]);
  const masked = v6.map((group, i) => {
    const bitsLeft = ipv6PrefixBits - i * 16;
    if (bitsLeft >= 16) return group;
    if (bitsLeft <= 0) return 0;
    return group & ((0xffff << (16 - bitsLeft)) & 0xffff);
  });
  return `${formatIpv6(masked)}/${ipv6PrefixBits}`;
}

/**
 * A client address masked for a key's `ip` part: IPv4 to `v4Bits` (`192.0.2.0/24`; the bare address at 32), IPv6 to
 * `v6Bits` as `clientIpKey` groups it; IPv4-mapped IPv6 is IPv4. `null` if the text is not one address.
 */
export function clientAddressKey(value: string, v4Bits: number, v6Bits: number): string | null {
  const text = value.trim();
  const v6 = parseIpv4(text) === null ? parseIpv6(text) : null;
  const v4 = v6 !== null && isV4Mapped(v6) ? [v6[6]! >> 8, v6[6]! & 0xff, v6[7]! >> 8, v6[7]! & 0xff] : parseIpv4(text);
  if (v4 === null) return clientIpKey(text, v6Bits);
  if (v4Bits >= 32) return formatIpv4(v4);
  const word = ((v4[0]! << 24) | (v4[1]! << 16) | (v4[2]! << 8) | v4[3]!) >>> 0;
  const masked = (word & (v4Bits === 0 ? 0 : (0xffffffff << (32 - v4Bits)) >>> 0)) >>> 0;
  return `${formatIpv4([masked >>> 24, (masked >>> 16) & 0xff, (masked >>> 8) & 0xff, masked & 0xff])}/${v4Bits}`;
}

function parseIpv4(text: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (m === null) return null;
  const octets = m.slice(1).map(Number);
  return octets.every((o) => o <= 255) ? octets : null;
}

function formatIpv4(octets: readonly number[]): string {
  return octets.join(".");
}

function isV4Mapped(g: readonly number[]): boolean {
  return g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff;
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (>= 2) of zero groups as `::`. */
export function formatIpv6(g: readonly number[]): string {
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (xs: readonly number[]) => xs.map((x) => x.toString(16)).join(":");
  if (bestStart < 0) return hex(g);
  return `${hex(g.slice(0, bestStart))}::${hex(g.slice(bestStart + bestLen))}`;
}

export { parseIpv6 };
