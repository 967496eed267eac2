/**
 * Tokens moving between a rate key's buckets with its parts (docs/production.md, the design note's bound): taken out
 * of the sender's bucket before they are sent, added at the receiver capped at its own slice's burst, gone with a lost
 * message; never made. A delegate cutting its share (delegate.ts `shareAsk`, `keep`) sends the tokens its bucket held
 * above the smaller slice's burst with the ask (`ShareAsk.tokens`); the key's object adds them to the direct slice,
 * which the parts the cut frees join (share_grant.ts `shareRecord`). Pure functions.
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  carryOver,
  refund,
  sliceParams,
} from "../algorithms/index.ts";
import { emptyState, honestSlice, promisedParts, type ShareGrant } from "./share.ts";
import { type LimiterRecord, type LimiterRule, peekState, type ShareEntry } from "./store.ts";
import { SHARE_PARTS } from "./tunables.ts";

/** Whole tokens a slice's bucket holds at `nowMs` (0: no slice or no state). */
export function tokensIn(params: AlgorithmParams | null, state: AlgorithmState | null, nowMs: number): number {
  return params === null || state === null ? 0 : peekState(params, state, nowMs).remaining;
}

/**
 * The tokens a cut's ask moves (`asked`, `ShareAsk.tokens`) that the key's object takes: as many as the parts it frees
 * (`freed`) hold at most, their part of the rule's burst; 0 for an absent or invalid count.
 */
function cutTokens(params: AlgorithmParams, asked: number | undefined, freed: number): number {
  if (asked === undefined || !Number.isSafeInteger(asked) || asked < 1 || freed <= 0) return 0;
  const burst = "burst" in params ? params.burst : 0;
  return Math.min(asked, Math.floor((burst * freed) / SHARE_PARTS));
}

/**
 * The record with `tokens` added to the direct slice, converted to `parts` first (the parts a cut freed join it),
 * capped at the slice's burst (the rest is lost, which is safe). Unchanged without a direct slice or tokens.
 */
function creditDirect(
  rec: LimiterRecord | null,
  rule: LimiterRule,
  parts: number,
  tokens: number,
  nowMs: number,
): LimiterRecord | null {
  const direct = rec?.shares?.direct;
  if (rec === null || direct === undefined || tokens < 1) return rec;
  const from = honestSlice(rec.params, direct.parts);
  const to = honestSlice(rule.params, parts);
  if (to === null) return rec;
  const state =
    from === null || direct.state === null
      ? emptyState(to, nowMs)
      : (carryOver(from, to, direct.state, nowMs) ?? emptyState(to, nowMs));
  return { ...rec, shares: { ...rec.shares!, direct: { parts, state: refund(to, state, tokens, nowMs) } } };
}

/**
 * The tokens a delegate moved with the parts it cut (`asked`) into the direct slice, which the parts it no longer uses
 * join now: its entry (`mine`) promised more than it still uses (`used`, share_grant.ts `inUse`); `others`: the other
 * live entries.
 */
export function creditCut(
  rec: LimiterRecord | null,
  rule: LimiterRule,
  asked: number | undefined,
  mine: ShareEntry,
  used: number,
  others: readonly ShareEntry[],
  nowMs: number,
): LimiterRecord | null {
  const tokens = cutTokens(rule.params, asked, promisedParts(mine, nowMs) - used);
  const promised = others.reduce((n, e) => n + promisedParts(e, nowMs), 0);
  return creditDirect(rec, rule, Math.max(0, SHARE_PARTS - promised - used), tokens, nowMs);
}

/**
 * The bucket an adopted rate share (`next`, its slice) starts from: the old share's (`from`, `state`) as it was at its
 * end (`endedMs`; now, if it is live), capped at the new burst; and `afterEnd`, the refill since that end of the parts
 * the key's object kept promised to this delegate without a break (`held`: `ShareGrant.held`, at most the old and the
 * new parts), which are its own. The rest of that refill the object gave to others (the direct slice refilled them
 * too): counting it as well made tokens. The caller adds `afterEnd`.
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
  const same = from !== null && from.algorithm === next.algorithm;
  const kept = same && state !== null ? peekState(from, state, Math.min(nowMs, endedMs)).remaining : 0;
  const start = emptyState(next, nowMs);
  const afterEnd = endedMs < nowMs && held > 0 ? refill(rule, held, nowMs - endedMs, nowMs) : 0;
  return { state: kept >= 1 ? refund(next, start, Math.min(kept, capacityOf(next)), nowMs) : start, afterEnd };
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

/** The refill of `parts` of the rate under `params` over the `ms` before `nowMs`, whole tokens (at most a burst). */
export function refill(params: AlgorithmParams, parts: number, ms: number, nowMs: number): number {
  if (parts <= 0 || ms <= 0) return 0;
  const slice = sliceParams(params, parts, SHARE_PARTS);
  return slice === null ? 0 : peekState(slice, emptyState(slice, nowMs - ms), nowMs).remaining;
}
