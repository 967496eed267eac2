/**
 * `SluiceLimiter`: one Durable Object per (rule, key), named by names.ts (the rule id and the key's hash, never the
 * raw key). A thin shell around the pure record protocol (store.ts): it reads an injected clock (the runtime's
 * `Date.now()` unless a test passes its own), keeps the record in memory and, on every change, writes it to SQLite
 * storage synchronously before answering (the record without its call ids, and the applied call as one slot of a
 * ring, call_slots.ts). A restarted object reloads the record, so it grants no free allowance; calls to one object
 * are serialised and never await before their write, so concurrent checks never interleave.
 *
 * An alarm deletes the record once it is as good as fresh (`freshAtMs`), re-armed by itself if the key was used
 * since: one alarm write per idle period, not one per request.
 * RPC (types in store.ts): `check` decides a batch at one instant (coalesce.ts), takes back a lease's unused units,
 * grants a new one, and answers a call id it already applied as remembered, charging nothing; `refund` gives an
 * admission back; `release` gives a concurrency rule's slots back; `peek` and `reset` serve the admin API. One object,
 * named `BAN_INDEX_NAME`, is the ban index instead (`noteBan`, `bans`, `forgetBan`).
 */
import { DurableObject } from "cloudflare:workers";
import { type Clock, systemClock } from "../isolate/time.ts";
import { CALL_KEY_PREFIX, CallSlots, callKey, RECORD_KEY, writesOf } from "../protocol/call_slots.ts";
import { keyCall, keyFreshAtMs, keyPeek, type ShareAsk, type ShareGrant } from "../protocol/share.ts";
import { shareRecord } from "../protocol/share_grant.ts";
import { type ReleaseInput, type ReleaseResult, releaseRecord, renewRecord } from "../protocol/slots.ts";
import {
  type AppliedCall,
  type CallInput,
  CallPace,
  type CallResult,
  type LimiterRecord,
  type LimiterRule,
  type PeekResult,
  type RefundInput,
  type RefundResult,
  refundRecord,
} from "../protocol/store.ts";
import { BAN_INDEX_MAX, type BanNote } from "./ban_note.ts";

const BAN_PREFIX = "ban:";

/** The most an object's alarm is put off after its record is fresh, ms. */
export const ALARM_SPREAD_MS = 60_000;

/**
 * How long after its record is fresh an object's alarm fires: an offset in [0, ALARM_SPREAD_MS) of its own, from its id
 * (hex). The keys of a window rule are fresh at the same instant (the window's end), and their alarms all at once
 * would be a herd that stalls the runtime (CHANGELOG.md). A fresh record is as good as none, so deleting it later
 * changes no decision.
 */
export function alarmSpreadMs(idHex: string): number {
  return Number.parseInt(idHex.slice(-8), 16) % ALARM_SPREAD_MS;
}

export class SluiceLimiter extends DurableObject {
  /** `undefined` until loaded from storage; `null` when the key has no state. */
  private record: LimiterRecord | null | undefined;
  /** When the alarm is set for, ms; `null` when none; `undefined` until read from storage. */
  private alarmAtMs: number | null | undefined;
  /** The write every change since the last one is waiting for; `null` when none is scheduled. */
  private pendingCommit: Promise<void> | null = null;
  /** Where each remembered call is stored; set by `load`. */
  private slots = new CallSlots();
  /** Calls applied since the last write, each to its slot. */
  private pendingCalls: { readonly slot: number; readonly call: AppliedCall }[] = [];
  /** Its calls' pace, refusals included (store.ts `CallPace`): in memory only. */
  private readonly pace = new CallPace();

  /** The runtime constructs it with `(ctx, env)`; a test may add its own clock, so it never races real time. */
  constructor(
    ctx: DurableObjectState,
    env: Cloudflare.Env,
    private readonly clock: Clock = systemClock,
  ) {
    super(ctx, env);
  }

  async check(input: CallInput): Promise<CallResult> {
    const nowMs = this.clock();
    const before = this.load();
    const { result, record } = keyCall(before, input, nowMs, this.pace.note(nowMs));
    await this.apply(before, record);
    return result;
  }

  /** A delegate's ask for its share of this key (share.ts): granted, renewed or let go, in this key's record. */
  async share(ask: ShareAsk): Promise<ShareGrant> {
    const before = this.load();
    const { grant, record } = shareRecord(before, ask, this.clock());
    await this.apply(before, record);
    return grant;
  }

  /** Store a changed record, and the call it applied in its slot. */
  private async apply(before: LimiterRecord | null, record: LimiterRecord | null): Promise<void> {
    if (record === before) return;
    const { call } = writesOf(before, record);
    if (call !== null) this.pendingCalls.push({ slot: this.slots.next(), call });
    await this.save(record);
  }

  async refund(input: RefundInput): Promise<RefundResult> {
    const before = this.load();
    const { result, record } = refundRecord(before, input, this.clock());
    if (record !== before) await this.save(record);
    return result;
  }

  /** Give slots back (concurrency, slots.ts): idempotent, by slot id. */
  async release(input: ReleaseInput): Promise<ReleaseResult> {
    const before = this.load();
    const { result, record } = releaseRecord(before, input, this.clock());
    if (record !== before) await this.save(record);
    return result;
  }

