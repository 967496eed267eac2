/** Granting shares (share.ts says what one is and promises): the key's object's answer to a delegate's ask. */
import { carryOver, decide, fingerprintOf, leaseTermMs } from "../algorithms/index.ts";
import { REGIONS } from "../request/region.ts";
import { noteLow } from "./late_refund.ts";
import { uses } from "./mechanisms.ts";
import {
  directDemand,
  directParts,
  directStateIn,
  EMPTY_BOOK,
  emptyState,
  honestSlice,
  keyCall,
  keyPeek,
  leastParts,
  live,
  partsUntilMs,
  promisedParts,
  type ShareAsk,
  type ShareGrant,
  settleShares,
  shareKindOf,
} from "./share.ts";
import {
  chargeUnits,
  fullState,
  isBusy,
  type LimiterRecord,
  type LimiterRule,
  newRecord,
  peekState,
  ruleFor,
  type ShareEntry,
} from "./store.ts";
import { sameWindow } from "./sublease.ts";
import {
  HOT_EXIT_PER_S,
  HOT_FROM_PER_S,
  HOT_HOLD_MS,
  SETTLED_SLACK_PARTS,
  SHARE_DELEGATES_MAX,
  SHARE_PARTS,
  SHARE_TERM_MAX_MS,
  SHARE_TERM_MS,
  UNSETTLED_TERM_RTTS,
} from "./tunables.ts";
import { aheadGrant, takeAheadBack } from "./window_ahead.ts";

/** A grant's fields when it grants no share. */
const NO_SHARE = { kind: "none", parts: 0, units: 0, remaining: 0, termMs: 0 } as const;

/** Grant, renew or end a delegate's share: its demand's proportion while hot; a retry answered as granted. */
export function shareRecord(record: LimiterRecord | null, ask: ShareAsk, nowMs: number): Granted<LimiterRecord | null> {
  const rule = ruleFor(record, ask.rule);
  let rec = withVersion(settleShares(record, nowMs), rule, nowMs);
  const mine = rec?.shares?.entries.find((e) => e.holder === ask.holder);
  // A retry or a copy (delegate_run.ts `timed`) of the ask its entry answered: that grant; else applied (production.md).
  if (mine !== undefined && mine.askId === ask.id) return { record: rec, grant: grantOf(mine, rule, rec, nowMs) };
  // Units of a window not started yet come off its grants ahead; the rest is refunded (window_ahead.ts).
  const back = takeAheadBack(rec, ask.giveBack);
  rec = back.record;
  if (back.rest.length > 0) {
    rec = keyCall(rec, { rule, id: `${ask.id}:back`, costs: [], giveBack: back.rest }, nowMs).record;
  }
  // Overtaken by a later ask of its delegate (which gave up on it): its units given back count, nothing else.
  if (mine !== undefined && (ask.seq ?? Infinity) < (mine.seq ?? 0)) {
    return { record: rec, grant: { atMs: nowMs, ...NO_SHARE, rule, hot: nowMs < (rec?.shares?.hotUntilMs ?? 0) } };
  }
  const kind = shareKindOf(rule.params);
  const others = (rec?.shares?.entries ?? []).filter((e) => e.holder !== ask.holder && live(e, nowMs));
  const demand = Math.max(0, Math.floor(ask.demand));
  const total = demand + directDemand(rec, nowMs) + others.reduce((sum, e) => sum + e.demand, 0);
  const hot = kind !== "none" && (total * 1000 >= HOT_EXIT_PER_S * SHARE_TERM_MS || isBusy(rec, nowMs));
  const roomy = mine !== undefined || others.length < SHARE_DELEGATES_MAX;
  // The parts the delegate's share still uses (`inUse`) stay promised after its ask, as its previous ones.
  const prev = mine === undefined ? null : inUse(mine, ask, nowMs);
  if (!hot || ask.release === true || !roomy) {
    const none: ShareGrant = { atMs: nowMs, ...NO_SHARE, rule, hot: hot && !roomy };
    if (mine === undefined || prev === null || rec === null) return { record: rec, grant: none };
    // Its share ends now (no tokens move with it).
    const { tokens: _tokens, ahead: _ahead, ...rest } = mine;
    const ended = { ...rest, parts: 0, units: 0, endsAtMs: nowMs, prevParts: prev.parts, prevEndsAtMs: prev.untilMs };
    const entry: ShareEntry = { ...ended, demand: 0, askId: ask.id, ...seqOf(ask) };
    return { record: withEntry(rec, others, entry, hot, nowMs), grant: none };
  }
  const g: Grant = { rec, rule, ask, demand, total, at: nowMs };
  let out = kind === "rate" ? rateGrant(g, others, prev?.parts ?? 0, mine) : windowGrant(g);
  out = { ...out, grant: withFreedAt(out.grant, prev, nowMs) };
  const ahead = out.grant.ahead;
  const { parts, units, tokens, termMs } = out.grant;
  const endsAtMs = nowMs + termMs + (ahead?.termMs ?? 0);
  const term = { atMs: nowMs, endsAtMs, prevParts: prev?.parts ?? 0, prevEndsAtMs: prev?.untilMs ?? 0, demand };
  const extra = { ...(tokens === undefined ? {} : { tokens }), ...(ahead === undefined ? {} : { ahead }) };
  const entry: ShareEntry = { holder: ask.holder, parts, units, ...term, ...extra, askId: ask.id, ...seqOf(ask) };
  return { record: withEntry(out.record, others, entry, true, nowMs), grant: out.grant };
}

