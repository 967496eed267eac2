/** A delegate's record (delegate.ts decides from it): its demand, load, renewal, and a window share's units ahead. */
import type { AlgorithmState } from "../algorithms/index.ts";
import type { ShareAsk, ShareGrant } from "./share.ts";
import type { AppliedCall, LeaseReturn, LimiterRule } from "./store.ts";
import {
  DELEGATE_AIM_CALLS_PER_S,
  DELEGATE_BUSY_CALLS_PER_S,
  DEMAND_BUCKET_MS,
  OLD_SHARE_FOR_MS,
  OLD_SHARE_MARGIN_MS,
  RENEW_LEAD_MS,
  RENEW_SLACK,
  SHARE_TERM_MS,
} from "./tunables.ts";

/** The share a delegate holds (rate: a bucket under its slice; window: units charged), and what it lent out of it. */
export interface HeldShare {
  readonly kind: "rate" | "window";
  /** The rule the share is under (the newest version the key's object had seen). */
  readonly rule: LimiterRule;
  /** The key's object's clock at the grant (a window share's refunds name it), ms. */
  readonly atMs: number;
  /** This delegate's clock when the share ends (the ask's sending time plus its term), and when to renew it, ms. */
  readonly endsAtMs: number;
  readonly renewAtMs: number;
  /** The demand per term the share was asked with (absent in an older record). */
  readonly demand?: number;
  /** The id of the ask the share answered (sent back as `ShareAsk.holding`; absent in an older record). */
  readonly askId?: string;
  /** The round trip of the renewal (or late first ask) the share answered, ms (a rate share renews that early). */
  readonly rttMs?: number;
  /** Rate share: parts of `SHARE_PARTS`, and the bucket under the sliced parameters (`null` with no parts). */
  readonly parts: number;
  readonly state: AlgorithmState | null;
  /** Rate share: its sub-leases' units still in its bucket (absent: none; a return matching none is dropped). */
  readonly reserved?: readonly Reservation[];
  /** Rate share: units of `reserved` taken out of the bucket, at most its refill over a lease's term (absent: 0). */
  readonly takenOut?: number;
  /** Rate share granted with spare (`ShareGrant.spare`): what its slice refuses passes to the key's object. */
  readonly spare?: boolean;
  /** Window share: units granted, and those still to admit from. */
  readonly units: number;
  readonly unitsLeft: number;
  /** Window share: the window was spent at the grant: refuse beyond these units until the term ends. */
  readonly short: boolean;
  /** Window share: units lent out of it and earlier shares of its window and parameters, not back yet (`takeBack`). */
  readonly lent?: number;
  /** Window share: units of the next window granted ahead, used from `fromMs` (`rollAhead`; absent: none). */
  readonly ahead?: AheadHeld;
}

/** A rate sub-lease's units, reserved in its share's bucket (docs/production.md, "the bound, path by path"). */
export interface Reservation {
  /** The delegate's clock at the lending (the lease's `atMs`, which its return names), ms. */
  readonly atMs: number;
  /** The sub-lease's id (the lending call's), which its return names; absent in an older record. */
  readonly id?: string;
  /** Units lent, or (once given back: `untilMs` then passed) the units used, to charge. */
  readonly units: number;
  /** When the units are charged, ms: the lease's end plus `RESERVATION_WAIT_MS` for its return; or its return's time. */
  readonly untilMs: number;
}