  /** Renew slots' leases (concurrency, slots.ts): their requests still run. A slot whose lease ended stays ended. */
  async renew(input: ReleaseInput): Promise<ReleaseResult> {
    const before = this.load();
    const { result, record } = renewRecord(before, input, this.clock());
    if (record !== before) await this.save(record);
    return result;
  }

  peek(input: { readonly rule: LimiterRule }): PeekResult {
    return keyPeek(this.load(), input.rule, this.clock());
  }

  /** The delegates holding a share of this key (their holder ids, `weur.0`): what an admin reset also forgets. */
  shareHolders(): string[] {
    return (this.load()?.shares?.entries ?? []).map((e) => e.holder);
  }

  /** Forget the key: its next request starts fresh. `true` if there was state to forget. */
  async reset(): Promise<boolean> {
    const existed = this.load() !== null;
    this.record = null;
    this.alarmAtMs = null;
    this.slots.clear();
    this.pendingCalls = [];
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    return existed;
  }

  /** The ban index: note a ban an isolate met (kept until it ends; the newest note of a key wins). */
  noteBan(note: BanNote): void {
    const { kv } = this.ctx.storage;
    const live = this.bans();
    if (live.length >= BAN_INDEX_MAX && !live.some((b) => b.object === note.object)) {
      const soonest = live.reduce((a, b) => (b.untilMs < a.untilMs ? b : a));
      if (soonest.untilMs >= note.untilMs) return;
      kv.delete(BAN_PREFIX + soonest.object);
    }
    kv.put(BAN_PREFIX + note.object, note);
  }

  /** The ban index: the bans noted that have not ended, the longest first; ended ones are dropped. */
  bans(): BanNote[] {
    const { kv } = this.ctx.storage;
    const now = this.clock();
    const live: BanNote[] = [];
    for (const [key, note] of kv.list<BanNote>({ prefix: BAN_PREFIX })) {
      if (note.untilMs > now) live.push(note);
      else kv.delete(key);
    }
    return live.sort((a, b) => b.untilMs - a.untilMs);
  }

  /** The ban index: forget a key's ban (an admin reset lifted it). */
  forgetBan(object: string): void {
    this.ctx.storage.kv.delete(BAN_PREFIX + object);
  }

  override async alarm(): Promise<void> {
    this.alarmAtMs = null;
    const record = this.load();
    if (record === null) return;
    const freshAt = keyFreshAtMs(record);
    if (this.clock() >= freshAt) {
      this.record = null;
      this.slots.clear();
      this.pendingCalls = [];
      await this.ctx.storage.deleteAll();
      return;
    }
    await this.armAlarm(freshAt);
  }

  private load(): LimiterRecord | null {
    if (this.record !== undefined) return this.record;
    const { kv } = this.ctx.storage;
    const stored = kv.get<LimiterRecord>(RECORD_KEY) ?? null;
    const { slots, calls } = CallSlots.load(kv.list<AppliedCall>({ prefix: CALL_KEY_PREFIX }));
    this.slots = slots;
    this.record = stored === null || calls.length === 0 ? stored : { ...stored, calls };
    return this.record;
  }

  private async save(record: LimiterRecord | null): Promise<void> {
    this.record = record;
    if (record === null) {
      this.ctx.storage.kv.delete(RECORD_KEY);
      return;
    }
    await this.commit();
    if (this.alarmAtMs === undefined) this.alarmAtMs = await this.ctx.storage.getAlarm();
    // An alarm that fires early re-arms itself (see `alarm`), so one pending alarm is enough.
    if (this.alarmAtMs === null) await this.armAlarm(keyFreshAtMs(record));
  }

  /**
   * Group commit. Under load many requests reach one object at once, and one storage write each is what costs (a
   * SQLite commit per request). So a change waits one scheduler turn, during which other requests may run and change
   * the in-memory record too; then one write stores the latest record, and every request that waited answers after
   * it (the runtime's output gate holds each answer until its write is durable). No answer ever reflects a change that
   * is not stored: if the object dies before the write, none of those requests got an answer.
   */
  private commit(): Promise<void> {
    if (this.pendingCommit === null) {
      this.pendingCommit = scheduler.wait(0).then(() => {
        this.pendingCommit = null;
        const record = this.record;
        const calls = this.pendingCalls.splice(0);
        if (record === null || record === undefined) return; // reset or expired in the meantime: already deleted
        const { kv } = this.ctx.storage;
        for (const { slot, call } of calls) kv.put(callKey(slot), call);
        kv.put(RECORD_KEY, writesOf(null, record).record);
      });
    }
    return this.pendingCommit;
  }

  /** Arm the alarm for when the record is fresh, put off by this object's own spread (`alarmSpreadMs`). */
  private async armAlarm(freshAtMs: number): Promise<void> {
    // A record kept fresh (its call ids, shares or rules version outlive its state) may be fresh already: never arm
    // for a time that has passed (an emptied log is fresh at 0).
    const atMs = Math.max(freshAtMs, this.clock()) + alarmSpreadMs(this.ctx.id.toString());
    this.alarmAtMs = atMs;
    await this.ctx.storage.setAlarm(atMs);
  }
}
