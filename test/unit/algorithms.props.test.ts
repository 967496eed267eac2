/**
 * Properties of the exact core (fast-check): it agrees with a literal rational transcription of the semantics
 * (test/support/reference.ts) on random traces, including extreme rates, idle gaps of years and clocks up to year
 * 2200; and the decision fields meet their definitions (retrying at retry_after succeeds and 1 ms earlier fails,
 * remaining, reset_after).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_SCALED } from "../../src/algorithms/arith.ts";
import {
  type AlgorithmState,
  capacityOf,
  type Decision,
  decide,
  freshAtMs,
  refund,
} from "../../src/algorithms/index.ts";
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

const YEAR_MS = 365 * 86_400_000;
const YEAR_2200_MS = Date.UTC(2200, 0, 1);
const PERIODS = [1, 7, 100, 1000, 3000, 60_000, 3_600_000, 86_400_000];
const AMOUNTS = [1, 2, 3, 7, 10, 100, 1000, 999_983, 1_000_000];

const rateArb = fc.record({
  amount: fc.oneof(fc.constantFrom(...AMOUNTS), fc.integer({ min: 1, max: 5000 })),
  periodMs: fc.oneof(fc.constantFrom(...PERIODS), fc.integer({ min: 1, max: 86_400_000 })),
});
const burstArb = fc.oneof(fc.integer({ min: 1, max: 40 }), fc.constantFrom(1, 20, 100, 100_000, 1_000_000));

const rateParamsArb = (make: (a: number, p: number, b: number) => AlgorithmParams) =>
  fc
    .tuple(rateArb, burstArb)
    .map(([r, b]) => make(r.amount, r.periodMs, b))
    .filter((p) => "rate" in p && capacityOf(p) * p.rate.perMs <= MAX_SCALED);

const windowMsArb = fc.oneof(fc.constantFrom(1, 1000, 60_000, 86_400_000), fc.integer({ min: 1, max: 3_600_000 }));
const limitArb = fc.oneof(fc.integer({ min: 1, max: 30 }), fc.constantFrom(100, 10_000));

/** sliding_counter with `buckets: k`: a sub-window length times k, so the window is a whole multiple of k. */
const bucketsCounterArb = fc
  .tuple(
    limitArb,
    fc.oneof(fc.constantFrom(1, 2, 4, 6, 10, 60), fc.integer({ min: 1, max: 100 })),
    fc.oneof(fc.constantFrom(1, 1000, 60_000), fc.integer({ min: 1, max: 100_000 })),
    fc.boolean(),
  )
  .map(([l, k, sub, c]) => slidingCounter(l, sub * k, c, k))
  .filter((p) => "windowMs" in p && p.limit * p.windowMs <= MAX_SCALED);

const paramsArb: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  rateParamsArb(tokenBucket),
  rateParamsArb(gcraP),
  rateParamsArb(leakyBucket),
  fc
    .tuple(rateArb, fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 40 }))
    .map(([r, b, d]) => leakyQueue(r.amount, r.periodMs, b, Math.min(b, d))),
  fc.tuple(limitArb, fc.oneof(windowMsArb, fc.constant("month" as const))).map(([l, w]) => fixedWindow(l, w)),
  fc.tuple(fc.integer({ min: 1, max: 30 }), windowMsArb).map(([l, w]) => slidingLog(l, w)),
  fc
    .tuple(limitArb, windowMsArb, fc.boolean())
    .map(([l, w, c]) => slidingCounter(l, w, c))
    .filter((p) => "windowMs" in p && p.limit * p.windowMs <= MAX_SCALED),
  bucketsCounterArb,
);

/** Gaps between requests: mostly bursts and small steps, sometimes long idles (up to years). */
const gapArb = fc.oneof(
  { weight: 5, arbitrary: fc.constant(0) },
  { weight: 5, arbitrary: fc.integer({ min: 1, max: 200 }) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 120_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 5 * YEAR_MS }) },
);
const startArb = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 0, max: YEAR_2200_MS - 10 * YEAR_MS }),
  fc.constant(YEAR_2200_MS - 6 * YEAR_MS),
);

/** A trace for `params`: non-decreasing times, costs in [1, capacity] (mostly 1). */
const traceArb = (params: AlgorithmParams) =>
  fc.tuple(
    startArb,
    fc.array(
      fc.tuple(
        gapArb,
        fc.oneof(
          { weight: 4, arbitrary: fc.constant(1) },
          { weight: 1, arbitrary: fc.integer({ min: 1, max: capacityOf(params) }) },
        ),
      ),
      {
        minLength: 1,
        maxLength: 60,
      },
    ),
  );

