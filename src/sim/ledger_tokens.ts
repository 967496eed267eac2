/**
 * Tokens where the rate ledger (rate_ledger.ts) counts them, to a fraction of a token (bookkeeping of a simulation,
 * not algorithm state): a bucket's level, a delegate's rate share (less its sub-leases' units reserved in it: the
 * ledger counts lent units out from the lending), the key's object's direct slice.
 */
import { type AlgorithmParams, capacityOf, carryOver, levelAt } from "../algorithms/index.ts";
import type { DelegateRecord } from "../protocol/delegate.ts";
import { directParts, honestSlice, settleShares } from "../protocol/share.ts";
import { type LimiterRecord, type LimiterRule, ruleFor } from "../protocol/store.ts";
import { delegateSlice } from "../protocol/sublease.ts";

/** A bucket's level now, within its capacity. */
export function bucketLevel(params: AlgorithmParams, state: unknown, nowMs: number): number {
  return Math.max(0, Math.min(capacityOf(params), levelAt(params, state as never, nowMs)));
}

/** Tokens a rate share holds now (0: none): its bucket's, plus the units taken out of it, less the units reserved. */
export function shareTokens(share: DelegateRecord["share"], nowMs: number): number {
  if (share === null || share.kind !== "rate" || share.state === null) return 0;
  const slice = delegateSlice(share.rule.params, share.parts);
  if (slice === null) return 0;
  const reserved = (share.reserved ?? []).reduce((n, r) => n + r.units, 0);
  return bucketLevel(slice, share.state, nowMs) + (share.takenOut ?? 0) - reserved;
}

/** Tokens in the key's object's direct slice now (the whole key's bucket before any share). */
export function directTokens(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): number {
  const rec = settleShares(record, nowMs);
  if (rec === null) return capacityOf(rule.params);
  const direct = rec.shares?.direct;
  if (direct === undefined) return bucketLevel(rec.params, rec.state, nowMs);
  const to = honestSlice(ruleFor(rec, rule).params, directParts(rec.shares!, nowMs));
  const from = honestSlice(rec.params, direct.parts);
  if (to === null || from === null || direct.state === null) return 0;
  return bucketLevel(to, carryOver(from, to, direct.state, nowMs), nowMs);
}
