/**
 * Edges the properties and tables did not reach, each found by a mutant that survived them (docs/testing.md): the
 * packed path's refund and its clock before the store's base, the rounding of a rescaled amount, a TAT exactly at
 * now, a rule change seen with a clock behind the state, and a full queue carried into a shorter one.
 */
import { describe, expect, it } from "vitest";
import { type AlgorithmParams, carryOver, decide, packedPath } from "../../src/algorithms/index.ts";
import { rescale, usedScaled } from "../../src/algorithms/shared.ts";
import { gcraP, leakyBucket, leakyQueue, tokenBucket } from "../support/params.ts";

function path(params: AlgorithmParams) {
  const p = packedPath(params);
  if (p === undefined) throw new Error(`${params.algorithm} has no packed path`);
  return p;
}

describe("the packed path", () => {
  const rules = [gcraP(7, 3000, 5), tokenBucket(10, 1000, 5), leakyBucket(10, 1000, 5), leakyQueue(7, 3000, 5)];
  it.each(rules.map((p) => [p.algorithm, p] as const))("%s: a refund moves the TAT back by cost × T", (_n, params) => {
    const p = path(params);
    const perMs = p.rate(params).perMs;
    const first = p.check(params, null, 0, 2);
    expect(first.stored).toBe(2 * perMs);
    expect(p.refund(params, first.stored as number, 2)).toBe(0);
    expect(p.refund(params, 10 * perMs, 3)).toBe(7 * perMs);
  });
  it.each(rules.map((p) => [p.algorithm, p] as const))("%s: a fresh key before the store's base", (_n, params) => {
    // a clock behind the base the store chose: the scaled now is negative, and a fresh key is still fresh
    const p = path(params);
    const fresh = decide(params, null, 1, 0);
    expect(fresh.ok && p.check(params, null, -5000, 1).decision).toEqual(fresh.ok && fresh.decision);
  });
});

describe("rescale: an amount from one rate's units to another's", () => {
  const third = { tokens: 1, perMs: 3 };
  const half = { tokens: 1, perMs: 2 };
  it.each([
    // 7 thirds are 14/3 halves: 4 rounded down, 5 rounded up
    [7, third, half, "floor", 4],
    [7, third, half, "ceil", 5],
    // exact: the same either way
    [6, third, half, "floor", 4],
    [6, third, half, "ceil", 4],
    [7, half, half, "ceil", 7],
    [0, third, half, "ceil", 0],
  ] as const)("%d from perMs %o to %o, %s: %d", (scaled, from, to, round, expected) => {
    expect(rescale(scaled, from, to, round)).toBe(expected);
  });
});

describe("usedScaled: the work ahead of now in a TAT state", () => {
  const rate = { tokens: 7, perMs: 3000 };
  it.each([
    ["TAT in the past", { tatMs: 999, tatFrac: 6 }, 0],
    ["TAT at now, a fraction on: the fraction", { tatMs: 1000, tatFrac: 3 }, 3],
    ["TAT 2 ms on", { tatMs: 1002, tatFrac: 3 }, 17],
    ["far ahead: capped", { tatMs: 9_000_000, tatFrac: 0 }, 100],
  ] as const)("%s", (_name, state, expected) => {
    expect(usedScaled(state, rate, 1000, 100)).toBe(expected);
  });
});

describe("carry-over", () => {
  it("token_bucket and leaky_bucket: a clock behind the state is read at the state's time", () => {
    // 10/s burst 10: 4 spent at t = 1000; the change is seen at t = 500
    const tb = tokenBucket(10, 1000, 10);
    const a = decide(tb, null, 4, 1000);
    if (!a.ok) throw new Error("admitted");
    expect(carryOver(tb, tokenBucket(10, 1000, 20), a.state, 500)).toEqual({ tokensScaled: 600, lastMs: 1000 });
    const lb = leakyBucket(10, 1000, 10);
    const b = decide(lb, null, 4, 1000);
    if (!b.ok) throw new Error("admitted");
    // 6 of room kept under a burst of 20: a level of 14
    expect(carryOver(lb, leakyBucket(10, 1000, 20), b.state, 500)).toEqual({ levelScaled: 1400, lastMs: 1000 });
  });

  it("leaky_queue: a full queue (burst + 1 waiting) is kept whole, capped at the new capacity", () => {
    // 10/s burst 2: three at t = 1000 fill it (TAT 1300)
    const q = leakyQueue(10, 1000, 2);
    let state = null;
    for (let i = 0; i < 3; i++) {
      const r = decide(q, state, 1, 1000);
      if (!r.ok || !r.decision.allowed) throw new Error("admitted");
      state = r.state;
    }
    expect(state).toEqual({ tatMs: 1300, tatFrac: 0 });
    if (state === null) return;
    expect(carryOver(q, leakyQueue(10, 1000, 5), state, 1000)).toEqual({ tatMs: 1300, tatFrac: 0 });
    // burst 1 holds 2: the third is dropped
    expect(carryOver(q, leakyQueue(10, 1000, 1), state, 1000)).toEqual({ tatMs: 1200, tatFrac: 0 });
  });

  it("leaky_queue: queued work in the new rate's units is rounded up, never down", () => {
    // 7/3s: one request at t = 0 is queued until 3000/7 ms (TAT 428 + 4/7); at t = 100, 2300/7000 of a second is
    // left, 766.67 ms at 1/s: kept as 767
    const q = leakyQueue(7, 3000, 2);
    const r = decide(q, null, 1, 0);
    if (!r.ok) throw new Error("admitted");
    expect(r.state).toEqual({ tatMs: 428, tatFrac: 4 });
    expect(carryOver(q, leakyQueue(1, 1000, 2), r.state, 100)).toEqual({ tatMs: 867, tatFrac: 0 });
  });
});
