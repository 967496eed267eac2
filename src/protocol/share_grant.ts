/**
 * Granting shares: the key's object's answer to a delegate's ask (share.ts says what a share is and promises). A
 * holder gets its demand's proportion of the rate (`rateGrant`) or of what is left of the window (`windowGrant`);
 * a retried ask is answered as granted; a share whose key went cold is let go.
 */
import { type AlgorithmState, carryOver, fingerprintOf, leaseTermMs } from "../algorithms/index.ts";
import {
  directDemand,
  EMPTY_BOOK,
  fullState,
  HOT_EXIT_PER_S,
  HOT_HOLD_MS,
  keyCall,
  keyPeek,
  live,
  promisedParts,
  SHARE_HOLDERS_MAX,
  SHARE_PARTS,
  SHARE_TERM_MS,
  type ShareAsk,
  type ShareGrant,
  settleShares,
  shareKindOf,
} from "./share.ts";
import {
  checkRecord,
  isBusy,
  type LimiterRecord,
  type LimiterRule,
  ruleFor,
  type ShareBook,
  type ShareEntry,
} from "./store.ts";
/**
 * Grant (renew, or take back) a holder's share. In order: a retried ask is answered as granted; the units given back
 * are refunded (converted by the algorithm's carry-over when the parameters changed, never dropped); then, while the
 * key is hot, the holder gets its demand's proportion (`rateGrant`, `windowGrant`); when it is not hot any more, or
 * the holder lets go, its share ends (its rate parts stay promised until the term it had ends).
 */
export function shareRecord(
  record: LimiterRecord | null,
  ask: ShareAsk,
  nowMs: number,
): { readonly record: LimiterRecord | null; readonly grant: ShareGrant } {
  const rule = ruleFor(record, ask.rule);
  let rec = withVersion(settleShares(record, nowMs), rule, nowMs);
  const mine = rec?.shares?.entries.find((e) => e.holder === ask.holder);
  if (mine !== undefined && mine.askId === ask.id) return { record: rec, grant: grantOf(mine, rule, rec, nowMs) };
  if (ask.giveBack.length > 0) {
    rec = keyCall(rec, { rule, id: `${ask.id}:back`, costs: [], giveBack: ask.giveBack }, nowMs).record;
  }
  const kind = shareKindOf(rule.params);
  const book = rec?.shares ?? EMPTY_BOOK;
  const others = book.entries.filter((e) => e.holder !== ask.holder && live(e, nowMs));
  const demand = Math.max(0, Math.floor(ask.demand));
  const total = demand + directDemand(rec, nowMs) + others.reduce((sum, e) => sum + e.demand, 0);
  const hot = kind !== "none" && (total * 1000 >= HOT_EXIT_PER_S * SHARE_TERM_MS || isBusy(rec, nowMs));
  const roomy = mine !== undefined || others.length < SHARE_HOLDERS_MAX;
  if (!hot || ask.release === true || !roomy) {
    const none: ShareGrant = {
      atMs: nowMs,
      kind: "none",
      parts: 0,
      units: 0,
      remaining: 0,
      termMs: 0,
      rule,
      hot: hot && !roomy,
    };
    if (mine === undefined || rec === null) return { record: rec, grant: none };
    const ended: ShareEntry = { ...ended0(mine, nowMs), askId: ask.id };
    return { record: withEntry(rec, book, others, ended, hot, nowMs), grant: none };
  }
  const out =
    kind === "rate"
      ? rateGrant(rec, rule, demand, total, others, nowMs)
      : windowGrant(rec, rule, ask, demand, total, nowMs);
  const prev = mine === undefined ? null : ended0(mine, nowMs);
  const entry: ShareEntry = {
    holder: ask.holder,
    parts: out.grant.parts,
    units: out.grant.units,
    atMs: nowMs,
    endsAtMs: nowMs + out.grant.termMs,
    prevParts: prev?.prevParts ?? 0,
    prevEndsAtMs: prev?.prevEndsAtMs ?? 0,
    demand,
    askId: ask.id,
  };
  return { record: withEntry(out.record, out.record.shares ?? book, others, entry, true, nowMs), grant: out.grant };
}

/** An entry's share ended now: what it held stays promised until its term ends. */
function ended0(e: ShareEntry, nowMs: number): ShareEntry {
  return {
    ...e,
    parts: 0,
    units: 0,
    endsAtMs: nowMs,
    prevParts: promisedParts(e, nowMs),
    prevEndsAtMs: Math.max(e.endsAtMs, e.prevEndsAtMs),
    demand: 0,
  };
}

function withEntry(
  rec: LimiterRecord,
  book: ShareBook,
  others: readonly ShareEntry[],
  entry: ShareEntry,
  hot: boolean,
  nowMs: number,
): LimiterRecord {
  const entries = live(entry, nowMs) ? [...others, entry] : [...others];
  const hotUntilMs = hot ? Math.max(book.hotUntilMs, nowMs + HOT_HOLD_MS) : book.hotUntilMs;
  return { ...rec, shares: { ...book, entries, hotUntilMs } };
}

