/**
 * Sliding window counter.
 *
 * Promise: approximately `limit` per sliding window, with constant state. The window before this one is weighted by
 * how much of it still overlaps the sliding window: `estimate = prev × (W − e)/W + curr`, computed as an exact
 * rational (scaled by W). Windows are epoch-aligned. With `count_denied` denied requests count too (Cloudflare's
 * variant: a client that keeps hammering stays blocked).
 * State: window index, previous and current counts. Pros: 3 numbers, no boundary doubling. Cons: approximate: it
 * assumes the previous window's traffic was spread evenly, so traffic packed at its end lets ~16% more through.
 * Pick it for general per-IP limits at scale.
 */
import type { SlidingCounterRule } from "../rules/types.ts";
import { floorDiv, MAX_SCALED } from "./arith.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";

type Params = Pick<SlidingCounterRule, "limit" | "windowMs" | "countDenied">;

export interface SlidingCounterState {
  /** Index of the current window (epoch-aligned, `floor(t / windowMs)`). */
  readonly window: number;
  /** Cost counted in window `window − 1`. */
  readonly prev: number;
  /** Cost counted in window `window`. */
  readonly curr: number;
}

export const slidingCounter: Algorithm<Params, SlidingCounterState> = {
  check(params, state, cost, nowMs): CheckOutcome<SlidingCounterState> {
    const { limit: n, windowMs: w } = params;
    let index = floorDiv(nowMs, w);
    let now = nowMs;
    if (state !== null && state.window > index) {
      index = state.window; // clock rule: a window never reopens
      now = index * w;
    }
    let prev = 0;
    let curr = 0;
    if (state !== null && state.window === index) {
      prev = state.prev;
      curr = state.curr;
    } else if (state !== null && state.window === index - 1) {
      prev = state.curr;
    }
    const e = now - index * w;
    const capacity = n * w;
    const allowed = prev * (w - e) + (curr + cost) * w <= capacity;
    const changed = allowed || params.countDenied;
    // With count_denied a hammering client grows `curr` without bound; cap it where scaled sums stay exact.
    const currAfter = changed ? Math.min(curr + cost, floorDiv(MAX_SCALED, w)) : curr;
    const estimate = prev * (w - e) + currAfter * w;
    const endMs = (index + 1) * w;
    const decision = {
      allowed,
      remaining: Math.max(0, floorDiv(capacity - estimate, w)),
      resetAfterMs: currAfter > 0 ? endMs + w - now : prev > 0 ? endMs - now : 0,
      retryAfterMs: allowed ? null : retryAfter(n, w, cost, prev, currAfter, e, endMs - now),
      delayMs: 0,
    };
    const next = changed ? { window: index, prev, curr: currAfter } : (state as SlidingCounterState);
    return { decision, state: next };
  },

  refund(params, state, cost, admittedAtMs) {
    const index = floorDiv(admittedAtMs, params.windowMs);
    if (state.window === index) return { ...state, curr: Math.max(0, state.curr - cost) };
    if (state.window === index + 1) return { ...state, prev: Math.max(0, state.prev - cost) };
    return state;
  },

  freshAtMs(params, state) {
    return (state.window + (state.curr > 0 ? 2 : 1)) * params.windowMs;
  },
};

/**
 * Smallest d >= 1 such that a request of `cost` at now + d is admitted, with no requests in between. The estimate
 * only falls as time passes, so solve it in this window, else in the next (where prev' = curr and curr' = 0); by the
 * end of the next window the estimate is 0 and any cost <= limit fits.
 */
function retryAfter(n: number, w: number, cost: number, prev: number, curr: number, e: number, untilEndMs: number) {
  const slack = (n - curr - cost) * w;
  if (slack >= 0 && prev > 0) {
    // prev × (w − e − d) <= slack  ⇔  d >= w − e − floor(slack / prev)
    const d = Math.max(1, w - e - floorDiv(slack, prev));
    if (d < untilEndMs) return d;
  }
  // Next window: curr × (w − e') <= (n − cost) × w  ⇔  e' >= w − floor((n − cost) × w / curr)
  const eNext = curr > 0 ? Math.max(0, w - floorDiv((n - cost) * w, curr)) : 0;
  return untilEndMs + eNext;
}
