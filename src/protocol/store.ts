/** One call to a key's object, pure: a batch in arrival order, an id (a retry is never charged twice), a lease. */
import { capacityOf, costError, decide, leasePolicy, leaseRefillOver, leaseTermMs } from "../algorithms/index.ts";
import { LEASE_MAX_SHARE_DIVISOR } from "../rules/lease.ts";
import type { AlgorithmParams } from "../rules/types.ts";
import { type CallKind, stepRecord } from "./outcome.ts";
import {
  type AppliedCall,
  CALL_MEMORY_MS,
  type CheckResult,
  chargeUnits,
  type LeaseAsks,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  type RefundResult,
  refundRecord,
  ruleFor,
  type Step,
} from "./record.ts";
import { BUSY_CALLS_PER_S, HOT_EARLY_MS } from "./tunables.ts";

export * from "./record.ts";

/** Call ids the key's object remembers at most: a retry's budget (up to 128 ms) at about 1,000 calls/s. */
export const CALL_MEMORY_MAX = 128;

/** The most units one lease takes: a window rule's, a quarter of its limit (no isolate holds most of a window). */
export function leaseCapOf(params: AlgorithmParams): number {
  const capacity = capacityOf(params);
  if (leasePolicy(params.algorithm).kind !== "window") return capacity;
  return Math.max(1, Math.floor(capacity / LEASE_MAX_SHARE_DIVISOR));
}

/** A lease request: after the batch, charge up to `units` (integer >= 1) for the caller to admit from for `ttlMs`. */
export type LeaseAsk = { readonly units: number; readonly ttlMs: number };

/** A lease: `units` charged at `atMs` (object clock: returns name it), usable `forMs` from when the call was *sent*. */
export interface LeaseGrant {
  readonly units: number;
  readonly atMs: number;
  readonly forMs: number;
  /** A rate sub-lease's id (the call's that got it): its return names it, and matches that reservation only. */
  readonly id?: string;
}

/** Units given back: a refund of what was charged at `atMs` (a lease's grant, an admission). */
export interface LeaseReturn {
  readonly units: number;
  readonly atMs: number;
  /** An admission given back, not a lease's unused units: a delegate sends it on (sublease.ts `takeBack`). */
  readonly admitted?: true;
  /** Tokens a delegate's bucket shed at a smaller grant, `atMs` its `freedAtMs`: not taken before then (delegate.ts). */
  readonly shed?: true;
  /** The rate sub-lease given back (`LeaseGrant.id`); absent: matched by `atMs` (an isolate from before ids). */
  readonly id?: string;
}

export interface CallInput {
  readonly rule: LimiterRule;
  /** Unique per call, the same across its retries: a call the object already applied is answered, not charged. */
  readonly id: string;
  /** The requests' costs, in arrival order (possibly none, for a call that only returns or renews a lease). */
  readonly costs: readonly number[];
  /** Unused units of the caller's previous leases, given back before the batch is decided. */
  readonly giveBack?: readonly LeaseReturn[];
  /** Ask for a lease after the batch is decided. */
  readonly lease?: LeaseAsk | null;
  /** What the call does with its costs (outcome.ts): `check` (default), `probe` (charge nothing) or `charge`. */
  readonly kind?: CallKind;
  /**
   * A copy of a call sent again (`awaitLate`, delegate_run.ts): its first copy reached the object no more than this
   * many ms before it, if at all. Applied only if the object remembers every call since (so the first, if applied);
   * else answered `unsure`, nothing applied.
   */
  readonly resent?: number;
}

