/** What a limiter keeps per (rule, key), and the pure operations on the record alone (a call is store.ts). */
import {
  type AlgorithmState,
  carryOver,
  type Decision,
  decide,
  fingerprintOf,
  freshAtMs,
  refund,
  scaledRefund,
  slotPolicy,
} from "../algorithms/index.ts";
import type { AlgorithmParams } from "../rules/types.ts";
import { type Lows, lateRefund, lowsPer, noteLow } from "./late_refund.ts";

/** The stored record (a stored format): the state and the parameters it was made under. */
export interface LimiterRecord {
  readonly v: 1;
  readonly params: AlgorithmParams;
  /** `JSON.stringify(params)`: compared to detect a rule change. */
  readonly fingerprint: string;
  readonly state: AlgorithmState;
  /** The rules version `params` came from (`LimiterRule.version`); absent: 0. */
  readonly version?: number;
  /** Calls applied in the last `CALL_MEMORY_MS` (at most `CALL_MEMORY_MAX`), so a retried call is not charged twice. */
  readonly calls?: readonly AppliedCall[];
  /** Lease units asked per ttl lately, across isolates: the key's demand, for sharing a short budget. */
  readonly leaseAsks?: LeaseAsks;
  /** The shares granted to delegates, and the direct slice while rate shares are out (share.ts). */
  readonly shares?: ShareBook;
  /** A rate rule's least deficits lately, which bound what a late refund gives back (late_refund.ts). */
  readonly lows?: Lows;
  /** A `block_for` rule's ban (outcome.ts): every request of the key is refused until `untilMs` (object clock). */
  readonly ban?: { readonly sinceMs: number; readonly untilMs: number };
}

/** The shares of a hot key the key's object granted (share.ts), at most `SHARE_DELEGATES_MAX` entries. */
export interface ShareBook {
  readonly entries: readonly ShareEntry[];
  /** While rate shares are out: the direct slice (parts no live share holds) and its state; `state` waits unused. */
  readonly direct?: DirectSlice;
  /** The key is hot until then (object clock), ms. */
  readonly hotUntilMs: number;
  /** Units of the next window (`window`, its index) granted already, charged when it starts (window_ahead.ts). */
  readonly ahead?: { readonly window: number; readonly units: number };
}

/** The direct calls' slice of a rate key: its parts, and its bucket (`null`: none, too few parts for one). */
export type DirectSlice = { readonly parts: number; readonly state: AlgorithmState | null };

/** One delegate's share, as the key's object remembers it (object clock, ms). */
export interface ShareEntry {
  /** The delegate holding it: its region and shard (`weur.0`), never a key. */
  readonly holder: string;
  /** Rate share: parts of `SHARE_PARTS` of the rule's rate and burst. 0 for a window share. */
  readonly parts: number;
  /** Window share: units charged at `atMs` for it. 0 for a rate share. */
  readonly units: number;
  readonly atMs: number;
  readonly endsAtMs: number;
  /** The delegate's previous parts, still promised until `prevEndsAtMs` (it uses them until it hears). */
  readonly prevParts: number;
  readonly prevEndsAtMs: number;
  /** Cost the delegate was asked for over its last term: its demand. */
  readonly demand: number;
  /** Rate share: tokens moved from the direct slice to the delegate with this grant (absent: none). */
  readonly tokens?: number;
  /** Window share: units of the next window granted with it (`ShareGrant.ahead`; absent: none). */
  readonly ahead?: AheadUnits;
  /** The ask this grant answered (a retried ask is answered again, not granted twice). */
  readonly askId: string;
  /** That ask's `ShareAsk.seq` (absent: none said): an ask of a lower one was overtaken and changes nothing. */
  readonly seq?: number;
}

/** What a grant ahead gives: units of the next window, charged from `atMs` (its start), usable for `termMs`. */
export interface AheadUnits {
  readonly units: number;
  /** The next window's start, object clock, ms: its refunds name it. */
  readonly atMs: number;
  readonly termMs: number;
}

