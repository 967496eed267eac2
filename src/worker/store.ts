/**
 * What a limiter keeps per (rule, key), and the two operations on it, as pure functions of (record, input, now).
 * The Durable Object (exact, persisted) and the in-isolate store (`scope: local`, approximate) are shells around
 * these, and both run the same pure core as the simulator.
 *
 * Rule changes across a redeploy: the record remembers the parameters its state was made under. When a request
 * arrives with other parameters, `carryOver` converts the state (tokens capped at the new burst, counts kept in an
 * unchanged window, ...) or discards it (another algorithm, another window); see src/algorithms/carry_over.ts.
 */
import {
  type AlgorithmState,
  carryOver,
  type Decision,
  decide,
  fingerprintOf,
  freshAtMs,
  refund,
} from "../algorithms/index.ts";
import type { AlgorithmParams } from "../rules/types.ts";

/** The stored record: the state and the parameters it was made under. */
export interface LimiterRecord {
  /** Record format version. */
  readonly v: 1;
  readonly params: AlgorithmParams;
  /** `JSON.stringify(params)`: compared to detect a rule change. */
  readonly fingerprint: string;
  readonly state: AlgorithmState;
}

/** The rule as the limiter sees it: its id (for messages) and its algorithm parameters. */
export interface LimiterRule {
  readonly id: string;
  readonly params: AlgorithmParams;
}

export interface CheckInput {
  readonly rule: LimiterRule;
  /** Integer >= 1. */
  readonly cost: number;
}

export type CheckResult =
  | {
      readonly ok: true;
      readonly decision: Decision;
      /** The limiter's clock at the decision, ms: pass it back to `refund`. */
      readonly atMs: number;
    }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

export interface RefundInput {
  readonly rule: LimiterRule;
  readonly cost: number;
  /** `atMs` of the admitting check. */
  readonly admittedAtMs: number;
}

/** What the key looks like after a refund, for the RateLimit header: `null` when there was nothing to refund. */
export type RefundResult = { readonly remaining: number; readonly resetAfterMs: number } | null;

export { fingerprintOf };

/** The state to decide on: the stored one, carried over to the current parameters, or `null` (fresh). */
function currentState(record: LimiterRecord | null, params: AlgorithmParams, fingerprint: string, nowMs: number) {
  if (record === null) return null;
  if (record.fingerprint === fingerprint) return record.state;
  return carryOver(record.params, params, record.state, nowMs);
}

/** Decide one request. `record` is the new record to store, or the very same object when nothing changed. */
export function checkRecord(
  record: LimiterRecord | null,
  input: CheckInput,
  nowMs: number,
): { readonly result: CheckResult; readonly record: LimiterRecord | null } {
  const { params } = input.rule;
  const fingerprint = fingerprintOf(params);
  const state = currentState(record, params, fingerprint, nowMs);
  const out = decide(params, state, input.cost, nowMs);
  if (!out.ok) return { result: out, record };
  const result: CheckResult = { ok: true, decision: out.decision, atMs: nowMs };
  const unchanged = record !== null && record.fingerprint === fingerprint && out.state === record.state;
  return { result, record: unchanged ? record : { v: 1, params, fingerprint, state: out.state } };
}

/** Give back an admitted request's cost. A record made under other parameters (a redeploy in between) is left alone. */
export function refundRecord(
  record: LimiterRecord | null,
  input: RefundInput,
  nowMs: number,
): { readonly result: RefundResult; readonly record: LimiterRecord | null } {
  const { params } = input.rule;
  if (record === null || record.fingerprint !== fingerprintOf(params)) return { result: null, record };
  const state = refund(params, record.state, input.cost, input.admittedAtMs);
  // Peek with a cost-1 check whose new state is thrown away: n cost-1 requests fit iff the first does and n-1 follow.
  const peek = decide(params, state, 1, nowMs);
  const remaining = peek.ok && peek.decision.allowed ? peek.decision.remaining + 1 : 0;
  const freshAt = freshAtMs(params, state);
  const resetAfterMs = Math.max(0, freshAt - nowMs);
  // A refund that leaves the key as good as fresh (an emptied log) drops the record: there is nothing to keep, and no
  // alarm to arm for a time that has already passed.
  return { result: { remaining, resetAfterMs }, record: freshAt <= nowMs ? null : { ...record, state } };
}

/** What a key looks like now, for a cost-1 request, without charging it (the admin API's state). */
export interface PeekResult {
  /** Largest n such that n cost-1 requests now would all be admitted. */
  readonly remaining: number;
  /** Until the key is as good as fresh, ms (0 when it already is). */
  readonly resetAfterMs: number;
  /** When a cost-1 request would be denied now: how long until it is admitted, ms; else `null`. */
  readonly retryAfterMs: number | null;
  /** The limiter's clock, ms. */
  readonly atMs: number;
}

/** The key's state seen by a hypothetical cost-1 request at `nowMs`, whose new state is thrown away. */
export function peekRecord(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): PeekResult {
  const { params } = rule;
  const state = currentState(record, params, fingerprintOf(params), nowMs);
  return peekState(params, state, nowMs);
}

/** `peekRecord` on a bare state (also used for `scope: local`). */
export function peekState(params: AlgorithmParams, state: AlgorithmState | null, nowMs: number): PeekResult {
  const out = decide(params, state, 1, nowMs);
  const resetAfterMs = state === null ? 0 : Math.max(0, freshAtMs(params, state) - nowMs);
  if (!out.ok) return { remaining: 0, resetAfterMs, retryAfterMs: null, atMs: nowMs };
  const d = out.decision;
  return {
    remaining: d.allowed ? d.remaining + 1 : 0,
    resetAfterMs,
    retryAfterMs: d.allowed ? null : d.retryAfterMs,
    atMs: nowMs,
  };
}

/** When the record is as good as no record, ms. */
export function recordFreshAtMs(record: LimiterRecord): number {
  return freshAtMs(record.params, record.state);
}
