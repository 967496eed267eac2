/**
 * Tokens moving between a rate key's buckets with its parts (docs/production.md, the design note's bound): taken out
 * of the sender's bucket before they are sent, added at the receiver capped at its own slice's burst, gone with a lost
 * message; never made. Here: the bucket a delegate's adopted rate grant starts from, and the refill of parts the key's
 * object kept promised. Pure functions.
 */
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
 * The bucket an adopted rate share (`next`, its slice) starts from: the old share's (`from`, `state`) as it was at its
 * end (`endedMs`; now, if it is live), capped at the new burst; and `afterEnd`, the refill since that end of the parts
 * the key's object kept promised to this delegate without a break (`held`: `ShareGrant.held`, at most the old and the
 * new parts), which are its own, up to what the old bucket would hold now had its share not ended (parts full at the
 * end gain nothing). The rest of that refill the object gave to others (the direct slice refilled them too): counting
 * it as well made tokens. The caller adds `afterEnd`.
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
 * The bucket a delegate's adopted rate grant starts from (`next`, its slice; `from`, the old share's slice): the old
 * bucket refilled until now while its parts stayed promised (a live share, or an ended one whose parts the key's object
 * held until the ask, `held` within its grace: share.ts `partsUntilMs`); else as `carried` says. The key's object keeps a rate share's
 * parts promised `LAPSE_GRACE_MS` past its end (share.ts `partsUntilMs`): a renewal within it finds them held without a
 * break, which the direct slice never refilled, so the refill since the end is the delegate's own; after it they are
 * the direct slice's, which refills them from then, and the delegate's bucket is taken as at its end. One side refills
 * a part at a time.
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

/**
 * The refill of `parts` of the rate under `params` over the `ms` before `nowMs`, whole tokens (at most a burst); 0 for
 * no parts (no slice) or no span (an empty bucket read at or before its start).
 */
export function refill(params: AlgorithmParams, parts: number, ms: number, nowMs: number): number {
  const slice = sliceParams(params, parts, SHARE_PARTS);
  return slice === null ? 0 : peekState(slice, emptyState(slice, nowMs - ms), nowMs).remaining;
}
