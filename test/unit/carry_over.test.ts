/** State across a redeploy that changed a rule's parameters. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, carryOver, decide } from "../../src/algorithms/index.ts";
import { estimateAt, type SlidingCounterState } from "../../src/algorithms/sliding_counter.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import {
  fixedWindow,
  gcraP,
  leakyBucket,
  leakyQueue,
  slidingCounter,
  slidingLog,
  tokenBucket,
} from "../support/params.ts";
import { runs } from "../support/runs.ts";

function spend(params: AlgorithmParams, n: number, t: number): AlgorithmState {
  let s: AlgorithmState | null = null;
  for (let i = 0; i < n; i++) {
    const r = decide(params, s, 1, t);
    if (!r.ok) throw new Error(r.error);
    s = r.state;
  }
  return s as AlgorithmState;
}
const remainingAfter = (params: AlgorithmParams, state: AlgorithmState | null, t: number) => {
  const r = decide(params, state, 1, t);
  if (!r.ok) throw new Error(r.error);
  return r.decision.allowed ? r.decision.remaining + 1 : 0;
};

describe("carryOver", () => {
  it("another algorithm: discarded", () => {
    expect(
      carryOver(tokenBucket(10, 1000, 20), gcraP(10, 1000, 20), spend(tokenBucket(10, 1000, 20), 5, 0), 0),
    ).toBeNull();
  });

  it("unchanged parameters: the very same state", () => {
    const s = spend(slidingLog(5, 60_000), 2, 0);
    expect(carryOver(slidingLog(5, 60_000), slidingLog(5, 60_000), s, 10)).toBe(s);
  });

  it.each([
    ["token_bucket", tokenBucket],
    ["gcra", gcraP],
    ["leaky_bucket", leakyBucket],
  ] as const)("%s: tokens are kept, capped at the new burst, and refill at the new rate", (_n, make) => {
    const before = make(10, 1000, 20);
    const s = spend(before, 15, 0); // 5 tokens left at t=0
    // a bigger burst: still 5 tokens now
    expect(remainingAfter(make(10, 1000, 100), carryOver(before, make(10, 1000, 100), s, 0), 0)).toBe(5);
    // a smaller burst: capped at 3
    expect(remainingAfter(make(10, 1000, 3), carryOver(before, make(10, 1000, 3), s, 0), 0)).toBe(3);
    // a new rate (7/3s): 5 tokens now, then refills 7 per 3 s
    const after = make(7, 3000, 20);
    const moved = carryOver(before, after, s, 0);
    expect(remainingAfter(after, moved, 0)).toBe(5);
    expect(remainingAfter(after, moved, 3000)).toBe(12);
  });

  it("leaky_queue: queued work is kept (rounded up) and drains at the new rate", () => {
    const before = leakyQueue(10, 1000, 20);
    const s = spend(before, 11, 0); // queue busy until t=1100
    const after = leakyQueue(5, 1000, 20);
    const moved = carryOver(before, after, s, 0);
    // 11 requests' worth of work at 5/s: busy until 2200
    const r = decide(after, moved, 1, 0);
    expect(r.ok && r.decision.delayMs).toBe(2200);
  });

  it("fixed_window and sliding_counter: kept for the same window, discarded for another", () => {
    const fw = fixedWindow(10, 60_000);
    const s = spend(fw, 4, 0);
    expect(carryOver(fw, fixedWindow(5, 60_000), s, 1)).toBe(s);
    expect(carryOver(fw, fixedWindow(10, 3_600_000), s, 1)).toBeNull();
    // a calendar month is the same window whatever the limit; a month and a length of ms never are
    const month = fixedWindow(10, "month");
    const m = spend(month, 4, 0);
    expect(carryOver(month, fixedWindow(5, "month"), m, 1)).toBe(m);
    expect(carryOver(month, fixedWindow(10, 31 * 86_400_000), m, 1)).toBeNull();
    expect(carryOver(fixedWindow(10, 31 * 86_400_000), month, s, 1)).toBeNull();
    const sc = slidingCounter(10, 60_000);
    const c = spend(sc, 4, 0);
    expect(carryOver(sc, slidingCounter(10, 60_000, true), c, 1)).toBe(c);
    expect(carryOver(sc, slidingCounter(10, 1000), c, 1)).toBeNull();
  });

  it("sliding_log: entries are kept and judged by the new limit", () => {
    const before = slidingLog(5, 60_000);
    const s = spend(before, 3, 0);
    expect(remainingAfter(slidingLog(4, 60_000), carryOver(before, slidingLog(4, 60_000), s, 1), 1)).toBe(1);
  });

  it("sliding_counter made before `buckets` existed: read as one bucket, kept as it is", () => {
    const c = spend(slidingCounter(10, 60_000), 4, 0);
    const { buckets: _, ...old } = slidingCounter(10, 60_000) as Extract<AlgorithmParams, { buckets: number }>;
    expect(carryOver(old as AlgorithmParams, slidingCounter(10, 60_000), c, 1)).toBe(c);
  });

  it("sliding_counter, buckets changed: each count moves to the new sub-window of its latest possible moment", () => {
    // k = 1: prev = 6 (window 0, [0, 60 s)), curr = 3 (window 1); at 70 s under k = 4 (sub-windows of 15 s)
    const state: AlgorithmState = { window: 1, prev: 6, curr: 3 };
    const next = carryOver(slidingCounter(10, 60_000), slidingCounter(10, 60_000, false, 4), state, 70_000);
    // prev's latest moment 59 999 is in sub-window 3; curr's is now (70 000), sub-window 4
    expect(next).toEqual({ window: 4, prev: 0, mid: [0, 0, 6], curr: 3 });
    // and back to k = 1 at 70 s: sub-window 3 ended at 59 999 (window 0), sub-window 4 is in window 1
    expect(carryOver(slidingCounter(10, 60_000, false, 4), slidingCounter(10, 60_000), next!, 70_000)).toEqual({
      window: 1,
      prev: 6,
      curr: 3,
    });
  });

  it("sliding_counter, buckets changed: never below the new rule's own estimate of any history the old state holds", () => {
    const K = [1, 2, 3, 4, 6, 12];
    fc.assert(
      fc.property(
        fc.constantFrom(...K),
        fc.constantFrom(...K),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300_000 }), fc.integer({ min: 1, max: 5 })), { maxLength: 40 }),
        fc.integer({ min: 0, max: 90_000 }),
        (kFrom, kTo, requests, after) => {
          const from = slidingCounter(1_000_000, 60_000, false, kFrom);
          const to = slidingCounter(1_000_000, 60_000, false, kTo);
          const sorted = [...requests].sort((a, b) => a[0] - b[0]);
          let oldState: AlgorithmState | null = null;
          for (const [t, cost] of sorted)
            oldState = (decide(from, oldState, cost, t) as { state: AlgorithmState }).state;
          if (oldState === null) return;
          // the history the old state still holds: its k + 1 sub-windows (older requests it has already forgotten)
          const wFrom = 60_000 / kFrom;
          const oldest = ((oldState as SlidingCounterState).window - kFrom) * wFrom;
          let newState: AlgorithmState | null = null;
          for (const [t, cost] of sorted)
            if (t >= oldest) newState = (decide(to, newState, cost, t) as { state: AlgorithmState }).state;
          const now = (sorted.at(-1)?.[0] ?? 0) + after;
          const moved = carryOver(from, to, oldState, now) as SlidingCounterState;
          const p = to as Extract<AlgorithmParams, { algorithm: "sliding_counter" }>;
          expect(estimateAt(p, moved, now)).toBeGreaterThanOrEqual(estimateAt(p, newState as SlidingCounterState, now));
        },
      ),
      { numRuns: runs(300) },
    );
  });
});
