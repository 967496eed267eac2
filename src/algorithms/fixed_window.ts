/**
 * Fixed window.
 *
 * Promise: at most `limit` cost per epoch-aligned window (a `1d` window resets at 00:00 UTC; `month` follows UTC
 * calendar months, like a billing period). State: the window's index and its count; one increment per request.
 * Pros: the cheapest state; "resets at 00:00 UTC" is easy to explain and matches invoices. Cons: a client can spend a
 * full allowance on each side of a boundary (2× in a short span), and denied clients all return at the boundary.
 * Pick it for daily and monthly quotas.
 */
import type { FixedWindowRule } from "../rules/types.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";
import { windowIndex, windowStartMs } from "./windows.ts";

type Params = Pick<FixedWindowRule, "limit" | "window">;

export interface FixedWindowState {
  /** Index of the window `count` belongs to. */
  readonly window: number;
  /** Cost admitted in that window. */
  readonly count: number;
}

export const fixedWindow: Algorithm<Params, FixedWindowState> = {
  check(params, state, cost, nowMs): CheckOutcome<FixedWindowState> {
    let index = windowIndex(params.window, nowMs);
    let now = nowMs;
    // Clock rule: a window that has been seen never reopens for an earlier clock.
    if (state !== null && state.window > index) {
      index = state.window;
      now = windowStartMs(params.window, index);
    }
    const count = state !== null && state.window === index ? state.count : 0;
    const untilEndMs = windowStartMs(params.window, index + 1) - now;
    if (count + cost <= params.limit) {
      const after = count + cost;
      return {
        decision: {
          allowed: true,
          remaining: params.limit - after,
          resetAfterMs: untilEndMs,
          retryAfterMs: null,
          delayMs: 0,
        },
        state: { window: index, count: after },
      };
    }
    return {
      decision: {
        allowed: false,
        remaining: params.limit - count,
        resetAfterMs: count === 0 ? 0 : untilEndMs,
        retryAfterMs: untilEndMs,
        delayMs: 0,
      },
      state: state as FixedWindowState,
    };
  },

  refund(params, state, cost, admittedAtMs) {
    if (state.window !== windowIndex(params.window, admittedAtMs)) return state;
    return { window: state.window, count: Math.max(0, state.count - cost) };
  },

  freshAtMs(params, state) {
    return windowStartMs(params.window, state.window + 1);
  },
};
