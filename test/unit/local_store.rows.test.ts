/**
 * The local store decides fixed_window, sliding_counter and sliding_log in place on a row of its table (the
 * algorithms' row kernels). These properties hold that fast path to the pure core's `decide` and `refund`, decision
 * for decision and state for state (`peek`), on every bucket count and limit shape, costs up to the capacity, clock steps back, idle
 * gaps past every window, refunds of admitted and long-gone requests, and keys coming and going.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, capacityOf, decide, refund, rowPath } from "../../src/algorithms/index.ts";
import { MAX_ROW_LIMIT } from "../../src/algorithms/sliding_log.ts";
import { createLocalStore } from "../../src/isolate/local_store.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, slidingCounter, slidingLog } from "../support/params.ts";

const CASES: AlgorithmParams[] = [
  fixedWindow(1, 1000),
  fixedWindow(20, 2000),
  slidingCounter(6, 1000, false),
  slidingCounter(6, 1000, true),
  slidingCounter(1, 60_000, false),
  slidingCounter(20, 2000, false, 4),
  slidingCounter(9, 1200, true, 6),
  slidingCounter(100, 60_000, false, 12),
  slidingCounter(3, 10, true, 10),
  slidingLog(1, 1000),
  slidingLog(4, 1000),
  slidingLog(20, 2000),
  slidingLog(MAX_ROW_LIMIT, 500),
];

describe("local store row kernels = pure core", () => {
  it.each(CASES.map((p) => [JSON.stringify(p), p] as const))("%s", (_n, params) => {
    expect(rowPath(params)?.compile(params)).not.toBeNull();
    const capacity = capacityOf(params);
    const windowMs =
      "windowMs" in params
        ? params.windowMs
        : "window" in params && params.window.kind === "ms"
          ? params.window.ms
          : 1000;
    const step = fc.record({
      gapMs: fc.oneof(
        fc.integer({ min: 0, max: Math.ceil(windowMs / 8) }),
        fc.integer({ min: -windowMs, max: 0 }), // clock steps back
        fc.integer({ min: 0, max: 3 * windowMs }), // idle past the window
      ),
      key: fc.integer({ min: 0, max: 3 }),
      cost: fc.integer({ min: 1, max: capacity }),
      refundAgoMs: fc.option(fc.integer({ min: 0, max: windowMs }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 150 }), (steps) => {
        const store = createLocalStore(params, 16);
        const states = new Map<number, AlgorithmState>();
        let t = 1_700_000_000_000;
        for (const { gapMs, key, cost, refundAgoMs } of steps) {
          t += gapMs;
          const name = `k${key}`;
          const expected = decide(params, states.get(key) ?? null, cost, t);
          const got = store.check(name, cost, t);
          expect(got).toEqual(expected.ok ? { ok: true, decision: expected.decision } : expected);
          if (expected.ok) states.set(key, expected.state);
          // A refund of this request (0 ms ago) or of one that may be long gone.
          if (refundAgoMs !== null && states.has(key)) {
            const at = t - refundAgoMs;
            states.set(key, refund(params, states.get(key)!, cost, at));
            store.refund(name, cost, at);
          }
          expect(store.peek(name)).toEqual(states.get(key) ?? null);
        }
      }),
      { numRuns: 150 },
    );
  });

  it("keeps no row for a key whose only request changed nothing, and drops rows as keys are evicted", () => {
    const store = createLocalStore(slidingCounter(2, 1000, false, 2), 2);
    for (const k of ["a", "b", "c"]) expect(store.check(k, 1, 0)).toMatchObject({ decision: { allowed: true } });
    expect(store.size).toBe(2);
    expect(store.peek("a")).toBeNull();
    expect(store.evictions).toBe(1);
  });

  it(`sliding_log above limit ${MAX_ROW_LIMIT} keeps objects (no row kernel), with the same decisions`, () => {
    const params = slidingLog(MAX_ROW_LIMIT + 1, 1000);
    expect(rowPath(params)?.compile(params)).toBeNull();
    const store = createLocalStore(params, 4);
    let state: AlgorithmState | null = null;
    for (let i = 0; i < 100; i++) {
      const expected = decide(params, state, 1, i * 7);
      const got = store.check("k", 1, i * 7);
      expect(got.ok && got.decision).toEqual(expected.ok && expected.decision);
      if (expected.ok) state = expected.state;
    }
  });
});