export interface DelegateRecord {
  readonly v: 1;
  readonly share: HeldShare | null;
  /** Whether the key is hot, as the last grant said (`false`: callers go back to the key's object). */
  readonly hot: boolean;
  /** Cost asked of this delegate (`demandPerTerm`) per `DEMAND_BUCKET_MS` bucket (`bucket`: the current's index). */
  readonly demand: Counts<"bucket">;
  /** Units to give back to the key's object with the next ask. */
  readonly giveBack: readonly LeaseReturn[];
  /** Calls answered lately (a retried call is answered as remembered, not decided twice). */
  readonly calls: readonly AppliedCall[];
  /** Calls decided per second: the current (`second`: its index) and the last (absent in a record from before it). */
  readonly load?: Counts<"second">;
  /** A window share's renewal while unanswered: sent again as it was (its id), nothing charged or given back twice. */
  readonly pending?: { readonly ask: ShareAsk; readonly sentAtMs: number };
  /** Calls whose units given back were taken before they were decided (`takeBack`); absent: none. */
  readonly taken?: readonly string[];
  /** Share asks sent (`ShareAsk.seq`: the key's object ignores one overtaken by a later one); absent: none. */
  readonly asks?: number;
}

export const NEW_DELEGATE: DelegateRecord = {
  v: 1,
  share: null,
  hot: true,
  demand: { bucket: 0, curr: 0, prev: 0 },
  giveBack: [],
  calls: [],
};

/** Counts in the current and the previous bucket, and the current one's index under its stored name `K`. */
type Counts<K extends string> = { readonly [k in K]: number } & { readonly curr: number; readonly prev: number };

/**
 * Counts rolled to the bucket of index `at` (`key`: the index's name): a new bucket starts empty, the last one kept if
 * it was the one before (none if there were no counts, or the clock stepped back).
 */
function rollTo<K extends string>(c: Counts<K> | undefined, key: K, at: number): Counts<K> {
  if (c !== undefined && c[key] === at) return c;
  return { [key]: at, curr: 0, prev: c !== undefined && at === c[key] + 1 ? c.curr : 0 } as Counts<K>;
}

/** A share's whole term, ms: `adoptGrant` renews it a quarter term before its end. */
const termOf = (share: Pick<HeldShare, "endsAtMs" | "renewAtMs">) => 4 * (share.endsAtMs - share.renewAtMs);

/**
 * Whether the share should be renewed now, in the background, with demand: in its term's last quarter, at most
 * `RENEW_LEAD_MS` before its end, a rate share at least `rttLeadMs` before it; or a rate share of a whole term or more
 * whose demand moved (`demandMoved`): a settled term grows to 4 s (share_grant.ts `rateTermMs`), too long to wait.
 */
export function renewDue(record: DelegateRecord, nowMs: number): boolean {
  const share = record.share;
  // A window share holding units of the next window goes on with them at its end (`rollAhead`).
  if (share === null || share.ahead !== undefined) return false;
  const demand = demandPerTerm(record, nowMs);
  if (demand <= 0) return false;
  const termMs = termOf(share);
  // `rttLeadMs` (docs/production.md, `RENEW_LEAD_MS`), at most half its term; no earlier: its old parts stay promised.
  const rtt = share.kind === "rate" ? (share.rttMs ?? 0) : 0;
  const rttLeadMs = rtt > 0 ? Math.min(rtt, Math.floor(termMs / 2)) : 0;
  const dueMs = Math.min(Math.max(share.renewAtMs, share.endsAtMs - RENEW_LEAD_MS), share.endsAtMs - rttLeadMs);
  if (nowMs >= dueMs) return true;
  // Only a share of a whole term or more (a shorter one renews soon anyway), a quarter of `SHARE_TERM_MS` old.
  if (share.kind !== "rate" || share.demand === undefined || termMs < SHARE_TERM_MS) return false;
  if (nowMs - (share.endsAtMs - termMs) < SHARE_TERM_MS / 4) return false;
  // A busy delegate's isolates are moving to their own shards: a quarter's fall frees their parts for the new shards.
  const fell = Math.max(RENEW_SLACK, Math.floor(share.demand / 4));
  const load = rollTo(record.load, "second", Math.floor(nowMs / 1000));
  const busy = Math.max(load.curr, load.prev) >= DELEGATE_BUSY_CALLS_PER_S;
  return demandMoved(share.demand, demand) || (busy && share.demand - demand > fell);
}