/** A rate grant of fewer parts than `prev`: when the rest stop being promised (the tokens its slice sheds come back). */
export function withFreedAt(grant: ShareGrant, prev: InUse | null, nowMs: number): ShareGrant {
  if (grant.kind !== "rate" || prev === null || grant.parts >= prev.parts || !uses("shedBack")) return grant;
  return { ...grant, freedAtMs: Math.max(nowMs, prev.untilMs) };
}

/** Parts of a share its delegate still uses, until when (object clock, ms). */
type InUse = { readonly parts: number; readonly untilMs: number };

/**
 * Parts of an entry still in use after its delegate sent `ask`, and until when: its last grant's if the ask is
 * `holding` it, else all it holds or held (`promisedParts`); at most `keep`; until its term's end or `oldForMs`.
 */
function inUse(e: ShareEntry, ask: ShareAsk, nowMs: number): InUse {
  const adopted = ask.holding !== undefined && ask.holding === e.askId;
  const parts = adopted ? (nowMs < partsUntilMs(e) ? e.parts : 0) : promisedParts(e, nowMs);
  const heldUntilMs = adopted ? e.endsAtMs : Math.max(e.endsAtMs, e.prevEndsAtMs);
  const untilMs = given(ask.oldForMs) ? Math.min(heldUntilMs, nowMs + ask.oldForMs) : heldUntilMs;
  return { parts: given(ask.keep) ? Math.min(parts, ask.keep) : parts, untilMs };
}

/** Whether an ask's optional figure is usable: said, a safe integer, not negative. */
const given = (n: number | undefined): n is number => n !== undefined && Number.isSafeInteger(n) && n >= 0;

function withEntry(rec: LimiterRecord, others: readonly ShareEntry[], entry: ShareEntry, hot: boolean, nowMs: number) {
  const book = rec.shares ?? EMPTY_BOOK;
  const hotUntilMs = hot ? Math.max(book.hotUntilMs, nowMs + HOT_HOLD_MS) : book.hotUntilMs;
  return { ...rec, shares: { ...book, entries: live(entry, nowMs) ? [...others, entry] : [...others], hotUntilMs } };
}

/** An entry's `seq`: its ask's, if it said one. */
const seqOf = (ask: ShareAsk): { seq?: number } =>
  ask.seq !== undefined && Number.isSafeInteger(ask.seq) ? { seq: ask.seq } : {};

