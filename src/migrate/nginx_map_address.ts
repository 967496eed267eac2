/**
 * `map $remote_addr`, and a map over a `geo` of the client address (nginx_map.ts `overGeo`), as the clients that get
 * the key: `match.address` (only those) or `match.except_address` (all but those). A geo picks the longest range that
 * holds the address; a map compares the address as text, so a CIDR range there matches nothing. Loopback, private
 * and link-local addresses are never a client's on Cloudflare (CF-Connecting-IP is the public address): they change
 * nothing, and are noted.
 */
import { neverAClient, parseAddressRange, rangeInside } from "../rules/address_range.ts";
import type { AddressRange } from "../rules/types.ts";

/** Client address ranges (CIDR text) a rule applies to (`only`) or never applies to (`except`). */
export interface AddressChoice {
  readonly only?: readonly string[];
  readonly except?: readonly string[];
}

type Entry = { readonly value: string; readonly result: string };

/**
 * A `map $remote_addr`'s entries as ranges, in the order NGINX tries them: its strings (whole addresses) first, then
 * its regexes in order, each a prefix of whole octets (`~^203\.0\.113\.` is 203.0.113.0/24, `~^10\.` 10.0.0.0/8) or
 * a whole address (`~^203\.0\.113\.7$`); a regex inside an earlier one never matches and is dropped, so the
 * longest range that holds an address is the entry NGINX picks. A range written as text never matches the address.
 */
function mapRanges(
  entries: readonly Entry[],
  said: string,
): { value: string; result: string; range: AddressRange | { error: string } }[] | { readonly refused: string } {
  const strings = entries.filter((e) => !e.value.startsWith("~"));
  const odd = strings.find((e) => e.value.includes("/"));
  if (odd !== undefined)
    return {
      refused: `${said}: ${odd.value}: a map compares $remote_addr as text, so a range never matches it (a geo block reads ranges)`,
    };
  const out = strings.map((e) => ({ ...e, range: parseAddressRange(e.value) }));
  const regexes: AddressRange[] = [];
  for (const e of entries.filter((x) => x.value.startsWith("~"))) {
    const range = octetPrefix(e.value);
    if (range === null)
      return {
        refused: `${said}: ${e.value} is a regex other than a prefix of whole octets (~^203\\.0\\.113\\.) or one address, which match.address cannot say`,
      };
    if (regexes.some((r) => rangeInside(range, r))) continue;
    regexes.push(range);
    out.push({ ...e, range });
  }
  return out;
}

/** `~^10\.`, `~^203\.0\.113\.` (with `.*`, `\d+` or `[0-9]+` after, to the end), `~^203\.0\.113\.7$` as a range. */
function octetPrefix(value: string): AddressRange | null {
  const m = /^~\*?\^((?:\d{1,3}\\\.){1,3})(?:\.\*|\\d\+|\[0-9\]\+|\\d\{1,3\})?\$?$/.exec(value);
  const whole = /^~\*?\^(\d{1,3})\\\.(\d{1,3})\\\.(\d{1,3})\\\.(\d{1,3})\$$/.exec(value);
  if (whole !== null) {
    const range = parseAddressRange(whole.slice(1).join("."));
    return "error" in range ? null : range;
  }
  if (m === null) return null;
  const octets = m[1]!.split("\\.").filter((o) => o !== "");
  const range = parseAddressRange(`${[...octets, "0", "0", "0"].slice(0, 4).join(".")}/${octets.length * 8}`);
  return "error" in range ? null : range;
}

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
  const read = cidr ? entries.map((e) => ({ ...e, range: parseAddressRange(e.value) })) : mapRanges(entries, said);
  if ("refused" in read) return read;
  for (const e of read) {
    if ("error" in e.range)
      return {
        refused: `${said}: ${e.value} is not an address or a CIDR range (a geo's a-b range, a hostname), which match.address cannot say`,
      };
    if (neverAClient(e.range)) private_.push(e.range.source);
    else ranges.push({ range: e.range, key: e.result !== "" });
  }
  const keyed = ranges.filter((r) => r.key);
  const empty = ranges.filter((r) => !r.key);
  for (const k of keyed) {
    const around = empty.find((x) => k.range.bits > x.range.bits && rangeInside(k.range, x.range));
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
    const except = empty.filter((x) => keyed.some((k) => rangeInside(x.range, k.range))).map((x) => x.range.source);
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
