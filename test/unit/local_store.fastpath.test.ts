/**
 * The local store decides TAT rules on the packed number directly (no state objects). These properties hold that
 * fast path to the pure core's `gcra.check` and `leakyQueue.check`, field for field, on extreme rates, costs up to
 * the capacity, idle gaps of years (forcing rebases), clock steps back and refunds.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type GcraState, gcra } from "../../src/algorithms/gcra.ts";
import { capacityOf } from "../../src/algorithms/index.ts";
import { leakyQueue } from "../../src/algorithms/leaky_queue.ts";
import { createLocalStore } from "../../src/isolate/local_store.ts";
import type { AlgorithmParams, Rate } from "../../src/rules/types.ts";
import { gcraP, leakyBucket, leakyQueue as leakyQueueP, tokenBucket } from "../support/params.ts";

const CASES: AlgorithmParams[] = [
  gcraP(7, 3000, 5),
  tokenBucket(1, 86_400_000, 3),
  leakyBucket(1_000_000, 1000, 1000),
  gcraP(1_000_000, 1, 50_000),
  leakyQueueP(7, 3000, 4, 2),
  leakyQueueP(10, 1000, 20, 20),
  leakyQueueP(1_000_000, 1000, 999, 0),
  leakyQueueP(10, 1000, 0), // NGINX's default: burst 0, capacity 1
  leakyQueueP(7, 3000, 0),
];

function rateOf(params: AlgorithmParams): Rate {
  if (!("rate" in params)) throw new Error("TAT rules only");
  return params.rate;
}

function coreCheck(params: AlgorithmParams, state: GcraState | null, cost: number, nowMs: number) {
  if (params.algorithm === "leaky_queue") return leakyQueue.check(params, state, cost, nowMs);
  if (!("burst" in params)) throw new Error("TAT rules only");
  return gcra.check({ rate: rateOf(params), burst: params.burst }, state, cost, nowMs);
}

describe("local store TAT fast path = pure core", () => {
  it.each(CASES.map((p) => [`${p.algorithm} ${JSON.stringify(p)}`, p] as const))("%s", (_n, params) => {
    const capacity = capacityOf(params);
    const step = fc.record({
      gapMs: fc.oneof(
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: -2_000, max: 0 }), // clock steps back
        fc.integer({ min: 0, max: 40_000_000_000 }), // idle for up to ~15 months: rebases at high rates
      ),
      key: fc.integer({ min: 0, max: 3 }),
      cost: fc.integer({ min: 1, max: capacity }),
      refund: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 120 }), (steps) => {
        const store = createLocalStore(params, 16);
        const states = new Map<number, GcraState>();
        const t0 = 1_700_000_000_000;
        let t = t0;
        let floorMs: number | null = null;
        for (const { gapMs, key, cost, refund } of steps) {
          t += gapMs;
          // The store's clock (the shell, not the fast path): it judges at no time earlier than its base, the first
          // time it saw, moved up to `now` by each rebase (when (now − base) × tokens passes 2^51).
          floorMs ??= t;
          if ((t - floorMs) * rateOf(params).tokens > 2 ** 51) floorMs = t;
          const expected = coreCheck(params, states.get(key) ?? null, cost, Math.max(t, floorMs));
          const got = store.check(`k${key}`, cost, t);
          expect(got).toEqual({ ok: true, decision: expected.decision });
          if (expected.decision.allowed) {
            states.set(key, expected.state);
            if (refund) {
              store.refund(`k${key}`, cost, t);
              states.set(key, gcra.refund({ rate: rateOf(params), burst: 1 }, expected.state, cost, 0));
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
