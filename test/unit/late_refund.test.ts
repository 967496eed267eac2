/**
 * A rate rule's refund that lands late gives back no more than the bucket without the refunded charges would hold
 * (src/protocol/late_refund.ts, issue 18): table tests on the record, for each rate algorithm, each checked against
 * that bucket (the pure core replaying the same admissions without the refunded ones).
 */
import { describe, expect, it } from "vitest";
import { decide, refund, scaledDeficit, scaledRefund } from "../../src/algorithms/index.ts";
import { type Lows, lateRefund, noteLow } from "../../src/protocol/late_refund.ts";
import { callRecord, type LimiterRecord, peekRecord, refundRecord } from "../../src/protocol/store.ts";
import { LOWS_MAX } from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, gcraP, leakyBucket, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);

type Op =
  /** A call at `atMs` deciding these costs (all must be admitted), named `name` for refunds. */
  | { readonly call: string; readonly atMs: number; readonly costs: readonly number[] }
  /** A refund at `atMs` of `cost` of call `of`; `given`: the whole requests the key gains by it. */
  | { readonly refund: string; readonly atMs: number; readonly cost: number; readonly given: number };

interface Row {
  readonly name: string;
  readonly ops: readonly Op[];
}

// 10 per second, burst 5: one token per 100 ms.
const rows: Row[] = [
  {
    name: "at once (same ms): all of it",
    ops: [
      { call: "a", atMs: T0, costs: [1] },
      { refund: "a", atMs: T0, cost: 1, given: 1 },
    ],
  },
  {
    // Full again at T0 + 100 (the refill cap took the unit), then 3 charged: the key holds 2.5 either way.
    name: "after the key filled up and was charged again: nothing (the refill cap took it)",
    ops: [
      { call: "a", atMs: T0, costs: [1] },
      { call: "b", atMs: T0 + 100, costs: [3] },
      { refund: "a", atMs: T0 + 150, cost: 1, given: 0 },
    ],
  },
  {
    // The admin guard's pattern: two requests 1 ms apart, the first refunded; the key regains all but the 0.01 the cap
    // took between them (3.02 -> 4.01), as the bucket without the first would hold.
    name: "two requests 1 ms apart, the first refunded: all but what the cap took meanwhile",
    ops: [
      { call: "a", atMs: T0, costs: [1] },
      { call: "b", atMs: T0 + 1, costs: [1] },
      { refund: "a", atMs: T0 + 2, cost: 1, given: 1 },
    ],
  },
  {
    // The admin guard in one ms: a charge, its refund, a charge, its refund a ms later (the first refund's step,
    // before the second charge, is not one after it).
    name: "charge, refund, charge in one ms, then the refund: all of it",
    ops: [
      { call: "a", atMs: T0, costs: [1] },
      { refund: "a", atMs: T0, cost: 1, given: 1 },
      { call: "b", atMs: T0, costs: [1] },
      { refund: "b", atMs: T0 + 1, cost: 1, given: 1 },
    ],
  },
  {
    // The object's clock reads a second earlier for the second charge (a restart, a test's clock): the steps taken
    // at the later time count as before it.
    name: "a clock that steps back between a refund and the next charge: all of it",
    ops: [
      { call: "a", atMs: T0 + 1000, costs: [1] },
      { refund: "a", atMs: T0 + 1000, cost: 1, given: 1 },
      { call: "b", atMs: T0, costs: [1] },
      { refund: "b", atMs: T0 + 1, cost: 1, given: 1 },
    ],
  },
  {
    name: "a key never near full meanwhile: all of it",
    ops: [
      { call: "a", atMs: T0, costs: [5] },
      { call: "b", atMs: T0 + 150, costs: [1] },
      { refund: "a", atMs: T0 + 160, cost: 2, given: 2 },
    ],
  },
  {
    // The key lacked 3.5 before b; without the first refund's 2, 1.5: the second gives 1.5 back (2.7 -> 4.2).
    name: "two refunds of one charge: the second only what the key lacked without the first",
    ops: [
      { call: "a", atMs: T0, costs: [2, 2] },
      { call: "b", atMs: T0 + 50, costs: [1] },
      { refund: "a", atMs: T0 + 60, cost: 2, given: 2 },
      { refund: "a", atMs: T0 + 70, cost: 2, given: 2 },
    ],
  },
  {
    name: "a refund before the key filled up, another after: each its own",
    ops: [
      { call: "a", atMs: T0, costs: [2] },
      { refund: "a", atMs: T0 + 10, cost: 1, given: 1 },
      { call: "b", atMs: T0 + 300, costs: [2] },
      { refund: "a", atMs: T0 + 310, cost: 1, given: 0 },
      { refund: "b", atMs: T0 + 320, cost: 2, given: 2 },
    ],
  },
];

const algorithms: [string, AlgorithmParams][] = [
  ["token_bucket", tokenBucket(10, 1000, 5)],
  ["gcra", gcraP(10, 1000, 5)],
  ["leaky_bucket", leakyBucket(10, 1000, 5)],
];

