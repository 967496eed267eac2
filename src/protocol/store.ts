// long-file: the record and every operation on it (checks, refunds, batches, leases, versions), one pure protocol.
/**
 * What a limiter keeps per (rule, key), and the two operations on it, as pure functions of (record, input, now).
 * The Durable Object (exact, persisted) and the in-isolate store (`scope: local`, approximate) are shells around
 * these, and both run the same pure core as the simulator.
 *
 * Rule changes across a redeploy: the record remembers the parameters its state was made under, and the rules version
 * they came from. When a request arrives with other parameters of a version at least as new, `carryOver` converts the
 * state (tokens capped at the new burst, counts kept in an unchanged window, ...) or discards it (another algorithm,
 * another window); see docs/rules.md, "Changing a rule's
 * parameters". A request from an older version (an isolate the deploy or an
 * override change has not reached yet) is decided under the record's newer parameters (`ruleFor`): two versions
 * serving at once never thrash the state between two fingerprints.
 */
import {
  type AlgorithmState,
  capacityOf,
  carryOver,
  type Decision,
  decide,
  fingerprintOf,
  freshAtMs,
  leasePolicy,
  leaseRefillOver,
  leaseTermMs,
  refund,
} from "../algorithms/index.ts";
import { LEASE_MAX_SHARE_DIVISOR } from "../rules/lease.ts";
import type { AlgorithmParams } from "../rules/types.ts";

/** The stored record: the state and the parameters it was made under. */
export interface LimiterRecord {
  /** Record format version. */
  readonly v: 1;
  readonly params: AlgorithmParams;
  /** `JSON.stringify(params)`: compared to detect a rule change. */
  readonly fingerprint: string;
  readonly state: AlgorithmState;
  /** The rules version `params` came from (`LimiterRule.version`); absent: 0. */
  readonly version?: number;
  /** Calls applied in the last `CALL_MEMORY_MS` (at most `CALL_MEMORY_MAX`), so a retried call is not charged twice. */
  readonly calls?: readonly AppliedCall[];
  /** Lease units asked per ttl lately, across isolates: the key's demand, for sharing a short budget (`callRecord`). */
  readonly leaseAsks?: LeaseAsks;
  /** The shares granted to delegates, and the direct slice's state while rate shares are out (share.ts). */
  readonly shares?: ShareBook;
}

/**
 * The shares of a hot key's budget its object granted (src/protocol/share.ts owns every operation on it). Bounded:
 * at most `SHARE_HOLDERS_MAX` entries (a few hundred bytes each at most).
 */
export interface ShareBook {
  readonly entries: readonly ShareEntry[];
  /**
   * While rate shares are out: the slice of the rate the object decides direct calls from (`parts` of `SHARE_PARTS`,
   * what no live share holds) and its state under those parameters; the record's own `state` then waits unused.
   */
  readonly direct?: { readonly parts: number; readonly state: AlgorithmState | null };
  /** The key is hot until then (object clock), ms: callers are told to go to their region's delegate. */
  readonly hotUntilMs: number;
}

/** One holder's share, as the key's object remembers it. */
export interface ShareEntry {
  /** The holder: a delegate's region and shard (`weur.0`), never a key. */
  readonly holder: string;
  /** Rate share: parts of `SHARE_PARTS` of the rule's rate and burst. 0 for a window share. */
  readonly parts: number;
  /** Window share: units charged at `atMs` for it. 0 for a rate share. */
  readonly units: number;
  /** The object's clock at the grant, ms. */
  readonly atMs: number;
  /** When the share ends at the latest (object clock), ms: the grant time plus its term. */
  readonly endsAtMs: number;
  /** The holder's previous parts, still promised until `prevEndsAtMs` (the holder uses them until it hears). */
  readonly prevParts: number;
  readonly prevEndsAtMs: number;
  /** Cost the holder was asked for over its last term: its demand. */
  readonly demand: number;
  /** The ask this grant answered (a retried ask is answered again, not granted twice). */
  readonly askId: string;
}

/** Lease units asked in the current and the previous bucket of one ttl (`bucket` = floor(now / ttl)). */
export interface LeaseAsks {
  readonly ttlMs: number;
  readonly bucket: number;
  readonly curr: number;
  readonly prev: number;
}

/** The rule as the limiter sees it: its id (for messages) and its algorithm parameters. */
export interface LimiterRule {
  readonly id: string;
  readonly params: AlgorithmParams;
  /**
   * The rules version the parameters come from: the build's `RULES_VERSION`, or an account record's own for an
   * override (src/request/match.ts `compileOverride`). Monotonic; absent: 0.
   */
  readonly version?: number;
}