/** How long a rate share is used after its renewal is sent, ms (`oldForMs`: the object frees its parts then). */
export function oldShareForMs(share: { readonly rttMs?: number }): number {
  const rtt = share.rttMs;
  return rtt === undefined || rtt <= 0 ? OLD_SHARE_FOR_MS : Math.min(OLD_SHARE_FOR_MS, rtt + OLD_SHARE_MARGIN_MS);
}

/** A live rate share whose renewal is sent now: it ends `oldShareForMs` from now at the latest. */
export function usedUntilAnswer(share: HeldShare, nowMs: number): { share: HeldShare; forMs: number } {
  const forMs = oldShareForMs(share);
  const untilMs = nowMs + forMs;
  if (untilMs >= share.endsAtMs) return { share, forMs };
  return { share: { ...share, endsAtMs: untilMs, renewAtMs: Math.min(share.renewAtMs, untilMs) }, forMs };
}

/**
 * A window share's pace per term (units it admitted since its term began, over at least a tenth of a term) when it at
 * least doubles the demand it was asked with, else 0 (why: docs/production.md's tuning table, `DEMAND_BUCKET_MS`).
 */
export function windowPace(
  share: Pick<HeldShare, "kind" | "endsAtMs" | "renewAtMs" | "demand" | "units" | "unitsLeft" | "lent"> | null,
  nowMs: number,
): number {
  const used = share === null ? 0 : share.units - share.unitsLeft - (share.lent ?? 0);
  if (share === null || share.kind !== "window" || used <= 0) return 0;
  const elapsedMs = Math.max(SHARE_TERM_MS / 10, nowMs - (share.endsAtMs - termOf(share)));
  const pace = Math.floor((used * SHARE_TERM_MS) / elapsedMs);
  return pace >= 2 * (share.demand ?? 0) ? pace : 0;
}

/** Whether demand per term moved from `was` to `now` by more than half of `was` and more than `RENEW_SLACK`. */
export function demandMoved(was: number, now: number): boolean {
  return Math.abs(now - was) > Math.max(RENEW_SLACK, Math.floor(was / 2));
}

/** Cost asked per term, sliding over `DEMAND_BUCKET_MS`: this bucket's, the last one's weighed by how much is in. */
export function demandPerTerm(record: Pick<DelegateRecord, "demand">, nowMs: number): number {
  const d = rolled(record.demand, nowMs);
  const bucketMs = DEMAND_BUCKET_MS;
  const elapsedMs = Math.min(bucketMs, Math.max(0, nowMs - d.bucket * bucketMs));
  const weighed = d.curr * bucketMs + d.prev * (bucketMs - elapsedMs);
  return Math.floor((weighed * SHARE_TERM_MS) / (bucketMs * bucketMs));
}

/** The demand buckets rolled to `nowMs`'s bucket (`rollTo`). */
export const rolled = (d: Counts<"bucket">, nowMs: number) => rollTo(d, "bucket", Math.floor(nowMs / DEMAND_BUCKET_MS));

/** The parts a share granted for demand `was` needs for `now`: if it fell, in proportion, 2 Poisson sd to spare. */
export function keptParts(parts: number, was: number | undefined, now: number): number {
  if (was === undefined || was <= 0 || now >= was) return parts;
  const need = now + 2 * Math.ceil(Math.sqrt(now)) + 1;
  return Math.min(parts, Math.max(now > 0 ? 1 : 0, Math.ceil((parts * need) / was)));
}

/**
 * One more call at `nowMs`: its count per second, whether busy (docs/production.md, `DELEGATE_BUSY_CALLS_PER_S`:
 * this or the last second, or a first second's surge at twice it), and the spread (`KeyState.spread`): the share of its
 * calls (the last second's, or this one's over 250 ms at least) to move for the rest to be `DELEGATE_AIM_CALLS_PER_S`.
 */
