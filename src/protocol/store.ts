/**
 * One call to a key's object, as pure functions of (record, input, now): a batch of requests decided in arrival order,
 * an id so that a retry is never charged twice, the busy mark, and a lease. The record and its single operations
 * (check, refund, peek, versions) are record.ts, re-exported here for the shells.
 */
import { capacityOf, decide, leasePolicy, leaseRefillOver, leaseTermMs } from "../algorithms/index.ts";
import { LEASE_MAX_SHARE_DIVISOR } from "../rules/lease.ts";
import type { AlgorithmParams } from "../rules/types.ts";
import { type CallKind, stepRecord } from "./outcome.ts";

import {
  type AppliedCall,
  CALL_MEMORY_MS,
  type CheckResult,
  checkRecord,
  type LeaseAsks,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  type RefundResult,
  refundRecord,
  ruleFor,
} from "./record.ts";
import { BUSY_CALLS_PER_S } from "./tunables.ts";

export * from "./record.ts";
// ---------------------------------------------------------------------------------------------------------------------
// One call: a batch of requests decided in arrival order, an id so a retry is never charged twice, and a lease.

/**
 * How many call ids the object remembers at most (oldest forgotten first). A retry follows its first attempt within
 * one call budget, while its isolate has no other call in flight for the key; 128 covers that at the object's own
 * limit of about 1,000 calls/s for budgets up to 128 ms, and at the busy mark (`BUSY_CALLS_PER_S`) for over a second.
 * The object stores each remembered call on its own (limiter.ts), so a call writes one entry, not the list.
 */
export const CALL_MEMORY_MAX = 128;

/**
 * A window rule's lease takes at most a quarter of its limit (`LEASE_MAX_SHARE_DIVISOR`, src/rules/lease.ts), so no
 * isolate holds most of a small window's budget while the others' requests are refused. A rate rule's leases are
 * shared by demand instead (`grantLease`), and capped only by its capacity.
 */
export { LEASE_MAX_SHARE_DIVISOR };

/** The most units one lease of this rule takes (`LEASE_MAX_SHARE_DIVISOR`). */
export function leaseCapOf(params: AlgorithmParams): number {
  const capacity = capacityOf(params);
  if (leasePolicy(params.algorithm).kind !== "window") return capacity;
  return Math.max(1, Math.floor(capacity / LEASE_MAX_SHARE_DIVISOR));
}

/** A lease request: after the batch, charge up to `units` more, for the caller to admit from locally. */
export interface LeaseAsk {
  /** Integer >= 1; the object grants fewer if fewer are available (possibly 0). */
  readonly units: number;
  /** How long the caller may admit from it, ms (>= 1). */
  readonly ttlMs: number;
}

/** What a lease gave, for the caller to admit from until its term ends. */
export interface LeaseGrant {
  /** Units charged to this lease (>= 1). */
  readonly units: number;
  /** The object's clock when it charged them, ms: pass it back with the unused units. */
  readonly atMs: number;
  /**
   * How long the lease may be used, ms, counted from when the caller *sent* the call (never later than the charge,
   * whatever the clocks say): the asked ttl, cut at the end of the window for window rules.
   */
  readonly forMs: number;
}

/** Unused units of a lease, given back (a refund of what the lease charged at `atMs`). */
export interface LeaseReturn {
  readonly units: number;
  /** `atMs` of the grant. */
  readonly atMs: number;
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
}

export interface CallResult {
  /** The object's clock, ms. */
  readonly atMs: number;
  /** One per cost, in order. */
  readonly results: readonly CheckResult[];
  readonly lease: LeaseGrant | null;
  /** True when the object had already applied this call id (a retry): nothing was charged again. */
  readonly replayed: boolean;
  /**
   * True when the key's object is busy: it applied at least `BUSY_CALLS_PER_S` calls for the key in the last second.
   * An isolate then leases the key (if its rule has `lease`) even below the rule's `lease.above`, so that many
   * isolates each just under `above` do not together make a call per request. Absent: not busy.
   */
  readonly busy?: boolean;
  /** For a call that gave units back (`giveBack`): the key's figures after it, as a refund reports them. */
  readonly refunded?: RefundResult;
  /**
   * The key is hot (src/protocol/share.ts): `true` from the key's object tells the caller to send this key's batches
   * to its region's delegate; `false` from a delegate tells it to go back to the key's object. Absent: no change.
   */
  readonly hot?: boolean;
}

