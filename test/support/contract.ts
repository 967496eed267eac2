/**
 * What the contract suites draw from: random parameters for every algorithm in the table, written both as resolved
 * parameters and as rule-file YAML, and random traces. The mapped types make a new algorithm a compile error here
 * until it has its entries, so it cannot join the table without joining the contract suites.
 */
import fc from "fast-check";
import { MAX_SCALED } from "../../src/algorithms/arith.ts";
import { type AlgorithmName, type AlgorithmParams, capacityOf, type ParamsOf } from "../../src/algorithms/index.ts";
import { rate } from "./params.ts";

const rateArb = fc.record({
  amount: fc.oneof(fc.constantFrom(1, 7, 10, 100, 1000), fc.integer({ min: 1, max: 2000 })),
  periodMs: fc.oneof(fc.constantFrom(1000, 3000, 60_000), fc.integer({ min: 1, max: 100_000 })),
});
const windowMsArb = fc.oneof(fc.constantFrom(1000, 60_000), fc.integer({ min: 1, max: 120_000 }));

/** Random parameters for each algorithm, exactly as validation would resolve them. */
export const PARAMS: { readonly [K in AlgorithmName]: fc.Arbitrary<ParamsOf<K>> } = {
  token_bucket: fc
    .tuple(rateArb, fc.integer({ min: 1, max: 40 }))
    .map(([r, burst]) => ({ algorithm: "token_bucket", rate: rate(r.amount, r.periodMs), burst })),
  gcra: fc
    .tuple(rateArb, fc.integer({ min: 1, max: 40 }))
    .map(([r, burst]) => ({ algorithm: "gcra", rate: rate(r.amount, r.periodMs), burst })),
  leaky_bucket: fc
    .tuple(rateArb, fc.integer({ min: 1, max: 40 }))
    .map(([r, burst]) => ({ algorithm: "leaky_bucket", rate: rate(r.amount, r.periodMs), burst })),
  leaky_queue: fc
    .tuple(rateArb, fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 40 }))
    .map(([r, burst, d]) => ({
      algorithm: "leaky_queue",
      rate: rate(r.amount, r.periodMs),
      burst,
      delay: Math.min(d, burst),
    })),
  fixed_window: fc.tuple(fc.integer({ min: 1, max: 30 }), fc.oneof(windowMsArb, fc.constant(0))).map(([limit, ms]) => ({
    algorithm: "fixed_window",
    limit,
    window: ms === 0 ? { kind: "month" } : { kind: "ms", ms },
  })),
  sliding_log: fc
    .tuple(fc.integer({ min: 1, max: 30 }), windowMsArb)
    .map(([limit, windowMs]) => ({ algorithm: "sliding_log", limit, windowMs })),
  sliding_counter: fc
    .tuple(fc.integer({ min: 1, max: 30 }), fc.constantFrom(1, 2, 3, 4, 6, 10), windowMsArb, fc.boolean())
    .map(([limit, buckets, subMs, countDenied]) => ({
      algorithm: "sliding_counter",
      limit,
      windowMs: Math.max(1, Math.floor(subMs / buckets)) * buckets,
      countDenied,
      buckets,
    })),
  concurrency: fc
    .tuple(
      fc.integer({ min: 1, max: 30 }),
      fc.oneof(fc.constantFrom(1000, 60_000), fc.integer({ min: 1000, max: 600_000 })),
    )
    .map(([limit, slotTtlMs]) => ({ algorithm: "concurrency", limit, slotTtlMs })),
};

/** Any algorithm's random parameters, within the exactness bounds validation enforces. */
export const anyParams: fc.Arbitrary<AlgorithmParams> = fc
  .oneof(...Object.values(PARAMS).map((a) => a as fc.Arbitrary<AlgorithmParams>))
  .filter(
    (p) => ("rate" in p ? capacityOf(p) * p.rate.perMs : "windowMs" in p ? p.limit * p.windowMs : 0) <= MAX_SCALED,
  );

/** The same parameters as rule-file YAML lines (after `algorithm:`), the way a user writes them. */
export function yamlOf(p: AlgorithmParams): string {
  const lines = [`algorithm: ${p.algorithm}`];
  const YAML: { readonly [K in AlgorithmName]: (q: ParamsOf<K>) => string[] } = {
    token_bucket: (q) => [`rate: "${q.rate.amount}/${q.rate.periodMs}ms"`, `burst: ${q.burst}`],
    gcra: (q) => [`rate: "${q.rate.amount}/${q.rate.periodMs}ms"`, `burst: ${q.burst}`],
    leaky_bucket: (q) => [`rate: "${q.rate.amount}/${q.rate.periodMs}ms"`, `burst: ${q.burst}`],
    leaky_queue: (q) => [`rate: "${q.rate.amount}/${q.rate.periodMs}ms"`, `burst: ${q.burst}`, `delay: ${q.delay}`],
    fixed_window: (q) => [`limit: ${q.limit}`, `window: ${q.window.kind === "month" ? "month" : `${q.window.ms}ms`}`],
    sliding_log: (q) => [`limit: ${q.limit}`, `window: ${q.windowMs}ms`],
    sliding_counter: (q) => [
      `limit: ${q.limit}`,
      `window: ${q.windowMs}ms`,
      `count_denied: ${q.countDenied}`,
      `buckets: ${q.buckets}`,
    ],
    concurrency: (q) => [`limit: ${q.limit}`, `slot_ttl: ${q.slotTtlMs}ms`],
  };
  lines.push(...(YAML[p.algorithm] as (q: AlgorithmParams) => string[])(p));
  return lines.map((l) => `  ${l}`).join("\n");
}

/** One step of a scenario: a request of `cost` after `gapMs`, and whether to refund it right away if admitted. */
export interface Step {
  readonly gapMs: number;
  readonly key: number;
  readonly cost: number;
  readonly refund: boolean;
}

/** Scenarios for `params`: non-decreasing times over a few keys, costs up to one above the capacity. */
export const stepsArb = (params: AlgorithmParams) =>
  fc.array(
    fc.record({
      gapMs: fc.oneof(
        { weight: 4, arbitrary: fc.constant(0) },
        { weight: 4, arbitrary: fc.integer({ min: 1, max: 300 }) },
        { weight: 2, arbitrary: fc.integer({ min: 1, max: 120_000 }) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 40 * 86_400_000 }) },
      ),
      key: fc.integer({ min: 0, max: 2 }),
      cost: fc.oneof(
        { weight: 6, arbitrary: fc.constant(1) },
        { weight: 2, arbitrary: fc.integer({ min: 1, max: capacityOf(params) }) },
        { weight: 1, arbitrary: fc.constant(capacityOf(params) + 1) },
      ),
      refund: fc.boolean(),
    }),
    { minLength: 1, maxLength: 60 },
  );
