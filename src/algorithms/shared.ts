/** Pieces several algorithms share: the rate family's header window and cached-denial bound, carry-over scaling. */
import { ceilDiv, gcd, MAX_SCALED } from "./arith.ts";
import type { Rate } from "./params.ts";
import type { Algorithm, Denied, FieldLayout, LeasePolicy, ParamReader } from "./types.ts";

interface RateLike {
  readonly tokens: number;
  readonly perMs: number;
}

/** The time to refill `capacity` from empty at `rate`, ms: the span a rate algorithm's quota describes. */
export function refillMs(capacity: number, rate: RateLike): number {
  return ceilDiv(capacity * rate.perMs, rate.tokens);
}

/**
 * Token buckets and GCRA: a smaller cost `c < c0` fits `(c0 − c) / R` sooner than the denied one, and is certainly
 * denied if it exceeds the denial's `remaining` (the tokens there were then, rounded down, are fewer than it).
 */
export function bucketSmallerDeniedUntilMs(rate: RateLike, denied: Denied, cost: number): number | null {
  return cost > denied.remaining ? denied.untilMs - ceilDiv((denied.cost - cost) * rate.perMs, rate.tokens) : null;
}

/** An amount in units of 1/from.perMs tokens, in units of 1/to.perMs tokens (BigInt: the product may pass 2^53). */
export function rescale(scaled: number, from: RateLike, to: RateLike, round: "floor" | "ceil"): number {
  if (from.perMs === to.perMs) return scaled;
  const num = BigInt(scaled) * BigInt(to.perMs);
  const den = BigInt(from.perMs);
  const q = num / den; // BigInt division truncates; values are >= 0
  return Number(round === "ceil" && q * den !== num ? q + 1n : q);
}

/** Work ahead of `nowMs` in a TAT state, in units of 1/rate.perMs tokens, capped at `cap`. */
export function usedScaled(
  state: { readonly tatMs: number; readonly tatFrac: number },
  rate: RateLike,
  nowMs: number,
  cap: number,
): number {
  const aheadMs = state.tatMs - nowMs;
  if (aheadMs < 0) return 0;
  if (aheadMs > ceilDiv(cap, rate.tokens)) return cap;
  return Math.min(cap, aheadMs * rate.tokens + state.tatFrac);
}

/**
 * The buckets' lease policy: a unit charged at `c` and used by `c + ttl` keeps any span `t` within
 * `burst + rate × (t + ttl)`; in integers, `count × perMs <= burst × perMs + tokens × (t + ttl)`.
 */
export function bucketLease<P extends { readonly rate: Rate; readonly burst: number }>(): LeasePolicy<P> {
  return {
    kind: "rate",
    withinBound: (params, count, spanMs, ttlMs) =>
      count * params.rate.perMs <= params.burst * params.rate.perMs + params.rate.tokens * (spanMs + ttlMs),
    refillOver: (params, spanMs) => Math.floor((params.rate.tokens * spanMs) / params.rate.perMs),
    slice: (params, num, den) => sliceOnly(params, num, den),
  };
}

/** `num/den` of a bucket's rate and burst. */
function sliceOnly<P extends { readonly rate: Rate; readonly burst: number }>(
  params: P,
  num: number,
  den: number,
): P | null {
  if (!Number.isSafeInteger(num) || !Number.isSafeInteger(den) || num < 1 || den < 1 || num > den) return null;
  if (num === den) return params;
  const { rate } = params;
  const tokensNum = rate.tokens * num;
  const perMsNum = rate.perMs * den;
  const g = gcd(tokensNum, perMsNum);
  const tokens = tokensNum / g;
  const perMs = perMsNum / g;
  const burst = Math.max(1, Math.floor((params.burst * num) / den));
  if (burst * perMs > MAX_SCALED || !Number.isSafeInteger(tokensNum) || !Number.isSafeInteger(perMsNum)) return null;
  const g2 = gcd(rate.amount * num, rate.periodMs * den);
  const sliced: Rate = {
    amount: (rate.amount * num) / g2,
    periodMs: (rate.periodMs * den) / g2,
    tokens,
    perMs,
  };
  return { ...params, rate: sliced, burst };
}

/** The rate family's rule-file fields: the rate and the burst. */
export const RATE_KEYS = ["rate_per_s", "rate", "burst"] as const;

/**
 * Read a rate and a burst of at least `minBurst`, and check that capacity × rate period stays exact (the algorithms
 * keep it as an integer: tokens scaled by the reduced period). `null` when invalid (reported).
 */
export function readRateAndBurst(
  r: ParamReader,
  capacityOf: (burst: number) => number,
  capacityName: string,
  minBurst: 0 | 1,
): { readonly rate: Rate; readonly burst: number } | null {
  const rate = r.rate();
  // NGINX's `limit_req` without `burst=` is burst 0: one request per interval, nothing queued. The buckets have no
  // such reading (a bucket of 0 tokens admits nothing), so only leaky_queue takes 0.
  const burst = r.int("burst", { min: minBurst, zeroHint: "burst 0, NGINX's default, is only for leaky_queue" });
  if (rate === undefined || burst === undefined) return null;
  const capacity = capacityOf(burst);
  if (capacity * rate.perMs > MAX_SCALED) {
    r.error(
      "burst",
      `${capacityName} × rate period is too large for exact arithmetic (max 2^50); ` +
        `use a shorter period or a smaller burst (${capacity} × ${rate.perMs} ms)`,
    );
    return null;
  }
  return { rate, burst };
}

/** The parameters of a bucket (token_bucket, gcra, leaky_bucket): a rate and a burst of at least 1. */
export interface BucketParams<N extends string> {
  readonly algorithm: N;
  readonly rate: Rate;
  /** The bucket size: the most a fresh key admits at once. */
  readonly burst: number;
}

/** The rule-file side the three buckets share: their fields, how they resolve, the projection and the capacity. */
export function bucketRuleSide<N extends string>(
  algorithm: N,
): Pick<Algorithm<BucketParams<N>, never>, "params" | "project" | "capacity"> {
  return {
    params: {
      keys: RATE_KEYS,
      takes: "rate_per_s or rate, and burst",
      capacityName: "burst",
      read(r) {
        const rb = readRateAndBurst(r, (burst) => burst, "burst", 1);
        return rb === null ? null : { algorithm, rate: rb.rate, burst: rb.burst };
      },
    },
    project: (rule) => ({ algorithm: rule.algorithm, rate: rule.rate, burst: rule.burst }),
    capacity: (params) => params.burst,
  };
}

/** A sliding window's `limit × windowMs` must stay exact (counts are weighed by time). Reports and says no if not. */
export function slidingExact(r: ParamReader, limit: number, windowMs: number): boolean {
  if (limit * windowMs <= MAX_SCALED) return true;
  r.error(
    "limit",
    `limit × window is too large for exact arithmetic (max 2^50); ` +
      `use a shorter window or a smaller limit (${limit} × ${windowMs} ms)`,
  );
  return false;
}

/** A state of two integer fields, `first` then `second`, as a shell's packed store keeps it (a row of two numbers). */
export function pairLayout<S>(first: keyof S & string, second: keyof S & string): FieldLayout<unknown, S> {
  return {
    count: () => 2,
    read: (_params, get) => ({ [first]: get(0), [second]: get(1) }) as S,
    write(_params, state, set) {
      set(0, state[first] as number);
      set(1, state[second] as number);
    },
  };
}
