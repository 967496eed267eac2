/** Sub-leases: a delegate's leases to its isolates out of its share (docs/production.md, "Sub-leases"). Pure. */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  decide,
  leasePolicy,
  leaseRefillOver,
  leaseTermMs,
  refund,
} from "../algorithms/index.ts";
import type { DelegateRecord, HeldShare, Reservation } from "./delegate_record.ts";
import { emptyState, honestSlice, shareKindOf } from "./share.ts";
import {
  type CallInput,
  type LeaseAsk,
  type LeaseGrant,
  type LeaseReturn,
  leaseCapOf,
  peekState,
  shorter,
} from "./store.ts";
import {
  DELEGATE_CALL_MEMORY,
  RATE_LEASE_TERM_MS,
  RESERVATION_WAIT_MS,
  SHARE_TERM_MS,
  SUBLEASE_OF_HELD,
  SUBLEASE_TERM_MS,
} from "./tunables.ts";

/** Whether `aMs` and `bMs` are in the same window of a window rule (`false` for any other rule). */
export function sameWindow(params: AlgorithmParams, aMs: number, bMs: number): boolean {
  const policy = leasePolicy(params.algorithm);
  return policy.kind === "window" && policy.windowOf(params, aMs) === policy.windowOf(params, bMs);
}

/** A delegate's rate slice: `parts` of `SHARE_PARTS` of the rule's rate and burst, nothing more. */
export const delegateSlice = honestSlice;

/** A share's sliced parameters (`null`: a window share, or no parts). */
export function sliceOf(share: HeldShare): AlgorithmParams | null {
  return share.kind === "rate" ? delegateSlice(share.rule.params, share.parts) : null;
}

/** The term of a sub-lease, ms: `SUBLEASE_TERM_MS` (rate: `RATE_LEASE_TERM_MS`), or the lease ttl if shorter. */
export function subleaseTermMs(ttlMs: number, kind: "rate" | "window" = "window"): number {
  return Math.max(1, Math.min(ttlMs, kind === "rate" ? RATE_LEASE_TERM_MS : SUBLEASE_TERM_MS));
}

/** The time a rule's rate takes to fill its burst from empty, ms, rounded up (`Infinity`: a rule without a rate). */
export function burstFillMs(params: AlgorithmParams): number {
  return "rate" in params ? Math.ceil((capacityOf(params) * params.rate.perMs) / params.rate.tokens) : Infinity;
}

/**
 * Grant `ask` out of `share` at `nowMs`: the lease (`null`: none) and the share without its units; never more than
 * asked, than the share holds, or than `leaseCapOf`. A window sub-lease never outlives its window; a rate one's tokens
 * are reserved in the bucket (`Reservation`), used at most `RATE_LEASE_TERM_MS` later.
 */
export function subleaseFrom(
  share: HeldShare,
  ask: LeaseAsk | null | undefined,
  nowMs: number,
  id?: string,
): { readonly lease: LeaseGrant | null; readonly share: HeldShare; readonly waitMs?: number } {
  const none = { lease: null, share };
  if (ask == null || !Number.isSafeInteger(ask.units) || ask.units < 1 || nowMs >= share.endsAtMs) return none;
  if (share.kind === "window") {
    const ttlMs = subleaseTermMs(Math.floor(ask.ttlMs));
    // Never out of a window gone by (a share ends with its window; this holds whatever the clocks did).
    if (!sameWindow(share.rule.params, nowMs, share.atMs)) return none;
    // Cut at the window's end (its units were charged in it), with as many fewer units.
    const forMs = Math.min(ttlMs, leaseTermMs(share.rule.params, nowMs, ttlMs));
    const wanted = forMs < ttlMs ? Math.ceil((ask.units * forMs) / ttlMs) : ask.units;
    const units = Math.min(wanted, share.unitsLeft, leaseCapOf(share.rule.params));
    if (units < 1 || forMs < 1) return none;
    // Fewer than wanted from a share that is not spent: a term as much shorter (as for a rate share, below).
    const termMs = units < wanted && !share.short ? shorter(forMs, units, wanted) : forMs;
    const lent = withLent({ ...share, unitsLeft: share.unitsLeft - units }, (share.lent ?? 0) + units);
    return { lease: { units, atMs: share.atMs, forMs: termMs }, share: lent };
  }
  const params = sliceOf(share);
  if (params === null || share.state === null) return none;
  // At most `RATE_LEASE_TERM_MS`, and as many fewer units as the term is shorter than asked (the same pace).
  const askedMs = Math.max(1, Math.floor(ask.ttlMs));
  const termMs = subleaseTermMs(askedMs, "rate");
  const wanted = termMs < askedMs ? Math.ceil((ask.units * termMs) / askedMs) : ask.units;
  // At most 1/`SUBLEASE_OF_HELD` of what the slice holds, 1/2n when scarce (why: docs/production.md's tuning table).
  const scarce = "rate" in params && (share.demand ?? 0) > (2 * params.rate.tokens * SHARE_TERM_MS) / params.rate.perMs;
  const ofHeld = scarce ? 2 * SUBLEASE_OF_HELD : SUBLEASE_OF_HELD;
  const reserved = sum(share.reserved);
  const have = peekState(params, share.state, nowMs).remaining - inBucket(share);
  const units = Math.min(wanted, Math.max(1, Math.floor(have / ofHeld)), have, capacityOf(params));
  if (units < 1) {
    const need = Math.min(capacityOf(params), Math.min(wanted, capacityOf(params)) + reserved);
    return { ...none, waitMs: refillWaitMs(params, share.state, need, nowMs, termMs) };
  }
  const forMs = units < wanted ? shorter(termMs, units, wanted) : termMs;
  const named = id === undefined ? {} : { id };
  const reservation = { atMs: nowMs, ...named, units, untilMs: nowMs + forMs + RESERVATION_WAIT_MS };
  const out = moved(params, share.state, share.takenOut ?? 0, reserved + units, 0, nowMs);
  const lent = withReserved({ ...share, state: out.state }, [...(share.reserved ?? []), reservation], out.takenOut);
  return { lease: { units, atMs: nowMs, forMs, ...named }, share: lent };
}

