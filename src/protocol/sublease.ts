/**
 * Sub-leases: a delegate's small leases to the isolates that call it, out of its own share (docs/production.md
 * "Sub-leases"). The isolate holds them as leases from the key's object (`LeaseAsk`, `LeaseGrant`, `giveBack`). Pure.
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  decide,
  leasePolicy,
  leaseTermMs,
  refund,
  scaledRefund,
} from "../algorithms/index.ts";
import { afterRefund, type Lows, lowsPer, noteLow, refundable } from "./late_refund.ts";
import { honestSlice, shareKindOf } from "./share.ts";
import {
  type CallInput,
  type LeaseAsk,
  type LeaseGrant,
  type LeaseReturn,
  type LimiterRule,
  leaseCapOf,
  peekState,
  shorter,
} from "./store.ts";
import { DELEGATE_CALL_MEMORY, RATE_LEASE_TERM_MS, SUBLEASE_OF_HELD, SUBLEASE_TERM_MS } from "./tunables.ts";

/** What a sub-lease is granted from: the share a delegate holds, as far as it needs it (delegate.ts `HeldShare`). */
export interface SubleaseSource {
  readonly kind: "rate" | "window";
  /** The rule the share is under (the newest version the key's object had seen). */
  readonly rule: LimiterRule;
  /** Rate share: parts of `SHARE_PARTS`. */
  readonly parts: number;
  /** Rate share: the bucket under the sliced parameters (`null` with no parts). */
  readonly state: AlgorithmState | null;
  /** Window share: units granted, and those still to admit from. */
  readonly units: number;
  readonly unitsLeft: number;
  /** Window share: the window was spent at the grant: refuse beyond these units until the term ends. */
  readonly short: boolean;
  /** The object's clock at the grant (a window share's refunds name it), ms. */
  readonly atMs: number;
  /** Window share: units lent out of it and earlier shares of its window and parameters, not back yet (`takeBack`). */
  readonly lent?: number;
  /** This delegate's clock when the share ends (the ask's sending time plus its term), ms. */
  readonly endsAtMs: number;
  /**
   * Rate share: the slice's least deficits since its sub-leases left it (late_refund.ts), so that a sub-lease given
   * back takes no more than the slice lacked from full at every instant since (`refundInto`). Absent (a record from
   * before it was kept, or no parts): nothing lent before it is started is taken back (`notedLows`).
   */
  readonly lows?: Lows;
}

/** Whether `aMs` and `bMs` are in the same window of a window rule (`false` for any other rule). */
export function sameWindow(params: AlgorithmParams, aMs: number, bMs: number): boolean {
  const policy = leasePolicy(params.algorithm);
  return policy.kind === "window" && policy.windowOf(params, aMs) === policy.windowOf(params, bMs);
}

/** A delegate's rate slice: `parts` of `SHARE_PARTS` of the rule's rate and burst, nothing more. */
export const delegateSlice = honestSlice;

/** The term of a sub-lease, ms: `SUBLEASE_TERM_MS` (rate: `RATE_LEASE_TERM_MS`), or the lease ttl if shorter. */
export function subleaseTermMs(ttlMs: number, kind: "rate" | "window" = "window"): number {
  return Math.max(1, Math.min(ttlMs, kind === "rate" ? RATE_LEASE_TERM_MS : SUBLEASE_TERM_MS));
}

/**
 * Grant `ask` out of `share` at `nowMs`: the lease (`null`: none) and the share without its units; never more than
 * asked, than the share holds, or than `leaseCapOf`. A window sub-lease never outlives its window; a rate one's tokens
 * leave the bucket now, used at most `RATE_LEASE_TERM_MS` later (the rate bound's term).
 */
