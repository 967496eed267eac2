/** A key's state in an isolate's coalescer: arrivals, the lease to ask, where to call, "last known" refusals. */
import { type AlgorithmParams, type Decision, leasePolicy, leaseTermMs } from "../algorithms/index.ts";
import { uses } from "../protocol/mechanisms.ts";
import type { FailureKind, ObjectTransport } from "../protocol/object_call.ts";
import {
  type CallInput,
  type CallResult,
  type CheckResult,
  type LeaseReturn,
  type LimiterRule,
  leaseCapOf,
  type RefundResult,
} from "../protocol/store.ts";
import { burstFillMs, sameWindow, subleaseTermMs } from "../protocol/sublease.ts";
import { DELEGATE_SHARDS, HOT_HOLD_MS, SHARE_TERM_MS, SPREAD_HALF_LIFE_MS } from "../protocol/tunables.ts";
import type { LeaseSettings } from "../rules/types.ts";
import {
  type Asked,
  type AskedLease,
  type AskInput,
  AUTO_LEASE,
  type DelegateRoute,
  type HeldLease,
  type HotMark,
  leaseSettingsOf,
  type Waiting,
} from "./coalesce_types.ts";

/** A key's arrivals per bucket of the lease ttl (`bucket` = time / ttl), the run since a quiet bucket, the last. */
type Arrivals = { bucket: number; curr: number; prev: number; runStartMs: number; runCount: number; lastMs: number };

/** What an isolate keeps per key (made new for a key not tracked yet, or forgot). Times: its clock, ms; 0 is "not". */
export class KeyState {
  readonly name: string;
  transport: ObjectTransport;
  rule: LimiterRule;
  timeoutMs: number;
  leaseSettings: LeaseSettings | null; // the rule's `lease:`, `AUTO_LEASE` (leases only while busy), or `null`
  inFlight = false;
  inFlightSinceMs = 0;
  queue: Waiting[] = [];
  lease: HeldLease | null = null;
  returns: HeldLease[] = []; // leases ended or replaced: their unused units go back with the next call
  lastKnownUntilMs = 0; // the last grant was short: until then, requests beyond the lease are refused here
  shortAtMs = -Infinity; // when a grant was last short of this isolate's need (`subleaseAsk`)
  lastKnownRetryAtMs = 0;
  seen: Arrivals = { bucket: 0, curr: 0, prev: 0, runStartMs: 0, runCount: 0, lastMs: 0 };
  busyUntilMs = 0; // the key's object said busy: lease even below `above`
  lastAsk: AskedLease | undefined; // the lease the key's call in flight asked for
  refunds: LeaseReturn[] = []; // waiting for the key's next call
  refundWaiters: ((result: RefundResult) => void)[] = []; // who waits for `refunds` to land
  returnsArmed = false; // a timer will send `refunds` and `returns` if no call takes them first
  returnsNotBeforeMs = 0; // no call of their own for refunds before then (an overloaded object sent them back)
  overloadedUntilMs = 0;
  grantHotUntilMs = 0; // hot until a term after the last lease granted here ended (`isHot`)
  delegate: DelegateRoute | null;
  hotUntilMs: number; // batches go to the delegate until then
  delegateDownUntilMs = 0; // the delegate is avoided after a failed call
  /** The share of the region's isolates to be on their own shards, heard at `spreadAtMs` (`spreadAt`). */
  spread: number;
  spreadAtMs: number;
  hotMarkRead: boolean; // for this hot spell
  spreadMark: ((name: string) => Promise<number | null>) | null;

  constructor(input: AskInput, now: number) {
    this.name = input.name;
    this.transport = input.transport;
    this.rule = input.rule;
    this.timeoutMs = input.timeoutMs;
    this.leaseSettings = leaseSettingsOf(input);
    this.delegate = input.delegate ?? null;
    this.hotUntilMs = input.delegate == null ? 0 : (input.hotMark?.untilMs ?? 0);
    this.spread = input.delegate == null ? 0 : Math.min(MAX_SPREAD, input.hotMark?.spread ?? 0);
    this.spreadAtMs = now;
    this.hotMarkRead = input.hotMark != null || input.spreadMark == null;
    this.spreadMark = input.spreadMark ?? null;
  }