export interface CallResult {
  /** The object's clock, ms. */
  readonly atMs: number;
  /** One per cost, in order. */
  readonly results: readonly CheckResult[];
  readonly lease: LeaseGrant | null;
  /** The object had already applied this call id (a retry): nothing was charged again. */
  readonly replayed: boolean;
  /** The key's object is busy (`isBusy`): isolates lease the key even below `lease.above`. Absent: not busy. */
  readonly busy?: boolean;
  /** A busy delegate: the spread it asks for, the share of its isolates to move to their own shards (absent: all). */
  readonly spread?: number;
  /** For a call that gave units back (`giveBack`): the key's figures after it, as a refund reports them. */
  readonly refunded?: RefundResult;
  /** `true` (key's object): the key is hot, go to the delegate; `false` (delegate): go back. Absent: no change. */
  readonly hot?: boolean;
  /** A rate sub-lease ask granted nothing: ms until the delegate's slice holds it (sublease.ts `refillWaitMs`). */
  readonly leaseWaitMs?: number;
  /** A copy sent again (`resent`) the object cannot tell from a first copy it forgot: nothing applied, no results. */
  readonly unsure?: true;
}

/** Apply one call: units given back, then each request in order at `nowMs`, then a lease; a known id as remembered. */
export function callRecord(record: LimiterRecord | null, input: CallInput, nowMs: number): Step<CallResult> {
  const seen = record?.calls?.find((c) => c.id === input.id);
  if (seen !== undefined) return { result: replay(record, input, seen, nowMs), record };
  if (!remembersSince(record?.calls ?? [], CALL_MEMORY_MAX, input, nowMs)) {
    return { result: unsureResult(nowMs), record };
  }
  // Decided under the newest rules version the object has seen (the call's own, or the record's).
  input = { ...input, rule: ruleFor(record, input.rule) };

  let current = record;
  for (const back of input.giveBack ?? []) {
    if (!Number.isSafeInteger(back.units) || back.units < 1) continue;
    // Shed tokens come back into parts freed at `atMs`: before then those parts are not the caller's to fill.
    if (back.shed === true && !(back.atMs <= nowMs)) continue;
    current = refundRecord(current, { rule: input.rule, cost: back.units, admittedAtMs: back.atMs }, nowMs).record;
  }
  const results: CheckResult[] = [];
  for (const cost of input.costs) {
    const out = stepRecord(current, input.rule, cost, input.kind ?? "check", nowMs);
    results.push(out.result);
    current = out.record;
  }
  const { record: leased, lease } = grantLease(current, input.rule, input.lease, nowMs);
  const peek = (input.giveBack?.length ?? 0) > 0 ? peekRecord(leased, input.rule, nowMs) : null;
  const refunded = peek === null ? {} : { refunded: { remaining: peek.remaining, resetAfterMs: peek.resetAfterMs } };
  const result: CallResult = { atMs: nowMs, results, lease, replayed: false, ...refunded };
  let next = leased;
  if (leased !== record && leased !== null) {
    const kept = (leased.calls ?? []).filter((c) => nowMs - c.atMs < CALL_MEMORY_MS);
    const applied = appliedCall(input.id, results, lease, nowMs);
    next = { ...leased, calls: [...kept.slice(Math.max(0, kept.length - CALL_MEMORY_MAX + 1)), applied] };
  }
  return { result: isBusy(next, nowMs) ? { ...result, busy: true } : result, record: next };
}

/** The answer to a copy sent again that the object cannot tell from a first copy it forgot: nothing applied. */
export function unsureResult(nowMs: number): CallResult {
  return { atMs: nowMs, results: [], lease: null, replayed: false, unsure: true };
}

/**
 * Whether calls remembered (at most `max`, oldest first) hold every one applied since a copy's first could have come
 * (`resent` ms ago; absent, or the call is remembered: nothing to know): fewer than `max`, or the oldest that old.
 */
export function remembersSince(calls: readonly AppliedCall[], max: number, call: CallInput, nowMs: number): boolean {
  const resentMs = call.resent;
  if (resentMs === undefined || calls.some((c) => c.id === call.id)) return true;
  return calls.length < max || (Number.isFinite(resentMs) && calls[0]!.atMs <= nowMs - resentMs);
}