/** Units reserved in a rate share's bucket (not taken out of it): what its batches and sub-leases must leave. */
export const inBucket = (share: HeldShare): number => Math.max(0, sum(share.reserved) - (share.takenOut ?? 0));

/**
 * The bucket with `due` units charged and the units taken out brought to `min(live, outCap)` (`outCap`: its refill
 * over a lease's term): those that come back into it refunded (capped at the burst: safe), those that go out charged.
 */
function moved(
  params: AlgorithmParams,
  state: AlgorithmState,
  takenOut: number,
  live: number,
  due: number,
  nowMs: number,
): { readonly state: AlgorithmState; readonly takenOut: number } {
  const out = Math.min(live, leaseRefillOver(params, RATE_LEASE_TERM_MS) ?? 0);
  const net = takenOut - out - due;
  return { state: net > 0 ? refund(params, state, net, nowMs) : charged(params, state, -net, nowMs), takenOut: out };
}

/** When the first of a rate share's sub-leases ends (its units then come back, or are charged), ms from `nowMs`. */
export function reservedBackInMs(share: HeldShare, nowMs: number): number {
  const endMs = Math.min(...(share.reserved ?? []).map((r) => r.untilMs - RESERVATION_WAIT_MS));
  return Math.min(RATE_LEASE_TERM_MS, Math.max(1, endMs - nowMs));
}

/** `units` charged to a bucket that holds them (reserved in it): if rounding ever says not, an empty one (safe). */
export function charged(params: AlgorithmParams, state: AlgorithmState, units: number, nowMs: number): AlgorithmState {
  if (units <= 0) return state;
  const out = decide(params, state, units, nowMs);
  return out.ok && out.decision.allowed ? out.state : emptyState(params, nowMs);
}

/** A live rate share with its reservations due by `nowMs` (given back, or expired: all used) charged and dropped. */
export function settled(share: HeldShare, nowMs: number): HeldShare {
  const reserved = share.reserved ?? [];
  const due = reserved.filter((r) => r.untilMs <= nowMs);
  if (due.length === 0) return share;
  const live = reserved.filter((r) => r.untilMs > nowMs);
  const params = sliceOf(share);
  if (params === null || share.state === null) return withReserved(share, live, 0);
  const out = moved(params, share.state, share.takenOut ?? 0, sum(live), sum(due), nowMs);
  return withReserved({ ...share, state: out.state }, live, out.takenOut);
}

/**
 * A rate share's bucket handed on to another (`into`, from the bucket as it is): its reservations go with it (`moved`)
 * as far as it holds them, the oldest charged in full first until it does (their returns then match nothing: short,
 * never over; the oldest have the fewest units left unused): either way within the bound.
 */