/** Lease units asked in the current and the previous bucket of one ttl (`bucket` = floor(now / ttl)). */
export interface LeaseAsks {
  readonly ttlMs: number;
  readonly bucket: number;
  readonly curr: number;
  readonly prev: number;
}

/** A step on a record: its result and the record after it (the very same object when nothing changed). */
export type Step<R> = { readonly result: R; readonly record: LimiterRecord | null };

/** The rule as the limiter sees it: its id (for messages) and its algorithm parameters. */
export interface LimiterRule {
  readonly id: string;
  readonly params: AlgorithmParams;
  /** The rules version of `params`: the build's `RULES_VERSION` or an override's own (monotonic; absent: 0). */
  readonly version?: number;
  /** `block_for`, ms: a refusal bans the key this long (outcome.ts). Absent: no bans. */
  readonly blockForMs?: number;
}

/** The rule a call is decided under: its own, or a newer record's parameters (two versions never thrash the state). */
export function ruleFor(record: LimiterRecord | null, rule: LimiterRule): LimiterRule {
  if (record === null || (rule.version ?? 0) >= (record.version ?? 0)) return rule;
  return { ...rule, params: record.params, version: record.version ?? 0 };
}

export type CheckResult =
  | {
      readonly ok: true;
      readonly decision: Decision;
      /** The limiter's clock at the decision, ms: pass it back to `refund`. */
      readonly atMs: number;
      /** The key is banned (`block_for`) until then, limiter clock, ms; absent: no ban. */
      readonly banUntilMs?: number;
      /** A charge (outcome.ts): the units it charged (less than asked when it did not fit). */
      readonly charged?: number;
      /** The slot an admission took, for its release (concurrency, slots.ts); absent: none. */
      readonly slot?: number;
    }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

/** A refund of `cost` admitted at `admittedAtMs` (the admitting check's `atMs`). */
export type RefundInput = { readonly rule: LimiterRule; readonly cost: number; readonly admittedAtMs: number };

/** What the key looks like after a refund, for the RateLimit header: `null` when there was nothing to refund. */
export type RefundResult = { readonly remaining: number; readonly resetAfterMs: number } | null;

/** A bare record of `state` under the rule's parameters and version (no bookkeeping). */
export function newRecord(rule: Pick<LimiterRule, "params" | "version">, state: AlgorithmState): LimiterRecord {
  const { params } = rule;
  const version = rule.version ?? 0;
  return { v: 1, params, fingerprint: fingerprintOf(params), state, ...(version === 0 ? {} : { version }) };
}

/** The state to decide on under `params` (`ruleFor`'s): the stored one, carried over, or `null` (fresh). */
export function stateOf(record: LimiterRecord | null, params: AlgorithmParams, nowMs: number): AlgorithmState | null {
  if (record === null) return null;
  if (record.fingerprint === fingerprintOf(params)) return record.state;
  return carryOver(record.params, params, record.state, nowMs);
}

/** Decide one request. `record` is the new record to store, or the very same object when nothing changed. */
export function checkRecord(
  record: LimiterRecord | null,
  input: { readonly rule: LimiterRule; readonly cost: number },
  nowMs: number,
): Step<CheckResult> {
  const rule = ruleFor(record, input.rule);
  const { params } = rule;
  const state = stateOf(record, params, nowMs);
  const out = decide(params, state, input.cost, nowMs);
  if (!out.ok) return { result: out, record };
  const slots = out.decision.allowed ? slotPolicy(params) : undefined;
  const slot = slots === undefined ? {} : { slot: slots.taken(out.state) };
  const result: CheckResult = { ok: true, decision: out.decision, atMs: nowMs, ...slot };
  const sameVersion = (rule.version ?? 0) === (record?.version ?? 0);
  if (record?.state === out.state && record.fingerprint === fingerprintOf(params) && sameVersion) {
    return { result, record };
  }
  // The old record's bookkeeping (call ids, lease asks, shares, lows, ban) goes on: it is not algorithm state.
  const next = newRecord(rule, out.state);
  const { v: _v, params: _p, fingerprint: _f, state: _s, version: _version, ...bookkeeping } = record ?? next;
  const kept: LimiterRecord = { ...next, ...bookkeeping };
  // A charge notes the key's deficit just before it, for later refunds of earlier charges (late_refund.ts).
  const lows = out.state === state ? null : noteLow(record?.lows, params, state, nowMs, false);
  return { result, record: lows === null ? kept : { ...kept, lows } };
}