/**
 * The rule a call is decided under: its own, unless the record was made under a newer rules version, whose parameters
 * then decide it (the object obeys the newest version it has seen). Equal versions: the call's own (an unversioned
 * caller, or a redeploy of the same version, behaves as before versions).
 */
export function ruleFor(record: LimiterRecord | null, rule: LimiterRule): LimiterRule {
  if (record === null || (rule.version ?? 0) >= (record.version ?? 0)) return rule;
  return { id: rule.id, params: record.params, version: record.version ?? 0 };
}

export interface CheckInput {
  readonly rule: LimiterRule;
  /** Integer >= 1. */
  readonly cost: number;
}

export type CheckResult =
  | {
      readonly ok: true;
      readonly decision: Decision;
      /** The limiter's clock at the decision, ms: pass it back to `refund`. */
      readonly atMs: number;
    }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

export interface RefundInput {
  readonly rule: LimiterRule;
  readonly cost: number;
  /** `atMs` of the admitting check. */
  readonly admittedAtMs: number;
}

/** What the key looks like after a refund, for the RateLimit header: `null` when there was nothing to refund. */
export type RefundResult = { readonly remaining: number; readonly resetAfterMs: number } | null;

/** The state to decide on: the stored one, carried over to the current parameters, or `null` (fresh). */
function currentState(record: LimiterRecord | null, params: AlgorithmParams, fingerprint: string, nowMs: number) {
  if (record === null) return null;
  if (record.fingerprint === fingerprint) return record.state;
  return carryOver(record.params, params, record.state, nowMs);
}

/** Decide one request. `record` is the new record to store, or the very same object when nothing changed. */
export function checkRecord(
  record: LimiterRecord | null,
  input: CheckInput,
  nowMs: number,
): { readonly result: CheckResult; readonly record: LimiterRecord | null } {
  const rule = ruleFor(record, input.rule);
  const { params } = rule;
  const fingerprint = fingerprintOf(params);
  const state = currentState(record, params, fingerprint, nowMs);
  const out = decide(params, state, input.cost, nowMs);
  if (!out.ok) return { result: out, record };
  const result: CheckResult = { ok: true, decision: out.decision, atMs: nowMs };
  const version = rule.version ?? 0;
  const unchanged =
    record !== null &&
    record.fingerprint === fingerprint &&
    out.state === record.state &&
    version === (record.version ?? 0);
  if (unchanged) return { result, record };
  const next: LimiterRecord = { v: 1, params, fingerprint, state: out.state, ...(version === 0 ? {} : { version }) };
  return { result, record: record === null ? next : keepBookkeeping(record, next) };
}

/** A new record with the old one's call ids, lease asks and shares (which are not algorithm state). */
function keepBookkeeping(old: LimiterRecord, next: LimiterRecord): LimiterRecord {
  if (old.calls === undefined && old.leaseAsks === undefined && old.shares === undefined) return next;
  return {
    ...next,
    ...(old.calls === undefined ? {} : { calls: old.calls }),
    ...(old.leaseAsks === undefined ? {} : { leaseAsks: old.leaseAsks }),
    ...(old.shares === undefined ? {} : { shares: old.shares }),
  };
}

/**
 * Give back an admitted request's cost. A refund names units charged under the rule as its caller had it; a record
 * made under other parameters since (a deploy, an override change) takes them back in its own terms: its state is
 * that charge converted by the algorithm's carry-over, and a unit is one request under either rule, so nothing a caller
 * gives back is dropped (the algorithm's `refund` never gives back more than the state holds).
 */
export function refundRecord(
  record: LimiterRecord | null,
  input: RefundInput,
  nowMs: number,
): { readonly result: RefundResult; readonly record: LimiterRecord | null } {
  if (record === null) return { result: null, record };
  const { params } = record;
  const state = refund(params, record.state, input.cost, input.admittedAtMs);
  // Peek with a cost-1 check whose new state is thrown away: n cost-1 requests fit iff the first does and n-1 follow.
  const peek = decide(params, state, 1, nowMs);
  const remaining = peek.ok && peek.decision.allowed ? peek.decision.remaining + 1 : 0;
  const freshAt = freshAtMs(params, state);
  const resetAfterMs = Math.max(0, freshAt - nowMs);
  // A refund that leaves the key as good as fresh (an emptied log) drops the record: there is nothing to keep, and no
  // alarm to arm for a time that has already passed.
  return { result: { remaining, resetAfterMs }, record: freshAt <= nowMs ? null : { ...record, state } };
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
}

