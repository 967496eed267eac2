/**
 * `match.address` and `match.except_address` (src/rules/address_range.ts, src/request/match.ts `addressPasses`):
 * ranges read strictly with messages that say what to write, membership at every boundary of IPv4 and IPv6 prefixes,
 * IPv4-mapped IPv6 as IPv4 (as the gateway keys it), and a request without an address.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addressPasses } from "../../src/request/match.ts";
import { addressGroups, inRange, parseAddressRange } from "../../src/rules/address_range.ts";
import type { AddressRange, RuleMatch } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";

function range(text: string): AddressRange {
  const r = parseAddressRange(text);
  if ("error" in r) throw new Error(r.error);
  return r;
}
const within = (address: string, text: string) => inRange(addressGroups(address)!, range(text));

describe("reading a range", () => {
  it.each([
    ["203.0.113.0/24", 120],
    ["203.0.113.7", 128],
    ["0.0.0.0/0", 96],
    ["2001:db8::/32", 32],
    ["::/0", 0],
    ["2001:DB8::1", 128],
    ["::ffff:203.0.113.0/120", 120],
  ])("%s: %d bits of the mapped address", (text, bits) => {
    expect(range(text).bits).toBe(bits);
  });

  it.each([
    ["203.0.113.7/24", /has bits set below its \/24 .*did you mean 203.0.113.0\/24\?/],
    ["2001:db8::1/32", /has bits set below its \/32/],
    ["10.0.0.0/33", /an IPv4 prefix is at most \/32/],
    ["2001:db8::/129", /an IPv6 prefix is at most \/128/],
    ["10.0.0.0/", /the prefix length after \/ must be a whole number from 0 to 32/],
    ["10.0.0.0/8/8", /must be an address or a range in CIDR notation/],
    ["256.0.0.0/8", /must be an address or a range in CIDR notation/],
    ["fe80::1%eth0", /must be an address or a range in CIDR notation/],
    ["example.com", /must be an address or a range in CIDR notation/],
  ])("%s is refused: %s", (text, message) => {
    const r = parseAddressRange(text);
    expect("error" in r && r.error).toMatch(message);
  });

  it("in a rule file: where and why, each entry of a list", () => {
    const yaml = `- id: r\n  match: { identity: ip, except_address: [203.0.113.0/24, 5, "10.1.0.0/8"], address: [] }\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n`;
    expect(parseRules(yaml, "a.yaml").errors.map((e) => e.replace(/^a\.yaml:\d+:\d+: /, ""))).toEqual([
      "r.match.address: must be an address range or a list of 1 to 1000 of them, got an empty list",
      'r.match.except_address[1]: must be an address range in CIDR notation ("203.0.113.0/24"), got 5',
      'r.match.except_address[2]: "10.1.0.0/8" has bits set below its /8 (the range would ignore them): did you mean 10.0.0.0/8?',
    ]);
  });
});

describe("a warning for ranges no Cloudflare client is in", () => {
  it("loopback, private and link-local: valid, but CF-Connecting-IP is never there", () => {
    const yaml = `- id: r\n  match: { identity: ip, except_address: [10.1.0.0/16, "fd00::/8", 203.0.113.0/24, 172.0.0.0/8] }\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n`;
    const parsed = parseRules(yaml, "a.yaml");
    expect(parsed.errors).toEqual([]);
    expect(parsed.rules[0]!.match.exceptAddresses?.map((r) => r.source)).toEqual([
      "10.1.0.0/16",
      "fd00::/8",
      "203.0.113.0/24",
      "172.0.0.0/8",
    ]);
    expect(parsed.warnings.map((w) => w.replace(/^a\.yaml:\d+:\d+: /, ""))).toEqual([
      "r.match.except_address[0]: warning: 10.1.0.0/16 is loopback, private or link-local: on Cloudflare CF-Connecting-IP is a public address, never in it",
      "r.match.except_address[1]: warning: fd00::/8 is loopback, private or link-local: on Cloudflare CF-Connecting-IP is a public address, never in it",
    ]);
  });
});

describe("membership", () => {
  it.each([
    ["203.0.113.0", "203.0.113.0/28", true],
    ["203.0.113.15", "203.0.113.0/28", true],
    ["203.0.113.16", "203.0.113.0/28", false],
    ["203.0.112.255", "203.0.113.0/28", false],
    ["::ffff:203.0.113.9", "203.0.113.0/28", true],
    ["203.0.113.9", "::ffff:203.0.113.0/124", true],
    ["192.0.2.1", "0.0.0.0/0", true],
    ["2001:db8::1", "0.0.0.0/0", false],
    ["2001:db8::1", "::/0", true],
    ["2001:db8:1:ffff:ffff:ffff:ffff:ffff", "2001:db8:1::/48", true],
    ["2001:db8:2::", "2001:db8:1::/48", false],
    ["2001:db8:1:8000::", "2001:db8:1::/49", false],
    ["2001:db8:1:7fff::", "2001:db8:1::/49", true],
    ["198.51.100.7", "198.51.100.7", true],
    ["198.51.100.8", "198.51.100.7", false],
  ])("%s in %s: %s", (address, text, expected) => {
    expect(within(address, text)).toBe(expected);
  });

  it("an IPv4 address is in the range its own first bits make, and out of it with one of them flipped", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 1, max: 32 }), (word, bits) => {
        const text = (w: number) => [w >>> 24, (w >>> 16) & 255, (w >>> 8) & 255, w & 255].join(".");
        const base = bits === 32 ? word : (word & ((0xffffffff << (32 - bits)) >>> 0)) >>> 0;
        const r = range(`${text(base)}/${bits}`);
        expect(inRange(addressGroups(text(word))!, r)).toBe(true);
        const flipped = (word ^ (1 << (32 - bits))) >>> 0;
        expect(inRange(addressGroups(text(flipped))!, r)).toBe(false);
      }),
      { seed: 33 },
    );
  });

  it("a request without an address passes no match.address, and every match.except_address", () => {
    const match = (m: Partial<RuleMatch>) => m as RuleMatch;
    expect(addressPasses(match({ addresses: [range("0.0.0.0/0")] }), null)).toBe(false);
    expect(addressPasses(match({ exceptAddresses: [range("::/0")] }), null)).toBe(true);
    expect(addressPasses(match({ exceptAddresses: [range("::/0")] }), "192.0.2.1")).toBe(false);
    expect(addressPasses(match({ addresses: [range("192.0.2.0/24")] }), "not an address")).toBe(false);
  });
});
