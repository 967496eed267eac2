/**
 * `map $remote_addr`, and a map over a `geo` of the client address (nginx_map.ts `overGeo`), as the clients that get
 * the key: `match.address` (only those) or `match.except_address` (all but those). A geo picks the longest range that
 * holds the address; a map compares the address as text, so a CIDR range there matches nothing. Loopback, private
 * and link-local addresses are never a client's on Cloudflare (CF-Connecting-IP is the public address): they change
 * nothing, and are noted.
 */
import { inRange, neverAClient, parseAddressRange } from "../rules/address_range.ts";
import type { AddressRange } from "../rules/types.ts";

/** Client address ranges (CIDR text) a rule applies to (`only`) or never applies to (`except`). */
export interface AddressChoice {
  readonly only?: readonly string[];
  readonly except?: readonly string[];
}

type Entry = { readonly value: string; readonly result: string };

/** Whether `a` lies wholly inside `b`. */
const inside = (a: AddressRange, b: AddressRange) => a.bits >= b.bits && inRange(a.groups, b);

/** Which clients get the map's key, or why a rule cannot say it. `cidr`: a geo's ranges (else a map's text). */
// long: the shapes a map or geo over the address can take, each refusal with its reason
export function addressChoice(
  entries: readonly Entry[],
  fallback: string,
  said: string,
  cidr: boolean,
): { readonly choice: AddressChoice | null; readonly notes: readonly string[] } | { readonly refused: string } {
  const ranges: { readonly range: AddressRange; readonly key: boolean }[] = [];
  const private_: string[] = [];
  for (const e of entries) {
    if (!cidr && e.value.includes("/"))
      return {
        refused: `${said}: ${e.value}: a map compares $remote_addr as text, so a range never matches it (a geo block reads ranges)`,
      };
    const range = parseAddressRange(e.value);
    if ("error" in range)
      return {
        refused: `${said}: ${e.value} is not an address or a CIDR range (a geo's a-b range, a hostname), which match.address cannot say`,
      };
    if (neverAClient(range)) private_.push(e.value);
    else ranges.push({ range, key: e.result !== "" });
  }
  const keyed = ranges.filter((r) => r.key);
  const empty = ranges.filter((r) => !r.key);
  for (const k of keyed) {
    const around = empty.find((x) => k.range.bits > x.range.bits && inside(k.range, x.range));
    if (around !== undefined)
      return {
        refused: `${said}: ${k.range.source} gets the key inside ${around.range.source}, which does not: a rule cannot apply inside a range it leaves out`,
      };
  }
  const notes =
    private_.length === 0
      ? []
      : [
          `${said}: ${private_.join(", ")} ${private_.length === 1 ? "is" : "are"} never a client's address on Cloudflare (CF-Connecting-IP is public), so ${private_.length === 1 ? "it changes" : "they change"} nothing`,
        ];
  if (fallback === "") {
    if (keyed.length === 0) return { refused: `${said}: only addresses that never reach the Worker get a key` };
    const only = keyed.map((k) => k.range.source);
    const except = empty.filter((x) => keyed.some((k) => inside(x.range, k.range))).map((x) => x.range.source);
    const text = `only requests from ${only.join(", ")}${except.length === 0 ? "" : ` but ${except.join(", ")}`} get a key`;
    return {
      choice: { only, ...(except.length === 0 ? {} : { except }) },
      notes: [...notes, `${said}: ${text} (match.address)`],
    };
  }
  if (empty.length === 0) return { choice: null, notes };
  const except = empty.map((x) => x.range.source);
  const text = `NGINX does not limit requests from ${except.join(", ")} (an allowlist: match.except_address)`;
  return { choice: { except }, notes: [...notes, `${said}: ${text}`] };
}
