/**
 * Rule changes across a redeploy. State is kept per (rule id, key); when the rule's parameters change, the state
 * carries over where it still means something, and never in the client's favour beyond what the new rule allows:
 *
 * - another algorithm: the state is discarded (the key starts fresh under the new rule);
 * - token_bucket, gcra, leaky_bucket: the key keeps its tokens at the moment of the change (rounded down), capped at
 *   the new burst, and refills at the new rate from then on;
 * - leaky_queue: the queued work (requests still waiting, rounded up) is kept, capped at the new capacity, and drains
 *   at the new rate;
 * - fixed_window, sliding_counter: the count is kept when the window is unchanged (a lower limit then simply denies),
 *   discarded when the window changed (old counts belong to other windows); a sliding_counter whose `buckets` changed
 *   (same window) moves each count to the new sub-window holding the latest moment its old one allows, so the key
 *   is judged as if those requests came as late as possible (see `rebucket`);
 * - sliding_log: the accepted entries are kept and judged by the new window and limit.
 *
 * Conversions multiply numbers that may pass 2^53 together, so they use BigInt; this runs once per key per change.
 */
import type { AlgorithmParams, Rate } from "../rules/types.ts";
import { ceilDiv } from "./arith.ts";
import { shiftTime } from "./gcra.ts";
import type { AlgorithmState, StateOf } from "./index.ts";
import { rebucket } from "./sliding_counter.ts";
import { refilledScaled } from "./token_bucket.ts";

/** State under `next` equivalent to `state` under `prev` at `nowMs`, or `null` to start fresh. */
export function carryOver(
  prev: AlgorithmParams,
  next: AlgorithmParams,
  state: AlgorithmState,
  nowMs: number,
): AlgorithmState | null {
  if (prev.algorithm !== next.algorithm) return null;
  if (sameParams(prev, next)) return state;
  switch (next.algorithm) {
    case "token_bucket": {
      const p = prev as typeof next;
      const s = state as StateOf["token_bucket"];
      const now = Math.max(nowMs, s.lastMs);
      const tokens = rescale(refilledScaled(p, s, now), p.rate, next.rate, "floor");
      return { tokensScaled: Math.min(tokens, next.burst * next.rate.perMs), lastMs: now };
    }
    case "leaky_bucket": {
      const p = prev as typeof next;
      const s = state as StateOf["leaky_bucket"];
      const now = Math.max(nowMs, s.lastMs);
      const elapsed = now - s.lastMs;
      const level = elapsed >= ceilDiv(s.levelScaled, p.rate.tokens) ? 0 : s.levelScaled - elapsed * p.rate.tokens;
      const tokens = rescale(p.burst * p.rate.perMs - level, p.rate, next.rate, "floor");
      const full = next.burst * next.rate.perMs;
      return { levelScaled: full - Math.min(tokens, full), lastMs: now };
    }
    case "gcra": {
      const p = prev as typeof next;
      const used = usedScaled(state as StateOf["gcra"], p.rate, nowMs, p.burst * p.rate.perMs);
      const tokens = rescale(p.burst * p.rate.perMs - used, p.rate, next.rate, "floor");
      const full = next.burst * next.rate.perMs;
      return shiftTime(nowMs, 0, full - Math.min(tokens, full), next.rate.tokens);
    }
    case "leaky_queue": {
      const p = prev as typeof next;
      const limit = (p.burst + 1) * p.rate.perMs;
      const queued = rescale(
        usedScaled(state as StateOf["leaky_queue"], p.rate, nowMs, limit),
        p.rate,
        next.rate,
        "ceil",
      );
      return shiftTime(nowMs, 0, Math.min(queued, (next.burst + 1) * next.rate.perMs), next.rate.tokens);
    }
    case "fixed_window": {
      const p = prev as typeof next;
      const same =
        p.window.kind === next.window.kind &&
        (p.window.kind === "month" || (next.window.kind === "ms" && p.window.ms === next.window.ms));
      return same ? state : null;
    }
    case "sliding_counter": {
      const p = prev as typeof next;
      if (p.windowMs !== next.windowMs) return null;
      // Records made before `buckets` existed have none: they were made with one.
      const from = { windowMs: p.windowMs, buckets: p.buckets ?? 1 };
      if (from.buckets === next.buckets) return state;
      return rebucket(from, next, state as StateOf["sliding_counter"], nowMs);
    }
    case "sliding_log":
      return state;
    default: {
      const never: never = next;
      return never;
    }
  }
}

/** Work ahead of `nowMs` in a TAT state, in units of 1/rate.perMs tokens, capped at `cap`. */
function usedScaled(state: StateOf["gcra"], rate: Rate, nowMs: number, cap: number): number {
  const aheadMs = state.tatMs - nowMs;
  if (aheadMs < 0) return 0;
  if (aheadMs > ceilDiv(cap, rate.tokens)) return cap;
  return Math.min(cap, aheadMs * rate.tokens + state.tatFrac);
}

/** An amount in units of 1/from.perMs tokens, in units of 1/to.perMs tokens. */
function rescale(scaled: number, from: Rate, to: Rate, round: "floor" | "ceil"): number {
  if (from.perMs === to.perMs) return scaled;
  const num = BigInt(scaled) * BigInt(to.perMs);
  const den = BigInt(from.perMs);
  const q = num / den; // BigInt division truncates; values are >= 0
  return Number(round === "ceil" && q * den !== num ? q + 1n : q);
}

function sameParams(a: AlgorithmParams, b: AlgorithmParams): boolean {
  return JSON.stringify(paramsOnly(a)) === JSON.stringify(paramsOnly(b));
}

/** The algorithm's own parameters, in a fixed key order (rules carry other fields too). */
export function paramsOnly(p: AlgorithmParams): Record<string, unknown> {
  const r = p as unknown as Record<string, unknown>;
  const keys = ["algorithm", "rate", "burst", "delay", "limit", "window", "windowMs", "countDenied", "buckets"];
  const out: Record<string, unknown> = {};
  for (const k of keys) if (r[k] !== undefined) out[k] = r[k];
  return out;
}