function check(params: AlgorithmParams, state: AlgorithmState | null, cost: number, t: number) {
  const r = decide(params, state, cost, t);
  if (!r.ok) throw new Error(`unexpected ${r.error}`);
  return r;
}

describe("the core equals the rational transcription of the semantics", () => {
  it("every field of every decision, on random traces for all seven algorithms", () => {
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), traceArb(p))),
        ([params, [start, steps]]) => {
          const ref = referenceKey(params);
          let state: AlgorithmState | null = null;
          let t = start;
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            expect(r.decision).toEqual(ref.check(cost, t));
            state = r.state;
          }
        },
      ),
      { numRuns: runs(1500) },
    );
  });
});

describe("token_bucket = gcra = leaky_bucket, decision for decision", () => {
  it("on random traces with the same rate and burst", () => {
    fc.assert(
      fc.property(
        rateParamsArb(tokenBucket).chain((p) => fc.tuple(fc.constant(p), traceArb(p))),
        ([tb, [start, steps]]) => {
          if (!("rate" in tb)) return;
          const variants: AlgorithmParams[] = [tb, { ...tb, algorithm: "gcra" }, { ...tb, algorithm: "leaky_bucket" }];
          const states: (AlgorithmState | null)[] = [null, null, null];
          let t = start;
          for (const [gap, cost] of steps) {
            t += gap;
            const ds = variants.map((p, i) => {
              const r = check(p, states[i] ?? null, cost, t);
              states[i] = r.state;
              return r.decision;
            });
            expect(ds[1]).toEqual(ds[0]);
            expect(ds[2]).toEqual(ds[0]);
          }
        },
      ),
      { numRuns: runs(500) },
    );
  });
});

/** Small parameters, so the definitions can be checked by brute force. */
const smallParamsArb: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1, max: 12 }), fc.constantFrom(1, 3, 10, 1000, 3000), fc.integer({ min: 1, max: 12 }))
    .chain(([a, p, b]) =>
      fc.constantFrom(
        tokenBucket(a, p, b),
        gcraP(a, p, b),
        leakyBucket(a, p, b),
        leakyQueue(a, p, b, 0),
        leakyQueue(a, p, b, b),
      ),
    ),
  fc
    .tuple(fc.integer({ min: 1, max: 12 }), fc.constantFrom(10, 1000, 7000))
    .chain(([l, w]) =>
      fc.constantFrom(fixedWindow(l, w), slidingLog(l, w), slidingCounter(l, w, false), slidingCounter(l, w, true)),
    ),
);
const smallTraceArb = (params: AlgorithmParams) =>
  fc.array(
    fc.tuple(
      fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
      fc.integer({ min: 1, max: capacityOf(params) }),
    ),
    {
      minLength: 1,
      maxLength: 30,
    },
  );

/** How many cost-1 requests at `t` are admitted in a row from `state`. */
function admitsInARow(params: AlgorithmParams, state: AlgorithmState | null, t: number): number {
  let s = state;
  for (let n = 0; n <= capacityOf(params) + 1; n++) {
    const r = check(params, s, 1, t);
    if (!r.decision.allowed) return n;
    s = r.state;
  }
  return Number.POSITIVE_INFINITY;
}
/** A fresh key's `remaining` after nothing: its capacity. */
const isFresh = (params: AlgorithmParams, state: AlgorithmState | null, t: number) =>
  admitsInARow(params, state, t) === admitsInARow(params, null, t);

