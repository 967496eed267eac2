/** Building algorithm parameters in tests, without going through YAML. */
import { gcd } from "../../src/algorithms/arith.ts";
import type { AlgorithmParams, Rate } from "../../src/rules/types.ts";

export function rate(amount: number, periodMs: number): Rate {
  const g = gcd(amount, periodMs);
  return { amount, periodMs, tokens: amount / g, perMs: periodMs / g };
}

export const tokenBucket = (amount: number, periodMs: number, burst: number): AlgorithmParams => ({
  algorithm: "token_bucket",
  rate: rate(amount, periodMs),
  burst,
});
export const gcraP = (amount: number, periodMs: number, burst: number): AlgorithmParams => ({
  algorithm: "gcra",
  rate: rate(amount, periodMs),
  burst,
});
export const leakyBucket = (amount: number, periodMs: number, burst: number): AlgorithmParams => ({
  algorithm: "leaky_bucket",
  rate: rate(amount, periodMs),
  burst,
});
export const leakyQueue = (amount: number, periodMs: number, burst: number, delay = 0): AlgorithmParams => ({
  algorithm: "leaky_queue",
  rate: rate(amount, periodMs),
  burst,
  delay,
});
export const fixedWindow = (limit: number, windowMs: number | "month"): AlgorithmParams => ({
  algorithm: "fixed_window",
  limit,
  window: windowMs === "month" ? { kind: "month" } : { kind: "ms", ms: windowMs },
});
export const slidingLog = (limit: number, windowMs: number): AlgorithmParams => ({
  algorithm: "sliding_log",
  limit,
  windowMs,
});
export const slidingCounter = (limit: number, windowMs: number, countDenied = false, buckets = 1): AlgorithmParams => ({
  algorithm: "sliding_counter",
  limit,
  windowMs,
  countDenied,
  buckets,
});
export const concurrencyP = (limit: number, slotTtlMs = 60_000): AlgorithmParams => ({
  algorithm: "concurrency",
  limit,
  slotTtlMs,
});

/**
 * Every algorithm with a row kernel, with awkward parameters (a rate that does not divide its period, bursts of 0
 * and 1, a million a second, count_denied, sub-windows): the shared cases of the tests that hold a fast path (the row
 * kernels, the local store) to the pure core.
 */
export const KERNEL_CASES: readonly AlgorithmParams[] = [
  gcraP(10, 1000, 20),
  gcraP(7, 3000, 1),
  gcraP(7, 3000, 5),
  gcraP(5000, 1000, 100),
  leakyQueue(10, 1000, 5, 2),
  leakyQueue(3, 7000, 0),
  leakyQueue(200, 1000, 50, 50),
  tokenBucket(10, 1000, 20),
  tokenBucket(7, 3000, 2),
  leakyBucket(120, 60_000, 10),
  leakyBucket(3, 1000, 1),
  leakyBucket(1_000_000, 1000, 1000),
  fixedWindow(5, 1000),
  slidingCounter(6, 1000, true),
  slidingCounter(6, 1000, true, 3),
  slidingCounter(6, 1000, false, 4),
  slidingCounter(9, 1200, true, 6),
  slidingLog(4, 1000),
];