  /** Count an arrival, in buckets of the lease ttl (1 s without a lease). */
  see(now: number): void {
    this.roll(now);
    if (this.seen.prev === 0 && this.seen.curr === 0) {
      // The key was quiet here for a whole bucket: a new run of arrivals starts now.
      this.seen.runStartMs = now;
      this.seen.runCount = 0;
    }
    this.seen.curr++;
    this.seen.runCount++;
    this.seen.lastMs = now;
  }

  /** Uncount an arrival whose admission was given back: leases are sized by the arrivals that keep theirs. */
  unsee(now: number): void {
    this.roll(now);
    if (this.seen.curr > 0) this.seen.curr--;
    else if (this.seen.prev > 0) this.seen.prev--;
    if (this.seen.runCount > 0) this.seen.runCount--;
  }

  roll(now: number): void {
    const bucket = Math.floor(now / (this.leaseSettings?.ttlMs ?? 1000));
    if (bucket !== this.seen.bucket) {
      this.seen.prev = bucket === this.seen.bucket + 1 ? this.seen.curr : 0;
      this.seen.curr = 0;
      this.seen.bucket = bucket;
    }
  }

  /** Arrivals per lease ttl, the larger of two buckets; a younger run from its 3rd arrival (a hot key leases now). */
  seenPerTtl(now: number): number {
    this.roll(now);
    const seen = Math.max(this.seen.prev, this.seen.curr);
    const ttlMs = this.leaseSettings?.ttlMs ?? 1000;
    const elapsedMs = now - this.seen.runStartMs;
    if (this.seen.runCount < 3 || elapsedMs >= ttlMs) return seen;
    return Math.max(seen, Math.floor(((this.seen.runCount - 1) * ttlMs) / Math.max(elapsedMs, ttlMs / 10)));
  }

  /** The lease to ask for with the next call, if any; to a delegate, a sub-lease whatever `above` and busy say. */
  leaseAsk(now: number, toDelegate = false): CallInput["lease"] {
    const settings = this.leaseSettings;
    if (settings === null) return null;
    if (toDelegate) return this.subleaseAsk(now);
    const seen = this.seenPerTtl(now);
    // Above `above`: seen / ttl > tokens / perMs, in integers. A busy object (many isolates, each under it) leases too.
    const busy = now < this.busyUntilMs;
    if (settings === AUTO_LEASE && !busy) return null;
    const above = settings.above;
    if (above !== null && !busy && seen * above.perMs <= above.tokens * settings.ttlMs) return null;
    // What it saw in one ttl, and two standard deviations of a Poisson count: rarely spent before its term.
    return { units: settings.units ?? seen + 2 * Math.ceil(Math.sqrt(seen)) + 1, ttlMs: settings.ttlMs };
  }

  /** What this isolate expects to need of the key over `ttlMs` (`seenPerTtl` scaled, rounded up). */
  seenOver(now: number, ttlMs: number): number {
    return Math.ceil((this.seenPerTtl(now) * ttlMs) / (this.leaseSettings?.ttlMs ?? 1000));
  }