export function handedOn(
  share: HeldShare,
  nowMs: number,
  into: (state: AlgorithmState | null) => { params: AlgorithmParams | null; state: AlgorithmState | null },
): { readonly state: AlgorithmState | null; readonly reserved: readonly Reservation[]; readonly takenOut: number } {
  const from = sliceOf(share);
  const atMs = Math.min(nowMs, share.endsAtMs);
  const oldest = [...(share.reserved ?? [])].sort((a, b) => a.atMs - b.atMs);
  let state = share.state;
  let takenOut = share.takenOut ?? 0;
  for (let i = 0; i < oldest.length; i++) {
    const kept = into(state);
    const reserved = oldest.slice(i);
    const live = sum(reserved);
    if (kept.params !== null && kept.state !== null) {
      const out = moved(kept.params, kept.state, takenOut, live, 0, nowMs);
      if (peekState(kept.params, out.state, nowMs).remaining >= live - out.takenOut) return { ...out, reserved };
    }
    // Charged in full: out of the units taken out first, then out of the old bucket.
    const units = oldest[i]!.units;
    const out = Math.min(takenOut, units);
    takenOut -= out;
    if (from !== null && state !== null) state = charged(from, state, units - out, atMs);
  }
  return { state: into(state).state, reserved: [], takenOut: 0 };
}

const sum = (reserved: readonly Reservation[] = []) => reserved.reduce((a, r) => a + r.units, 0);

/** The share with `reserved` and `takenOut` of them (the fields absent when none). */
export function withReserved(share: HeldShare, reserved: readonly Reservation[], takenOut: number): HeldShare {
  const { reserved: _reserved, takenOut: _takenOut, ...rest } = share;
  return reserved.length === 0 ? rest : { ...rest, reserved, ...(takenOut > 0 ? { takenOut } : {}) };
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
  const wanted = input.lease == null ? 0 : sum([input.lease.units]);
  return sum(input.costs) + Math.max(0, wanted - sum((input.giveBack ?? []).map((b) => b.units)));
}

/**
 * A batch's units given back, taken before it is decided, once per call id: into the share while it holds them, else
 * kept for the next ask. A rate rule's units no reservation takes are dropped (none left the key's object's bucket,
 * which would admit them twice if it refilled since); its admissions given back (`admitted`) go on to the key's
 * object, whose late refund takes back only what its bucket lacked since (late_refund.ts).
 */
export function takeBack(record: DelegateRecord, input: CallInput, nowMs: number): DelegateRecord {
  const once = record.taken?.includes(input.id) === true || record.calls.some((c) => c.id === input.id);
  if ((input.giveBack ?? []).length === 0 || once) return record;
  let share = record.share;
  const giveBack = [...record.giveBack];
  const rate = shareKindOf(input.rule.params) === "rate" || share?.kind === "rate";
  for (const back of input.giveBack ?? []) {
    if (!Number.isSafeInteger(back.units) || back.units < 1) continue;
    const admitted = rate && back.admitted === true;
    const took = share === null || admitted ? null : refundInto(share, back, nowMs);
    if (took === null && (!rate || admitted)) giveBack.push(back);
    if (took === null) continue;
    share = took.share;
    if (took.rest > 0) giveBack.push({ ...back, units: took.rest });
  }
  return { ...record, share, giveBack, taken: [...(record.taken ?? []).slice(1 - DELEGATE_CALL_MEMORY), input.id] };
}

/**
 * A refund taken into the share, and the units left for the key's object (`null`: none is this share's). A window
 * share also takes back units lent out of an earlier share of its window (`lent`); a rate share, into the live
 * reservation the return names (the fewest units such), whose used units are then due (`settled`): exact, as the
 * bucket held them all along.
 */
function refundInto(share: HeldShare, back: LeaseReturn, nowMs: number): { share: HeldShare; rest: number } | null {
  if (share.kind === "rate") {
    const reserved = share.reserved ?? [];
    let at = -1;
    reserved.forEach((r, i) => {
      // Named: that sub-lease's reservation only (never another lent in the same ms); else by its lending time.
      const named = back.id === undefined || r.id === back.id;
      const fits = named && r.atMs === back.atMs && r.units >= back.units && r.untilMs > nowMs;
      if (fits && (at === -1 || r.units < reserved[at]!.units)) at = i;
    });
    if (at === -1) return null;
    const due = { ...reserved[at]!, units: reserved[at]!.units - back.units, untilMs: nowMs };
    const now = reserved.map((r, i) => (i === at ? due : r));
    return { share: withReserved(share, now, share.takenOut ?? 0), rest: 0 };
  }
  if (nowMs >= share.endsAtMs) return null;
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

/** The share with `lent` units out (the field absent at 0). */
export function withLent(share: HeldShare, lent: number): HeldShare {
  if (lent > 0) return { ...share, lent };
  const { lent: _lent, ...rest } = share;
  return share.lent === undefined ? share : rest;
}