/** The grant an entry records (a retried ask's answer). */
function grantOf(e: ShareEntry, rule: LimiterRule, rec: LimiterRecord | null, nowMs: number): ShareGrant {
  const kind = shareKindOf(rule.params);
  const granted = e.parts > 0 || e.units > 0 || (kind === "rate" && e.endsAtMs > e.atMs);
  const { atMs, parts, tokens, units, ahead } = e;
  const remaining = kind === "window" && rec !== null ? keyPeek(rec, rule, nowMs).remaining : 0;
  const termMs = Math.max(0, e.endsAtMs - atMs - (ahead?.termMs ?? 0));
  const sized = { parts, ...(tokens === undefined ? {} : { tokens }), units, remaining, termMs };
  const hot = nowMs < (rec?.shares?.hotUntilMs ?? 0);
  return { atMs, kind: granted ? kind : "none", ...sized, ...(ahead === undefined ? {} : { ahead }), rule, hot };
}

/** What a grant is decided from (`shareRecord`): the settled record, its rule, the ask, its demand, all, `at` now. */
type Grant = { rec: LimiterRecord | null; rule: LimiterRule; ask: ShareAsk; demand: number; total: number; at: number };
type Granted<Rec = LimiterRecord> = { readonly record: Rec; readonly grant: ShareGrant };

/**
 * A rate share: its demand's proportion of `SHARE_PARTS` (of the rate per term with spare) within what the other live
 * shares leave; parts beyond those it `held` move out of the direct slice with their tokens (`transfer`, never made).
 */
function rateGrant(g: Grant, others: readonly ShareEntry[], held: number, mine: ShareEntry | undefined): Granted {
  const { rec, rule, ask, demand, total, at: nowMs } = g;
  // Spare: a slow rule's rate per term while all demands with headroom are below it (docs/production.md, "Tuning").
  const params = rule.params;
  const rate = "rate" in params && uses("spareHome") ? (params.rate.tokens * SHARE_TERM_MS) / params.rate.perMs : null;
  let needs = withHeadroom(demand) + withHeadroom(directDemand(rec, nowMs));
  for (const e of others) needs += withHeadroom(e.demand);
  const perTerm = rate !== null && rate * 1000 < HOT_FROM_PER_S * SHARE_TERM_MS && needs < rate ? rate : null;
  const prevTermMs = mine !== undefined && mine.parts > 0 ? Math.max(0, mine.endsAtMs - mine.atMs) : 0;
  const told = ask.holding !== undefined && ask.holding === mine?.askId; // `held`: to the entry's grant's holder only
  const base = rec ?? newRecord(rule, fullState(rule.params, nowMs));
  const book = base.shares ?? EMPTY_BOOK;
  const room = directParts({ ...book, entries: others }, nowMs); // the parts the other live shares leave
  // Rounded up, so the parts add up to all of them; `room` keeps them within `SHARE_PARTS`.
  const of = perTerm === null ? demand / total : withHeadroom(demand) / perTerm;
  const fair = total === 0 ? 0 : Math.min(SHARE_PARTS, Math.ceil(SHARE_PARTS * of));
  // A rule slower than `HOT_FROM_PER_S`: hot by its traffic only.
  const slow = "rate" in params && params.rate.tokens * 1000 < HOT_FROM_PER_S * params.rate.perMs;
  // A fast rule's first round of asks (no holder renewed yet), each demand one batch: a region's equal part.
  const unrenewed = others.every((e) => e.prevEndsAtMs === 0);
  const first = uses("equalFirst") && mine === undefined && demand > 0 && !slow && unrenewed;
  const want = first ? Math.ceil(SHARE_PARTS / REGIONS.length) : fair;
  const parts = fedParts(Math.min(want, room), room, leastParts(params));
  // A settled share whose demand is rising fast renews each term, not doubled: its parts follow the key's growth.
  const lastTermMs = rising(mine?.demand ?? 0, demand) ? 0 : prevTermMs;
  const termMs = rateTermMs(parts, fair, held, lastTermMs, uses("rttTerms") ? ask.rttMs : undefined, slow);
  const moved = transfer(base, rule, Math.max(0, room - held), Math.max(0, room - Math.max(parts, held)), nowMs);
  const tokens = moved.tokens > 0 ? { tokens: moved.tokens } : {};
  const sizes = { parts, ...tokens, ...(held > 0 && told ? { held } : {}), units: 0, remaining: 0 };
  const spare = perTerm === null ? {} : { spare: true };
  const grant: ShareGrant = { atMs: nowMs, kind: "rate", ...sizes, termMs, rule, hot: true, ...spare };
  const lows = moved.lows == null ? {} : { lows: moved.lows };
  return { record: { ...base, ...lows, shares: { ...book, direct: moved.direct } }, grant };
}