/** Whole requests the key holds at `atMs` (a cost-1 peek). */
const level = (params: AlgorithmParams, record: LimiterRecord | null, atMs: number) =>
  peekRecord(record, { id: "r", params }, atMs).remaining;

/** The bucket without the refunded units: the pure core deciding each call's costs, less what was refunded. */
function without(params: AlgorithmParams, ops: readonly Op[], upTo: number, atMs: number): number {
  const refunded = new Map<string, number>();
  for (const op of ops.slice(0, upTo + 1))
    if ("refund" in op) refunded.set(op.refund, (refunded.get(op.refund) ?? 0) + op.cost);
  let state = null;
  for (const op of ops.slice(0, upTo + 1)) {
    if (!("call" in op)) continue;
    const cost = op.costs.reduce((a, b) => a + b, 0) - (refunded.get(op.call) ?? 0);
    if (cost === 0) continue;
    const out = decide(params, state, cost, op.atMs);
    if (!out.ok || !out.decision.allowed) throw new Error("the bucket without the refunds admits less");
    state = out.state;
  }
  const peek = decide(params, state, 1, atMs);
  return peek.ok && peek.decision.allowed ? peek.decision.remaining + 1 : 0;
}

describe("a rate rule's late refund", () => {
  for (const [algorithm, params] of algorithms) {
    for (const row of rows) {
      it(`${algorithm}: ${row.name}`, () => {
        const rule = { id: "r", params };
        let record: LimiterRecord | null = null;
        const chargedAt = new Map<string, number>();
        row.ops.forEach((op, i) => {
          if ("call" in op) {
            const out = callRecord(record, { rule, id: op.call, costs: op.costs }, op.atMs);
            expect(out.result.results.every((r) => r.ok && r.decision.allowed)).toBe(true);
            record = out.record;
            chargedAt.set(op.call, op.atMs);
            return;
          }
          const before = level(params, record, op.atMs);
          const out = refundRecord(record, { rule, cost: op.cost, admittedAtMs: chargedAt.get(op.refund)! }, op.atMs);
          record = out.record;
          expect(level(params, record, op.atMs) - before).toBe(op.given);
          // Never more than the bucket without the refunded units holds, now or later.
          for (const later of [0, 50, 1000]) {
            expect(level(params, record, op.atMs + later)).toBeLessThanOrEqual(
              without(params, row.ops, i, op.atMs + later),
            );
          }
        });
      });
    }
  }

  it("a window rule's refund in its window gives back all of it, whatever came between", () => {
    const params = fixedWindow(5, 60_000);
    const rule = { id: "r", params };
    let record = callRecord(null, { rule, id: "a", costs: [1, 1] }, T0).record;
    record = callRecord(record, { rule, id: "b", costs: [1] }, T0 + 10_000).record;
    record = refundRecord(record, { rule, cost: 2, admittedAtMs: T0 }, T0 + 20_000).record;
    expect(level(params, record, T0 + 20_000)).toBe(4);
    expect(record?.lows).toBeUndefined();
  });
});

describe("the buckets' scaled deficit and refund (src/algorithms)", () => {
  for (const [algorithm, params] of algorithms) {
    it(`${algorithm}: a fresh key lacks nothing; each charge adds its cost; a whole refund is the algorithm's own`, () => {
      const per = (params as { rate: { perMs: number } }).rate.perMs;
      expect(scaledDeficit(params, null, T0)).toBe(0);
      let state = null;
      for (const [dt, cost, deficit] of [
        [0, 2, 2],
        [0, 1, 3],
        [50, 1, 3.5],
        [1000, 1, 1],
      ] as const) {
        const out = decide(params, state, cost, T0 + dt);
        if (!out.ok || !out.decision.allowed) throw new Error("admitted");
        state = out.state;
        expect(scaledDeficit(params, state, T0 + dt)).toBe(deficit * per);
      }
      expect(scaledRefund(params, state!, 2 * per)).toEqual(refund(params, state!, 2, T0));
      expect(scaledDeficit(params, scaledRefund(params, state!, per / 2), T0 + 1000)).toBe(per / 2);
      expect(scaledDeficit(params, scaledRefund(params, state!, 10 * per), T0 + 1000)).toBe(0); // never past full
    });
  }
  it("is none for the other algorithms", () => {
    expect(scaledDeficit(fixedWindow(5, 1000), null, T0)).toBeNull();
  });
});