/** A call applied at `nowMs`, as the key's object or a delegate remembers it (`AppliedCall`). */
export function appliedCall(
  id: string,
  results: readonly CheckResult[],
  lease: LeaseGrant | null,
  nowMs: number,
): AppliedCall {
  const verdicts = results.map((r) => (!r.ok ? "e" : r.decision.allowed ? "1" : "0")).join("");
  const delaysMs = results.map((r) => (r.ok ? r.decision.delayMs : 0));
  const slots = results.map((r) => (r.ok ? (r.slot ?? null) : null));
  const { units: leaseUnits, forMs: leaseForMs } = lease ?? { units: 0, forMs: 0 };
  const delays = delaysMs.some((d) => d > 0) && { delaysMs };
  const taken = slots.some((s) => s !== null) && { slots };
  return { id, atMs: nowMs, verdicts, ...delays, ...taken, leaseUnits, leaseForMs };
}

/** Whether the record remembers `BUSY_CALLS_PER_S` calls within the last second (or that pace over `spanMs`). */
export function isBusy(record: LimiterRecord | null, nowMs: number, spanMs = 1000): boolean {
  const calls = record?.calls ?? [];
  const n = Math.ceil((BUSY_CALLS_PER_S * spanMs) / 1000);
  return calls.length >= n && nowMs - calls[calls.length - n]!.atMs < spanMs;
}

/**
 * Whether the last `HOT_EARLY_MS` of a key's object's calls of every kind (refusals included, which the record does not
 * remember) had `BUSY_CALLS_PER_S`'s pace. Never stored: only when the key is told hot depends on it, never a decision.
 */
export class CallPace {
  private readonly times: number[] = [];

  /** A call at `nowMs`: whether it completes the busy pace. A clock stepped back starts the count anew. */
  note(nowMs: number): boolean {
    const n = Math.ceil((BUSY_CALLS_PER_S * HOT_EARLY_MS) / 1000);
    if (nowMs < (this.times.at(-1) ?? nowMs)) this.times.length = 0;
    this.times.push(nowMs);
    if (this.times.length > n) this.times.shift();
    return this.times.length === n && nowMs - this.times[0]! < HOT_EARLY_MS;
  }
}

/** Charge up to `ask.units` as cost-1 requests; a short rate key shared by demand (docs/production.md, "Leases"). */
function grantLease(record: LimiterRecord | null, rule: LimiterRule, ask: LeaseAsk | null | undefined, nowMs: number) {
  if (ask == null || !Number.isSafeInteger(ask.units) || ask.units < 1) return { record, lease: null };
  const ttlMs = Math.max(1, Math.floor(ask.ttlMs));
  const asks = noteAsk(record?.leaseAsks, ask.units, ttlMs, nowMs);
  // Asks over the last ttl, as a sliding window: this bucket's, and the last one's weighed by how much of it is in.
  const elapsedMs = Math.min(ttlMs, Math.max(0, nowMs - asks.bucket * ttlMs));
  const demand = asks.curr + Math.floor((asks.prev * (ttlMs - elapsedMs)) / ttlMs);
  const available = peekRecord(record, rule, nowMs).remaining;
  const refill = leaseRefillOver(rule.params, ttlMs);
  const supply = refill === null ? null : available + refill;
  const share =
    supply === null || demand <= supply
      ? ask.units
      : Number((BigInt(ask.units) * BigInt(supply) + BigInt(demand) - 1n) / BigInt(demand));
  const units = Math.min(ask.units, share, available, leaseCapOf(rule.params));
  const { record: current, units: charged } = chargeUnits(record, rule, units, nowMs);
  // Cut short by what the key holds: the rest comes with the refill, so the term is shorter in proportion.
  const termMs = units === available && available < share ? shorter(ttlMs, units, share) : ttlMs;
  const lease = charged < 1 ? null : { units, atMs: nowMs, forMs: leaseTermMs(rule.params, nowMs, termMs) };
  return { record: current === null ? null : { ...current, leaseAsks: asks }, lease };
}

