/**
 * A rate rule's bound has no unit per share (issue 36, "a bound that means something"): every slice of a key (the
 * direct one, each delegate's) holds a whole unit of the rule's burst or admits nothing (share.ts `honestSlice`), so a
 * rule whose rate cannot feed every holder feeds as many as it can (share_grant.ts `fedParts`). With the tier's terms
 * (tunables.ts: a rate sub-lease's) inside `RATE_BOUND_MS`, a key
 * admits at most `burst + rate × (t + 500 ms)` in any span t: over 10 s at or above its limit, at most 5% beyond the
 * exact single writer, for any rate and burst.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { capacityOf } from "../../src/algorithms/index.ts";
import { directParts, honestSlice, leastParts, promisedParts, type ShareGrant } from "../../src/protocol/share.ts";
import { fedParts, shareRecord } from "../../src/protocol/share_grant.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { RATE_BOUND_MS, RATE_LEASE_TERM_MS, SHARE_DELEGATES_MAX, SHARE_PARTS } from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { gcraP, leakyBucket, tokenBucket } from "../support/params.ts";
import { runs } from "../support/runs.ts";

const T0 = Date.UTC(2030, 0, 1);

describe("the rate bound's term", () => {
  it("holds a sub-lease's term, and is at most 5% over 10 s", () => {
    expect(RATE_LEASE_TERM_MS).toBeLessThanOrEqual(RATE_BOUND_MS);
    // Over 10 s at or above the limit the exact writer admits up to burst + rate × 10 s; the bound rate × 500 ms more.
    for (const [ratePerS, burst] of [
      [10, 1],
      [10, 20],
      [200, 200],
      [5000, 1],
      [5000, 1000],
      [5000, 10_000],
    ] as const) {
      const exact = burst + ratePerS * 10;
      expect((ratePerS * RATE_BOUND_MS) / 1000 / exact).toBeLessThanOrEqual(0.05);
    }
  });
});

describe("leastParts and honestSlice", () => {
  it("are the fewest parts holding a whole unit of burst, and no slice below them", () => {
    expect([1, 3, 20, 999, 1000, 5000].map((burst) => leastParts(tokenBucket(10, 1000, burst)))).toEqual([
      1000, 334, 50, 2, 1, 1,
    ]);
    const free = tokenBucket(10, 1000, 20);
    expect(honestSlice(free, 49)).toBeNull();
    expect(honestSlice(free, 0)).toBeNull();
    expect(capacityOf(honestSlice(free, 50)!)).toBe(1);
    expect(capacityOf(honestSlice(free, 1000)!)).toBe(20);
    // A delegate's slice too, with its extra burst (200 ms of its own rate: 0 here, 0.1 of a unit).
    expect(delegateSlice(free, 49)).toBeNull();
    expect(capacityOf(delegateSlice(free, 50)!)).toBe(1);
  });
});

describe("fedParts", () => {
  it("gives at least the least parts or none, and leaves the direct slice none it cannot use", () => {
    const cases: [number, number, number, number][] = [
      // parts, room, least -> fed
      [27, 1000, 50, 50],
      [27, 60, 50, 60],
      [27, 40, 50, 0],
      [0, 1000, 50, 0],
      [300, 1000, 50, 300],
      [300, 320, 50, 320],
      [300, 350, 50, 300],
      [5, 1000, 1, 5],
      [1, 1000, 1000, 1000],
    ];
    for (const [parts, room, least, fed] of cases) expect(fedParts(parts, room, least), `${parts}/${room}`).toBe(fed);
  });
});

/** Every live slice's capacity (a holder's larger of its old and new, the direct slice's) against the rule's burst. */
function capacities(params: AlgorithmParams, record: LimiterRecord | null, nowMs: number): number {
  const book = record?.shares;
  if (book === undefined) return capacityOf(params);
  let total = 0;
  for (const e of book.entries) {
    const parts = promisedParts(e, nowMs);
    const slice = delegateSlice(params, parts);
    total += slice === null ? 0 : capacityOf(slice);
  }
  const direct = honestSlice(params, directParts(book, nowMs));
  return total + (direct === null ? 0 : capacityOf(direct));
}

/** The most the slices may hold: the rule's burst, all told. */
function most(params: AlgorithmParams): number {
  return (params as { burst: number }).burst;
}

describe("a 10/s rule shared by 36 delegates (the shipped free-global at 1,000x)", () => {
  it("feeds 20 of them a unit each, the others none for a quarter term: no unit beyond its burst", () => {
    const params = tokenBucket(10, 1000, 20);
    const rule = { id: "free-global", params, version: 1 };
    let record: LimiterRecord | null = null;
    let grants: ShareGrant[] = [];
    // Two rounds: the first ask of a cold key gets all of it (nobody else asked yet); at the renewals, demand splits it.
    for (const round of [0, 1]) {
      grants = [];
      for (let h = 0; h < 36; h++) {
        const holding = round === 0 ? {} : { holding: `a${h}.0`, oldForMs: 0 };
        const ask = { rule, holder: `d${h}`, id: `a${h}.${round}`, demand: 300, units: 0, giveBack: [], ...holding };
        const out = shareRecord(record, ask, T0 + 100 * round);
        record = out.record;
        grants.push(out.grant);
      }
    }
    const fed = grants.filter((g) => g.parts > 0);
    expect(fed.length).toBe(20);
    expect(fed.every((g) => g.parts >= 50)).toBe(true);
    expect(grants.filter((g) => g.parts === 0).every((g) => g.kind === "rate" && g.termMs === 250)).toBe(true);
    expect(capacities(params, record, T0 + 100)).toBeLessThanOrEqual(most(params));
  });
});

const paramsArb = fc
  .tuple(
    fc.oneof(fc.integer({ min: 10, max: 100 }), fc.integer({ min: 100, max: 5000 })),
    fc.constantFrom(tokenBucket, gcraP, leakyBucket),
  )
  .chain(([ratePerS, make]) =>
    fc
      .oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2 * ratePerS }))
      .map((burst) => make(ratePerS, 1000, burst)),
  );

const askArb = fc.record({
  gapMs: fc.integer({ min: 0, max: 600 }),
  holder: fc.integer({ min: 0, max: SHARE_DELEGATES_MAX - 1 }),
  demand: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 20, max: 5000 })),
  keep: fc.option(fc.integer({ min: 0, max: SHARE_PARTS }), { nil: undefined }),
  release: fc.boolean(),
});

describe("the slices' capacities (property)", () => {
  it("never add up to more than the burst and the extra burst, whatever holders ask, keep or let go", () => {
    fc.assert(
      fc.property(paramsArb, fc.array(askArb, { minLength: 1, maxLength: 120 }), (params, asks) => {
        const rule = { id: "r", params, version: 1 };
        let record: LimiterRecord | null = null;
        let now = T0;
        let id = 0;
        for (const a of asks) {
          now += a.gapMs;
          const ask = {
            rule,
            holder: `d${a.holder}`,
            id: `a${id++}`,
            demand: a.demand,
            units: 0,
            giveBack: [],
            ...(a.keep === undefined ? {} : { keep: a.keep }),
            ...(a.release && a.gapMs % 7 === 0 ? { release: true } : {}),
          };
          record = shareRecord(record, ask, now).record;
          expect(capacities(params, record, now)).toBeLessThanOrEqual(most(params));
        }
      }),
      { numRuns: runs(300), seed: 1 },
    );
  });
});
