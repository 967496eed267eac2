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