/** A demand up by more than a quarter and two standard deviations of a Poisson count since the share's last grant. */
export const rising = (before: number, now: number): boolean =>
  now - before > Math.max(Math.floor(before / 4), 2 * Math.ceil(Math.sqrt(before)));

/** A demand per term with two standard deviations of a Poisson count to spare. */
const withHeadroom = (d: number): number => (d <= 0 ? 0 : d + 2 * Math.ceil(Math.sqrt(d)) + 1);

/**
 * A rate share's parts: none, or at least `least`: a rate that cannot feed every delegate feeds as many as it can,
 * first come; the direct slice is never left fewer than `least` (the delegate takes those).
 */
export function fedParts(parts: number, room: number, least: number): number {
  if (parts <= 0) return 0;
  const fed = parts >= least ? parts : room >= least ? least : 0;
  return fed > 0 && room - fed < least ? room : fed;
}

/**
 * A rate share's term, ms (why: docs/production.md, "Shares"). Unsettled (new, short of `fair` by over an eighth, or
 * moved by over a quarter; never within `SETTLED_SLACK_PARTS`): half a term, a `slow` rule's a quarter (a whole one if
 * it grew, not short), at least `UNSETTLED_TERM_RTTS` round trips. Settled: the last doubled, to `SHARE_TERM_MAX_MS`.
 */
export function rateTermMs(parts: number, fair: number, held: number, lastMs: number, rttMs?: number, slow = false) {
  const rtts = rttMs !== undefined && Number.isSafeInteger(rttMs) && rttMs > 0 ? UNSETTLED_TERM_RTTS * rttMs : 0;
  const unsettled = Math.max(Math.ceil(SHARE_TERM_MS / (slow ? 4 : 2)), Math.min(SHARE_TERM_MS, rtts));
  const short = fair - parts > Math.max(SETTLED_SLACK_PARTS, Math.floor(fair / 8));
  if (short) return unsettled;
  const moved = Math.abs(parts - held) > Math.max(SETTLED_SLACK_PARTS, Math.floor(held / 4));
  if (held <= 0 || (moved && !(slow && parts > held))) return unsettled;
  if (moved) return SHARE_TERM_MS;
  return Math.min(SHARE_TERM_MAX_MS, Math.max(SHARE_TERM_MS, 2 * lastMs));
}

