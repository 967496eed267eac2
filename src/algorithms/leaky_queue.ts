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
import { ceilDiv, floorDiv } from "./arith.ts";
import { tatKernel } from "./bucket_rows.ts";
import { type GcraState, refused, shiftTime } from "./gcra.ts";
import type { Rate } from "./params.ts";
import { admitInto, decisionOf, decisionScratch, packedCheckFromInto, packedStep, refuseInto } from "./scratch.ts";
import { pairLayout, RATE_KEYS, readRateAndBurst, refillMs, rescale, usedScaled } from "./shared.ts";
import type { Algorithm, CheckOutcome, DecisionScratch, Own, PackedPath, PackedStep, ParamReader } from "./types.ts";

export interface LeakyQueueParams {
  readonly algorithm: "leaky_queue";
  readonly rate: Rate;
  /** The queue length B (0: NGINX's default, nothing queued). */
  readonly burst: number;
  /** The first `delay` queued requests go at once (`nodelay` is `delay = burst`). */
  readonly delay: number;
}
type Params = Own<LeakyQueueParams>;

export type LeakyQueueState = GcraState;

/**
 * The one copy of the queue's arithmetic, on `wait`: how long until the queue is free, in units of 1/a ms (0 when
 * it is free now), at most about burst × T (the caller handles a queue further ahead). Writes the decision into `d`,
 * and into `step` whether it was admitted and the new lead of the TAT over now (no change when denied).
 */
function decideWait(params: Params, wait: number, cost: number, d: DecisionScratch, step: PackedStep): void {
  const { tokens: a, perMs: p } = params.rate;
  const limit = params.burst * p; // B × T in units of 1/a ms
  step.changed = wait <= limit;
  if (!step.changed) {
    refuseInto(d, 0, ceilDiv(wait, a), ceilDiv(wait - limit, a));
    return;
  }
  const after = wait + cost * p;
  // remaining = floor((B·T − (tat − now)) / T) + 1, or 0 when that is negative
  const remaining = Math.max(0, floorDiv(limit - after, p) + 1);
  const delayMs = Math.max(0, ceilDiv(wait - params.delay * p, a));
  step.stored = after;
  admitInto(d, remaining, ceilDiv(after, a), delayMs);
}

/** The pure core's scratch (`check` copies its decision out before it returns). */
const decision = decisionScratch();
const step = packedStep();

const packedInto: PackedPath<LeakyQueueParams>["into"] = (params, stored, nowScaled, cost, d, s) => {
  decideWait(params, Number.isNaN(stored) ? 0 : Math.max(0, stored - nowScaled), cost, d, s);
  if (s.changed) s.stored += nowScaled;
};

/** `delay: n` (0 to burst, default 0) or `nodelay: true` (= burst), not both. */
function readDelay(r: ParamReader, burst: number): number | undefined {
  if (r.has("delay") && r.has("nodelay")) {
    r.error("nodelay", "give delay or nodelay, not both");
    return undefined;
  }
  if (r.has("nodelay")) {
    const nodelay = r.bool("nodelay", false);
    return nodelay === undefined ? undefined : nodelay ? burst : 0;
  }
  const delay = r.int("delay", { min: 0, fallback: 0 });
  if (delay !== undefined && delay > burst) {
    r.error("delay", `must be at most burst (${burst}), got ${delay}`);
    return undefined;
  }
  return delay;
}

export const leakyQueue: Algorithm<LeakyQueueParams, LeakyQueueState> = {
  params: {
    keys: [...RATE_KEYS, "delay", "nodelay"],
    takes: "rate_per_s or rate, burst, and delay or nodelay",
    capacityName: "burst + 1",
    read(r) {
      const rb = readRateAndBurst(r, (burst) => burst + 1, "(burst + 1)", 0);
      if (rb === null) return null;
      const delay = readDelay(r, rb.burst);
      return delay === undefined ? null : { algorithm: "leaky_queue", rate: rb.rate, burst: rb.burst, delay };
    },
  },
  project: ({ algorithm, rate, burst, delay }) => ({ algorithm, rate, burst, delay }),
  capacity: (params) => params.burst + 1,

  check(params, state, cost, nowMs): CheckOutcome<LeakyQueueState> {
    const { tokens: a, perMs: p } = params.rate;
    const start = state === null || state.tatMs < nowMs ? { tatMs: nowMs, tatFrac: 0 } : state;
    const waitMs = start.tatMs - nowMs;
    if (waitMs <= ceilDiv(params.burst * p, a)) {
      decideWait(params, waitMs * a + start.tatFrac, cost, decision, step);
      const next = step.changed ? shiftTime(start.tatMs, start.tatFrac, cost * p, a) : (state as LeakyQueueState);
      return { decision: decisionOf(decision), state: next };
    }
    // Only after a clock step back can the queue be this far ahead, and then it is a denial; stay in whole ms (the
    // scaled wait could pass 2^53).
    const denial = refused(
      0,
      waitMs + ceilDiv(start.tatFrac, a),
      waitMs + ceilDiv(start.tatFrac - params.burst * p, a),
    );
    return { decision: denial, state: state as LeakyQueueState };
  },

  refund(params, state, cost) {
    return shiftTime(state.tatMs, state.tatFrac, -cost * params.rate.perMs, params.rate.tokens);
  },

  freshAtMs(_params, state) {
    return state.tatMs + (state.tatFrac > 0 ? 1 : 0);
  },

  // The queued work (requests still waiting, rounded up) is kept, capped at the new capacity, and drains at the
  // new rate.
  carryOver(prev, next, state, nowMs) {
    const limit = (prev.burst + 1) * prev.rate.perMs;
    const queued = rescale(usedScaled(state, prev.rate, nowMs, limit), prev.rate, next.rate, "ceil");
    return shiftTime(nowMs, 0, Math.min(queued, (next.burst + 1) * next.rate.perMs), next.rate.tokens);
  },

  headerWindowMs: (params) => refillMs(params.burst + 1, params.rate),
  peakSpanMs: (params) => params.rate.periodMs,
  describe(params, words) {
    const delay = params.delay === params.burst ? "nodelay" : `delay ${params.delay}`;
    return `leaky_queue ${words.rate(params.rate)}, burst ${params.burst}, ${delay}`;
  },
  denialsCount: () => false,
  // Admission depends on the queue's wait, not on the cost: every cost is denied until the same time.
  smallerDeniedUntilMs: (_params, denied) => denied.untilMs,

  lease: { kind: "none", why: "each request's place in the queue is decided when it arrives" },

  level: {
    name: "queued",
    label: (params) => `burst ${params.burst}`,
    at(params, state, tMs) {
      if (state === null) return 0;
      return Math.max(0, (state.tatMs - tMs) * params.rate.tokens + state.tatFrac) / params.rate.perMs;
    },
  },

  packed: {
    stateParams: (params) => params,
    rate: (params) => params.rate,
    check: packedCheckFromInto(packedInto),
    into: packedInto,
    // The TAT moves back by cost × T: the queue slot is freed.
    refund: (params, stored, cost) => stored - cost * params.rate.perMs,
  },
  fields: pairLayout<LeakyQueueState>("tatMs", "tatFrac"),
  rows: { compile: (params) => tatKernel(params, leakyQueue.packed!, leakyQueue.check) },
};
