/**
 * The blocked-key cache against the object's own decisions: a model of the Durable Object (the pure core on one
 * state) is driven by random traces of this isolate's requests (random costs, gaps and call latencies), other
 * isolates' requests and refunds; every answer the cache gives is checked against what the object would have said.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_SCALED } from "../../src/algorithms/arith.ts";
import { type AlgorithmState, capacityOf, decide, refund } from "../../src/algorithms/index.ts";
import { BlockedCache, cacheable } from "../../src/isolate/blocked_cache.ts";
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

const rateArb = fc.record({
  amount: fc.oneof(fc.constantFrom(1, 2, 3, 7, 10, 100), fc.integer({ min: 1, max: 500 })),
  periodMs: fc.oneof(fc.constantFrom(1, 7, 100, 1000, 3000, 60_000), fc.integer({ min: 1, max: 100_000 })),
});
const burstArb = fc.integer({ min: 1, max: 30 });
const rateParams = (make: (a: number, p: number, b: number) => AlgorithmParams) =>
  fc
    .tuple(rateArb, burstArb)
    .map(([r, b]) => make(r.amount, r.periodMs, b))
    .filter((p) => "rate" in p && capacityOf(p) * p.rate.perMs <= MAX_SCALED);
const windowMsArb = fc.oneof(fc.constantFrom(1000, 60_000), fc.integer({ min: 1, max: 100_000 }));
const limitArb = fc.integer({ min: 1, max: 30 });

const paramsArb: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  rateParams(tokenBucket),
  rateParams(gcraP),
  rateParams(leakyBucket),
  fc
    .tuple(rateArb, fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 30 }))
    .map(([r, b, d]) => leakyQueue(r.amount, r.periodMs, b, Math.min(b, d))),
  fc.tuple(limitArb, fc.oneof(windowMsArb, fc.constant("month" as const))).map(([l, w]) => fixedWindow(l, w)),
  fc.tuple(limitArb, windowMsArb).map(([l, w]) => slidingLog(l, w)),
  fc.tuple(limitArb, windowMsArb, fc.boolean()).map(([l, w, c]) => slidingCounter(l, w, c)),
);

const gapArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant(0) },
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 200 }) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 120_000 }) },
);

const stepsArb = (capacity: number) =>
  fc.array(
    fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record({
          kind: fc.constant("mine" as const),
          gapMs: gapArb,
          cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: capacity })),
          latencyMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40 })),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("other" as const),
          gapMs: gapArb,
          cost: fc.integer({ min: 1, max: capacity }),
        }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant("refund_last" as const), gapMs: gapArb }) },
    ),
    { minLength: 1, maxLength: 120 },
  );

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

describe("blocked-key cache", () => {
  it("never refuses what the object would admit, and never promises a retry later than the object's", () => {
    let answeredLocally = 0;
    fc.assert(
      fc.property(
        paramsArb.chain((params) => fc.tuple(fc.constant(params), stepsArb(capacityOf(params)))),
        ([params, steps]) => {
          const cache = new BlockedCache();
          const id = "rule\u0000key";
          const fp = JSON.stringify(params);
          let state: AlgorithmState | null = null;
          let now = T0;
          let lastAdmitted: { cost: number; atMs: number } | null = null;
          for (const step of steps) {
            now += step.gapMs;
            if (step.kind === "other") {
              const out = decide(params, state, step.cost, now);
              if (out.ok) state = out.state;
              continue;
            }
            if (step.kind === "refund_last") {
              if (lastAdmitted !== null && state !== null) {
                state = refund(params, state, lastAdmitted.cost, lastAdmitted.atMs);
                cache.forget(id);
              }
              lastAdmitted = null;
              continue;
            }
            const cached = cache.lookup(id, fp, step.cost, now);
            const truth = decide(params, state, step.cost, now);
            if (!truth.ok) throw new Error("cost within capacity");
            if (cached !== null) {
              answeredLocally++;
              expect(cached.allowed).toBe(false);
              expect(truth.decision.allowed).toBe(false);
              expect(cached.retryAfterMs).toBeGreaterThanOrEqual(1);
              expect(truth.decision.retryAfterMs).toBeGreaterThanOrEqual(cached.retryAfterMs ?? 0);
              // A locally answered request changes nothing at the object: the model skips it too.
              expect(cacheable(params)).toBe(true);
              continue;
            }
            // The call: sent `latencyMs` before the object decides (its clock is `now`).
            state = truth.state;
            if (truth.decision.allowed) {
              cache.forget(id);
              lastAdmitted = { cost: step.cost, atMs: now };
            } else {
              cache.remember(id, fp, params, step.cost, now - step.latencyMs, truth.decision);
            }
          }
        },
      ),
      { numRuns: 1500 },
    );
    // The property is not vacuous: the cache did answer.
    expect(answeredLocally).toBeGreaterThan(300);
  });

  it("does not remember a denial answered to a call sent before this isolate's refund of the key", () => {
    // The real order this stands for (test/integration/blocked_cache.test.ts, under load): call B for the key is in
    // flight when request A, denied by another rule, refunds it; B's denial arrives after the refund forgot the entry.
    // The object may have decided B before the refund arrived, so remembering it would refuse a request it admits.
    const params = tokenBucket(1, 60_000, 1);
    const fp = JSON.stringify(params);
    const denial = { allowed: false, remaining: 0, resetAfterMs: 60_000, retryAfterMs: 60_000, delayMs: 0 } as const;
    const cache = new BlockedCache();
    cache.forgetRefunded("k", T0 + 50);
    cache.remember("k", fp, params, 1, T0 + 20, denial); // sent before the refund: stale
    expect(cache.lookup("k", fp, 1, T0 + 60)).toBeNull();
    cache.remember("k", fp, params, 1, T0 + 50, denial); // sent in the refund's own millisecond: still unknown order
    expect(cache.lookup("k", fp, 1, T0 + 60)).toBeNull();
    cache.remember("k", fp, params, 1, T0 + 51, denial); // sent after it: the object had the refund
    expect(cache.lookup("k", fp, 1, T0 + 60)?.allowed).toBe(false);
    // Another key's refund says nothing of this one's denials.
    cache.forgetRefunded("other", T0 + 100);
    expect(cache.lookup("k", fp, 1, T0 + 110)?.allowed).toBe(false);
    // A refund forgets the entry too.
    cache.forgetRefunded("k", T0 + 120);
    expect(cache.lookup("k", fp, 1, T0 + 130)).toBeNull();
  });

  it("a flood from one blocked key costs about one object call per retry period", () => {
    const params = tokenBucket(10, 1000, 20);
    const cache = new BlockedCache();
    const fp = JSON.stringify(params);
    let state: AlgorithmState | null = null;
    let calls = 0;
    let admitted = 0;
    // 10 s of one request per ms from one key: 10,000 requests.
    for (let t = 0; t < 10_000; t++) {
      const now = T0 + t;
      if (cache.lookup("k", fp, 1, now) !== null) continue;
      calls++;
      const out = decide(params, state, 1, now);
      if (!out.ok) throw new Error("unreachable");
      state = out.state;
      if (out.decision.allowed) {
        admitted++;
        cache.forget("k");
      } else cache.remember("k", fp, params, 1, now, out.decision);
    }
    // 20 burst + 10/s over 10 s are admitted; each denial blocks until the next token (100 ms): ~100 denial calls.
    expect(admitted).toBe(20 + 99);
    expect(calls - admitted).toBeLessThanOrEqual(101);
  });

  it("a cost-10 denial says nothing about a cost the remaining tokens cover, and bounds the costs between", () => {
    const params = tokenBucket(10, 1000, 20);
    const cache = new BlockedCache();
    const fp = JSON.stringify(params);
    const denied10 = { allowed: false, remaining: 5, resetAfterMs: 1500, retryAfterMs: 500, delayMs: 0 };
    cache.remember("k", fp, params, 10, T0, denied10);
    // 5 tokens left: cost 1..5 may pass; cost 6 needs 4 tokens (400 ms) less than cost 10: denied for 100 ms.
    expect(cache.lookup("k", fp, 5, T0)).toBeNull();
    expect(cache.lookup("k", fp, 6, T0 + 99)).toMatchObject({ retryAfterMs: 1 });
    expect(cache.lookup("k", fp, 6, T0 + 100)).toBeNull();
    expect(cache.lookup("k", fp, 10, T0 + 499)).toMatchObject({ allowed: false, retryAfterMs: 1, remaining: 5 });
    expect(cache.lookup("k", fp, 10, T0 + 500)).toBeNull();
    // Another rule under the same id (a redeploy) proves nothing.
    expect(cache.lookup("k", "other", 10, T0)).toBeNull();
  });

  it("stays within its bound, evicting the least recently used entry", () => {
    const params = tokenBucket(1, 1000, 1);
    const cache = new BlockedCache(2);
    const fp = JSON.stringify(params);
    const denied = { allowed: false, remaining: 0, resetAfterMs: 1000, retryAfterMs: 1000, delayMs: 0 };
    cache.remember("a", fp, params, 1, T0, denied);
    cache.remember("b", fp, params, 1, T0, denied);
    expect(cache.lookup("a", fp, 1, T0)).not.toBeNull();
    cache.remember("c", fp, params, 1, T0, denied);
    expect(cache.size).toBe(2);
    expect(cache.lookup("b", fp, 1, T0)).toBeNull();
    expect(cache.lookup("a", fp, 1, T0)).not.toBeNull();
  });

  it("does not cache sliding_counter with count_denied (its denials change the state)", () => {
    const params = slidingCounter(1, 1000, true);
    const cache = new BlockedCache();
    const denied = { allowed: false, remaining: 0, resetAfterMs: 2000, retryAfterMs: 1000, delayMs: 0 };
    cache.remember("k", JSON.stringify(params), params, 1, T0, denied);
    expect(cache.size).toBe(0);
  });
});