/**
 * Apply one call: give back the returned lease units, decide each request in order at `nowMs` (exactly as if they had
 * been separate calls at the same instant), then grant a lease from what is left (`grantLease`). A call whose id the
 * record remembers is not applied again: its verdicts are answered as remembered, with the key's figures now.
 */
export function callRecord(
  record: LimiterRecord | null,
  input: CallInput,
  nowMs: number,
): { readonly result: CallResult; readonly record: LimiterRecord | null } {
  const seen = record?.calls?.find((c) => c.id === input.id);
  if (seen !== undefined) return { result: replay(record, input, seen, nowMs), record };
  // Decided under the newest rules version the object has seen (the call's own, or the record's).
  input = { ...input, rule: ruleFor(record, input.rule) };

  let current = record;
  for (const back of input.giveBack ?? []) {
    if (!Number.isSafeInteger(back.units) || back.units < 1) continue;
    current = refundRecord(current, { rule: input.rule, cost: back.units, admittedAtMs: back.atMs }, nowMs).record;
  }
  const results: CheckResult[] = [];
  for (const cost of input.costs) {
    const out = stepRecord(current, input.rule, cost, input.kind ?? "check", nowMs);
    results.push(out.result);
    current = out.record;
  }
  let lease: LeaseGrant | null = null;
  if (input.lease != null && Number.isSafeInteger(input.lease.units) && input.lease.units >= 1) {
    const granted = grantLease(current, input.rule, input.lease, nowMs);
    current = granted.record;
    lease = granted.lease;
  }
  const refunded = (input.giveBack?.length ?? 0) > 0 ? figuresOf(current, input.rule, nowMs) : null;
  const result: CallResult = {
    atMs: nowMs,
    results,
    lease,
    replayed: false,
    ...(refunded === null ? {} : { refunded }),
  };
  if (current === record) return { result: withBusy(result, record, nowMs), record };
  if (current === null) return { result, record: null };
  const verdicts = results.map((r) => (!r.ok ? "e" : r.decision.allowed ? "1" : "0")).join("");
  const delaysMs = results.map((r) => (r.ok ? r.decision.delayMs : 0));
  const applied: AppliedCall = {
    id: input.id,
    atMs: nowMs,
    verdicts,
    ...(delaysMs.some((d) => d > 0) ? { delaysMs } : {}),
    leaseUnits: lease?.units ?? 0,
    leaseForMs: lease?.forMs ?? 0,
  };
  const kept = (current.calls ?? []).filter((c) => nowMs - c.atMs < CALL_MEMORY_MS);
  const calls = [...kept.slice(Math.max(0, kept.length - CALL_MEMORY_MAX + 1)), applied];
  const next = { ...current, calls };
  return { result: withBusy(result, next, nowMs), record: next };
}

/** The key's figures for a cost-1 request now, as a refund reports them. */
function figuresOf(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): RefundResult {
  const peek = peekRecord(record, rule, nowMs);
  return { remaining: peek.remaining, resetAfterMs: peek.resetAfterMs };
}

/** The result, marked busy when the record remembers `BUSY_CALLS_PER_S` calls within the last second. */
function withBusy(result: CallResult, record: LimiterRecord | null, nowMs: number): CallResult {
  return isBusy(record, nowMs) ? { ...result, busy: true } : result;
}

/** Whether the record remembers `BUSY_CALLS_PER_S` calls within the last second. */
export function isBusy(record: LimiterRecord | null, nowMs: number): boolean {
  const calls = record?.calls;
  if (calls === undefined || calls.length < BUSY_CALLS_PER_S) return false;
  // The newest are last: look back from the BUSY_CALLS_PER_S-th newest.
  const nth = calls[calls.length - BUSY_CALLS_PER_S]!;
  return nowMs - nth.atMs < 1000;
}

/**
 * Grant a lease: charge up to `ask.units` at `nowMs`, exactly as that many cost-1 requests then.
 *
 * A rate algorithm's key, when short, is shared by demand: the record keeps the units isolates asked for over the
 * last ttl (`leaseAsks`, the key's demand D), and the supply S over one ttl is what the key holds now plus its refill
 * in that time. Each ask gets `units × min(1, S / D)` (rounded up, so a last unit is still handed out), and never
 * more than the key holds now. So the grants of one ttl add up to about the supply, each isolate gets a slice in
 * proportion to its traffic, and none holds units it will not use while others refuse. A window's remaining units go
 * first come (`leaseRefillOver`).
 */
