/**
 * What an isolate decides for a key without asking its object: while the object cannot be asked (overloaded, timing
 * out), from what it last knew (`lastKnown`: its last share reused once, a key known short, a backoff); while the key
 * is short here, refused (`scarceAnswer`). Functions of a key's state (coalesce_types.ts `KeyState`) and the
 * coalescer's clock, counters and spread (`KeyCtx`).
 */
import { leasePolicy } from "../algorithms/index.ts";
import type { FailureKind } from "../protocol/object_call.ts";
import type { CheckResult } from "../protocol/store.ts";
import {
  type Asked,
  AUTO_LEASE,
  type CoalesceCounters,
  type HeldLease,
  type KeyState,
  OVERLOAD_BACKOFF_MS,
} from "./coalesce_types.ts";

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
 * A request the object could not decide (`failure`), decided from what this isolate last knew; `null` leaves it to
 * its rule's `on_error`. In order:
 *
 * 1. A rate rule's last share, reused once: the units of the last lease granted here, for at most one more term
 *    after it ended (never charged, never given back). Each isolate thus admits at most its last share once more,
 *    as if the object had granted it again when it ended; over all isolates that is what the object granted in the
 *    last two terms, at most `burst + rate × 2·ttl` beyond the lease bound, once per outage. Window rules never
 *    reuse a share (a window's units are counted exactly).
 * 2. A key known to be short here (`scarceUntilMs`): refused, as before the failure.
 * 3. An overloaded object: refused, and the key refused here without asking for a short, spread backoff
 *    (`OVERLOAD_BACKOFF_MS`), so the object is not asked more while it drowns. A request beyond `maxWaiting` here:
 *    refused (no backoff: the requests already waiting still go to the object). An overload thus never admits
 *    anything uncounted; it under-admits for that backoff at most.
 * 4. Any other failure (unreachable, timeout, an error) of a key that is not hot here: its rule's `on_error`.
 *    A hot key (a share held lately, or a busy object) was decided by 1 or 2 when they apply; and its call that
 *    times out (or any call within a lease ttl of an overloaded answer that does) is taken for what it most likely
 *    is, an overloaded object whose queue outlasted the budget, and decided as 3.
 */
export function lastKnown(
  ctx: KeyCtx,
  st: KeyState,
  failure: FailureKind,
  cost: number,
  now: number,
  backoff = true,
): Asked | null {
  if (failure === "overloaded") st.overloadedUntilMs = now + (st.leaseSettings?.ttlMs ?? AUTO_LEASE.ttlMs);
  const hot = isHot(st, now);
  const overloaded = failure === "overloaded" || (failure === "timeout" && hot);
  if (!overloaded && !hot) return null;
  const share = fallbackShare(st, now);
  if (share !== null && share.unitsLeft >= cost) {
    share.unitsLeft -= cost;
    countLastKnown(ctx);
    return shareAnswer(ctx, st, share, cost, now);
  }
  if (now >= st.scarceUntilMs) {
    if (!overloaded) return null;
    if (!backoff) {
      countLastKnown(ctx);
      return scarceAnswer(st, now);
    }
    const backoffMs = OVERLOAD_BACKOFF_MS / 2 + ctx.spread(OVERLOAD_BACKOFF_MS / 2);
    st.scarceUntilMs = now + backoffMs;
    st.scarceRetryAtMs = Math.max(st.scarceRetryAtMs, st.scarceUntilMs);
  }
  countLastKnown(ctx);
  return scarceAnswer(st, now);
}

/** The share to decide from while the object cannot be asked (see `lastKnown`, 1), or `null`. */
export function fallbackShare(st: KeyState, now: number): HeldLease | null {
  if (st.fallback !== null && now < st.fallback.endsAtMs) return st.fallback;
  const g = st.lastGrant;
  if (g === null || g.reused || leasePolicy(st.rule.params.algorithm).kind !== "rate") return null;
  if (now >= g.endsAtMs + g.termMs) return null;
  g.reused = true;
  st.fallback = { unitsLeft: g.units, units: g.units, atMs: g.atMs, endsAtMs: g.endsAtMs + g.termMs, returned: true };
  return st.fallback;
}

/** An admission from the share this isolate decides from (`fallbackShare`): a refund goes back into it, if live. */
export function shareAnswer(ctx: KeyCtx, st: KeyState, share: HeldLease, cost: number, now: number): Asked {
  return {
    kind: "answered",
    result: {
      ok: true,
      atMs: now,
      decision: {
        allowed: true,
        remaining: share.unitsLeft,
        resetAfterMs: Math.max(0, share.endsAtMs - now),
        retryAfterMs: null,
        delayMs: 0,
      },
    },
    source: "lease",
    batchSize: 0,
    attempts: 0,
    refund: () => {
      if (st.fallback === share && ctx.clock() < share.endsAtMs) share.unitsLeft += cost;
      return Promise.resolve(null);
    },
  };
}

/**
 * A refusal while the key is scarce. Its retry is honest: this isolate admits nothing before its lease ends (when it
 * asks the object again), nor before the key reopens if the object's own denial said when (a window's end).
 */
export function scarceAnswer(st: KeyState, now: number): Asked {
  const waitMs = Math.max(1, st.scarceRetryAtMs - now);
  return {
    kind: "answered",
    result: {
      ok: true,
      atMs: now,
      decision: { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 },
    },
    source: "lease",
    batchSize: 0,
    attempts: 0,
    refund: () => Promise.resolve(null),
  };
}

/**
 * Got less than this isolate expects to need in one ttl (its ask without the margin): the key's budget is short;
 * this isolate makes do with its share until its lease ends, and asks again then (so units given back meanwhile are
 * not lost). Its refusals tell the client the later of that and when the object's own denial in this call said the
 * key reopens. (Granted what it needs but not the margin: it calls again if it runs out.)
 */
export function noteScarcity(
  ctx: KeyCtx,
  st: KeyState,
  short: boolean,
  endsAtMs: number,
  results: readonly CheckResult[],
): void {
  st.scarceUntilMs = 0;
  st.scarceRetryAtMs = 0;
  if (!short) return;
  const now = ctx.clock();
  let reopensAtMs = endsAtMs;
  for (const r of results) {
    if (r.ok && !r.decision.allowed && r.decision.retryAfterMs !== null) {
      reopensAtMs = Math.max(reopensAtMs, now + r.decision.retryAfterMs);
    }
  }
  st.scarceUntilMs = endsAtMs;
  st.scarceRetryAtMs = reopensAtMs;
}
