/**
 * The algorithm table: one entry per `algorithm` name, selected with an exhaustive check, and `decide`, the one
 * entry point every shell (Durable Object, in-isolate store, simulator) calls.
 */
import { type AlgorithmName, type AlgorithmParams, capacityOf } from "../rules/types.ts";
import { type FixedWindowState, fixedWindow } from "./fixed_window.ts";
import { type GcraState, gcra } from "./gcra.ts";
import { type LeakyBucketState, leakyBucket } from "./leaky_bucket.ts";
import { type LeakyQueueState, leakyQueue } from "./leaky_queue.ts";
import { type SlidingCounterState, slidingCounter } from "./sliding_counter.ts";
import { type SlidingLogState, slidingLog } from "./sliding_log.ts";
import { type TokenBucketState, tokenBucket } from "./token_bucket.ts";
import type { Algorithm, Decision, ParamsOf } from "./types.ts";

export type { Decision } from "./types.ts";

export interface StateOf {
  token_bucket: TokenBucketState;
  gcra: GcraState;
  leaky_bucket: LeakyBucketState;
  leaky_queue: LeakyQueueState;
  fixed_window: FixedWindowState;
  sliding_log: SlidingLogState;
  sliding_counter: SlidingCounterState;
}

/** Any algorithm's state. Which one it is follows from the rule it was made under. */
export type AlgorithmState = StateOf[AlgorithmName];

const TABLE: { readonly [K in AlgorithmName]: Algorithm<ParamsOf<K>, StateOf[K]> } = {
  token_bucket: tokenBucket,
  gcra,
  leaky_bucket: leakyBucket,
  leaky_queue: leakyQueue,
  fixed_window: fixedWindow,
  sliding_log: slidingLog,
  sliding_counter: slidingCounter,
};

/** The algorithm for a rule's parameters, typed loosely enough to call with any of its states. */
export function algorithmFor(params: AlgorithmParams): Algorithm<AlgorithmParams, AlgorithmState> {
  return TABLE[params.algorithm] as unknown as Algorithm<AlgorithmParams, AlgorithmState>;
}

export type DecideResult =
  | { readonly ok: true; readonly decision: Decision; readonly state: AlgorithmState }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

/**
 * Decide one request: `cost` of a key whose state is `state` (`null` = fresh), at `nowMs`.
 * A cost above the rule's capacity can never succeed: it is an error value and changes no state.
 */
export function decide(
  params: AlgorithmParams,
  state: AlgorithmState | null,
  cost: number,
  nowMs: number,
): DecideResult {
  if (!Number.isSafeInteger(cost) || cost < 1) return { ok: false, error: "invalid_cost" };
  if (cost > capacityOf(params)) return { ok: false, error: "cost_exceeds_capacity" };
  const out = algorithmFor(params).check(params, state, cost, nowMs);
  return { ok: true, decision: out.decision, state: out.state };
}

/** Give back what an admitted request of `cost` at `admittedAtMs` charged. */
export function refund(
  params: AlgorithmParams,
  state: AlgorithmState,
  cost: number,
  admittedAtMs: number,
): AlgorithmState {
  return algorithmFor(params).refund(params, state, cost, admittedAtMs);
}

/** When `state` is as good as no state (an alarm may delete it then). */
export function freshAtMs(params: AlgorithmParams, state: AlgorithmState): number {
  return algorithmFor(params).freshAtMs(params, state);
}
