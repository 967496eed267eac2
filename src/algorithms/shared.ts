/** Pieces several algorithms share: the rate family's header window and cached-denial bound, carry-over scaling. */
import { ceilDiv } from "./arith.ts";
import type { Denied } from "./types.ts";

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
