/** A hot key's shares, the key's object's side (delegate.ts: the delegate's; docs/production.md, "Shares"). Pure. */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  carryOver,
  decide,
  freshAtMs,
  leasePolicy,
  sliceParams,
} from "../algorithms/index.ts";
import {
  type AheadUnits,
  type CallInput,
  type CallResult,
  callRecord,
  type DirectSlice,
  fullState,
  isBusy,
  type LeaseReturn,
  type LimiterRecord,
  type LimiterRule,
  newRecord,
  type PeekResult,
  peekRecord,
  peekState,
  recordFreshAtMs,
  refusedCall,
  ruleFor,
  type ShareBook,
  type ShareEntry,
  type Step,
} from "./store.ts";
import { HOT_EARLY_MS, LAPSE_GRACE_MS, RATE_LEASE_TERM_MS, SHARE_PARTS, SHARE_TERM_MS } from "./tunables.ts";
import { applyAhead } from "./window_ahead.ts";

/** What a key's shares are made of: parts of the rate, units of a window, or nothing (no shares). */
export type ShareKind = "rate" | "window" | "none";

export const shareKindOf = (params: AlgorithmParams): ShareKind => leasePolicy(params.algorithm).kind;

/** A delegate asks for (or renews, or lets go of) its share. */
export interface ShareAsk {
  readonly rule: LimiterRule;
  /** The delegate (its id, stored and sent as `holder`): its region and shard (`weur.0`), never a key. */
  readonly holder: string;
  /** Unique per ask, the same across its retries: a retried ask is answered again, not granted twice. */
  readonly id: string;
  /** The delegate's count of its asks, rising (absent: an older delegate). One below its entry's was overtaken. */
  readonly seq?: number;
  /** Cost the delegate was asked for over its last term (admitted or not): its demand. */
  readonly demand: number;
  /** Window shares: the units the delegate wants for the next term; 0 lets its share go. Rate shares: ignored. */
  readonly units: number;
  /** Units given back: a window share's unused units, and admissions refunded that its share no longer holds. */
  readonly giveBack: readonly LeaseReturn[];
  /** The delegate lets its share go (its key is cold, or it is shutting down). */
  readonly release?: boolean;
  /** Rate shares: the parts the delegate still uses until it adopts the answer (cut; 0: holds none). Absent: all. */
  readonly keep?: number;
  /** Rate shares: the ask whose grant the delegate uses now (older shares' parts are free). Absent: not known. */
  readonly holding?: string;
  /** Rate shares: ms it still uses its share after sending this, from receipt (any clocks). Absent: its term. */
  readonly oldForMs?: number;
  /** Rate shares: the round trip of the renewal that answered the share held, ms (`rateTermMs`). Absent: unknown. */
  readonly rttMs?: number;
}

/** What the key's object granted. */
export interface ShareGrant {
  /** The object's clock at the grant, ms (a window share's refunds name it). */
  readonly atMs: number;
  /** `none`: no share (the key is cold, or no room): the delegate passes its batches through to the key's object. */
  readonly kind: ShareKind;
  /** Rate share: parts of `SHARE_PARTS` (0: none now; ask again at the term's end). */
  readonly parts: number;
  /** Rate share: tokens moved out of the direct slice to the delegate (capped at its burst there; lost, gone). */
  readonly tokens?: number;
  /** Rate share: parts the key's object kept promised to the delegate without a break up to this grant. Absent: 0. */
  readonly held?: number;
  /** Rate share of fewer parts than the delegate held: when the rest stop being promised to it (this clock). */
  readonly freedAtMs?: number;
  /** Window share: units charged for the delegate at `atMs`. */
  readonly units: number;
  /** Window share: units left in the window after this grant (0: the window is spent until it ends). */
  readonly remaining: number;
  /** Window share near its window's end: units of the next window (window_ahead.ts). Absent: none. */
  readonly ahead?: AheadUnits;
  /** How long the delegate may use it, ms, counted from when it *sent* the ask. */
  readonly termMs: number;
  /** The rule the share is under: the newest rules version the object has seen. */
  readonly rule: LimiterRule;
  /** Whether the key is still hot (callers stay with their delegate). */
  readonly hot: boolean;
  /** Rate share: the key has spare in its direct slice (share_grant.ts `rateGrant`). Absent: no spare. */
  readonly spare?: boolean;
}

export const EMPTY_BOOK: ShareBook = { entries: [], hotUntilMs: 0 };

/** Until when an entry's parts stay promised: its end, `LAPSE_GRACE_MS` more for a rate share's (share_tokens.ts). */
export const partsUntilMs = (e: ShareEntry): number => (e.parts > 0 ? e.endsAtMs + LAPSE_GRACE_MS : e.endsAtMs);

/** Parts an entry still holds at `nowMs`: its own, or its previous ones while the delegate may still be using them. */
export function promisedParts(e: ShareEntry, nowMs: number): number {
  return Math.max(nowMs < partsUntilMs(e) ? e.parts : 0, nowMs < e.prevEndsAtMs ? e.prevParts : 0);
}

