/**
 * The clock rule (docs/rules.md "Decisions"): a `now` earlier than one the key has seen never admits more than the later
 * time would. The worked traces never step back, so here they do: on random traces whose clock jumps back and forth,
 * every field of every decision equals the rational transcription (test/support/reference.ts), and a few steps back
 * are pinned as named tables with an explicit `now`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, capacityOf, type Decision, decide } from "../../src/algorithms/index.ts";
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
import { referenceKey } from "../support/reference.ts";
import { runs } from "../support/runs.ts";

const rateArb = fc.record({
  amount: fc.constantFrom(1, 3, 7, 10, 1000),
  periodMs: fc.constantFrom(1, 7, 1000, 3000, 60_000),
});
const paramsArb: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  fc
    .tuple(rateArb, fc.integer({ min: 1, max: 25 }))
    .chain(([r, b]) =>
      fc.constantFrom(
        tokenBucket(r.amount, r.periodMs, b),
        gcraP(r.amount, r.periodMs, b),
        leakyBucket(r.amount, r.periodMs, b),
      ),
    ),
  fc
    .tuple(rateArb, fc.integer({ min: 0, max: 25 }), fc.integer({ min: 0, max: 25 }))
    .map(([r, b, d]) => leakyQueue(r.amount, r.periodMs, b, Math.min(b, d))),
  fc
    .tuple(fc.integer({ min: 1, max: 25 }), fc.constantFrom(10, 1000, 7000, 60_000))
    .chain(([l, w]) =>
      fc.constantFrom(fixedWindow(l, w), slidingLog(l, w), slidingCounter(l, w, false), slidingCounter(l, w, true)),
    ),
  fc.integer({ min: 1, max: 25 }).map((l) => fixedWindow(l, "month")),
  // buckets: k sub-windows; every window here is a multiple of 1..5
  fc
    .tuple(fc.integer({ min: 1, max: 25 }), fc.constantFrom(60, 1200, 6000, 60_000), fc.integer({ min: 2, max: 5 }))
    .chain(([l, w, k]) => fc.constantFrom(slidingCounter(l, w, false, k), slidingCounter(l, w, true, k))),
);

/** Steps of the clock: mostly forward, often back (a little or a lot), sometimes a month or more either way. */
const stepArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant(0) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 3000 }) },
  { weight: 3, arbitrary: fc.integer({ min: -3000, max: -1 }) },
  { weight: 1, arbitrary: fc.integer({ min: -70 * 86_400_000, max: 70 * 86_400_000 }) },
);

describe("the clock stepping back", () => {
  it("every field of every decision equals the rational transcription", () => {
    fc.assert(
      fc.property(
        paramsArb.chain((p) =>
          fc.tuple(
            fc.constant(p),
            fc.array(fc.tuple(stepArb, fc.integer({ min: 1, max: capacityOf(p) })), { minLength: 1, maxLength: 40 }),
          ),
        ),
        ([params, steps]) => {
          const ref = referenceKey(params);
          let state: AlgorithmState | null = null;
          let t = Date.UTC(2024, 0, 20);
          for (const [step, cost] of steps) {
            t += step;
            const r = decide(params, state, cost, t);
            if (!r.ok) throw new Error(r.error);
            expect(r.decision).toEqual(ref.check(cost, t));
            state = r.state;
          }
        },
      ),
      { numRuns: runs(600) },
    );
  });
  it("a denial does not drop a log's old entries, so a step back still counts them (found by this property)", () => {
    // sliding_log 3 per 10 ms: t=10 is denied (the entry of t=0 has left by then, but a denial changes nothing);
    // back at t=9 the entry of t=0 is inside the window again and counts, so 1 more fits and none remain.
    const params = { algorithm: "sliding_log", limit: 3, windowMs: 10 } as const;
    const ref = referenceKey(params);
    let state: AlgorithmState | null = null;
    const t0 = Date.UTC(2024, 0, 20);
    const seen: [boolean, number][] = [];
    for (const [at, cost] of [
      [0, 1],
      [3, 1],
      [10, 3],
      [9, 1],
      [10, 1],
    ] as const) {
      const r = decide(params, state, cost, t0 + at);
      if (!r.ok) throw new Error(r.error);
      expect(r.decision).toEqual(ref.check(cost, t0 + at));
      seen.push([r.decision.allowed, r.decision.remaining]);
      state = r.state;
    }
    expect(seen).toEqual([
      [true, 2],
      [true, 1],
      [false, 2],
      [true, 0],
      [true, 0],
    ]);
  });
});