  /** A sub-lease to ask: what was seen over its term, no margin, none below 2 (docs/production.md, "Sub-leases"). */
  subleaseAsk(now: number): CallInput["lease"] {
    const settings = this.leaseSettings;
    const kind = leasePolicy(this.rule.params.algorithm).kind;
    if (settings === null || kind === "none") return null;
    const full = subleaseTermMs(settings.ttlMs, kind);
    const tight = now - this.shortAtMs < SHARE_TERM_MS;
    const rateMs = tight ? Math.min(full, burstFillMs(this.rule.params)) : full;
    const ttlMs = kind === "window" ? windowSubleaseTermMs(this.rule.params, now, full) : rateMs;
    // None the window's end would cut: near it the delegate decides every batch, so no units sit with isolates then.
    if (leaseTermMs(this.rule.params, now, ttlMs) < ttlMs) return null;
    const need = this.seenOver(now, ttlMs);
    if (need < 2) return null;
    return { units: Math.min(need, settings.units ?? need, leaseCapOf(this.rule.params)), ttlMs };
  }

  /** The key's next call's delegate, while hot and not failing; its own shard once its draw is below the spread. */
  delegateFor(now: number): DelegateRoute | null {
    if (this.delegate === null || now >= this.hotUntilMs || now < this.delegateDownUntilMs) return null;
    const own = this.delegate.ownShard;
    return own !== undefined && (this.delegate.draw ?? 0) < this.spreadAt(now) ? own : this.delegate;
  }

  /** Whether the spread decays and grows by busy answers: a window rule's (a rate share settles too slowly for it). */
  spreadDecays(): boolean {
    return uses("spread") && leasePolicy(this.rule.params.algorithm).kind === "window";
  }

  /** The key's spread at `now`: the one heard at `spreadAtMs`, decayed since if it decays. */
  spreadAt(now: number): number {
    return this.spreadDecays() ? decayedSpread(this.spread, now - this.spreadAtMs) : this.spread;
  }

  /** Raise the key's spread to `spread` (at most `MAX_SPREAD`) if above what it is now; it decays from `now` on. */
  spreadTo(spread: number, now: number): void {
    if (spread <= this.spreadAt(now)) return;
    this.spread = Math.min(MAX_SPREAD, spread);
    this.spreadAtMs = now;
  }

  /** The first shard said busy, `moving` its calls' share to move (1: overloaded): docs/production.md, "spread". */
  heardBusy(moving: number, now: number): void {
    const share = Math.min(1, Math.max(0, moving));
    const spread = this.spreadAt(now);
    this.spreadTo(this.spreadDecays() ? spread + (1 - spread) * share : share, now);
  }

  /** Before a hot spell's first call to the first shard: read the mark's spread, and move if it says so. */
  async readMark(clock: () => number): Promise<DelegateRoute | null> {
    this.hotMarkRead = true;
    if (this.spreadMark !== null) this.spreadTo((await this.spreadMark(this.name).catch(() => null)) ?? 0, clock());
    return this.delegateFor(clock());
  }

  /** A lapsed hot spell renewed by the mark read for this request, or ended by its absence (`undefined`: none read). */
  takeMark(mark: HotMark | null | undefined, now: number): void {
    if (mark === undefined || this.delegate === null || this.hotUntilMs === 0 || now < this.hotUntilMs) return;
    this.hotUntilMs = mark?.untilMs ?? 0;
    this.spreadTo(mark?.spread ?? 0, now);
  }

  /** An answer said the key is hot (go to the delegate) or cold (`false`: back to the key's object). */
  noteHot(hot: boolean | undefined, now: number): void {
    if (hot === true) this.hotUntilMs = now + HOT_HOLD_MS;
    else if (hot === false) {
      this.hotUntilMs = 0;
      this.spread = 0;
      this.spreadAtMs = now;
      this.hotMarkRead = this.spreadMark === null;
    }
  }

  /** This isolate holds or held a share of the key lately, or the key's object says it is busy. */
  isHot(now: number): boolean {
    const until = Math.max(this.hotUntilMs, this.busyUntilMs, this.overloadedUntilMs, this.grantHotUntilMs);
    return now < until || this.lease !== null;
  }

  /**
   * The key's object is known busy here: it said so, or was overloaded, or the last answer was short (then a late
   * answer is not waited for: `awaitLate`). A key hot by construction or by a mark is not busy by that alone.
   */
  knownBusy(now: number): boolean {
    return now < Math.max(this.busyUntilMs, this.overloadedUntilMs, this.lastKnownUntilMs);
  }

