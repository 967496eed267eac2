/**
 * A `geo` block's `ranges` as CIDR blocks (src/migrate/nginx_geo.ts `rangeToCidrs`): the blocks cover the range
 * exactly, none outside it, none twice, each aligned to its size, for any IPv4 start and end. And a geo's lines read
 * as NGINX 1.22's ngx_http_geo_module.c applies them (`geoLines`): a network given twice keeps the later value,
 * `delete` removes what it names exactly (a network; with `ranges`, the /16 pieces NGINX stores), and a delete of
 * nothing changes nothing. The real NGINX differential's /geo/ and /geotier/ cases check both against NGINX itself.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseText } from "../../src/migrate/nginx_conf.ts";
import { geoLines, rangeToCidrs } from "../../src/migrate/nginx_geo.ts";
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

/** The geo block `body` read by geoLines: its entries as `value result`, its default, its notes; or its refusal. */
function geo(body: string): { entries: string[]; fallback: string; notes: string[] } | string {
  const [block] = parseText(`geo $g {\n${body}\n}`, "geo.conf");
  const read = geoLines(block!.block!);
  if ("refused" in read) return read.refused;
  return { entries: read.entries.map((e) => `${e.value} ${e.result}`), fallback: read.fallback, notes: read.notes };
}

describe("a geo block's lines, as NGINX applies them", () => {
  it("keeps the later value of a network given twice, written either way", () => {
    expect(geo("default 1; 10.0.0.0/8 a; 192.0.2.9 b; 10.0.0.0/8 c; 192.0.2.9/32 d;")).toEqual({
      entries: ["10.0.0.0/8 c", "192.0.2.9/32 d"],
      fallback: "1",
      notes: [],
    });
  });

  it("deletes the network named exactly, the address's low bits masked as NGINX masks them", () => {
    const read = geo("10.0.0.0/8 0; 10.1.0.0/16 1; 2001:db8::/32 0; delete 10.0.0.1/8; delete 2001:DB8::/32;");
    expect(read).toEqual({ entries: ["10.1.0.0/16 1"], fallback: "", notes: [] });
  });

  it("changes nothing for a delete of a network not above it, or of a wider or narrower one, and says so", () => {
    const read = geo("10.0.0.0/8 0; delete 10.0.0.0/9; delete 10.0.0.0/7; delete 192.0.2.1;") as {
      entries: string[];
      notes: string[];
    };
    expect(read.entries).toEqual(["10.0.0.0/8 0"]);
    expect(read.notes).toHaveLength(3);
    expect(read.notes[0]).toBe("its delete 10.0.0.0/9: no such network above it, so nothing (NGINX warns too)");
  });

  it("adds a network again after it was deleted", () => {
    expect(geo("10.0.0.0/8 0; delete 10.0.0.0/8; 10.0.0.0/8 1;")).toMatchObject({ entries: ["10.0.0.0/8 1"] });
  });

  it("refuses to delete the default, which NGINX keeps as 0.0.0.0/0", () => {
    expect(geo("default 0; delete 0.0.0.0/0;")).toBe(
      "its delete 0.0.0.0/0 deletes its default, which is not read here",
    );
  });

  it("with ranges, deletes a whole range, or the /16 pieces of one that its own range cuts the same", () => {
    expect(geo("ranges; 10.0.0.0-10.0.0.255 a; 192.0.2.0-192.0.2.255 b; delete 10.0.0.0-10.0.0.255;")).toEqual({
      entries: ["192.0.2.0/24 b"],
      fallback: "",
      notes: [],
    });
    // 10.0.0.0-10.3.255.255 is stored as four /16 pieces; deleting 10.1.0.0-10.2.255.255 takes two of them.
    expect(geo("ranges; 10.0.0.0-10.3.255.255 a; delete 10.1.0.0-10.2.255.255;")).toMatchObject({
      entries: ["10.0.0.0/16 a", "10.3.0.0/16 a"],
    });
    // Pieces that touch with the same value are one range again: four /16s are one /14.
    expect(geo("ranges; 10.0.0.0-10.1.255.255 a; 10.2.0.0-10.3.255.255 a;")).toMatchObject({
      entries: ["10.0.0.0/14 a"],
    });
  });

  it("with ranges, keeps a range a delete cuts inside one piece, as NGINX does (it finds no piece that equals it)", () => {
    const read = geo("ranges; 10.0.0.0-10.0.255.255 a; delete 10.0.0.0-10.0.0.255;") as {
      entries: string[];
      notes: string[];
    };
    expect(read.entries).toEqual(["10.0.0.0/16 a"]);
    expect(read.notes).toEqual([
      "its delete 10.0.0.0-10.0.0.255: a part of it is no range above it, so that part stays (NGINX warns too)",
    ]);
  });
});