describe("decision fields meet their definitions (brute force on small rules)", () => {
  it("retry_after: the same request succeeds at exactly that time and fails 1 ms earlier", () => {
    fc.assert(
      fc.property(
        smallParamsArb.chain((p) => fc.tuple(fc.constant(p), smallTraceArb(p))),
        ([params, steps]) => {
          let state: AlgorithmState | null = null;
          let t = 1_000_000;
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            const d = r.decision;
            if (!d.allowed) {
              expect(d.retryAfterMs).toBeGreaterThanOrEqual(1);
              const retry = d.retryAfterMs as number;
              expect(check(params, r.state, cost, t + retry).decision.allowed).toBe(true);
              if (retry > 1) expect(check(params, r.state, cost, t + retry - 1).decision.allowed).toBe(false);
            } else expect(d.retryAfterMs).toBeNull();
            state = r.state;
          }
        },
      ),
      { numRuns: runs(800) },
    );
  });

  it("remaining: exactly that many cost-1 requests at the same instant are admitted", () => {
    fc.assert(
      fc.property(
        smallParamsArb.chain((p) => fc.tuple(fc.constant(p), smallTraceArb(p))),
        ([params, steps]) => {
          let state: AlgorithmState | null = null;
          let t = 1_000_000;
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            // sliding_counter with count_denied: each probe would itself count, so only the admitted chain matters
            expect(admitsInARow(params, r.state, t)).toBe(r.decision.remaining);
            state = r.state;
          }
        },
      ),
      { numRuns: runs(800) },
    );
  });

  it("reset_after: fresh again at now + reset_after (and not 1 ms before when > 0)", () => {
    fc.assert(
      fc.property(
        smallParamsArb.chain((p) => fc.tuple(fc.constant(p), smallTraceArb(p))),
        ([params, steps]) => {
          let state: AlgorithmState | null = null;
          let t = 1_000_000;
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            const reset = r.decision.resetAfterMs;
            expect(reset).toBeGreaterThanOrEqual(0);
            expect(isFresh(params, r.state, t + reset)).toBe(true);
            if (reset > 0 && params.algorithm !== "fixed_window")
              expect(isFresh(params, r.state, t + reset - 1)).toBe(false);
            // the state may be dropped from freshAtMs on
            expect(isFresh(params, r.state, Math.max(t, freshAtMs(params, r.state)))).toBe(true);
            state = r.state;
          }
        },
      ),
      { numRuns: runs(500) },
    );
  });
});

describe("state invariants", () => {
  it("a denied request changes no state (but sliding_counter with count_denied)", () => {
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), traceArb(p))),
        ([params, [start, steps]]) => {
          let state: AlgorithmState | null = null;
          let t = start;
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            const countsDenied = params.algorithm === "sliding_counter" && params.countDenied;
            if (!r.decision.allowed && !countsDenied) expect(r.state).toBe(state);
            state = r.state;
          }
        },
      ),
      { numRuns: runs(500) },
    );
  });

  it("refund right after an admission restores the state: every later decision is as if it never happened", () => {
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), traceArb(p), fc.integer({ min: 0, max: 59 }))),
        ([params, [start, steps], refundAt]) => {
          let withRefund: AlgorithmState | null = null;
          let without: AlgorithmState | null = null;
          let t = start;
          steps.forEach(([gap, cost], i) => {
            t += gap;
            if (i === refundAt) {
              const r = check(params, withRefund, cost, t);
              if (r.decision.allowed) {
                withRefund = refund(params, r.state, cost, t);
                return;
              }
            }
            const a = check(params, withRefund, cost, t);
            const b = check(params, without, cost, t);
            expect(a.decision).toEqual(b.decision);
            withRefund = a.state;
            without = b.state;
          });
        },
      ),
      { numRuns: runs(500) },
    );
  });

  it("a clock stepping back never admits more than the later time would", () => {
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), traceArb(p), fc.integer({ min: 1, max: 10 * YEAR_MS }))),
        ([params, [start, steps], back]) => {
          let state: AlgorithmState | null = null;
          let t = start + back;
          for (const [gap, cost] of steps) {
            t += gap;
            state = check(params, state, cost, t).state;
          }
          // the same probe at the latest time and at an earlier one
          const later = admitsUpTo(params, state, t, 50);
          const earlier = admitsUpTo(params, state, t - back, 50);
          expect(earlier).toBeLessThanOrEqual(later);
        },
      ),
      { numRuns: runs(400) },
    );
  });
});

function admitsUpTo(params: AlgorithmParams, state: AlgorithmState | null, t: number, max: number): number {
  let s = state;
  for (let n = 0; n < max; n++) {
    const r = check(params, s, 1, t);
    if (!r.decision.allowed) return n;
    s = r.state;
  }
  return max;
}

