/**
 * Sub-leases: a delegate grants the isolates that call it small leases out of its own share (delegate.ts), so that a
 * busy isolate answers most requests of a hot key itself and calls its delegate about once per (short) term. The
 * isolate holds them with its machinery for leases from the key's object (src/isolate/coalesce.ts): the same
 * `LeaseAsk` and `LeaseGrant`, unused units back with its next call (`giveBack`). A window share's sub-lease is units
 * it holds (already charged in the key's record); a rate share's is tokens taken out of its slice's bucket. What each
 * bounds, and what a dead isolate loses, is at `subleaseFrom` (and in docs/rules.md); how a delegate takes units
 * given back, at `takeBack`. Pure functions.
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  decide,
  leasePolicy,
  leaseTermMs,
  refund,
} from "../algorithms/index.ts";
import { honestSlice } from "./share.ts";
import {
  type CallInput,
  type LeaseAsk,
  type LeaseGrant,
  type LeaseReturn,
  type LimiterRule,
  leaseCapOf,
  peekState,
} from "./store.ts";
import { RATE_LEASE_TERM_MS, SUBLEASE_OF_HELD, SUBLEASE_TERM_MS } from "./tunables.ts";

/** What a sub-lease is granted from: the share a delegate holds, as far as a sub-lease needs it (delegate.ts `HeldShare`). */
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
  /**
   * Window share: units sub-leased out of it and out of the earlier shares of the same window under the same
   * parameters, not yet given back (absent: 0). A return naming one of those earlier shares is taken into this one,
   * up to these (`takeBack`).
   */
  readonly lent?: number;
  /** This delegate's clock when the share ends (the ask's sending time plus its term), ms. */
  readonly endsAtMs: number;
}

/** A delegate's rate slice: `parts` of `SHARE_PARTS` of the rule's rate and burst, nothing more. */
export function delegateSlice(params: AlgorithmParams, parts: number): AlgorithmParams | null {
  return honestSlice(params, parts);
}

/**
 * The term an isolate asks a delegate's sub-lease for, ms: `SUBLEASE_TERM_MS` (a rate share's: `RATE_LEASE_TERM_MS`,
 * within the rate bound's term), or its lease ttl if shorter.
 */
export function subleaseTermMs(ttlMs: number, kind: "rate" | "window" = "window"): number {
  return Math.max(1, Math.min(ttlMs, kind === "rate" ? RATE_LEASE_TERM_MS : SUBLEASE_TERM_MS));
}

/**
 * Grant `ask` out of `share` at `nowMs` (this delegate's clock): the lease (`null`: nothing to grant) and the share
 * without its units. Never more than asked, than the share holds now, or than a quarter of a window rule's limit.
 *
 * - **Window share:** units the delegate still holds, usable for at most `SUBLEASE_TERM_MS` (shorter, down to a
 *   quarter, when it holds fewer than asked and the window is not spent) and never past the window's end (every unit is used in the window it was charged in: 0 over-admission; isolates ask for none the
 *   window's end would cut, src/isolate/key_state.ts `subleaseAsk`). Given back with the isolate's next call, they go
 *   back into the share while it holds them (the refund names the share's charge), or into the share that renewed it
 *   in the same window (at most what was lent: `lent`), else on to the key's object with the delegate's next ask. A dead isolate's units are lost until the window ends: at most its lease (about half a
 *   term of its own demand, never more than a quarter of the limit).
 * - **Rate share:** tokens taken out of the slice's bucket as that many requests admitted now, usable for at most
 *   `SUBLEASE_TERM_MS` (shorter, down to a quarter, when the bucket had fewer than asked); what is left goes back into
 *   the bucket with the isolate's next call. A dead isolate loses its lease's tokens once (the bucket refills at its
 *   rate meanwhile). An admission from a sub-lease comes at most `SUBLEASE_TERM_MS` after its token left the bucket,
 *   within the rate bound's term (`burst + rate × (t + term)`, term 1 s; docs/rules.md).
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
    const policy = leasePolicy(share.rule.params.algorithm);
    if (
      policy.kind !== "window" ||
      policy.windowOf(share.rule.params, nowMs) !== policy.windowOf(share.rule.params, share.atMs)
    ) {
      return none;
    }
    // Cut at the window's end: the units were charged in it (at the share's grant, `atMs`); and as many fewer units
    // (what the isolate can use before the window ends: units left unused then are lost to it).
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
  return { lease: { units, atMs: nowMs, forMs }, share: { ...share, state: out.state } };
}

/**
 * How long the slice's bucket (`params`, `state`) takes to hold `units` from `nowMs`, ms, at most `capMs`: a rate
 * sub-lease ask that found the bucket empty tells its isolate so (`CallResult.leaseWaitMs`), and the isolate refuses
 * from what it knows only until then, not for the ask's whole term. The first of 5 ms doubled that suffices.
 */
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

