import type { AlgorithmName, AlgorithmParams } from "../rules/types.ts";

/** What every check answers. All durations are integer milliseconds. */
export interface Decision {
  /** Admitted or not. */
  readonly allowed: boolean;
  /** Largest `n` such that `n` further cost-1 requests at this same instant would all be admitted. */
  readonly remaining: number;
  /** Smallest `d >= 0` such that, with no further requests, at `now + d` the key is as good as fresh. */
  readonly resetAfterMs: number;
  /** Only when denied (else `null`): smallest `d >= 1` such that the same request at `now + d` is admitted. */
  readonly retryAfterMs: number | null;
  /** leaky_queue only (else 0): how long the admitted request waits before it goes on, rounded up. */
  readonly delayMs: number;
}

export interface CheckOutcome<S> {
  readonly decision: Decision;
  /** The state after this request; the very same object when nothing changed (e.g. a denial). */
  readonly state: S;
}

/**
 * One rate-limiting algorithm, as pure functions of (params, state, cost, now). No clock, no storage, no I/O:
 * the Durable Object, the in-isolate store and the simulator are shells around these.
 * `state === null` means a fresh key. `cost` is an integer in [1, capacity] (checked by `decide`).
 */
export interface Algorithm<P, S> {
  check(params: P, state: S | null, cost: number, nowMs: number): CheckOutcome<S>;
  /**
   * Undo the charge of a request admitted at `admittedAtMs` with `cost` (used when another rule denied it).
   * Applied right after the admission it restores the state exactly as it was before.
   */
  refund(params: P, state: S, cost: number, admittedAtMs: number): S;
  /** The earliest time (ms) from which this state is as good as no state at all, and may be dropped. */
  freshAtMs(params: P, state: S): number;
}

export type ParamsOf<K extends AlgorithmName> = Extract<AlgorithmParams, { algorithm: K }>;