export const live = (e: ShareEntry, nowMs: number): boolean => nowMs < partsUntilMs(e) || nowMs < e.prevEndsAtMs;

/** When the book's promises end (or ended), each entry's own parts' and previous parts'. */
const endsOf = (book: ShareBook): number[] => book.entries.flatMap((e) => [partsUntilMs(e), e.prevEndsAtMs]);

/** The parts of the rate no live share holds: the direct calls' slice. */
export function directParts(book: ShareBook, nowMs: number): number {
  return Math.max(0, SHARE_PARTS - book.entries.reduce((promised, e) => promised + promisedParts(e, nowMs), 0));
}

/** An empty state under `params`: a bucket with nothing in it, refilling from `nowMs`. */
export function emptyState(params: AlgorithmParams, nowMs: number): AlgorithmState {
  const out = decide(params, null, capacityOf(params), nowMs);
  if (!out.ok) throw new Error("a fresh key admits its capacity");
  return out.state;
}

/** The fewest parts whose slice holds a whole unit of burst: a smaller one would round it up to 1, never had. */
export function leastParts(params: AlgorithmParams): number {
  const burst = "burst" in params ? params.burst : 0;
  return burst >= 1 ? Math.ceil(SHARE_PARTS / burst) : SHARE_PARTS;
}

/** Every rate slice of a key (direct or a delegate's): `null` below `leastParts`, so bursts never add up to more. */
export function honestSlice(params: AlgorithmParams, parts: number): AlgorithmParams | null {
  if (parts <= 0 || parts < leastParts(params)) return null;
  return sliceParams(params, Math.min(parts, SHARE_PARTS), SHARE_PARTS);
}

/** The direct slice's state carried over to `to` (an empty bucket where it has none). */
export function directStateIn(recParams: AlgorithmParams, direct: DirectSlice, to: AlgorithmParams, nowMs: number) {
  const from = honestSlice(recParams, direct.parts);
  if (from === null || direct.state === null) return emptyState(to, nowMs);
  return carryOver(from, to, direct.state, nowMs) ?? emptyState(to, nowMs);
}

/** The record at `nowMs`: ended shares and a bare book dropped; no rate share live, the direct slice folded back. */
export function settleShares(record: LimiterRecord | null, nowMs: number): LimiterRecord | null {
  if (record === null || record.shares === undefined) return record;
  // Units granted ahead of a window that has now started go into the state first (window_ahead.ts).
  const applied = applyAhead(record, nowMs);
  const book = applied.shares!;
  const entries = book.entries.filter((e) => live(e, nowMs));
  let rec: LimiterRecord = applied;
  let direct = book.direct;
  const parts = directParts(book, nowMs); // an ended entry promises nothing
  // Parts a promise gave back since the direct slice's last write refill there from its end on (the latest: its parts
  // were the book's at that write, every end since is after it; never before a grant, which wrote it).
  const ends = endsOf(book).filter((t) => t > 0 && t <= nowMs);
  const backAtMs = ends.length === 0 ? nowMs : Math.min(nowMs, Math.max(...ends, ...book.entries.map((e) => e.atMs)));
  if (direct !== undefined && (parts === SHARE_PARTS || shareKindOf(rec.params) !== "rate")) {
    // No rate share live: the direct slice folds back into the record's own state.
    rec = { ...rec, state: directStateIn(rec.params, direct, rec.params, backAtMs) };
    direct = undefined;
  } else if (direct !== undefined && ends.length > 0 && parts > direct.parts) {
    const to = honestSlice(rec.params, parts);
    direct = { parts, state: to === null ? null : directStateIn(rec.params, direct, to, backAtMs) };
  }
  if (entries.length === 0 && direct === undefined && book.ahead === undefined && nowMs >= book.hotUntilMs) {
    const { shares: _shares, ...rest } = rec;
    return rest;
  }
  if (entries.length === book.entries.length && direct === book.direct && rec === applied) return applied;
  const { direct: _direct, ...rest } = book;
  return { ...rec, shares: { ...rest, entries, ...(direct === undefined ? {} : { direct }) } };
}

/** The direct callers' requests over the last share term, scaled up when `CALL_MEMORY_MAX` calls span less. */
export function directDemand(record: LimiterRecord | null, nowMs: number): number {
  const calls = record?.calls ?? [];
  let n = 0;
  let oldestMs = nowMs;
  for (let i = calls.length - 1; i >= 0; i--) {
    const c = calls[i]!;
    if (nowMs - c.atMs >= SHARE_TERM_MS) break;
    n += c.verdicts.length;
    oldestMs = c.atMs;
  }
  const spanMs = nowMs - oldestMs;
  if (n === 0 || spanMs >= SHARE_TERM_MS / 2) return n;
  return Math.floor((n * SHARE_TERM_MS) / Math.max(spanMs, SHARE_TERM_MS / 10));
}

