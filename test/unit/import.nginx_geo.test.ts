/**
 * A `geo` block's `ranges` as CIDR blocks (src/migrate/nginx_geo.ts `rangeToCidrs`): the blocks cover the range
 * exactly, none outside it, none twice, each aligned to its size, for any IPv4 start and end.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rangeToCidrs } from "../../src/migrate/nginx_geo.ts";
import { addressGroups, inRange, parseAddressRange } from "../../src/rules/address_range.ts";
import type { AddressRange } from "../../src/rules/types.ts";

const word = (w: number) => [w >>> 24, (w >>> 16) & 255, (w >>> 8) & 255, w & 255].join(".");
const covered = (ranges: readonly AddressRange[], w: number) =>
  ranges.filter((r) => inRange(addressGroups(word(w))!, r)).length;

describe("geo ranges as CIDR blocks", () => {
  it.each([
    [0, 0xffffffff, ["0.0.0.0/0"]],
    [0x0a000000, 0x0affffff, ["10.0.0.0/8"]],
    [0xcb007101, 0xcb007101, ["203.0.113.1/32"]],
    [0xcb0071ff, 0xcb007200, ["203.0.113.255/32", "203.0.114.0/32"]],
  ])("%d-%d", (start, end, want) => {
    expect(rangeToCidrs(start, end)).toEqual(want);
  });

  it("follow one another from start to end, and hold the ends and not the addresses beside them", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 4096 }), (start, span) => {
        const end = Math.min(0xffffffff, start + span);
        const cidrs = rangeToCidrs(start, end);
        const ranges = cidrs.map((t) => parseAddressRange(t) as AddressRange);
        expect(ranges.length).toBeLessThanOrEqual(62);
        // In order, each starting where the one before ended: together exactly start..end.
        let next = start;
        for (const c of cidrs) {
          const [a, bits] = c.split("/") as [string, string];
          const first = a.split(".").reduce((w, o) => w * 256 + Number(o), 0);
          expect(first).toBe(next);
          next = first + 2 ** (32 - Number(bits));
        }
        expect(next).toBe(end + 1);
        for (const w of [start, end, Math.floor((start + end) / 2)]) expect(covered(ranges, w)).toBe(1);
        if (start > 0) expect(covered(ranges, start - 1)).toBe(0);
        if (end < 0xffffffff) expect(covered(ranges, end + 1)).toBe(0);
      }),
      { seed: 32 },
    );
  });
});