describe("the staircase of deficits", () => {
  // 10/s, burst 5: deficits in 1/100 of a request (perMs 100).
  const params = tokenBucket(10, 1000, 5);
  const at = (tokensScaled: number, lastMs: number) => ({ tokensScaled, lastMs });
  it("keeps suffix minima: a lower deficit later drops the higher ones before it", () => {
    let lows: Lows | undefined;
    lows = noteLow(lows, params, at(200, T0), T0, false)!; // 3 requests short of full
    lows = noteLow(lows, params, at(400, T0 + 10), T0 + 10, false)!; // 1
    lows = noteLow(lows, params, at(300, T0 + 20), T0 + 20, true)!; // 2, after refunds landed at T0 + 20
    expect(lows).toEqual({
      s: [
        [2 * (T0 + 10), 100],
        [2 * (T0 + 20) + 1, 200],
      ],
      slack: 0,
      per: 100,
    });
    expect(lateRefund(lows, params, 5, T0 - 1).given).toBe(100);
    expect(lateRefund(lows, params, 5, T0 + 10).given).toBe(200); // only steps after the charge
    expect(lateRefund(lows, params, 5, T0 + 20).given).toBe(200); // a step after refunds landed in the charge's ms counts
    expect(lateRefund(lows, params, 5, T0 + 21).given).toBe(500); // none after: the refund caps it at full now
  });

  it(`keeps at most ${LOWS_MAX} steps, merging the oldest on the safe side`, () => {
    const forty = tokenBucket(10, 1000, 40);
    const n = LOWS_MAX + 4;
    let lows: Lows | undefined;
    for (let i = 0; i < n; i++) lows = noteLow(lows, forty, at(4000 - 100 * i, T0 + i), T0 + i, false)!;
    expect(lows!.s).toHaveLength(LOWS_MAX);
    // Deficits 0..n-1 requests at T0..T0+n-1: a charge at T0 + 1 sees the least after it, 2, or less (merged).
    expect(lateRefund(lows, forty, 40, T0 + 1).given).toBeLessThanOrEqual(200);
    expect(lateRefund(lows, forty, 40, T0 + n - 2).given).toBe((n - 1) * 100);
  });
});

describe("the staircase's edges (each value written out)", () => {
  const p100 = tokenBucket(10, 1000, 5); // perMs 100
  const p30 = tokenBucket(10, 3000, 5); // 10 per 3 s: perMs 300
  const at = (tokensScaled: number, lastMs: number) => ({ tokensScaled, lastMs });
  const base: Lows = { s: [[2 * T0, 150]], slack: 7, per: 100 };

  it("is none for an algorithm that is not a bucket", () => {
    expect(noteLow(base, fixedWindow(5, 1000), null, T0, false)).toBeNull();
  });

  it("converts steps (rounded down) and slack (rounded up) to other parameters' units", () => {
    // 150/100 of a request = 450/300; slack 7/100 = 21/300. Deficit now 300 - 0 ... (p30 burst 5: 1500 full).
    const out = noteLow(base, p30, at(1500 - 600, T0 + 10), T0 + 10, false)!;
    expect(out).toEqual({
      s: [
        [2 * T0, 450],
        [2 * (T0 + 10), 600 - 21],
      ],
      slack: 21,
      per: 300,
    });
    const odd: Lows = { s: [[2 * T0, 1]], slack: 1, per: 300 };
    expect(noteLow(odd, p100, at(500 - 200, T0 + 10), T0 + 10, false)).toEqual({
      s: [
        [2 * T0, 0],
        [2 * (T0 + 10), 199],
      ],
      slack: 1,
      per: 100,
    });
    expect(lateRefund(base, p30, 5, T0 - 1).given).toBe(450);
  });

  it("takes the slack off a new step, and a full key drops it", () => {
    expect(noteLow(base, p100, at(300, T0 + 10), T0 + 10, false)).toEqual({
      s: [
        [2 * T0, 150],
        [2 * (T0 + 10), 193],
      ],
      slack: 7,
      per: 100,
    });
    expect(noteLow(base, p100, at(500, T0 + 10), T0 + 10, false)).toEqual({
      s: [[2 * (T0 + 10), 0]],
      slack: 0,
      per: 100,
    });
  });

  it("adds no step for a later charge of the same instant, and moves steps not before a new one to just before it", () => {
    const one = noteLow(undefined, p100, at(300, T0), T0, false)!; // 200
    expect(noteLow(one, p100, at(200, T0), T0, false)).toEqual({ s: [[2 * T0, 200]], slack: 0, per: 100 });
    expect(noteLow(one, p100, at(300, T0), T0, false)).toEqual({ s: [[2 * T0, 200]], slack: 0, per: 100 });
    const refunded = noteLow(undefined, p100, at(100, T0), T0, true)!; // 400, at the odd tick
    expect(noteLow(refunded, p100, at(50, T0), T0, false)).toEqual({
      s: [
        [2 * T0 - 1, 400],
        [2 * T0, 450],
      ],
      slack: 0,
      per: 100,
    });
  });

  it("after a refund: the steps after its charge lose its cost, those before keep theirs, the rest is slack", () => {
    const lows: Lows = {
      s: [
        [2 * T0, 100],
        [2 * T0 + 1, 150],
        [2 * (T0 + 5), 400],
      ],
      slack: 0,
      per: 100,
    };
    expect(lateRefund(lows, p100, 2, T0)).toEqual({
      given: 150,
      lows: {
        s: [
          [2 * T0 + 1, 0],
          [2 * (T0 + 5), 200],
        ],
        slack: 50,
        per: 100,
      },
    });
    expect(lateRefund(lows, p100, 1, T0 + 5)).toEqual({ given: 100, lows });
  });
});
