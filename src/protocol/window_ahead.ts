/** Window shares granted ahead (object side): units of the next window wait in the book, charged when it starts. */
import { capacityOf, decide, leasePolicy, leaseTermMs } from "../algorithms/index.ts";
import type { AheadUnits, LeaseReturn, LimiterRecord, LimiterRule, ShareBook } from "./store.ts";
import { AHEAD_LEAD_MS } from "./tunables.ts";

/**
 * The units of the next window for a share asked at `nowMs` for `want`, whose term the window's end cuts to `termMs`
 * (at most `AHEAD_LEAD_MS`; else `null`): within what the next window's limit leaves; `book` with them charged.
 */
export function aheadGrant(
  book: ShareBook,
  rule: LimiterRule,
  want: number,
  termMs: number,
  termMaxMs: number,
  nowMs: number,
): { readonly ahead: AheadUnits; readonly book: ShareBook } | null {
  const policy = leasePolicy(rule.params.algorithm);
  if (policy.kind !== "window" || want < 1 || termMs >= termMaxMs || termMs > AHEAD_LEAD_MS) return null;
  const atMs = nowMs + termMs;
  const window = policy.windowOf(rule.params, atMs);
  if (window !== policy.windowOf(rule.params, nowMs) + 1) return null;
  const charged = book.ahead?.window === window ? book.ahead.units : 0;
  const units = Math.min(want, policy.limit(rule.params) - charged);
  if (units < 1) return null;
  const aheadTermMs = leaseTermMs(rule.params, atMs, termMaxMs);
  return { ahead: { units, atMs, termMs: aheadTermMs }, book: { ...book, ahead: { window, units: charged + units } } };
}

/**
 * The record with the units ahead charged once their window started (at most its limit, which a newer version may
 * have lowered), or dropped once it passed; the very same record when there is nothing to do.
 */
export function applyAhead(record: LimiterRecord, nowMs: number): LimiterRecord {
  const ahead = record.shares?.ahead;
  const policy = leasePolicy(record.params.algorithm);
  if (ahead === undefined || policy.kind !== "window") return record;
  const window = policy.windowOf(record.params, nowMs);
  if (window < ahead.window) return record;
  const { ahead: _ahead, ...book } = record.shares!;
  if (window > ahead.window) return { ...record, shares: book };
  let state = record.state;
  let cost = Math.min(ahead.units, capacityOf(record.params));
  while (cost >= 1) {
    const out = decide(record.params, state, cost, nowMs);
    if (out.ok && out.decision.allowed) state = out.state;
    if (!out.ok || out.decision.allowed) break;
    cost = out.decision.remaining;
  }
  return { ...record, state, shares: book };
}

/** Units given back that were granted ahead of a window not started: off the book; the rest, the record's refund. */
export function takeAheadBack(record: LimiterRecord | null, giveBack: readonly LeaseReturn[]) {
  const ahead = record?.shares?.ahead;
  const policy = record === null ? null : leasePolicy(record.params.algorithm);
  if (record === null || ahead === undefined || policy?.kind !== "window") return { record, rest: giveBack };
  let units = ahead.units;
  const rest: LeaseReturn[] = [];
  for (const back of giveBack) {
    const valid = Number.isSafeInteger(back.units) && back.units >= 1;
    if (valid && policy.windowOf(record.params, back.atMs) === ahead.window) units -= Math.min(units, back.units);
    else rest.push(back);
  }
  if (units === ahead.units) return { record, rest };
  const { ahead: _ahead, ...book } = record.shares!;
  const shares: ShareBook = units > 0 ? { ...book, ahead: { window: ahead.window, units } } : book;
  return { record: { ...record, shares }, rest };
}
