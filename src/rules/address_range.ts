/**
 * `match.address` and `match.except_address`: client address ranges in CIDR notation (`203.0.113.0/24`,
 * `2001:db8::/32`, or one address), read strictly, and whether a client address (as `CF-Connecting-IP` carries it)
 * is in one. Every address is eight 16-bit groups, an IPv4 one as IPv4-mapped IPv6, so one comparison serves both
 * families and `::ffff:203.0.113.7` is `203.0.113.7`, as the gateway keys it (request/identity.ts).
 */
import { describe, type Raw } from "./raw.ts";
import type { RuleErrors } from "./read.ts";
import type { AddressRange } from "./types.ts";

/** The most ranges one field takes: a list that long belongs in a WAF's IP list, in front of the Worker. */
export const MAX_ADDRESS_RANGES = 1000;

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseIpv4(text: string): number[] | null {
  const m = V4.exec(text);
  if (m === null) return null;
  const octets = m.slice(1).map(Number);
  return octets.every((o) => o <= 255) ? octets : null;
}

/** Eight 16-bit groups, or `null`. Accepts `::` compression and a dotted IPv4 tail; rejects zone ids. */
export function parseIpv6(text: string): number[] | null {
  if (text.length > 45 || !/^[0-9A-Fa-f:.]+$/.test(text)) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parseHalf = (half: string, lastHalf: boolean): number[] | null => {
    if (half === "") return [];
    const out: number[] = [];
    const parts = half.split(":");
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (lastHalf && i === parts.length - 1 && part.includes(".")) {
        const v4 = parseIpv4(part);
        if (v4 === null) return null;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else if (/^[0-9A-Fa-f]{1,4}$/.test(part)) {
        out.push(Number.parseInt(part, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = parseHalf(halves[0]!, halves.length === 1);
  const tail = halves.length === 2 ? parseHalf(halves[1]!, true) : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const zeros = 8 - head.length - tail.length;
  if (zeros < 1) return null;
  return [...head, ...new Array<number>(zeros).fill(0), ...tail];
}

/** An address as eight 16-bit groups (IPv4 mapped), or `null` when the text is not exactly one address. */
export function addressGroups(text: string | null): number[] | null {
  if (text === null) return null;
  const t = text.trim();
  if (V4.test(t)) {
    const o = parseIpv4(t);
    return o === null ? null : [0, 0, 0, 0, 0, 0xffff, (o[0]! << 8) | o[1]!, (o[2]! << 8) | o[3]!];
  }
  return parseIpv6(t);
}

/** Whether `groups` (an address) is in `range`. */
export function inRange(groups: readonly number[], range: AddressRange): boolean {
  for (let i = 0, left = range.bits; left > 0; i++, left -= 16) {
    const mask = left >= 16 ? 0xffff : (0xffff << (16 - left)) & 0xffff;
    if ((groups[i]! & mask) !== range.groups[i]) return false;
  }
  return true;
}

/** Whether range `a` lies wholly inside range `b`. */
export function rangeInside(a: AddressRange, b: AddressRange): boolean {
  return a.bits >= b.bits && inRange(a.groups, b);
}

/** A range as written (`203.0.113.0/24`, `2001:db8::/32`, one address), or why it is not one. */
export function parseAddressRange(text: string): AddressRange | { readonly error: string } {
  const [address = "", length, extra] = text.trim().split("/");
  const groups = addressGroups(address);
  const v4 = V4.test(address.trim());
  const most = v4 ? 32 : 128;
  const example = 'an address or a range in CIDR notation ("203.0.113.0/24", "2001:db8::/32")';
  if (groups === null || extra !== undefined) return { error: `must be ${example}, got ${JSON.stringify(text)}` };
  if (length !== undefined && !/^\d{1,3}$/.test(length))
    return { error: `${JSON.stringify(text)}: the prefix length after / must be a whole number from 0 to ${most}` };
  const own = length === undefined ? most : Number(length);
  if (own > most) return { error: `${JSON.stringify(text)}: an IPv${v4 ? 4 : 6} prefix is at most /${most}` };
  const bits = v4 ? own + 96 : own;
  const masked = groups.map((g, i) => {
    const left = bits - i * 16;
    return left >= 16 ? g : left <= 0 ? 0 : g & ((0xffff << (16 - left)) & 0xffff);
  });
  if (masked.some((g, i) => g !== groups[i])) {
    const base = v4 ? `${masked[6]! >> 8}.${masked[6]! & 0xff}.${masked[7]! >> 8}.${masked[7]! & 0xff}` : null;
    const fix = base === null ? "" : `: did you mean ${base}/${own}?`;
    return { error: `${JSON.stringify(text)} has bits set below its /${own} (the range would ignore them)${fix}` };
  }
  return { source: text.trim(), groups: masked, bits };
}

/** `match.address` or `match.except_address`: one range or a non-empty list of them; `null` after an error. */
export function readAddressRanges(e: RuleErrors, field: string, raw: Raw | undefined): AddressRange[] | null {
  const list = Array.isArray(raw) ? raw : [raw];
  if (list.length === 0 || list.length > MAX_ADDRESS_RANGES) {
    e.add(
      field,
      `must be an address range or a list of 1 to ${MAX_ADDRESS_RANGES} of them, got ${list.length === 0 ? "an empty list" : `${list.length}`}`,
    );
    return null;
  }
  const out: AddressRange[] = [];
  list.forEach((r, i) => {
    const name = Array.isArray(raw) ? `${field}[${i}]` : field;
    const range =
      typeof r === "string"
        ? parseAddressRange(r)
        : { error: `must be an address range in CIDR notation ("203.0.113.0/24"), got ${describe(r)}` };
    if ("error" in range) {
      e.add(name, range.error);
      return;
    }
    if (neverAClient(range))
      e.warn(
        name,
        `${range.source} is loopback, private or link-local: on Cloudflare CF-Connecting-IP is a public address, never in it`,
      );
    out.push(range);
  });
  return out.length === list.length ? out : null;
}

/** Loopback, private and link-local space: no client Cloudflare connects is there (its address is public). */
const PRIVATE: readonly AddressRange[] = [
  "127.0.0.0/8",
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "169.254.0.0/16",
  "::1",
  "fc00::/7",
  "fe80::/10",
].map((t) => parseAddressRange(t) as AddressRange);

/** Whether `range` lies wholly inside loopback, private or link-local space. */
export function neverAClient(range: AddressRange): boolean {
  return PRIVATE.some((p) => rangeInside(range, p));
}
