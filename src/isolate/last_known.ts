/** What an isolate decides without asking ("last known"): a refusal while the key is short or busy, never admitted. */
import { type Decision, leasePolicy } from "../algorithms/index.ts";
import type { FailureKind } from "../protocol/object_call.ts";
import type { CheckResult, RefundResult } from "../protocol/store.ts";
import { HOT_HOLD_MS, OVERLOAD_BACKOFF_MS } from "../protocol/tunables.ts";
import { type Asked, AUTO_LEASE, type CoalesceCounters } from "./coalesce_types.ts";
import type { KeyState } from "./key_state.ts";

/** What these need of the coalescer: its clock, counters and spread. */
export interface KeyCtx {
  readonly clock: () => number;
  readonly counters: CoalesceCounters;
  spread(rangeMs: number): number;
}

/** This isolate holds or held a share of the key lately, or the key's object says it is busy. */
export function isHot(st: KeyState, now: number): boolean {
  const until = Math.max(st.hotUntilMs, st.busyUntilMs, st.overloadedUntilMs, st.grantHotUntilMs);
  return now < until || st.lease !== null;
}

/** A busy failure of the key's object sends the key to its delegate, as `hot` would (an overloaded object throws). */
export function overloadTeachesHot(st: KeyState, failure: FailureKind, now: number): boolean {
  if (st.delegate === null || leasePolicy(st.rule.params.algorithm).kind === "none") return false;
  if (!busyFailure(failure)) return false;
  st.hotUntilMs = Math.max(st.hotUntilMs, now + HOT_HOLD_MS);
  return true;
}

/** A failure that says the object is busy, not broken: overloaded, or no answer within the budget. */
export function busyFailure(failure: FailureKind): boolean {
  return failure === "overloaded" || failure === "timeout";
}

/**
 * A request the object could not decide: refused if short here or the object busy (then refused here for part of
 * `OVERLOAD_BACKOFF_MS`, unless `backoff` is false); any other failure: `null`, its rule's `on_error`.
 */
export function lastKnown(ctx: KeyCtx, st: KeyState, failure: FailureKind, now: number, backoff = true): Asked | null {
  if (failure === "overloaded") st.overloadedUntilMs = now + (st.leaseSettings?.ttlMs ?? AUTO_LEASE.ttlMs);
  if (now >= st.lastKnownUntilMs) {
    if (!busyFailure(failure)) return null;
    if (backoff) {
      st.lastKnownUntilMs = now + OVERLOAD_BACKOFF_MS / 2 + ctx.spread(OVERLOAD_BACKOFF_MS / 2);
      st.lastKnownRetryAtMs = Math.max(st.lastKnownRetryAtMs, st.lastKnownUntilMs);
    }
  }
  ctx.counters.last_known_answers = (ctx.counters.last_known_answers ?? 0) + 1;
  return lastKnownRefusal(st, now);
}

/** A last known refusal, its retry when this isolate asks again (or the key reopens, if the object said). */
export function lastKnownRefusal(st: KeyState, now: number): Asked {
  const waitMs = Math.max(1, st.lastKnownRetryAtMs - now);
  const decision = { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 };
  return heldAnswer(now, decision, () => Promise.resolve(null));
}

/** An answer from what this isolate holds of the key, without a call (its lease, or a last known refusal). */
export function heldAnswer(atMs: number, decision: Decision, refund: () => Promise<RefundResult>): Asked {
  return { kind: "answered", result: { ok: true, atMs, decision }, source: "lease", attempts: 0, refund };
}

/** A grant `short` of the need: refuse beyond the lease until `endsAtMs`, retry when the object's denials say. */
export function noteLastKnown(
  ctx: KeyCtx,
  st: KeyState,
  short: boolean,
  endsAtMs: number,
  results: readonly CheckResult[],
): void {
  st.lastKnownUntilMs = short ? endsAtMs : 0;
  st.lastKnownRetryAtMs = short ? endsAtMs : 0;
  if (!short) return;
  const now = ctx.clock();
  for (const r of results) {
    if (!r.ok || r.decision.allowed || r.decision.retryAfterMs === null) continue;
    st.lastKnownRetryAtMs = Math.max(st.lastKnownRetryAtMs, now + r.decision.retryAfterMs);
  }
}