export function subleaseFrom<S extends SubleaseSource>(
  share: S,
  ask: LeaseAsk | null | undefined,
  nowMs: number,
): { readonly lease: LeaseGrant | null; readonly share: S; readonly waitMs?: number } {
  const none = { lease: null, share };
  if (ask == null || !Number.isSafeInteger(ask.units) || ask.units < 1 || nowMs >= share.endsAtMs) return none;
  const ttlMs = subleaseTermMs(Math.floor(ask.ttlMs));
  if (share.kind === "window") {
    // Never out of a window gone by (a share ends with its window; this holds whatever the clocks did).
    if (!sameWindow(share.rule.params, nowMs, share.atMs)) return none;
    // Cut at the window's end (its units were charged in it), with as many fewer units.
    const forMs = Math.min(ttlMs, leaseTermMs(share.rule.params, nowMs, ttlMs));
    const wanted = forMs < ttlMs ? Math.ceil((ask.units * forMs) / ttlMs) : ask.units;
    const units = Math.min(wanted, share.unitsLeft, leaseCapOf(share.rule.params));
    if (units < 1 || forMs < 1) return none;
    // Fewer than wanted from a share that is not spent: a term as much shorter (as for a rate share, below).
    const termMs = units < wanted && !share.short ? shorter(forMs, units, wanted) : forMs;
    return {
      lease: { units, atMs: share.atMs, forMs: termMs },
      share: withLent({ ...share, unitsLeft: share.unitsLeft - units }, (share.lent ?? 0) + units),
    };
  }
  const params = delegateSlice(share.rule.params, share.parts);
  if (params === null || share.state === null) return none;
  // At most `RATE_LEASE_TERM_MS`, and as many fewer units as the term is shorter than asked (the same pace).
  const askedMs = Math.max(1, Math.floor(ask.ttlMs));
  const termMs = subleaseTermMs(askedMs, "rate");
  const wanted = termMs < askedMs ? Math.ceil((ask.units * termMs) / askedMs) : ask.units;
  // At most a part of what the slice holds (`SUBLEASE_OF_HELD`): the rest stays for batches and other isolates' asks.
  const have = peekState(params, share.state, nowMs).remaining;
  const units = Math.min(wanted, Math.max(1, Math.floor(have / SUBLEASE_OF_HELD)), have, capacityOf(params));
  if (units < 1) {
    const waitMs = refillWaitMs(params, share.state, Math.min(wanted, capacityOf(params)), nowMs, termMs);
    return { ...none, waitMs };
  }
  const out = decide(params, share.state, units, nowMs);
  if (!out.ok || !out.decision.allowed) return none;
  const forMs = units < wanted ? shorter(termMs, units, wanted) : termMs;
  const lows = notedLows(share.lows, params, share.state, nowMs, false);
  return { lease: { units, atMs: nowMs, forMs }, share: { ...share, state: out.state, ...lows } };
}

/**
 * A rate slice's lows with its deficit at `nowMs` noted (late_refund.ts `noteLow`: just before a charge, or after a
 * refund or a new bucket, `afterRefunds`), as a field to spread into the share. Lows not kept yet start with nothing
 * lent before now coming back: a step of no deficit (the slice may have been full since, for all this share knows).
 */
export function notedLows(
  lows: Lows | undefined,
  params: AlgorithmParams,
  state: AlgorithmState | null,
  nowMs: number,
  afterRefunds: boolean,
): { readonly lows?: Lows } {
  const per = lowsPer(params);
  if (per === null) return {};
  const start = lows ?? { s: [[2 * nowMs + 1, 0]], slack: 0, per };
  const noted = noteLow(start, params, state, nowMs, afterRefunds);
  return noted === null ? {} : { lows: noted };
}

/** How long the slice's bucket takes to hold `units` (first of 5, 10, 20… ms), at most `capMs` (`leaseWaitMs`). */
export function refillWaitMs(
  params: AlgorithmParams,
  state: AlgorithmState,
  units: number,
  nowMs: number,
  capMs: number,
): number {
  for (let waitMs = 5; waitMs < capMs; waitMs *= 2) {
    if (peekState(params, state, nowMs + waitMs).remaining >= units) return waitMs;
  }
  return capMs;
}

/** A call's demand on a delegate's share: its requests, and its lease ask less what it gives back (never below 0). */
export function callDemand(input: CallInput): number {
  const sum = (units: readonly number[]) => units.reduce((a, b) => a + (Number.isSafeInteger(b) && b > 0 ? b : 0), 0);
  const costs = sum(input.costs);
  const wanted = input.lease == null ? 0 : sum([input.lease.units]);
  if (wanted === 0) return costs;
  return costs + Math.max(0, wanted - sum((input.giveBack ?? []).map((b) => b.units)));
}