  /** A busy failure of the key's object sends the key to its delegate, as `hot` would (an overloaded object throws). */
  overloadTeachesHot(failure: FailureKind, now: number): boolean {
    if (this.delegate === null || leasePolicy(this.rule.params.algorithm).kind === "none") return false;
    if (!busyFailure(failure)) return false;
    this.hotUntilMs = Math.max(this.hotUntilMs, now + HOT_HOLD_MS);
    return true;
  }

  /** A last known refusal, its retry when this isolate asks again (or the key reopens, if the object said). */
  lastKnownRefusal(now: number): Asked {
    const waitMs = Math.max(1, this.lastKnownRetryAtMs - now);
    const decision = { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 };
    return heldAnswer(now, decision, () => Promise.resolve(null));
  }
}

/**
 * A window rule's sub-lease term, ms: in a window's last 4 terms, a quarter of what is left (at least half a term):
 * units isolates hold die with them (a redeploy) or strand at the window's end, where a window binds.
 */
export function windowSubleaseTermMs(params: AlgorithmParams, now: number, fullMs: number): number {
  if (!sameWindow(params, now - 8 * fullMs, now)) return fullMs;
  return Math.min(fullMs, Math.max(Math.ceil(fullMs / 2), Math.floor(leaseTermMs(params, now, 4 * fullMs) / 4)));
}

/** Whether a grant is short of `asked`'s need; a sub-lease by its pace (a delegate cuts a smaller one's term). */
export function shortOf(asked: AskedLease | undefined, units: number, forMs: number): boolean {
  if (asked === undefined) return false;
  if (asked.sub !== true || units === 0) return units < asked.need;
  return units * asked.ttlMs < asked.need * forMs;
}

/** The highest spread: every one of the `DELEGATE_SHARDS` shards then has as many of the region's isolates. */
export const MAX_SPREAD = 1 - 1 / DELEGATE_SHARDS;

/** A spread heard `ageMs` ago, now: halved every `SPREAD_HALF_LIFE_MS` (the region's load may have fallen since). */
export function decayedSpread(spread: number, ageMs: number): number {
  return ageMs <= 0 ? spread : spread * 0.5 ** (ageMs / SPREAD_HALF_LIFE_MS);
}

/** Request `i`'s result from a call answered after its budget; a rejection is marked handled (few callers look). */
export function lateResult(late: Promise<CallResult>, i: number): Promise<CheckResult> {
  const result = late.then((r): CheckResult => r.results[i] ?? { ok: false, error: "invalid_cost" });
  result.catch(() => undefined);
  return result;
}

/** A failure that says the object is busy, not broken: overloaded, or no answer within the budget. */
export const busyFailure = (failure: FailureKind): boolean => failure === "overloaded" || failure === "timeout";

/** An answer from what this isolate holds of the key, without a call (its lease, or a last known refusal). */
export function heldAnswer(atMs: number, decision: Decision, refund: () => Promise<RefundResult>): Asked {
  return { kind: "answered", result: { ok: true, atMs, decision }, source: "lease", attempts: 0, refund };
}

/** FNV-1a of a string, as an unsigned 32-bit seed (never 0). */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0 || 1;
}

/** Which of `shards` an isolate's id picks: by the high bits of its hash (FNV-1a's low bits follow the input's). */
export const shardOf = (text: string, shards: number): number => (hashString(text) >>> 16) % shards;

/** An isolate's own shard (1 to `DELEGATE_SHARDS` - 1) and its draw in [0, 1), by two hashes of its id. */
export function ownShardOf(id: string): { readonly shard: number; readonly draw: number } {
  return { shard: 1 + shardOf(id, DELEGATE_SHARDS - 1), draw: hashString(`draw:${id}`) / 2 ** 32 };
}