function grantLease(
  record: LimiterRecord | null,
  rule: LimiterRule,
  ask: LeaseAsk,
  nowMs: number,
): { readonly record: LimiterRecord | null; readonly lease: LeaseGrant | null } {
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
      : Number(ceilDivBig(BigInt(ask.units) * BigInt(supply), BigInt(demand)));
  const cap = leaseCapOf(rule.params);
  const units = Math.min(ask.units, share, available, cap);
  let current = record;
  let lease: LeaseGrant | null = null;
  if (units >= 1) {
    const out = checkRecord(current, { rule, cost: units }, nowMs);
    if (out.result.ok && out.result.decision.allowed) {
      current = out.record;
      // Cut short by what the key holds now, not by its share (nor by the cap): the rest of the share comes back with
      // the refill, so the lease is shorter in proportion (down to a quarter of the ttl) and its holder asks again sooner.
      const termMs =
        units === available && available < share
          ? Math.max(Math.ceil(ttlMs / 4), Math.floor((ttlMs * units) / share))
          : ttlMs;
      lease = { units, atMs: nowMs, forMs: leaseTermMs(rule.params, nowMs, termMs) };
    }
  }
  if (current === null) return { record: null, lease };
  return { record: { ...current, leaseAsks: asks }, lease };
}

/** The asks per ttl with one more of `units` at `nowMs` (a new ttl restarts them). */
function noteAsk(asks: LeaseAsks | undefined, units: number, ttlMs: number, nowMs: number): LeaseAsks {
  const bucket = Math.floor(nowMs / ttlMs);
  if (asks === undefined || asks.ttlMs !== ttlMs || bucket > asks.bucket + 1) {
    return { ttlMs, bucket, curr: units, prev: 0 };
  }
  if (bucket === asks.bucket + 1) return { ttlMs, bucket, curr: units, prev: asks.curr };
  // The same bucket (or an earlier clock: counted in the current one).
  return { ...asks, curr: asks.curr + units };
}

function ceilDivBig(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** The answer to a call already applied: its verdicts as remembered, with the key's figures as they are now. */
function replay(record: LimiterRecord | null, input: CallInput, seen: AppliedCall, nowMs: number): CallResult {
  const peek = peekRecord(record, input.rule, nowMs);
  const results = replayedResults(input, seen, nowMs, {
    remaining: peek.remaining,
    resetAfterMs: peek.resetAfterMs,
    retryAfterMs: Math.max(1, peek.retryAfterMs ?? 1),
  });
  const lease = seen.leaseUnits > 0 ? { units: seen.leaseUnits, atMs: seen.atMs, forMs: seen.leaseForMs } : null;
  const refunded =
    (input.giveBack?.length ?? 0) > 0 ? { remaining: peek.remaining, resetAfterMs: peek.resetAfterMs } : null;
  return { atMs: nowMs, results, lease, replayed: true, ...(refunded === null ? {} : { refunded }) };
}

/**
 * The results of a call applied before (`seen`), answered again as remembered (the key's object's `replay`, a
 * delegate's `replayed`): its verdicts, with the figures the answerer knows now.
 */
export function replayedResults(
  input: CallInput,
  seen: AppliedCall,
  nowMs: number,
  figures: { readonly remaining: number; readonly resetAfterMs: number; readonly retryAfterMs: number },
): CheckResult[] {
  return input.costs.map((cost, i): CheckResult => {
    const verdict = seen.verdicts[i];
    if (verdict === "e" || verdict === undefined) {
      const out = decide(input.rule.params, null, cost, nowMs);
      return out.ok ? { ok: false, error: "invalid_cost" } : out;
    }
    const allowed = verdict === "1";
    const delayMs = allowed ? Math.max(0, (seen.delaysMs?.[i] ?? 0) - (nowMs - seen.atMs)) : 0;
    const { remaining, resetAfterMs } = figures;
    const retryAfterMs = allowed ? null : figures.retryAfterMs;
    return { ok: true, atMs: seen.atMs, decision: { allowed, remaining, resetAfterMs, retryAfterMs, delayMs } };
  });
}
