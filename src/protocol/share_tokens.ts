/** Tokens moving between a rate key's buckets with its parts, never made (docs/production.md, the bound). Pure. */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  carryOver,
  refund,
  sliceParams,
} from "../algorithms/index.ts";
import { emptyState, type ShareGrant } from "./share.ts";
import { peekState } from "./store.ts";
import { SHARE_PARTS } from "./tunables.ts";

/**
 * The bucket an adopted rate share (`next`) starts from: the old one (`from`, `state`) as at its end, capped at the new
 * burst; and `afterEnd` (the caller adds it), the refill since that end of the `held` parts the object kept promised
 * without a break, up to what the old bucket would hold now: the rest of that refill was the direct slice's.
 */
export function carried(
  rule: AlgorithmParams,
  next: AlgorithmParams,
  from: AlgorithmParams | null,
  state: AlgorithmState | null,
  endedMs: number,
  held: number,
  nowMs: number,
): { readonly state: AlgorithmState; readonly afterEnd: number } {
  const same = from !== null && from.algorithm === next.algorithm && state !== null;
  const kept = same ? Math.min(peekState(from, state, Math.min(nowMs, endedMs)).remaining, capacityOf(next)) : 0;
  // Never past what the old bucket would hold now had its share not ended: a part full at the end gains nothing.
  const unended = same ? peekState(from, state, nowMs).remaining : 0;
  const afterEnd = Math.min(refill(rule, held, nowMs - endedMs, nowMs), unended - kept);
  const start = emptyState(next, nowMs);
  return { state: kept >= 1 ? refund(next, start, kept, nowMs) : start, afterEnd };
}

/**
 * The bucket a delegate's adopted rate grant (`next`) starts from: the old one (`from`) refilled until now while its
 * parts stayed promised (a live share, or all of them `held` within the lapse grace, share.ts `partsUntilMs`); else
 * as `carried` says. One side refills a part at a time: the delegate while promised, the direct slice after.
 */
export function adoptedStart(
  grant: ShareGrant,
  next: AlgorithmParams,
  from: AlgorithmParams | null,
  old: { readonly parts: number; readonly endsAtMs: number; readonly state: AlgorithmState | null } | null,
  nowMs: number,
): { readonly state: AlgorithmState; readonly afterEnd: number } {
  const held = old === null ? 0 : Math.min(old.parts, grant.parts, grant.held ?? 0);
  if (old === null || nowMs <= old.endsAtMs || held >= old.parts) {
    const over = from !== null && old?.state != null ? carryOver(from, next, old.state, nowMs) : null;
    return { state: over ?? emptyState(next, nowMs), afterEnd: 0 };
  }
  return carried(grant.rule.params, next, from, old.state, old.endsAtMs, held, nowMs);
}

/** The refill of `parts` of the rate over the `ms` before `nowMs`, whole tokens (at most a burst; 0: no slice). */
export function refill(params: AlgorithmParams, parts: number, ms: number, nowMs: number): number {
  const slice = sliceParams(params, parts, SHARE_PARTS);
  return slice === null ? 0 : peekState(slice, emptyState(slice, nowMs - ms), nowMs).remaining;
}