/** `units` charged at once, as that many cost-1 requests would be, if they fit; else none (`units: 0`, `record`). */
export function chargeUnits(record: LimiterRecord | null, rule: LimiterRule, units: number, nowMs: number) {
  const out = units >= 1 ? checkRecord(record, { rule, cost: units }, nowMs) : null;
  return out?.result.ok && out.result.decision.allowed ? { record: out.record, units } : { record, units: 0 };
}

/** Give back an admitted request's cost, in the record's own parameters (a unit is one request under either rule). */
export function refundRecord(record: LimiterRecord | null, input: RefundInput, nowMs: number): Step<RefundResult> {
  if (record === null) return { result: null, record };
  const { params } = record;
  // A bucket's refund gives back no more than the key lacked from full at every instant since the charge.
  const late = lowsPer(params) === null ? null : lateRefund(record.lows, params, input.cost, input.admittedAtMs);
  const state =
    late === null
      ? refund(params, record.state, input.cost, input.admittedAtMs)
      : scaledRefund(params, record.state, late.given);
  // The key's deficit after the refund noted, for later refunds of earlier charges (a bucket's).
  const noted = (r: LimiterRecord): LimiterRecord => {
    const { params: p } = ruleFor(r, input.rule);
    const lows = noteLow(r.lows, p, stateOf(r, p, nowMs), nowMs, true);
    return lows === null ? r : { ...r, lows };
  };
  const { remaining, resetAfterMs } = peekState(params, state, nowMs);
  const result = { remaining, resetAfterMs };
  if (late !== null) record = { ...record, lows: late.lows };
  if (late?.given === 0) return { result, record };
  // A state as good as fresh drops a bare record; else it is kept as fresh at any time (a clock may step back).
  if (resetAfterMs > 0) return { result, record: noted({ ...record, state }) };
  const { calls, leaseAsks, shares, ban, version } = record;
  const bare = calls === undefined && leaseAsks === undefined && shares === undefined && ban === undefined;
  return { result, record: bare && (version ?? 0) === 0 ? null : noted({ ...record, state: fullState(params, 0) }) };
}

/** A full state under `params` (a fresh key's, made concrete); at time 0, as good as none at any time. */
export function fullState(params: AlgorithmParams, nowMs: number): AlgorithmState {
  const out = decide(params, null, 1, nowMs);
  if (!out.ok) throw new Error("a fresh key admits one unit");
  return refund(params, out.state, 1, nowMs);
}

/** What a key looks like now, for a cost-1 request, without charging it (the admin API's state). */
export interface PeekResult {
  /** Largest n such that n cost-1 requests now would all be admitted. */
  readonly remaining: number;
  /** Until the key is as good as fresh, ms (0 when it already is). */
  readonly resetAfterMs: number;
  /** When a cost-1 request would be denied now: how long until it is admitted, ms; else `null`. */
  readonly retryAfterMs: number | null;
  /** The limiter's clock, ms. */
  readonly atMs: number;
  /** The key is banned (`block_for`) until then, ms; absent: no ban. */
  readonly banUntilMs?: number;
}

/** The key's state seen by a hypothetical cost-1 request at `nowMs`, whose new state is thrown away; a ban refuses. */
export function peekRecord(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): PeekResult {
  const ban = activeBan(record, nowMs);
  if (ban === null) return peekAlgorithm(record, rule, nowMs);
  const { resetAfterMs, retryAfterMs } = bannedResult(record, rule, 1, ban.untilMs, nowMs).decision;
  return { remaining: 0, resetAfterMs, retryAfterMs, atMs: nowMs, banUntilMs: ban.untilMs };
}

