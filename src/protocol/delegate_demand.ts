/**
 * A delegate's demand and when it renews its share (delegate.ts holds the share and decides from it): demand counted
 * in half-term buckets and estimated per term (`demandPerTerm`), the renewal due in the term's last quarter but
 * close to its end, or early when demand moved (`renewDue`), and the parts a rate share still needs when its demand
 * fell (`keptParts`, sent as the ask's `keep`); and the calls it decided per second (`countCall`): when it says busy.
 *
 * Pure functions of a delegate's record and its clock.
 */
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

/** Cost asked of a delegate: the current and the previous bucket of `DEMAND_BUCKET_MS` (`bucket`: its index). */
export interface DemandBuckets {
  readonly bucket: number;
  readonly curr: number;
  readonly prev: number;
}

/** What renewing needs of a delegate's record (delegate.ts `DelegateRecord`). */
interface Renewable {
  readonly share: {
    readonly kind: "rate" | "window";
    readonly endsAtMs: number;
    readonly renewAtMs: number;
    readonly demand?: number;
    readonly rttMs?: number;
    readonly ahead?: unknown;
  } | null;
  readonly demand: DemandBuckets;
  /** Calls decided per second (`countLoad`; absent: none counted). */
  readonly load?: CallLoad;
}

/**
 * Whether the share should be renewed now, in the background, with demand: in the last quarter of its term, but no
 * earlier than `RENEW_LEAD_MS` before its end (a long term's parts given up stay promised until its end: a short lead
 * wastes little of them), a rate share at least its last renewal's round trip before its end (`rttLeadMs`); or, a rate share of a whole term or more, a quarter of `SHARE_TERM_MS` old, when its demand
 * has moved by more than half (`demandMoved`) from the demand it was granted for (`HeldShare.demand`): a settled
 * share's term grows to 4 s (share_grant.ts `rateTermMs`), and demand that moves (isolates moving to their own
 * shards of a region, a surge) must not wait that long.
 */
export function renewDue(record: Renewable, nowMs: number): boolean {
  const share = record.share;
  // A window share holding units of the next window goes on with them at its end (delegate_ahead.ts).
  if (share === null || share.ahead !== undefined) return false;
  const demand = demandPerTerm(record, nowMs);
  if (demand <= 0) return false;
  const leadMs = share.endsAtMs - share.renewAtMs;
  const termMs = 4 * leadMs; // adoptGrant: the lead is a quarter of the term
  const dueMs = Math.min(Math.max(share.renewAtMs, share.endsAtMs - RENEW_LEAD_MS), share.endsAtMs - rttLeadMs(share));
  if (nowMs >= dueMs) return true;
  // Only a share of a whole term or more (a shorter one renews soon anyway), a quarter of `SHARE_TERM_MS` old.
  if (share.kind !== "rate" || share.demand === undefined || termMs < SHARE_TERM_MS) return false;
  const ageMs = nowMs - (share.endsAtMs - termMs);
  if (ageMs < SHARE_TERM_MS / 4) return false;
  // A busy delegate's isolates are moving to their own shards: its demand fallen by a quarter is enough, so that the
  // parts it no longer needs go to the new shards sooner (cluster simulation, 3 seeds: global-rate at 5,000 isolates
  // and a load growing to twice its rate, -19.0% of exact after the first second with half, -15.9% with a quarter).
  const fell = Math.max(RENEW_SLACK, Math.floor(share.demand / 4));
  return demandMoved(share.demand, demand) || (busyNow(record.load, nowMs) && share.demand - demand > fell);
}

/** Whether a delegate's calls in the current or the last second (`countLoad`) make it say busy at `nowMs`. */
function busyNow(load: CallLoad | undefined, nowMs: number): boolean {
  if (load === undefined) return false;
  const second = Math.floor(nowMs / 1000);
  const curr = load.second === second ? load.curr : 0;
  const prev = load.second === second ? load.prev : load.second === second - 1 ? load.curr : 0;
  return Math.max(curr, prev) >= DELEGATE_BUSY_CALLS_PER_S;
}