/** The direct slice going from `before` parts to `after` (no more), and the tokens the parts given up take along. */
function transfer(rec: LimiterRecord, rule: LimiterRule, before: number, after: number, nowMs: number) {
  const direct = rec.shares?.direct ?? { parts: SHARE_PARTS, state: rec.state };
  const mid = honestSlice(rule.params, before);
  const to = honestSlice(rule.params, after);
  if (mid === null) return { direct: { parts: after, state: to === null ? null : emptyState(to, nowMs) }, tokens: 0 };
  let state = directStateIn(rec.params, direct, mid, nowMs);
  // Tokens leaving the direct slice are a charge to it: its deficit before, noted for later refunds (late_refund.ts).
  const lows = before > after && uses("shedBack") ? noteLow(rec.lows, mid, state, nowMs, false) : null;
  let tokens = Math.floor((peekState(mid, state, nowMs).remaining * (before - after)) / before);
  if (tokens >= 1) {
    const out = decide(mid, state, tokens, nowMs);
    if (out.ok && out.decision.allowed) state = out.state;
    else tokens = 0;
  }
  if (to === null) return { direct: { parts: 0, state: null }, tokens, lows };
  return { direct: { parts: after, state: carryOver(mid, to, state, nowMs) ?? emptyState(to, nowMs) }, tokens, lows };
}

/**
 * A window share: units of the current window, charged now, its term cut at the window's end: as asked while the window
 * has room for every demand, else its demand's proportion of what is left and `heldByOthers` (all left if no more).
 */
function windowGrant({ rec, rule, ask, demand, total, at: nowMs }: Grant): Granted {
  const available = keyPeek(rec, rule, nowMs).remaining;
  const want = Math.max(0, Math.floor(ask.units));
  const termMs = Math.max(1, leaseTermMs(rule.params, nowMs, SHARE_TERM_MS));
  // What is left no more than this one ask: all of it, first come (a proportion would leave every delegate dry).
  const whole = demand > 0 && available * SHARE_TERM_MS <= want * termMs;
  const splitHeld = uses("scarceWindowSplit");
  const pool = available + (splitHeld ? heldByOthers(rec, rule, ask.holder, nowMs) : 0);
  // Never more than it asks for what is left of its term: more would be stranded with it at the window's end.
  const useBy = Math.ceil((want * termMs) / SHARE_TERM_MS);
  const split = Math.min(splitHeld ? useBy : want, Math.ceil((pool * demand) / total));
  const fair = total <= available || total === 0 || whole ? want : split;
  const out = chargeUnits(rec, rule, Math.min(want, Math.max(demand > 0 ? 1 : 0, fair), available), nowMs);
  const { units } = out;
  const remaining = available - units;
  let record = out.record ?? newRecord(rule, fullState(rule.params, nowMs));
  // Shortly before the window's end, units of the next window too (window_ahead.ts).
  const next = uses("windowAhead")
    ? aheadGrant(record.shares ?? EMPTY_BOOK, rule, want, termMs, SHARE_TERM_MS, nowMs)
    : null;
  if (next !== null) record = { ...record, shares: next.book };
  const ahead = next === null ? {} : { ahead: next.ahead };
  return {
    record,
    grant: { atMs: nowMs, kind: "window", parts: 0, units, remaining, termMs, ...ahead, rule, hot: true },
  };
}

/** What the other shares of this window still hold by their demand, to split by (docs/production.md, "Shares"). */
function heldByOthers(rec: LimiterRecord | null, rule: LimiterRule, holder: string, nowMs: number): number {
  let held = 0;
  for (const e of rec?.shares?.entries ?? []) {
    if (e.holder === holder || e.units < 1 || nowMs >= e.endsAtMs || !sameWindow(rule.params, e.atMs, nowMs)) continue;
    const used = Math.ceil((e.demand * Math.max(0, nowMs - e.atMs)) / SHARE_TERM_MS);
    held += Math.max(0, e.units - used);
  }
  return held;
}

/** A newer rules version an ask brought, obeyed even when it grants nothing (the direct slice: at its next call). */
function withVersion(rec: LimiterRecord | null, rule: LimiterRule, nowMs: number): LimiterRecord | null {
  if (rec === null || (rule.version ?? 0) <= (rec.version ?? 0)) return rec;
  const state =
    fingerprintOf(rule.params) === rec.fingerprint
      ? rec.state
      : (carryOver(rec.params, rule.params, rec.state, nowMs) ?? fullState(rule.params, nowMs));
  return { ...rec, ...newRecord(rule, state) };
}
