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
import { ceilDiv, floorDiv } from "./arith.ts";
import { tatKernel } from "./bucket_rows.ts";
import type { Rate } from "./params.ts";
import { admitInto, decisionOf, decisionScratch, packedCheckFromInto, packedStep, refuseInto } from "./scratch.ts";
import {
  bucketLease,
  bucketRuleSide,
  bucketSmallerDeniedUntilMs,
  pairLayout,
  refillMs,
  rescale,
  usedScaled,
} from "./shared.ts";
import type { Algorithm, CheckOutcome, Decision, DecisionScratch, PackedPath, PackedStep } from "./types.ts";

export interface GcraParams {
  readonly algorithm: "gcra";
  readonly rate: Rate;
  /** The burst B: the most a fresh key admits at once. */
  readonly burst: number;
}

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

/**
 * The one copy of GCRA's arithmetic, on `ahead`: how far the TAT before this request is ahead of now, in units of
 * 1/a ms (0 when it is past), at most about burst × T (the caller handles a TAT further ahead). Writes the decision
 * into `d`, and into `step` whether it was admitted and the new lead (no change when denied).
 */
function decideAhead(rate: Rate, burst: number, ahead: number, cost: number, d: DecisionScratch, step: PackedStep) {
  const { tokens: a, perMs: p } = rate;
  const limit = burst * p; // burst × T, in units of 1/a ms
  const next = ahead + cost * p;
  step.changed = next <= limit;
  if (step.changed) {
    step.stored = next;
    admitInto(d, floorDiv(limit - next, p), ceilDiv(next, a), 0);
  } else refuseInto(d, Math.max(0, floorDiv(limit - ahead, p)), ceilDiv(ahead, a), ceilDiv(next - limit, a));
}

export function admitted(remaining: number, resetAfterMs: number, delayMs: number): Decision {
  return { allowed: true, remaining, resetAfterMs, retryAfterMs: null, delayMs };
}

export function refused(remaining: number, resetAfterMs: number, retryAfterMs: number): Decision {
  return { allowed: false, remaining, resetAfterMs, retryAfterMs, delayMs: 0 };
}

/** The pure core's scratch (`check` copies its decision out before it returns). */
const decision = decisionScratch();
const step = packedStep();

/** GCRA's packed path, for every rule that decides as GCRA does (gcra; token_bucket and leaky_bucket through it). */
export function gcraPacked<
  P extends { readonly algorithm: string; readonly rate: Rate; readonly burst: number },
>(): PackedPath<P> {
  const into: PackedPath<P>["into"] = (params, stored, nowScaled, cost, d, s) => {
    decideAhead(params.rate, params.burst, Number.isNaN(stored) ? 0 : Math.max(0, stored - nowScaled), cost, d, s);
    if (s.changed) s.stored += nowScaled;
  };
  return {
    stateParams: ({ rate, burst }) => ({ algorithm: "gcra", rate, burst }),
    rate: (params) => params.rate,
    check: packedCheckFromInto(into),
    into,
    // The TAT moves back by cost × T.
    refund: (params, stored, cost) => stored - cost * params.rate.perMs,
  };
}

export const gcra: Algorithm<GcraParams, GcraState> = {
  ...bucketRuleSide("gcra"),

  check(params, state, cost, nowMs): CheckOutcome<GcraState> {
    const { tokens: a, perMs: p } = params.rate;
    // TAT before this request, never earlier than now. (Computing with an earlier now than one already seen is
    // allowed: TAT is a future time, so it only makes the limiter stingier.)
    const base = state === null || state.tatMs < nowMs ? { tatMs: nowMs, tatFrac: 0 } : state;
    const baseAheadMs = base.tatMs - nowMs;
    if (baseAheadMs <= ceilDiv(params.burst * p, a)) {
      decideAhead(params.rate, params.burst, baseAheadMs * a + base.tatFrac, cost, decision, step);
      const next = step.changed ? shiftTime(base.tatMs, base.tatFrac, cost * p, a) : (state ?? base);
      return { decision: decisionOf(decision), state: next };
    }
    // Only after a clock step back can TAT be this far ahead, and then it is a denial; stay in whole ms (the
    // scaled lead could pass 2^53).
    const next = shiftTime(base.tatMs, base.tatFrac, cost * p, a);
    const denial = refused(
      0,
      baseAheadMs + ceilDiv(base.tatFrac, a),
      next.tatMs - nowMs + ceilDiv(next.tatFrac - params.burst * p, a),
    );
    return { decision: denial, state: state ?? base };
  },

  refund(params, state, cost) {
    return shiftTime(state.tatMs, state.tatFrac, -cost * params.rate.perMs, params.rate.tokens);
  },

  freshAtMs(_params, state) {
    return state.tatMs + (state.tatFrac > 0 ? 1 : 0);
  },

  // The key keeps its tokens at the moment of the change (rounded down), capped at the new burst.
  carryOver(prev, next, state, nowMs) {
    const used = usedScaled(state, prev.rate, nowMs, prev.burst * prev.rate.perMs);
    const tokens = rescale(prev.burst * prev.rate.perMs - used, prev.rate, next.rate, "floor");
    const full = next.burst * next.rate.perMs;
    return shiftTime(nowMs, 0, full - Math.min(tokens, full), next.rate.tokens);
  },

  headerWindowMs: (params) => refillMs(params.burst, params.rate),
  peakSpanMs: (params) => params.rate.periodMs,
  describe: (params, words) => `${params.algorithm} ${words.rate(params.rate)}, burst ${params.burst}`,
  denialsCount: () => false,
  smallerDeniedUntilMs: (params, denied, cost) => bucketSmallerDeniedUntilMs(params.rate, denied, cost),

  // A lease is used at most `ttl` after it was charged: any span t admits at most burst + rate × (t + ttl).
  lease: bucketLease<GcraParams>(),

  scaled: {
    deficit: (params, state, nowMs) =>
      state === null ? 0 : usedScaled(state, params.rate, nowMs, params.burst * params.rate.perMs),
    refund: (params, state, scaled) => shiftTime(state.tatMs, state.tatFrac, -scaled, params.rate.tokens),
  },

  level: {
    name: "tokens",
    label: (params) => `burst ${params.burst}`,
    at(params, state, tMs) {
      if (state === null) return params.burst;
      return params.burst - usedScaled(state, params.rate, tMs, params.burst * params.rate.perMs) / params.rate.perMs;
    },
  },

  packed: gcraPacked<GcraParams>(),
  fields: pairLayout<GcraState>("tatMs", "tatFrac"),
  rows: { compile: (params) => tatKernel(params, gcraPacked<GcraParams>(), gcra.check) },
};