/**
 * The term of a sub-lease of `units` where `wanted` were asked for `termMs`: as much shorter, down to a quarter, so its
 * delegate asks again about when it has used them (an isolate takes a sub-lease at least its demand's pace over its
 * term for no sign of a short key: key_state.ts), instead of refusing for a whole term while the share refills.
 */
export function shorter(termMs: number, units: number, wanted: number): number {
  return Math.max(Math.ceil(termMs / 4), Math.floor((termMs * units) / wanted));
}

/**
 * What a call asks of a delegate's share over its term (its demand): the requests it carries, and the units its lease
 * ask wants, less the units it gives back (what an earlier lease did not use); never less than its requests.
 */
export function callDemand(input: CallInput): number {
  const costs = input.costs.reduce((a, b) => a + (Number.isSafeInteger(b) && b > 0 ? b : 0), 0);
  const lease = input.lease;
  const wanted = lease != null && Number.isSafeInteger(lease.units) && lease.units > 0 ? lease.units : 0;
  if (wanted === 0) return costs;
  const back = (input.giveBack ?? []).reduce(
    (a, b) => a + (Number.isSafeInteger(b.units) && b.units > 0 ? b.units : 0),
    0,
  );
  return costs + Math.max(0, wanted - back);
}

/** What `takeBack` needs of a delegate's record (delegate.ts `DelegateRecord`). */
export interface TakingRecord {
  readonly share: SubleaseSource | null;
  readonly giveBack: readonly LeaseReturn[];
  readonly calls: readonly { readonly id: string }[];
  readonly taken?: readonly string[];
}

/** Calls whose units given back a delegate remembers taking (as many as the calls it remembers). */
const TAKEN_MEMORY = 32;

/**
 * A batch's units given back, taken before it is decided: into the share while it holds them, else kept to give back
 * to the key's object (with the next ask). Its shell takes them before a renewal, so that they go back with it. Once
 * per call id (`taken` until the call is decided, then its remembered call), whatever retries and restarts do.
 */
export function takeBack<R extends TakingRecord>(record: R, input: CallInput, nowMs: number): R {
  const once = record.taken?.includes(input.id) === true || record.calls.some((c) => c.id === input.id);
  if ((input.giveBack ?? []).length === 0 || once) return record;
  let share = record.share;
  const giveBack = [...record.giveBack];
  for (const back of input.giveBack ?? []) {
    if (!Number.isSafeInteger(back.units) || back.units < 1) continue;
    const took = share === null ? null : refundInto(share, back, nowMs);
    if (took === null) giveBack.push(back);
    else {
      share = took.share;
      if (took.rest > 0) giveBack.push({ ...back, units: took.rest });
    }
  }
  const taken = [...(record.taken ?? []).slice(1 - TAKEN_MEMORY), input.id];
  return { ...record, share, giveBack, taken };
}

/**
 * A refund taken into the share, and the units of it left to give back to the key's object (`null`: none of it is this
 * share's to take). A window share takes its own units back (up to those it was granted), and units sub-leased out of
 * an earlier share of the same window (`lent`: charged in this window, they are as good as its own; without this they
 * would wait in `giveBack` for the next ask while the share is short).
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
    const policy = leasePolicy(share.rule.params.algorithm);
    const sameWindow =
      policy.kind === "window" &&
      policy.windowOf(share.rule.params, back.atMs) === policy.windowOf(share.rule.params, share.atMs);
    if (!sameWindow || lent < 1) return null;
    const took = Math.min(back.units, lent);
    const grown = { ...share, units: share.units + took, unitsLeft: share.unitsLeft + took };
    return { share: withLent(grown, lent - took), rest: back.units - took };
  }
  const params = delegateSlice(share.rule.params, share.parts);
  if (params === null || share.state === null) return null;
  return { share: { ...share, state: refund(params, share.state, back.units, back.atMs) }, rest: 0 };
}

/** The share with `lent` units out (the field absent at 0). */
export function withLent<S extends SubleaseSource>(share: S, lent: number): S {
  if (lent > 0) return { ...share, lent };
  if (share.lent === undefined) return share;
  const { lent: _lent, ...rest } = share;
  return rest as S;
}