/** What `takeBack` needs of a delegate's record (delegate.ts `DelegateRecord`). */
interface TakingRecord {
  readonly share: SubleaseSource | null;
  readonly giveBack: readonly LeaseReturn[];
  readonly calls: readonly { readonly id: string }[];
  readonly taken?: readonly string[];
}

/**
 * A batch's units given back, taken before it is decided (and before a renewal, which takes the rest back): into the
 * share while it holds them, else kept for the next ask. Once per call id (`taken`, then its remembered call). A rate
 * rule's units the share does not take are dropped, not sent on: they never left the key's object's bucket, and its
 * late-refund check (late_refund.ts) knows nothing of the slice they left (the key is short, never over).
 */
export function takeBack<R extends TakingRecord>(record: R, input: CallInput, nowMs: number): R {
  const once = record.taken?.includes(input.id) === true || record.calls.some((c) => c.id === input.id);
  if ((input.giveBack ?? []).length === 0 || once) return record;
  let share = record.share;
  const giveBack = [...record.giveBack];
  const rate = shareKindOf(input.rule.params) === "rate" || share?.kind === "rate";
  for (const back of input.giveBack ?? []) {
    if (!Number.isSafeInteger(back.units) || back.units < 1) continue;
    const took = share === null ? null : refundInto(share, back, nowMs);
    if (took === null) {
      if (!rate) giveBack.push(back);
    } else {
      share = took.share;
      if (took.rest > 0) giveBack.push({ ...back, units: took.rest });
    }
  }
  const taken = [...(record.taken ?? []).slice(1 - DELEGATE_CALL_MEMORY), input.id];
  return { ...record, share, giveBack, taken };
}

/**
 * A refund taken into the share, and the units left for the key's object (`null`: none is this share's). A window
 * share also takes back units lent out of an earlier share of its window (`lent`: charged in it, as good as its own).
 * A rate share takes back no more than its slice lacked from full at every instant since the units left it (its
 * `lows`; the rest is dropped): once it was full, the tokens came back by refill, and taking them again would admit
 * them twice (a return riding an isolate's late call, after another isolate drained the slice: over the rate bound).
 */
function refundInto<S extends SubleaseSource>(
  share: S,
  back: LeaseReturn,
  nowMs: number,
): { readonly share: S; readonly rest: number } | null {
  if (nowMs >= share.endsAtMs) return null;
  if (share.kind === "window") {
    const lent = share.lent ?? 0;
    if (back.atMs === share.atMs) {
      const unitsLeft = Math.min(share.units, share.unitsLeft + back.units);
      return { share: withLent({ ...share, unitsLeft }, Math.max(0, lent - back.units)), rest: 0 };
    }
    if (!sameWindow(share.rule.params, back.atMs, share.atMs) || lent < 1) return null;
    const took = Math.min(back.units, lent);
    const grown = { ...share, units: share.units + took, unitsLeft: share.unitsLeft + took };
    return { share: withLent(grown, lent - took), rest: back.units - took };
  }
  const params = delegateSlice(share.rule.params, share.parts);
  if (params === null || share.state === null) return null;
  const start = notedLows(share.lows, params, share.state, nowMs, true).lows;
  if (start === undefined)
    return { share: { ...share, state: refund(params, share.state, back.units, back.atMs) }, rest: 0 };
  const given = refundable(start, params, back.units, back.atMs);
  const state = given > 0 ? scaledRefund(params, share.state, given) : share.state;
  const lows = afterRefund(start, params, back.units, given, back.atMs);
  return { share: { ...share, state, ...notedLows(lows, params, state, nowMs, true) }, rest: 0 };
}

/** The share with `lent` units out (the field absent at 0). */
export function withLent<S extends SubleaseSource>(share: S, lent: number): S {
  if (lent > 0) return { ...share, lent };
  if (share.lent === undefined) return share;
  const { lent: _lent, ...rest } = share;
  return rest as S;
}