describe("admission bounds", () => {
  const admittedCostIn = (ds: { t: number; cost: number; d: Decision }[], from: number, to: number) =>
    ds.filter((x) => x.d.allowed && x.t >= from && x.t < to).reduce((s, x) => s + x.cost, 0);

  it("rate algorithms: no more than burst + rate × t in any span t", () => {
    fc.assert(
      fc.property(
        fc
          .oneof(rateParamsArb(tokenBucket), rateParamsArb(gcraP), rateParamsArb(leakyBucket))
          .chain((p) => fc.tuple(fc.constant(p), traceArb(p))),
        ([params, [start, steps]]) => {
          if (!("rate" in params)) return;
          let state: AlgorithmState | null = null;
          let t = start;
          const ds: { t: number; cost: number; d: Decision }[] = [];
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            ds.push({ t, cost, d: r.decision });
            state = r.state;
          }
          for (const a of ds) {
            for (const b of ds) {
              if (b.t < a.t) continue;
              const span = b.t - a.t;
              const admitted = admittedCostIn(ds, a.t, b.t + 1);
              // admitted <= burst + span × amount / period, in integers
              expect(BigInt(admitted - params.burst) * BigInt(params.rate.periodMs)).toBeLessThanOrEqual(
                BigInt(span) * BigInt(params.rate.amount),
              );
            }
          }
        },
      ),
      { numRuns: runs(300) },
    );
  });

  it("fixed_window: no more than limit per aligned window; sliding_log: no more than limit in any window span", () => {
    fc.assert(
      fc.property(
        fc
          .tuple(fc.integer({ min: 1, max: 20 }), fc.constantFrom(1000, 60_000))
          .chain(([l, w]) =>
            fc.tuple(
              fc.constantFrom(fixedWindow(l, w), slidingLog(l, w)),
              fc.array(fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 1, max: l })), { maxLength: 80 }),
            ),
          ),
        ([params, steps]) => {
          if (params.algorithm !== "sliding_log" && params.algorithm !== "fixed_window") return;
          const w =
            params.algorithm === "sliding_log" ? params.windowMs : params.window.kind === "ms" ? params.window.ms : 0;
          let state: AlgorithmState | null = null;
          let t = 0;
          const ds: { t: number; cost: number; d: Decision }[] = [];
          for (const [gap, cost] of steps) {
            t += gap;
            const r = check(params, state, cost, t);
            ds.push({ t, cost, d: r.decision });
            state = r.state;
          }
          for (const x of ds) {
            const from = params.algorithm === "fixed_window" ? Math.floor(x.t / w) * w : x.t;
            expect(admittedCostIn(ds, from, from + w)).toBeLessThanOrEqual(params.limit);
          }
        },
      ),
      { numRuns: runs(400) },
    );
  });
});

describe("extreme values stay exact", () => {
  it("1/d with burst 1 after a century of idling, near year 2200", () => {
    const p = tokenBucket(1, 86_400_000, 1);
    const t0 = YEAR_2200_MS - 100 * YEAR_MS;
    const a = check(p, null, 1, t0);
    const b = check(p, a.state, 1, t0 + 86_400_000 - 1);
    expect(b.decision).toMatchObject({ allowed: false, retryAfterMs: 1 });
    const c = check(p, a.state, 1, YEAR_2200_MS);
    expect(c.decision).toEqual({
      allowed: true,
      remaining: 0,
      resetAfterMs: 86_400_000,
      retryAfterMs: null,
      delayMs: 0,
    });
  });
  it("a refill or drain product past 2^53 (1000000 per ms, a century idle) still fills the bucket exactly", () => {
    for (const make of [tokenBucket, leakyBucket]) {
      const p = make(1_000_000, 1, 3);
      const t0 = YEAR_2200_MS - 100 * YEAR_MS;
      const a = check(p, null, 3, t0);
      expect(check(p, a.state, 3, t0).decision).toMatchObject({ allowed: false, retryAfterMs: 1 });
      expect(check(p, a.state, 3, YEAR_2200_MS).decision).toEqual({
        allowed: true,
        remaining: 0,
        resetAfterMs: 1,
        retryAfterMs: null,
        delayMs: 0,
      });
    }
  });
  it("7/3s never drifts over a million requests at the rate", () => {
    const p = gcraP(7, 3000, 7);
    let state: AlgorithmState | null = null;
    let admitted = 0;
    // one request every 428 or 429 ms (3000/7 = 428.57...): exactly 7 per 3000 ms
    for (let i = 0; i < 1_000_000; i++) {
      const t = YEAR_2200_MS - YEAR_MS + Math.floor((i * 3000) / 7) + 3000;
      const r = check(p, state, 1, t);
      if (r.decision.allowed) admitted++;
      state = r.state;
    }
    expect(admitted).toBe(1_000_000);
  });
  it("1000000/s: a full burst of a million, then one per microsecond-equivalent", () => {
    const p = tokenBucket(1_000_000, 1000, 1_000_000);
    const a = check(p, null, 1_000_000, YEAR_2200_MS);
    expect(a.decision).toMatchObject({ allowed: true, remaining: 0, resetAfterMs: 1000 });
    const b = check(p, a.state, 1001, YEAR_2200_MS + 1);
    expect(b.decision).toMatchObject({ allowed: false, retryAfterMs: 1, remaining: 1000 });
  });
});
