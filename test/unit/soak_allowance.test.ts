/**
 * The soak's over-admission check (bench/soak/allowance.ts) held to the pure core: whatever the core admits, with
 * any costs, gaps and client-side latencies, the check finds no excess; and a limiter that loses a key's state half
 * way (what a crash without durable state would do) is caught, for every algorithm.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Admission, rateAllowance, refilled, verdictOf } from "../../bench/soak/allowance.ts";
import { type AlgorithmState, capacityOf, decide } from "../../src/algorithms/index.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import {
  fixedWindow,
  gcraP,
  leakyBucket,
  leakyQueue,
  rate,
  slidingCounter,
  slidingLog,
  tokenBucket,
} from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

/** Run the core over `(gap, cost, latency)` steps; the admissions as a client would have seen them. */
function admissionsOf(
  params: AlgorithmParams,
  steps: readonly (readonly [number, number, number])[],
  loseStateAtStep = -1,
): Admission[] {
  let state: AlgorithmState | null = null;
  let now = T0;
  const out: Admission[] = [];
  steps.forEach(([gapMs, cost, latencyMs], i) => {
    now += gapMs;
    if (i === loseStateAtStep) state = null;
    const r = decide(params, state, Math.min(cost, capacityOf(params)), now);
    if (!r.ok) return;
    state = r.state;
    if (r.decision.allowed)
      out.push({ sentMs: now - latencyMs / 2, receivedMs: now + latencyMs, cost: Math.min(cost, capacityOf(params)) });
  });
  return out;
}

const paramsArb: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1, max: 20 }), fc.constantFrom(100, 1000, 3000), fc.integer({ min: 1, max: 20 }))
    .chain(([a, p, b]) =>
      fc.constantFrom(tokenBucket(a, p, b), gcraP(a, p, b), leakyBucket(a, p, b), leakyQueue(a, p, b, 0)),
    ),
  fc.tuple(fc.integer({ min: 1, max: 20 }), fc.constantFrom(500, 1000, 10_000)).map(([l, w]) => fixedWindow(l, w)),
  fc.tuple(fc.integer({ min: 1, max: 20 }), fc.constantFrom(500, 1000, 10_000)).map(([l, w]) => slidingLog(l, w)),
  fc
    .tuple(fc.integer({ min: 1, max: 20 }), fc.constantFrom(500, 1000, 10_000), fc.boolean())
    .map(([l, w, c]) => slidingCounter(l, w, c)),
);

const stepsArb = fc.array(
  fc.tuple(
    fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 3000 })),
    fc.integer({ min: 1, max: 6 }),
    fc.integer({ min: 0, max: 40 }),
  ),
  { maxLength: 400 },
);

describe("the soak's over-admission check", () => {
  it("finds no excess in anything the pure core admits", () => {
    fc.assert(
      fc.property(paramsArb, stepsArb, (params, steps) => {
        expect(verdictOf(params, admissionsOf(params, steps)).excess).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  // A saturating client (cost 1 every 10 ms for 3 s) against a limiter that forgets the key at 0.5 s,
  // inside the first window (a count_denied counter stays locked after it, so a later loss would admit nothing).
  const flood = Array.from({ length: 300 }, () => [10, 1, 4] as const);
  it.each([
    ["token_bucket", tokenBucket(1, 1000, 5)],
    ["gcra", gcraP(1, 1000, 5)],
    ["leaky_bucket", leakyBucket(1, 1000, 5)],
    ["leaky_queue", leakyQueue(1, 1000, 5, 2)],
    ["fixed_window", fixedWindow(5, 1000)],
    ["sliding_log", slidingLog(5, 1000)],
    ["sliding_counter", slidingCounter(5, 1000)],
    ["sliding_counter, count_denied", slidingCounter(5, 1000, true)],
  ])("catches a %s limiter that loses its state half way", (_name, params) => {
    expect(verdictOf(params, admissionsOf(params, flood)).excess).toBe(0);
    expect(verdictOf(params, admissionsOf(params, flood, 50)).excess).toBeGreaterThan(0);
  });

  it("computes refills and allowances exactly, rounding down", () => {
    expect(refilled(rate(7, 3000), 2999)).toBe(6); // 6.997...
    expect(refilled(rate(7, 3000), 3000)).toBe(7);
    expect(refilled(rate(1, 86_400_000), 86_399_999)).toBe(0);
    expect(rateAllowance(tokenBucket(10, 1000, 20), 1000, 1)).toBe(30);
    expect(rateAllowance(leakyQueue(10, 1000, 20), 0, 1)).toBe(21); // capacity: burst + 1
    expect(rateAllowance(leakyQueue(10, 1000, 20), 0, 21)).toBe(41); // a full-capacity cost after 20 queued
  });

  it("holds window rules to each window, and over the run to the windows it touched", () => {
    const fw = fixedWindow(5, 1000);
    const at = (ms: number, cost = 1): Admission => ({ sentMs: T0 + ms, receivedMs: T0 + ms + 2, cost });
    const six = [0, 100, 200, 300, 400, 500].map((ms) => at(ms));
    expect(verdictOf(fw, six)).toEqual({ admitted: 6, allowedOverRun: 5, excess: 1, ambiguous: 0 });
    // Sent at 999, answered at 1001: either window; held to neither.
    const straddling = [...six.slice(0, 5), { sentMs: T0 + 999, receivedMs: T0 + 1001, cost: 1 }];
    expect(verdictOf(fw, straddling)).toEqual({ admitted: 6, allowedOverRun: 10, excess: 0, ambiguous: 1 });
  });
});
