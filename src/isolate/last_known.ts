/**
 * What an isolate decides for a key without asking its object: while the object cannot be asked (overloaded, timing
 * out), from what it last knew (`lastKnown`: a key known short, a backoff; never an admission); while the key
 * is short here, refused (`lastKnownRefusal`). Functions of a key's state (coalesce_types.ts `KeyState`) and the
 * coalescer's clock, counters and spread (`KeyCtx`).
 */
import { leasePolicy } from "../algorithms/index.ts";
import type { FailureKind } from "../protocol/object_call.ts";
import type { CheckResult, RefundResult } from "../protocol/store.ts";
import { HOT_HOLD_MS, OVERLOAD_BACKOFF_MS } from "../protocol/tunables.ts";
import { type Asked, AUTO_LEASE, type CoalesceCounters, type KeyState } from "./coalesce_types.ts";

/** What these functions need of the coalescer: its clock, its counters, and its spread of renewals. */
export interface KeyCtx {
  readonly clock: () => number;
  readonly counters: CoalesceCounters;
  spread(rangeMs: number): number;
}

export function countLastKnown(ctx: KeyCtx): void {
  const { counters } = ctx;
  counters.last_known_answers = (counters.last_known_answers ?? 0) + 1;
}

/** This isolate holds or held a share of the key lately, or the key's object says it is busy. */
export function isHot(st: KeyState, now: number): boolean {
  const g = st.lastGrant;
  return (
    now < st.hotUntilMs ||
    now < st.busyUntilMs ||
    now < st.overloadedUntilMs ||
    st.lease !== null ||
    (g !== null && now < g.endsAtMs + g.termMs)
  );
}

/**
 * The key's object could not take a call in time: overloaded, or timing out (a call that outlasts its budget is taken
 * for what it most likely is, a busy object's queue). In the real runtime an overloaded Durable Object throws at the
 * caller, so no `hot` answer ever comes; the isolate infers it: a key whose rule takes shares and that has a delegate
 * goes to the delegate for `HOT_HOLD_MS`, as if the object had said `hot`, and the data center's other isolates learn
 * it from this one's mark without an answered call. Returns whether the key is now hot.
 */
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
 * A request the object could not decide (`failure`), decided from what this isolate last knew; `null` leaves it to
 * its rule's `on_error`. Nothing is admitted here: a live lease's units were already offered before the call
 * (`Coalescer.ask`), and a share that ended is not reused (over many isolates that reuse grew with their number and
 * broke the rate bound). In order:
 *
 * 1. A key known to be short here (`lastKnownUntilMs`): refused, as before the failure.
 * 2. A busy object (overloaded, or no answer within the budget: `busyFailure`): refused, and the key refused here
 *    without asking for a short, spread backoff (`OVERLOAD_BACKOFF_MS`), so the object is not asked more while it
 *    drowns. A request beyond `maxWaiting` here: refused (no backoff: the requests already waiting still go to the
 *    object). A busy object thus never admits anything uncounted; it under-admits for that backoff at most.
 * 3. Any other failure (an error, a reset: the object is broken or unreachable, and nothing usable is known): its
 *    rule's `on_error`.
 */
export function lastKnown(ctx: KeyCtx, st: KeyState, failure: FailureKind, now: number, backoff = true): Asked | null {
  if (failure === "overloaded") st.overloadedUntilMs = now + (st.leaseSettings?.ttlMs ?? AUTO_LEASE.ttlMs);
  const busy = busyFailure(failure);
  if (now >= st.lastKnownUntilMs) {
    if (!busy) return null;
    if (!backoff) {
      countLastKnown(ctx);
      return lastKnownRefusal(st, now);
    }
    const backoffMs = OVERLOAD_BACKOFF_MS / 2 + ctx.spread(OVERLOAD_BACKOFF_MS / 2);
    st.lastKnownUntilMs = now + backoffMs;
    st.lastKnownRetryAtMs = Math.max(st.lastKnownRetryAtMs, st.lastKnownUntilMs);
  }
  countLastKnown(ctx);
  return lastKnownRefusal(st, now);
}

/**
 * A last known refusal: the key is short here. Its retry is honest: this isolate admits nothing before its lease ends (when it
 * asks the object again), nor before the key reopens if the object's own denial said when (a window's end).
 */
export function lastKnownRefusal(st: KeyState, now: number): Asked {
  const waitMs = Math.max(1, st.lastKnownRetryAtMs - now);
  const decision = { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 };
  return heldAnswer(now, decision, () => Promise.resolve(null));
}

/**
 * An answer this isolate gives from what it holds of the key, without a call: from its lease (coalesce.ts
 * `leaseAnswer`), or a last known refusal while the key is short here (`lastKnownRefusal`).
 */
export function heldAnswer(
  atMs: number,
  decision: Extract<CheckResult, { ok: true }>["decision"],
  refund: () => Promise<RefundResult>,
): Asked {
  return { kind: "answered", result: { ok: true, atMs, decision }, source: "lease", batchSize: 0, attempts: 0, refund };
}

/**
 * Got less than this isolate expects to need in one ttl (its ask without the margin): the key's budget is short;
 * this isolate makes do with its share until its lease ends, and asks again then (so units given back meanwhile are
 * not lost). Its refusals tell the client the later of that and when the object's own denial in this call said the
 * key reopens. (Granted what it needs but not the margin: it calls again if it runs out.)
 */
export function noteLastKnown(
  ctx: KeyCtx,
  st: KeyState,
  short: boolean,
  endsAtMs: number,
  results: readonly CheckResult[],
): void {
  st.lastKnownUntilMs = 0;
  st.lastKnownRetryAtMs = 0;
  if (!short) return;
  const now = ctx.clock();
  let reopensAtMs = endsAtMs;
  for (const r of results) {
    if (r.ok && !r.decision.allowed && r.decision.retryAfterMs !== null) {
      reopensAtMs = Math.max(reopensAtMs, now + r.decision.retryAfterMs);
    }
  }
  st.lastKnownUntilMs = endsAtMs;
  st.lastKnownRetryAtMs = reopensAtMs;
}
