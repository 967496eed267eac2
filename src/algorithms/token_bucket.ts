/**
 * Token bucket.
 *
 * Promise: a bucket holds up to `burst` tokens and refills continuously at `rate`; a request spends `cost` tokens and
 * is admitted iff that many are there. Over any span t at most `burst + rate × t` cost is admitted.
 * State: the token count, kept exactly as an integer in units of 1/perMs token (`tokensScaled`), and the time of the
 * last refill. Two integers per key; refill is lazy (computed on the next request), so idle keys cost nothing.
 * Pros: bounded bursts that real integrations need; exact retry times. Cons: two parameters to tune and explain.
 * Pick it for per-key API rates ("10/s with a burst of 20").
 */
import { ceilDiv, floorDiv } from "./arith.ts";
import { bucketKernel } from "./bucket_rows.ts";
import { gcraPacked } from "./gcra.ts";
import type { Rate } from "./params.ts";
import { bucketLease, bucketRuleSide, bucketSmallerDeniedUntilMs, pairLayout, refillMs, rescale } from "./shared.ts";
import type { Algorithm, CheckOutcome, Own } from "./types.ts";

export interface TokenBucketParams {
  readonly algorithm: "token_bucket";
  readonly rate: Rate;
  /** The bucket size B: the most a fresh key admits at once. */
  readonly burst: number;
}
type Params = Own<TokenBucketParams>;

export interface TokenBucketState {
  /** Tokens × `rate.perMs`, an integer in [0, burst × perMs]. */
  readonly tokensScaled: number;
  /** When `tokensScaled` was last brought up to date, ms. */
  readonly lastMs: number;
}

/** Tokens (scaled) at `nowMs`, refilled from `state` and capped at the burst; `nowMs >= state.lastMs`. */
export function refilledScaled(params: Params, state: TokenBucketState, nowMs: number): number {
  const full = params.burst * params.rate.perMs;
  const deficit = full - state.tokensScaled;
  if (deficit <= 0) return full;
  // elapsed × tokens may pass 2^53 after a long idle gap, and is then inexact; but then it is also far above the
  // deficit (at most 2^50), so the comparison is still right, and below 2^53 the product is exact.
  const refill = (nowMs - state.lastMs) * params.rate.tokens;
  return refill >= deficit ? full : state.tokensScaled + refill;
}

export const tokenBucket: Algorithm<TokenBucketParams, TokenBucketState> = {
  ...bucketRuleSide("token_bucket"),
  check(params, state, cost, nowMs): CheckOutcome<TokenBucketState> {
    const { tokens: a, perMs: p } = params.rate;
    const full = params.burst * p;
    // Clock rule: never let time run backwards past the last refill.
    const now = state === null ? nowMs : Math.max(nowMs, state.lastMs);
    const scaled = state === null ? full : refilledScaled(params, state, now);
    const need = cost * p;
    if (scaled >= need) {
      const after = scaled - need;
      return {
        decision: {
          allowed: true,
          remaining: floorDiv(after, p),
          resetAfterMs: ceilDiv(full - after, a),
          retryAfterMs: null,
          delayMs: 0,
        },
        state: { tokensScaled: after, lastMs: now },
      };
    }
    // A fresh bucket is full and cost <= burst, so a denial always has a state to keep unchanged.
    return {
      decision: {
        allowed: false,
        remaining: floorDiv(scaled, p),
        resetAfterMs: ceilDiv(full - scaled, a),
        retryAfterMs: ceilDiv(need - scaled, a),
        delayMs: 0,
      },
      state: state as TokenBucketState,
    };
  },

  refund(params, state, cost) {
    const full = params.burst * params.rate.perMs;
    return { tokensScaled: Math.min(full, state.tokensScaled + cost * params.rate.perMs), lastMs: state.lastMs };
  },

  freshAtMs(params, state) {
    const deficit = params.burst * params.rate.perMs - state.tokensScaled;
    return state.lastMs + Math.max(0, ceilDiv(deficit, params.rate.tokens));
  },

  // The key keeps its tokens at the moment of the change (rounded down), capped at the new burst, and refills at
  // the new rate from then on.
  carryOver(prev, next, state, nowMs) {
    const now = Math.max(nowMs, state.lastMs);
    const tokens = rescale(refilledScaled(prev, state, now), prev.rate, next.rate, "floor");
    return { tokensScaled: Math.min(tokens, next.burst * next.rate.perMs), lastMs: now };
  },

  headerWindowMs: (params) => refillMs(params.burst, params.rate),
  peakSpanMs: (params) => params.rate.periodMs,
  describe: (params, words) => `${params.algorithm} ${words.rate(params.rate)}, burst ${params.burst}`,
  denialsCount: () => false,
  smallerDeniedUntilMs: (params, denied, cost) => bucketSmallerDeniedUntilMs(params.rate, denied, cost),

  // A lease is used at most `ttl` after it was charged: any span t admits at most burst + rate × (t + ttl).
  lease: bucketLease<TokenBucketParams>(),

  scaled: {
    deficit: (params, state, nowMs) =>
      state === null
        ? 0
        : params.burst * params.rate.perMs - refilledScaled(params, state, Math.max(nowMs, state.lastMs)),
    refund: (params, state, scaled) => ({
      tokensScaled: Math.min(params.burst * params.rate.perMs, state.tokensScaled + scaled),
      lastMs: state.lastMs,
    }),
  },

  level: {
    name: "tokens",
    label: (params) => `burst ${params.burst}`,
    at(params, state, tMs) {
      if (state === null) return params.burst;
      return refilledScaled(params, state, Math.max(tMs, state.lastMs)) / params.rate.perMs;
    },
  },

  // The same decisions and fields as GCRA (the property tests hold them to it), kept as GCRA's one number.
  packed: gcraPacked<TokenBucketParams>(),
  fields: pairLayout<TokenBucketState>("tokensScaled", "lastMs"),
  rows: {
    compile: (params) =>
      bucketKernel(params, gcraPacked<TokenBucketParams>(), "tokens", (tokensScaled, lastMs) => ({
        tokensScaled,
        lastMs,
      })),
  },
};