/**
 * How long a rate share is still used after its renewal is sent, unless the answer comes first, ms (sent as the ask's
 * `oldForMs`: the key's object keeps its parts promised until it received the ask plus this): the share's last
 * renewal's round trip and `OLD_SHARE_MARGIN_MS`, at most `OLD_SHARE_FOR_MS` (and that with no round trip measured).
 * The key's object used to keep a renewed or cut share's old parts promised until the old term's end, up to 4 s,
 * unused by anyone once the answer had come (cluster simulation, hot-rate at 1,000 isolates and 10k req/s: 2.3 points
 * of admission, 0.9 of them more than 300 ms before the old end). An answer later than this leaves the delegate
 * without a share until it comes: its batches wait for it (delegate_run.ts), none is refused for it. Shorter (one and
 * a half round trips and 20 ms) or longer (two and 20 ms) measured no better.
 */
export function oldShareForMs(share: { readonly rttMs?: number }): number {
  const rtt = share.rttMs;
  if (rtt === undefined || rtt <= 0) return OLD_SHARE_FOR_MS;
  return Math.min(OLD_SHARE_FOR_MS, rtt + OLD_SHARE_MARGIN_MS);
}

/**
 * A live rate share whose renewal is sent now: used `forMs` more at most (`oldShareForMs`), so it ends then unless it
 * ended sooner; the answer, when it comes first, replaces it.
 */
export function usedUntilAnswer<
  S extends { readonly rttMs?: number; readonly endsAtMs: number; readonly renewAtMs: number },
>(share: S, nowMs: number): { readonly share: S; readonly forMs: number } {
  const forMs = oldShareForMs(share);
  const untilMs = nowMs + forMs;
  if (untilMs >= share.endsAtMs) return { share, forMs };
  return { share: { ...share, endsAtMs: untilMs, renewAtMs: Math.min(share.renewAtMs, untilMs) }, forMs };
}

/**
 * How long before its end a rate share renews at least, ms: its last renewal's round trip (`rttMs`), so that the
 * answer comes back before the share ends; at most half its term (a round trip longer than that would renew it at
 * every batch). A quarter term renewed only its last quarter (62 ms) before its end, less than a far region's
 * 100-190 ms round trip: its share ended with the renewal in flight, its parts promised and unused (cluster simulation,
 * hot-rate 1,000 isolates at 10k req/s: about 20 parts per 1,000). Not earlier (1.5 round trips, or round trips of
 * first asks, which waited in the key's object's queue at a cold start): the key's object holds a renewed share's old
 * parts promised until its old end too, so an earlier renewal promises them twice for longer (measured: up to 2.4
 * points of admission less at hot-rate 200 isolates at 50k req/s). A window share renews in its last quarter only
 * (renewing gives its unused units back).
 */
export function rttLeadMs(share: {
  readonly kind: "rate" | "window";
  readonly endsAtMs: number;
  readonly renewAtMs: number;
  readonly rttMs?: number;
}): number {
  if (share.kind !== "rate" || share.rttMs === undefined || share.rttMs <= 0) return 0;
  const termMs = 4 * (share.endsAtMs - share.renewAtMs);
  return Math.min(share.rttMs, Math.floor(termMs / 2));
}

/**
 * A window share's pace, per term, when it at least doubles the demand the share was asked with (else 0, as for no
 * window share): the units it admitted since its term started (not those out in sub-leases, taken for half a term
 * ahead), over at least a tenth of a term. A new shard's demand grows while its region's isolates move to it, and the
 * half-term buckets (`demandPerTerm`) lag: its first shares ran dry and were renewed 3 to 6 times in a few hundred ms
 * (cluster simulation, hot-window at 5,000 isolates, the second after the cold start: 159 calls at the key's object,
 * 97 with this; counting sub-leased units too, 141 at 50k req/s).
 */
export function windowPace(
  share: {
    readonly kind: "rate" | "window";
    readonly endsAtMs: number;
    readonly renewAtMs: number;
    readonly units: number;
    readonly unitsLeft: number;
    readonly lent?: number;
    readonly demand?: number;
  } | null,
  nowMs: number,
): number {
  const used = share === null ? 0 : share.units - share.unitsLeft - (share.lent ?? 0);
  if (share === null || share.kind !== "window" || used <= 0) return 0;
  const startMs = share.endsAtMs - 4 * (share.endsAtMs - share.renewAtMs); // adoptGrant: the lead is a quarter
  const elapsedMs = Math.max(SHARE_TERM_MS / 10, nowMs - startMs);
  const pace = Math.floor((used * SHARE_TERM_MS) / elapsedMs);
  return pace >= 2 * (share.demand ?? 0) ? pace : 0;
}