export function countLoad(record: Pick<DelegateRecord, "load">, nowMs: number) {
  const was = record.load;
  const second = Math.floor(nowMs / 1000);
  const at = rollTo(was, "second", second);
  // A clock stepping back counts nothing new.
  const load = was !== undefined && second < was.second ? was : { ...at, curr: at.curr + 1 };
  const calls = Math.max(load.curr, load.prev);
  const perS = Math.max(load.prev, (load.curr * 1000) / Math.max(250, nowMs - load.second * 1000));
  const spread = calls >= 2 * DELEGATE_BUSY_CALLS_PER_S ? 1 : Math.max(0, 1 - DELEGATE_AIM_CALLS_PER_S / perS);
  const surge = load.prev === 0 && perS >= 2 * DELEGATE_BUSY_CALLS_PER_S;
  return { load, busy: calls >= DELEGATE_BUSY_CALLS_PER_S || surge, spread };
}

/** Units of the next window a delegate holds ahead. */
export interface AheadHeld {
  readonly units: number;
  /** The key's object's clock at the next window's start, ms (their refunds name it). */
  readonly atMs: number;
  /** This delegate's clock from when they may be used, and when the share they become ends, ms. */
  readonly fromMs: number;
  readonly endsAtMs: number;
}

/**
 * The units ahead a window grant (asked at `sentAtMs`, answered at `nowMs`) brings, as a field of the share. Whatever
 * the clocks' offset, the share is used until the ask's send plus its term (before the window's end), the units ahead
 * from the answer's arrival plus it (after); batches between wait.
 */
export function aheadHeld(grant: ShareGrant, sentAtMs: number, nowMs: number): { readonly ahead?: AheadHeld } {
  const a = grant.ahead;
  if (a === undefined || !(a.units >= 1) || !(a.termMs >= 1)) return {};
  const fromMs = nowMs + grant.termMs;
  return { ahead: { units: a.units, atMs: a.atMs, fromMs, endsAtMs: sentAtMs + grant.termMs + a.termMs } };
}

/** Whether a window grant is short (refusing past its units): the window spent, or units ahead and too few left. */
export function windowShort(grant: ShareGrant, asked: number): boolean {
  return grant.units < asked && (grant.remaining === 0 || (grant.ahead !== undefined && grant.remaining < asked));
}

/** How long a batch at `nowMs` waits for the share's units ahead (from the share's end until usable; 0: none). */
export function aheadWaitMs(record: DelegateRecord, nowMs: number): number {
  if (record.share?.ahead === undefined || nowMs < record.share.endsAtMs) return 0;
  return Math.max(0, record.share.ahead.fromMs - nowMs);
}

/** The units ahead become the share once it ended and they are usable (its units, a past window's, not given back). */
export function rollAhead(record: DelegateRecord, nowMs: number): DelegateRecord {
  const share = record.share;
  const ahead = share?.ahead;
  if (share == null || ahead === undefined || nowMs < share.endsAtMs || nowMs < ahead.fromMs) return record;
  const { ahead: _ahead, lent: _lent, ...rest } = share;
  const { atMs, endsAtMs, units } = ahead;
  const renewAtMs = endsAtMs - Math.floor(Math.max(1, endsAtMs - ahead.fromMs) / 4);
  return { ...record, share: { ...rest, atMs, endsAtMs, renewAtMs, units, unitsLeft: units, short: false } };
}

/**
 * Whether the alarm at a share's end (or a delegate's idle check) gives units back: a window share's units left, and
 * units kept for an ask that no batch made. Not while a share is live or has units ahead (the share goes on with those).
 */
export function releaseDue(record: DelegateRecord, nowMs: number): boolean {
  const s = record.share;
  if (s !== null && (nowMs < s.endsAtMs || s.ahead !== undefined)) return false;
  return (s?.kind === "window" && s.unitsLeft > 0) || record.giveBack.length > 0;
}
