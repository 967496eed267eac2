/**
 * Leaky bucket as a queue (shaping), with NGINX `limit_req` semantics.
 *
 * Promise: requests leave at a steady `rate`; up to `burst` may wait in the queue, and each admitted request is held
 * for `delay_ms` before it goes on. The first `delay` queued requests go at once (`nodelay` = all of them), as NGINX's
 * `delay=`/`nodelay`. A full queue is a denial.
 * State: `tat`, the time the queue is next free, as whole ms plus a remainder in units of 1/rate.tokens ms.
 * Pros: perfectly smooth output for a fragile upstream. Cons: holds a connection per queued request and hides
 * overload behind latency. Pick it in front of a downstream with a strict requests-per-second cap.
 */
import type { LeakyQueueRule } from "../rules/types.ts";
import { ceilDiv, floorDiv } from "./arith.ts";
import { type GcraState, shiftTime } from "./gcra.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";

type Params = Pick<LeakyQueueRule, "rate" | "burst" | "delay">;

export type LeakyQueueState = GcraState;

/** `(tat - now)` in units of 1/a ms, or +Infinity when it is too far ahead to matter (only after a clock step back). */
function aheadScaled(state: GcraState, nowMs: number, a: number, boundMs: number): number {
  const aheadMs = state.tatMs - nowMs;
  return aheadMs > boundMs ? Number.POSITIVE_INFINITY : aheadMs * a + state.tatFrac;
}

/** floor((B·T − max(0, tat − now)) / T) + 1, or 0 when that is negative. */
function remainingAt(limit: number, ahead: number, p: number): number {
  if (ahead === Number.POSITIVE_INFINITY) return 0;
  return Math.max(0, floorDiv(limit - Math.max(0, ahead), p) + 1);
}

export const leakyQueue: Algorithm<Params, LeakyQueueState> = {
  check(params, state, cost, nowMs): CheckOutcome<LeakyQueueState> {
    const { tokens: a, perMs: p } = params.rate;
    const limit = params.burst * p; // B × T in units of 1/a ms
    const boundMs = ceilDiv(limit, a) + params.burst + 2;
    const start = state === null || state.tatMs < nowMs ? { tatMs: nowMs, tatFrac: 0 } : state;
    const wait = aheadScaled(start, nowMs, a, boundMs);
    if (wait <= limit) {
      const next = shiftTime(start.tatMs, start.tatFrac, cost * p, a);
      const after = aheadScaled(next, nowMs, a, Number.POSITIVE_INFINITY);
      return {
        decision: {
          allowed: true,
          remaining: remainingAt(limit, after, p),
          resetAfterMs: ceilDiv(after, a),
          retryAfterMs: null,
          delayMs: Math.max(0, ceilDiv(wait - params.delay * p, a)),
        },
        state: next,
      };
    }
    const current = state as LeakyQueueState;
    return {
      decision: {
        allowed: false,
        remaining: remainingAt(limit, wait, p),
        resetAfterMs: current.tatMs - nowMs + ceilDiv(current.tatFrac, a),
        retryAfterMs: start.tatMs - nowMs + ceilDiv(start.tatFrac - limit, a),
        delayMs: 0,
      },
      state: current,
    };
  },

  refund(params, state, cost) {
    return shiftTime(state.tatMs, state.tatFrac, -cost * params.rate.perMs, params.rate.tokens);
  },

  freshAtMs(_params, state) {
    return state.tatMs + (state.tatFrac > 0 ? 1 : 0);
  },
};