/** The grant an entry records (a retried ask's answer). */
function grantOf(e: ShareEntry, rule: LimiterRule, rec: LimiterRecord | null, nowMs: number): ShareGrant {
  const kind = shareKindOf(rule.params);
  const granted = e.parts > 0 || e.units > 0 || (kind === "rate" && e.endsAtMs > e.atMs);
  const hot = nowMs < (rec?.shares?.hotUntilMs ?? 0);
  return {
    atMs: e.atMs,
    kind: granted ? kind : "none",
    parts: e.parts,
    units: e.units,
    remaining: kind === "window" && rec !== null ? keyPeek(rec, rule, nowMs).remaining : 0,
    termMs: Math.max(0, e.endsAtMs - e.atMs),
    rule,
    hot,
  };
}

/**
 * A rate share: the holder's demand's proportion of `SHARE_PARTS` (at least 1 part when it has demand), within what
 * the other live shares leave. Cut short by them: a quarter term, so it asks again sooner. The first rate share
 * moves the record's state into the direct slice (`ShareBook.direct`, converted lazily by the next direct call).
 */
function rateGrant(
  rec: LimiterRecord | null,
  rule: LimiterRule,
  demand: number,
  total: number,
  others: readonly ShareEntry[],
  nowMs: number,
): { readonly record: LimiterRecord; readonly grant: ShareGrant } {
  const base = rec ?? newRecord(rule, fullState(rule.params, nowMs));
  const book = base.shares ?? EMPTY_BOOK;
  const direct = book.direct ?? { parts: SHARE_PARTS, state: base.state };
  let promised = 0;
  for (const e of others) promised += promisedParts(e, nowMs);
  const room = Math.max(0, SHARE_PARTS - promised);
  const fair = total === 0 ? 0 : Math.max(demand > 0 ? 1 : 0, Math.floor((SHARE_PARTS * demand) / total));
  const parts = Math.min(fair, room);
  const termMs = parts < fair ? Math.ceil(SHARE_TERM_MS / 4) : SHARE_TERM_MS;
  const grant: ShareGrant = { atMs: nowMs, kind: "rate", parts, units: 0, remaining: 0, termMs, rule, hot: true };
  return { record: { ...base, shares: { ...book, direct } }, grant };
}

/**
 * A window share: units of the current window, charged now as that many requests; as many as asked while the window
 * has room for every holder's demand, else the holder's demand's proportion of what is left (rounded up). The term is
 * cut at the window's end.
 */
function windowGrant(
  rec: LimiterRecord | null,
  rule: LimiterRule,
  ask: ShareAsk,
  demand: number,
  total: number,
  nowMs: number,
): { readonly record: LimiterRecord; readonly grant: ShareGrant } {
  const available = keyPeek(rec, rule, nowMs).remaining;
  const want = Math.max(0, Math.floor(ask.units));
  const fair = total <= available || total === 0 ? want : Math.ceil((available * demand) / total);
  let units = Math.min(want, Math.max(demand > 0 ? 1 : 0, fair), available);
  let current = rec;
  if (units >= 1) {
    const out = checkRecord(current, { rule, cost: units }, nowMs);
    if (out.result.ok && out.result.decision.allowed) current = out.record;
    else units = 0;
  }
  const termMs = Math.max(1, leaseTermMs(rule.params, nowMs, SHARE_TERM_MS));
  const record = current ?? newRecord(rule, fullState(rule.params, nowMs));
  const remaining = available - units;
  return { record, grant: { atMs: nowMs, kind: "window", parts: 0, units, remaining, termMs, rule, hot: true } };
}

function newRecord(rule: LimiterRule, state: AlgorithmState): LimiterRecord {
  const version = rule.version ?? 0;
  return {
    v: 1,
    params: rule.params,
    fingerprint: fingerprintOf(rule.params),
    state,
    ...(version === 0 ? {} : { version }),
  };
}

/**
 * The record under a newer rules version an ask brought (its state converted by the carry-over), so the object obeys
 * the newest version it has seen even when the ask grants nothing. While rate shares are out, only the record's own
 * parameters move: the direct slice's state converts at its next call.
 */
function withVersion(rec: LimiterRecord | null, rule: LimiterRule, nowMs: number): LimiterRecord | null {
  if (rec === null || (rule.version ?? 0) <= (rec.version ?? 0)) return rec;
  const fingerprint = fingerprintOf(rule.params);
  const state =
    fingerprint === rec.fingerprint
      ? rec.state
      : (carryOver(rec.params, rule.params, rec.state, nowMs) ?? emptyOrFull(rule, rec, nowMs));
  return { ...rec, params: rule.params, fingerprint, state, version: rule.version ?? 0 };
}

/** A state for a record whose algorithm changed (the carry-over starts it fresh). */
function emptyOrFull(rule: LimiterRule, _rec: LimiterRecord, nowMs: number): AlgorithmState {
  return fullState(rule.params, nowMs);
}