/** Decisions of `requests` ([t, cost]) on one key, from a fresh state. */
function run(params: AlgorithmParams, requests: readonly (readonly [number, number])[]): Decision[] {
  let state: AlgorithmState | null = null;
  return requests.map(([t, cost]) => {
    const r = decide(params, state, cost, t);
    if (!r.ok) throw new Error(r.error);
    state = r.state;
    return r.decision;
  });
}
const ok = (remaining: number, resetAfterMs: number, delayMs = 0): Decision => ({
  allowed: true,
  remaining,
  resetAfterMs,
  retryAfterMs: null,
  delayMs,
});
const no = (remaining: number, resetAfterMs: number, retryAfterMs: number): Decision => ({
  allowed: false,
  remaining,
  resetAfterMs,
  retryAfterMs,
  delayMs: 0,
});

describe("steps back, pinned", () => {
  // [name, params, requests [t, cost], decisions]
  const table: readonly (readonly [string, AlgorithmParams, readonly (readonly [number, number])[], Decision[]])[] = [
    [
      "token_bucket: judged at the last refill, never earlier",
      tokenBucket(10, 1000, 20),
      [
        [5000, 20],
        [4000, 1],
        [5100, 1],
      ],
      [ok(0, 2000), no(0, 2000, 100), ok(0, 2000)],
    ],
    [
      "leaky_bucket: judged at the last leak, never earlier",
      leakyBucket(10, 1000, 20),
      [
        [5000, 20],
        [4000, 1],
        [5100, 1],
      ],
      [ok(0, 2000), no(0, 2000, 100), ok(0, 2000)],
    ],
    [
      "gcra: the earlier now only makes TAT further ahead (7/3s, burst 3)",
      gcraP(7, 3000, 3),
      [
        [1000, 3],
        [999, 1],
      ],
      [ok(0, 1286), no(0, 1287, 430)],
    ],
    [
      "leaky_queue: the earlier now sees a longer wait",
      leakyQueue(10, 1000, 2),
      [
        [1000, 1],
        [1000, 1],
        [1000, 1],
        [950, 1],
      ],
      [ok(2, 100), ok(1, 200, 100), ok(0, 300, 200), no(0, 350, 150)],
    ],
    [
      "fixed_window: a window that has been seen never reopens",
      fixedWindow(3, 1000),
      [
        [5500, 2],
        [4500, 1],
        [4999, 1],
      ],
      [ok(1, 500), ok(0, 1000), no(0, 1000, 1000)],
    ],
    [
      "fixed_window month: back into January is judged at February 1st",
      fixedWindow(2, "month"),
      [
        [Date.UTC(2024, 1, 10), 2],
        [Date.UTC(2024, 0, 31, 23), 1],
      ],
      [
        ok(0, Date.UTC(2024, 2, 1) - Date.UTC(2024, 1, 10)),
        no(0, Date.UTC(2024, 2, 1) - Date.UTC(2024, 1, 1), 29 * 86_400_000),
      ],
    ],
    [
      "sliding_log: judged at the newest entry",
      slidingLog(3, 1000),
      [
        [5000, 2],
        [5500, 1],
        [4000, 1],
        [4000, 2],
      ],
      [ok(1, 1000), ok(0, 1000), no(0, 1000, 500), no(0, 1000, 500)],
    ],
    [
      "sliding_counter: judged at the start of the newest window",
      slidingCounter(10, 1000),
      [
        [5500, 4],
        [6500, 4],
        [5900, 4],
      ],
      [ok(6, 1500), ok(4, 1500), no(2, 2000, 500)],
    ],
  ];
  it.each(table)("%s", (_name, params, requests, decisions) => {
    expect(run(params, requests)).toEqual(decisions);
    // and the reference agrees
    const ref = referenceKey(params);
    expect(requests.map(([t, cost]) => ref.check(cost, t))).toEqual(decisions);
  });
});
