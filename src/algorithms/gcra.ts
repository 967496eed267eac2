/**
 * GCRA (generic cell rate algorithm).
 *
 * Promise: exactly the token bucket's decisions and fields for the same rate and burst, kept as one timestamp: the
 * theoretical arrival time (TAT) of the next request. Emission interval T = 1/rate; a request of cost c moves TAT by
 * c × T and is admitted iff the new TAT is at most burst × T ahead of now.
 * State: TAT as whole ms plus a remainder in units of 1/rate.tokens ms, so T = perMs/tokens is never rounded.
 * Pros: one number per key, no refill step. Cons: needs one clock every checker agrees on (the Durable Object is it).
 * Pick it where a token bucket fits and state size matters.
 */
import type { GcraRule } from "../rules/types.ts";
import { ceilDiv, floorDiv } from "./arith.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";

type Params = Pick<GcraRule, "rate" | "burst">;

export interface GcraState {
  /** Whole ms of the theoretical arrival time. */
  readonly tatMs: number;
  /** Remainder of the TAT in units of 1/rate.tokens ms, in [0, rate.tokens). */
  readonly tatFrac: number;
}

/** A time point `ms + frac / a` moved by `delta / a` ms (delta may be negative). */
export function shiftTime(ms: number, frac: number, delta: number, a: number): GcraState {
  const sum = frac + delta;
  const whole = floorDiv(sum, a);
  return { tatMs: ms + whole, tatFrac: sum - whole * a };
}

export const gcra: Algorithm<Params, GcraState> = {
  check(params, state, cost, nowMs): CheckOutcome<GcraState> {
    const { tokens: a, perMs: p } = params.rate;
    const limit = params.burst * p; // burst × T, in units of 1/a ms
    // TAT before this request, never earlier than now. (Computing with an earlier now than one already seen is
    // allowed: TAT is a future time, so it only makes the limiter stingier.)
    const base = state === null || state.tatMs < nowMs ? { tatMs: nowMs, tatFrac: 0 } : state;
    const next = shiftTime(base.tatMs, base.tatFrac, cost * p, a);
    const aheadMs = next.tatMs - nowMs;
    // Guard the multiplication: only after a clock step back can TAT be this far ahead, and then it is a denial.
    const ahead = aheadMs > ceilDiv(limit, a) ? Number.POSITIVE_INFINITY : aheadMs * a + next.tatFrac;
    if (ahead <= limit) {
      return {
        decision: {
          allowed: true,
          remaining: floorDiv(limit - ahead, p),
          resetAfterMs: ceilDiv(ahead, a),
          retryAfterMs: null,
          delayMs: 0,
        },
        state: next,
      };
    }
    const baseAheadMs = base.tatMs - nowMs;
    const baseAhead = baseAheadMs * a + base.tatFrac;
    return {
      decision: {
        allowed: false,
        remaining: baseAheadMs > ceilDiv(limit, a) ? 0 : Math.max(0, floorDiv(limit - baseAhead, p)),
        resetAfterMs: baseAheadMs + ceilDiv(base.tatFrac, a),
        retryAfterMs: aheadMs + ceilDiv(next.tatFrac - limit, a),
        delayMs: 0,
      },
      state: state ?? base,
    };
  },

  refund(params, state, cost) {
    return shiftTime(state.tatMs, state.tatFrac, -cost * params.rate.perMs, params.rate.tokens);
  },

  freshAtMs(_params, state) {
    return state.tatMs + (state.tatFrac > 0 ? 1 : 0);
  },
};