/** A refusal of `cost` during a ban until `untilMs`: a retry at its end or later, when the algorithm admits. */
export function bannedResult(
  record: LimiterRecord | null,
  rule: LimiterRule,
  cost: number,
  untilMs: number,
  nowMs: number,
): Extract<CheckResult, { ok: true }> {
  const waitMs = untilMs - nowMs;
  const params = ruleFor(record, rule).params;
  const state = stateOf(record, params, nowMs);
  // At the ban's end the algorithm decides again: a retry succeeds only once it admits too.
  const own = decide(params, state, cost, nowMs);
  const ownRetryMs = own.ok && !own.decision.allowed ? (own.decision.retryAfterMs ?? 0) : 0;
  const resetAfterMs = Math.max(waitMs, peekState(params, state, nowMs).resetAfterMs);
  const retryAfterMs = Math.max(waitMs, ownRetryMs);
  const decision: Decision = { allowed: false, remaining: 0, resetAfterMs, retryAfterMs, delayMs: 0 };
  return { ok: true, decision, atMs: nowMs, banUntilMs: untilMs };
}

/** `peekRecord` of the algorithm's state alone, ignoring any ban (what a charge fits into). */
export function peekAlgorithm(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): PeekResult {
  const { params } = ruleFor(record, rule);
  return peekState(params, stateOf(record, params, nowMs), nowMs);
}

/** The record's ban if it is still running at `nowMs` (it ends at `untilMs` exactly), else `null`. */
export function activeBan(record: LimiterRecord | null, nowMs: number): NonNullable<LimiterRecord["ban"]> | null {
  const ban = record?.ban;
  return ban !== undefined && nowMs < ban.untilMs ? ban : null;
}

/** `peekRecord` on a bare state (also used for `scope: local`). */
export function peekState(params: AlgorithmParams, state: AlgorithmState | null, nowMs: number): PeekResult {
  const out = decide(params, state, 1, nowMs);
  const resetAfterMs = state === null ? 0 : Math.max(0, freshAtMs(params, state) - nowMs);
  if (!out.ok) return { remaining: 0, resetAfterMs, retryAfterMs: null, atMs: nowMs };
  const d = out.decision;
  const remaining = d.allowed ? d.remaining + 1 : 0;
  return { remaining, resetAfterMs, retryAfterMs: d.allowed ? null : d.retryAfterMs, atMs: nowMs };
}

/** When the record is as good as no record, ms: its state is fresh and it remembers no recent call. */
export function recordFreshAtMs(record: LimiterRecord): number {
  const lastCallMs = record.calls?.at(-1)?.atMs;
  const fresh = Math.max(freshAtMs(record.params, record.state), record.ban?.untilMs ?? 0);
  return lastCallMs === undefined ? fresh : Math.max(fresh, lastCallMs + CALL_MEMORY_MS);
}

/** How long the object remembers a call id, ms (a retry follows within one `timeout_ms`). */
export const CALL_MEMORY_MS = 60_000;

/** A call the object applied, as it remembers it (a stored format). */
export interface AppliedCall {
  readonly id: string;
  /** The object's clock when it applied the call, ms. */
  readonly atMs: number;
  /** Per request in order: `1` admitted, `0` denied, `e` an error value. */
  readonly verdicts: string;
  /** Per request, the admitted ones' shaping delays, ms; absent when all are 0. */
  readonly delaysMs?: readonly number[];
  /** Per request, the slot an admission took (concurrency: its release names it; `null`: none); absent: none took one. */
  readonly slots?: readonly (number | null)[];
  /** The lease it granted (0: none), and its term. */
  readonly leaseUnits: number;
  readonly leaseForMs: number;
}