/** A direct call to a key's object: `callRecord`, on the direct slice while rate shares are out; `hot` if so. */
export function keyCall(rec: LimiterRecord | null, input: CallInput, nowMs: number, paced = false): Step<CallResult> {
  const settled = settleShares(rec, nowMs);
  const direct = settled?.shares?.direct;
  input = withHotTerm(settled, input, nowMs);
  const out = direct === undefined ? callRecord(settled, input, nowMs) : directCall(settled!, direct, input, nowMs);
  const rule = ruleFor(out.record, input.rule);
  // Hot before a whole busy second: that pace over `HOT_EARLY_MS`, or over calls of every kind (`CallPace`: `paced`).
  const busy = paced || isBusy(out.record, nowMs) || isBusy(out.record, nowMs, HOT_EARLY_MS);
  const hot = shareKindOf(rule.params) !== "none" && (busy || nowMs < (out.record?.shares?.hotUntilMs ?? 0));
  return { result: hot ? { ...out.result, hot: true } : out.result, record: out.record };
}

/** A lease asked of a hot rate key, cut to `RATE_LEASE_TERM_MS` (the bound's); cold, a rule's `lease:` keeps its. */
function withHotTerm(settled: LimiterRecord | null, input: CallInput, nowMs: number): CallInput {
  const lease = input.lease;
  if (lease == null || settled === null || !(lease.ttlMs > RATE_LEASE_TERM_MS)) return input;
  if (shareKindOf(ruleFor(settled, input.rule).params) !== "rate") return input;
  if (!isBusy(settled, nowMs) && nowMs >= (settled.shares?.hotUntilMs ?? 0)) return input;
  return { ...input, lease: { ...lease, ttlMs: RATE_LEASE_TERM_MS } };
}

/** `callRecord` on a view of the record as its direct slice, merged back; with no parts left, all refused. */
function directCall(rec: LimiterRecord, direct: DirectSlice, input: CallInput, nowMs: number): Step<CallResult> {
  const book = rec.shares!;
  const rule = ruleFor(rec, input.rule);
  const parts = directParts(book, nowMs);
  const to = honestSlice(rule.params, parts);
  if (to === null) {
    // The live shares hold the whole rate until the next of them ends.
    const nextEndMs = Math.min(nowMs + SHARE_TERM_MS, ...endsOf(book).filter((t) => t > nowMs));
    return { result: refusedCall(input, rule.params, nextEndMs, nowMs), record: rec };
  }
  const from = honestSlice(rec.params, direct.parts);
  const fresh = from === null || direct.state === null;
  const view: LimiterRecord = {
    ...newRecord({ params: fresh ? to : from, version: rule.version }, fresh ? emptyState(to, nowMs) : direct.state),
    ...callMemory(rec),
  };
  const out = callRecord(view, { ...input, rule: { ...rule, params: to } }, nowMs);
  if (out.record === view) return { result: out.result, record: rec };
  const after = out.record ?? { ...view, state: fullState(to, nowMs), params: to };
  const main = carryOver(rec.params, rule.params, rec.state, nowMs) ?? emptyState(rule.params, nowMs);
  const { version: _v, calls: _c, leaseAsks: _l, lows: _w, ...base } = rec;
  const shares = { ...book, direct: { parts, state: after.state } };
  return { result: out.result, record: { ...base, ...newRecord(rule, main), ...callMemory(after), shares } };
}

/** What a direct call's view shares with the record: its calls, lease asks and lows (not its shares or ban). */
function callMemory({ calls, leaseAsks, lows }: LimiterRecord): Pick<LimiterRecord, "calls" | "leaseAsks" | "lows"> {
  return { ...(calls && { calls }), ...(leaseAsks && { leaseAsks }), ...(lows && { lows }) };
}

/** What the key looks like to a cost-1 direct request now (the admin API's peek), shares considered. */
export function keyPeek(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): PeekResult {
  const rec = settleShares(record, nowMs);
  const direct = rec?.shares?.direct;
  if (rec === null || direct === undefined) return peekRecord(rec, rule, nowMs);
  const to = honestSlice(ruleFor(rec, rule).params, directParts(rec.shares!, nowMs));
  const from = honestSlice(rec.params, direct.parts);
  if (to === null || from === null || direct.state === null) {
    return { remaining: 0, resetAfterMs: SHARE_TERM_MS, retryAfterMs: SHARE_TERM_MS, atMs: nowMs };
  }
  return peekState(to, carryOver(from, to, direct.state, nowMs), nowMs);
}

/** When the record is as good as none: its state fresh, no call remembered, no share live, the key not hot. */
export function keyFreshAtMs(record: LimiterRecord): number {
  const book = record.shares;
  if (book === undefined) return recordFreshAtMs(record);
  let atMs = Math.max(recordFreshAtMs(record), book.hotUntilMs, ...endsOf(book));
  const from = book.direct === undefined ? null : honestSlice(record.params, book.direct.parts);
  if (from !== null && book.direct?.state != null) atMs = Math.max(atMs, freshAtMs(from, book.direct.state));
  return atMs;
}