/** The key's state seen by a hypothetical cost-1 request at `nowMs`, whose new state is thrown away. */
export function peekRecord(record: LimiterRecord | null, rule: LimiterRule, nowMs: number): PeekResult {
  const { params } = ruleFor(record, rule);
  const state = currentState(record, params, fingerprintOf(params), nowMs);
  return peekState(params, state, nowMs);
}

/** `peekRecord` on a bare state (also used for `scope: local`). */
export function peekState(params: AlgorithmParams, state: AlgorithmState | null, nowMs: number): PeekResult {
  const out = decide(params, state, 1, nowMs);
  const resetAfterMs = state === null ? 0 : Math.max(0, freshAtMs(params, state) - nowMs);
  if (!out.ok) return { remaining: 0, resetAfterMs, retryAfterMs: null, atMs: nowMs };
  const d = out.decision;
  return {
    remaining: d.allowed ? d.remaining + 1 : 0,
    resetAfterMs,
    retryAfterMs: d.allowed ? null : d.retryAfterMs,
    atMs: nowMs,
  };
}

/** When the record is as good as no record, ms: its state is fresh and it remembers no recent call. */
export function recordFreshAtMs(record: LimiterRecord): number {
  const lastCallMs = record.calls?.at(-1)?.atMs;
  const fresh = freshAtMs(record.params, record.state);
  return lastCallMs === undefined ? fresh : Math.max(fresh, lastCallMs + CALL_MEMORY_MS);
}

// ---------------------------------------------------------------------------------------------------------------------
// One call: a batch of requests decided in arrival order, an id so a retry is never charged twice, and a lease.

/** How long the object remembers a call id, ms: far longer than any retry (which follows within one `timeout_ms`). */
export const CALL_MEMORY_MS = 60_000;
/** Calls per second for one key beyond which its object tells isolates it is busy (`CallResult.busy`). */
export const BUSY_CALLS_PER_S = 100;

/**
 * How many call ids the object remembers at most (oldest forgotten first). A retry follows its first attempt within
 * one call budget, while its isolate has no other call in flight for the key; 128 covers that at the object's own
 * limit of about 1,000 calls/s for budgets up to 128 ms, and at the busy mark (`BUSY_CALLS_PER_S`) for over a second.
 * The object stores each remembered call on its own (limiter.ts), so a call writes one entry, not the list.
 */
export const CALL_MEMORY_MAX = 128;

/** A call the object applied, as it remembers it (compactly: one character per request). */
export interface AppliedCall {
  readonly id: string;
  /** The object's clock when it applied the call, ms. */
  readonly atMs: number;
  /** Per request in order: `1` admitted, `0` denied, `e` an error value. */
  readonly verdicts: string;
  /** Per request, the admitted ones' shaping delays, ms; absent when all are 0. */
  readonly delaysMs?: readonly number[];
  /** Units of the lease it granted (0 for none). */
  readonly leaseUnits: number;
  /** The lease's term, ms. */
  readonly leaseForMs: number;
}

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
    const out = checkRecord(current, { rule: input.rule, cost }, nowMs);
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
  const results = input.costs.map((cost, i): CheckResult => {
    const verdict = seen.verdicts[i];
    if (verdict === "e" || verdict === undefined) {
      const out = decide(input.rule.params, null, cost, nowMs);
      return out.ok ? { ok: false, error: "invalid_cost" } : out;
    }
    const allowed = verdict === "1";
    const delayMs = allowed ? Math.max(0, (seen.delaysMs?.[i] ?? 0) - (nowMs - seen.atMs)) : 0;
    return {
      ok: true,
      atMs: seen.atMs,
      decision: {
        allowed,
        remaining: peek.remaining,
        resetAfterMs: peek.resetAfterMs,
        retryAfterMs: allowed ? null : Math.max(1, peek.retryAfterMs ?? 1),
        delayMs,
      },
    };
  });
  const lease = seen.leaseUnits > 0 ? { units: seen.leaseUnits, atMs: seen.atMs, forMs: seen.leaseForMs } : null;
  const refunded =
    (input.giveBack?.length ?? 0) > 0 ? { remaining: peek.remaining, resetAfterMs: peek.resetAfterMs } : null;
  return { atMs: nowMs, results, lease, replayed: true, ...(refunded === null ? {} : { refunded }) };
}
