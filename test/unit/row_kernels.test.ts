/**
 * Every algorithm's row kernel (the in-place fast path the replay and the local store decide on) against the pure
 * core's `decide` and `refund`: decision for decision and state for state, with clock steps back (far enough to put a
 * TAT beyond the burst), idle gaps, refunds of admitted and long-gone requests, and several keys on one table.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, capacityOf, decide, refund, rowPath } from "../../src/algorithms/index.ts";
import type { RowChange } from "../../src/algorithms/types.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { KERNEL_CASES } from "../support/params.ts";

const CASES = KERNEL_CASES;

/** The span a case's time steps are drawn against: its window, or the time to refill its burst. */
function spanOf(p: AlgorithmParams): number {
  if ("windowMs" in p) return p.windowMs;
  if ("window" in p) return p.window.kind === "ms" ? p.window.ms : 86_400_000;
  if ("rate" in p) return Math.ceil(((p.burst + 1) * p.rate.periodMs) / p.rate.amount);
  return 1000;
}

describe("row kernels = pure core", () => {
  it.each(CASES.map((p) => [JSON.stringify(p), p] as const))("%s", (_n, params) => {
    const kernel = rowPath(params)?.compile(params) ?? null;
    expect(kernel).not.toBeNull();
    const k = kernel!;
    const span = spanOf(params);
    const step = fc.record({
      gapMs: fc.oneof(
        fc.integer({ min: 0, max: Math.ceil(span / 8) }),
        fc.integer({ min: -3 * span, max: 0 }), // clock steps back
        fc.integer({ min: 0, max: 3 * span }), // idle
      ),
      key: fc.integer({ min: 0, max: 2 }),
      cost: fc.integer({ min: 1, max: capacityOf(params) }),
      refundAgoMs: fc.option(fc.integer({ min: 0, max: span }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 120 }), (steps) => {
        const row = new Float64Array(3 * k.width);
        const fresh = [true, true, true];
        const states = new Map<number, AlgorithmState>();
        const change: RowChange = { changed: false };
        let t = 1_700_000_000_000;
        for (const { gapMs, key, cost, refundAgoMs } of steps) {
          t += gapMs;
          const expected = decide(params, states.get(key) ?? null, cost, t);
          if (!expected.ok) throw new Error("a valid cost");
          const at = key * k.width;
          if (fresh[key]) row.fill(0, at, at + k.width);
          const got = k.check(row, at, fresh[key]!, cost, t, change);
          expect(got).toEqual(expected.decision);
          if (change.changed) fresh[key] = false;
          if (expected.state !== states.get(key)) states.set(key, expected.state);
          if (refundAgoMs !== null && states.has(key)) {
            states.set(key, refund(params, states.get(key)!, cost, t - refundAgoMs));
            k.refund(row, at, cost, t - refundAgoMs);
          }
          expect(fresh[key] ? null : k.read(row, at)).toEqual(states.get(key) ?? null);
        }
      }),
      { numRuns: 200 },
    );
  });
});
