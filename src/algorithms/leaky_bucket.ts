/**
 * Leaky bucket as a meter.
 *
 * Promise: a bucket of size `burst` leaks at `rate`; a request pours in `cost` and is admitted iff it does not
 * overflow. It is the token bucket upside down (level = burst − tokens): the same decisions and the same fields.
 * State: the level as an integer in units of 1/perMs (`levelScaled`) and the time of the last leak.
 * Pros and cons: as the token bucket. Pick it when "how full is the bucket" is the picture your team thinks in;
 * for delaying instead of refusing, use leaky_queue.
 */
import { ceilDiv, floorDiv } from "./arith.ts";
import { bucketKernel } from "./bucket_rows.ts";
import { gcraPacked } from "./gcra.ts";
import type { Rate } from "./params.ts";
import { bucketLease, bucketRuleSide, bucketSmallerDeniedUntilMs, pairLayout, refillMs, rescale } from "./shared.ts";
import type { Algorithm, CheckOutcome, Own } from "./types.ts";

export interface LeakyBucketParams {
  readonly algorithm: "leaky_bucket";
  readonly rate: Rate;
  /** The bucket size B: the most a fresh key admits at once. */
  readonly burst: number;
}
type Params = Own<LeakyBucketParams>;

export interface LeakyBucketState {
  /** Level × `rate.perMs`, an integer in [0, burst × perMs]. */
  readonly levelScaled: number;
  /** When the level was last brought up to date, ms. */
  readonly lastMs: number;
}

function leaked(params: Params, state: LeakyBucketState, nowMs: number): number {
  // elapsed × tokens may pass 2^53 after a gap of years, and is then inexact; but then it is also far above the level
  // (at most 2^50), so the comparison is still right, and below 2^53 the product is exact.
  const drained = (nowMs - state.lastMs) * params.rate.tokens;
  return drained >= state.levelScaled ? 0 : state.levelScaled - drained;
}

export const leakyBucket: Algorithm<LeakyBucketParams, LeakyBucketState> = {
  ...bucketRuleSide("leaky_bucket"),
  check(params, state, cost, nowMs): CheckOutcome<LeakyBucketState> {
    const { tokens: a, perMs: p } = params.rate;
    const full = params.burst * p;
    const now = state === null ? nowMs : Math.max(nowMs, state.lastMs);
    const level = state === null ? 0 : leaked(params, state, now);
    const poured = level + cost * p;
    if (poured <= full) {
      return {
        decision: {
          allowed: true,
          remaining: floorDiv(full - poured, p),
          resetAfterMs: ceilDiv(poured, a),
          retryAfterMs: null,
          delayMs: 0,
        },
        state: { levelScaled: poured, lastMs: now },
      };
    }
    return {
      decision: {
        allowed: false,
        remaining: floorDiv(full - level, p),
        resetAfterMs: ceilDiv(level, a),
        retryAfterMs: ceilDiv(poured - full, a),
        delayMs: 0,
      },
      state: state as LeakyBucketState,
    };
  },

  refund(params, state, cost) {
    return { levelScaled: Math.max(0, state.levelScaled - cost * params.rate.perMs), lastMs: state.lastMs };
  },

  freshAtMs(params, state) {
    return state.lastMs + ceilDiv(state.levelScaled, params.rate.tokens);
  },

  // As the token bucket: the room left at the moment of the change (rounded down) is kept, capped at the new burst.
  carryOver(prev, next, state, nowMs) {
    const now = Math.max(nowMs, state.lastMs);
    const tokens = rescale(prev.burst * prev.rate.perMs - leaked(prev, state, now), prev.rate, next.rate, "floor");
    const full = next.burst * next.rate.perMs;
    return { levelScaled: full - Math.min(tokens, full), lastMs: now };
  },

  headerWindowMs: (params) => refillMs(params.burst, params.rate),
  peakSpanMs: (params) => params.rate.periodMs,
  describe: (params, words) => `${params.algorithm} ${words.rate(params.rate)}, burst ${params.burst}`,
  denialsCount: () => false,
  smallerDeniedUntilMs: (params, denied, cost) => bucketSmallerDeniedUntilMs(params.rate, denied, cost),

  // A lease is used at most `ttl` after it was charged: any span t admits at most burst + rate × (t + ttl).
  lease: bucketLease<LeakyBucketParams>(),

  scaled: {
    deficit: (params, state, nowMs) => (state === null ? 0 : leaked(params, state, Math.max(nowMs, state.lastMs))),
    refund: (_params, state, scaled) => ({
      levelScaled: Math.max(0, state.levelScaled - scaled),
      lastMs: state.lastMs,
    }),
  },

  level: {
    name: "bucket level",
    label: (params) => `burst ${params.burst}`,
    at(params, state, tMs) {
      if (state === null) return 0;
      return leaked(params, state, Math.max(tMs, state.lastMs)) / params.rate.perMs;
    },
  },

  // The same decisions and fields as GCRA (the property tests hold them to it), kept as GCRA's one number.
  packed: gcraPacked<LeakyBucketParams>(),
  fields: pairLayout<LeakyBucketState>("levelScaled", "lastMs"),
  rows: {
    compile: (params) =>
      bucketKernel(params, gcraPacked<LeakyBucketParams>(), "level", (levelScaled, lastMs) => ({
        levelScaled,
        lastMs,
      })),
  },
};