/** A lease of `units` of `wanted` for `termMs`: as much shorter, down to a quarter, its holder asks again in time. */
export function shorter(termMs: number, units: number, wanted: number): number {
  return Math.max(Math.ceil(termMs / 4), Math.floor((termMs * units) / wanted));
}

/** The asks per ttl with one more of `units` at `nowMs` (a new ttl restarts them). */
function noteAsk(asks: LeaseAsks | undefined, units: number, ttlMs: number, nowMs: number): LeaseAsks {
  const bucket = Math.floor(nowMs / ttlMs);
  if (asks === undefined || asks.ttlMs !== ttlMs || bucket > asks.bucket) {
    return { ttlMs, bucket, curr: units, prev: asks?.ttlMs === ttlMs && bucket === asks.bucket + 1 ? asks.curr : 0 };
  }
  // The same bucket (or an earlier clock: counted in the current one).
  return { ...asks, curr: asks.curr + units };
}

/** The answer to a call already applied: its verdicts as remembered, with the key's figures as they are now. */
function replay(record: LimiterRecord | null, input: CallInput, seen: AppliedCall, nowMs: number): CallResult {
  const { remaining, resetAfterMs, retryAfterMs } = peekRecord(record, input.rule, nowMs);
  const figures = { remaining, resetAfterMs, retryAfterMs: Math.max(1, retryAfterMs ?? 1) };
  const lease = seen.leaseUnits > 0 ? { units: seen.leaseUnits, atMs: seen.atMs, forMs: seen.leaseForMs } : null;
  const refunded = (input.giveBack?.length ?? 0) > 0 ? { refunded: { remaining, resetAfterMs } } : {};
  return { atMs: nowMs, results: replayedResults(input, seen, nowMs, figures), lease, replayed: true, ...refunded };
}

/** `cost` refused for `waitMs` at `nowMs` (an invalid cost keeps its error). */
export function refusedFor(params: AlgorithmParams, cost: number, waitMs: number, nowMs: number): CheckResult {
  const out = decide(params, null, cost, nowMs);
  if (!out.ok) return out;
  const decision = { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 };
  return { ok: true, atMs: nowMs, decision };
}

/** Every request of `input` refused under `params` until `untilMs` (at least 1 ms on). */
export function refusedCall(input: CallInput, params: AlgorithmParams, untilMs: number, nowMs: number): CallResult {
  const results = input.costs.map((cost) => refusedFor(params, cost, Math.max(1, untilMs - nowMs), nowMs));
  return { atMs: nowMs, results, lease: null, replayed: false };
}

/** A call applied before (`seen`), answered again (by the key's object or a delegate) with the figures now. */
export function replayedResults(input: CallInput, seen: AppliedCall, nowMs: number, figures: Figures): CheckResult[] {
  return input.costs.map((cost, i): CheckResult => {
    const verdict = seen.verdicts[i];
    if (verdict === "e" || verdict === undefined)
      return { ok: false, error: costError(input.rule.params, cost) ?? "invalid_cost" };
    const allowed = verdict === "1";
    const delayMs = allowed ? Math.max(0, (seen.delaysMs?.[i] ?? 0) - (nowMs - seen.atMs)) : 0;
    const { remaining, resetAfterMs } = figures;
    const retryAfterMs = allowed ? null : figures.retryAfterMs;
    // The slot the admission took, as first answered (its release names it).
    const slot = allowed ? seen.slots?.[i] : undefined;
    const decision = { allowed, remaining, resetAfterMs, retryAfterMs, delayMs };
    return { ok: true, atMs: seen.atMs, decision, ...(typeof slot === "number" ? { slot } : {}) };
  });
}

type Figures = { readonly remaining: number; readonly resetAfterMs: number; readonly retryAfterMs: number };