/** Whether demand per term moved from `was` to `now` by more than half of `was` and more than `RENEW_SLACK`. */
export function demandMoved(was: number, now: number): boolean {
  return Math.abs(now - was) > Math.max(RENEW_SLACK, Math.floor(was / 2));
}

/**
 * Cost asked per term (`SHARE_TERM_MS`), estimated over the last `DEMAND_BUCKET_MS`, sliding: this bucket's, and the
 * last one's weighed by how much of it is in, scaled to a term.
 */
export function demandPerTerm(record: { readonly demand: DemandBuckets }, nowMs: number): number {
  const d = rolled(record.demand, nowMs);
  const bucketMs = DEMAND_BUCKET_MS;
  const elapsedMs = Math.min(bucketMs, Math.max(0, nowMs - d.bucket * bucketMs));
  const weighed = d.curr * bucketMs + d.prev * (bucketMs - elapsedMs);
  return Math.floor((weighed * SHARE_TERM_MS) / (bucketMs * bucketMs));
}

/** The demand buckets rolled to `nowMs`: a new bucket starts empty, the last one kept if it was the one before. */
export function rolled(d: DemandBuckets, nowMs: number): DemandBuckets {
  const bucket = Math.floor(nowMs / DEMAND_BUCKET_MS);
  if (bucket === d.bucket) return d;
  return { bucket, curr: 0, prev: bucket === d.bucket + 1 ? d.curr : 0 };
}

/**
 * The parts a rate share of `parts`, granted for demand `was`, still needs for demand `now` (per term): all of them
 * while demand holds or grows (or was never told); fewer in proportion when it fell, with a margin for chance (two
 * standard deviations of a Poisson count), at least 1 while there is demand.
 */
export function keptParts(parts: number, was: number | undefined, now: number): number {
  if (was === undefined || was <= 0 || now >= was) return parts;
  const need = now + 2 * Math.ceil(Math.sqrt(now)) + 1;
  return Math.min(parts, Math.max(now > 0 ? 1 : 0, Math.ceil((parts * need) / was)));
}

/** Calls a delegate decided per second: the current second (its index) and the last one. */
export interface CallLoad {
  readonly second: number;
  readonly curr: number;
  readonly prev: number;
}

/** The per-second call count with one more call at `nowMs`. */
export function countCall(load: CallLoad | undefined, nowMs: number): CallLoad {
  const second = Math.floor(nowMs / 1000);
  if (load === undefined || second > load.second + 1) return { second, curr: 1, prev: 0 };
  if (second === load.second + 1) return { second, curr: 1, prev: load.curr };
  if (second < load.second) return load; // a clock stepping back counts nothing new
  return { ...load, curr: load.curr + 1 };
}

/**
 * One more call decided at `nowMs`: the count per second, and whether it says busy (`busyPerS` calls in the current or
 * the last second), with the spread to ask for (coalesce_types.ts `KeyState.spread`): the share of its calls to move
 * for those that stay to be `DELEGATE_AIM_CALLS_PER_S`, by its calls per second (the last second's, or the current
 * one's so far over at least a quarter second); all (1) at twice `busyPerS`. Isolates keep the highest spread they
 * heard: the same ones move as long as it stays, and more only once those that stayed are busy again.
 */
export function countLoad(
  record: { readonly load?: CallLoad },
  nowMs: number,
  busyPerS: number,
): { readonly load: CallLoad; readonly busy: boolean; readonly spread: number } {
  const load = countCall(record.load, nowMs);
  const calls = Math.max(load.curr, load.prev);
  const perS = Math.max(load.prev, (load.curr * 1000) / Math.max(250, nowMs - load.second * 1000));
  const spread = calls >= 2 * busyPerS ? 1 : Math.max(0, 1 - DELEGATE_AIM_CALLS_PER_S / perS);
  return { load, busy: calls >= busyPerS, spread };
}
