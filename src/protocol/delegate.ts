/** A delegate's decisions from its share of a hot key (`HeldShare`; share.ts: the key's object's side), pure. */
import { type AlgorithmState, capacityOf, carryOver, decide, fingerprintOf, refund } from "../algorithms/index.ts";
import {
  aheadHeld,
  countLoad,
  type DelegateRecord,
  demandPerTerm,
  type HeldShare,
  keptParts,
  rolled,
  usedUntilAnswer,
  windowPace,
  windowShort,
} from "./delegate_record.ts";
import { uses } from "./mechanisms.ts";
import { emptyState, leastParts, type ShareAsk, type ShareGrant, shareKindOf } from "./share.ts";
import { adoptedStart } from "./share_tokens.ts";
import {
  appliedCall,
  type CallInput,
  type CallResult,
  type CheckResult,
  type LeaseReturn,
  type LimiterRule,
  peekState,
  refusedFor,
  replayedResults,
} from "./store.ts";
import {
  callDemand,
  delegateSlice,
  handedOn,
  inBucket,
  reservedBackInMs,
  sameWindow,
  settled,
  sliceOf,
  subleaseFrom,
  takeBack,
  withLent,
  withReserved,
} from "./sublease.ts";
import { DELEGATE_CALL_MEMORY, PENDING_RESEND_MS, RATE_LEASE_TERM_MS, SHARE_TERM_MS } from "./tunables.ts";

// The record and what delegate_record.ts decides about its renewal and load, for the shells and the tests.
export * from "./delegate_record.ts";

/**
 * What deciding `costs` (and a sub-lease of `leaseUnits`) needs first: `renew` (no live share, other parameters, or a
 * window share out of units) or `ready`. A newer version with the same parameters (every deploy) waits for no renewal.
 */
export function delegateNeed(
  record: DelegateRecord,
  rule: LimiterRule,
  costs: readonly number[],
  nowMs: number,
  leaseUnits = 0,
): "ready" | "renew" {
  const share = record.share;
  if (share === null || nowMs >= share.endsAtMs) return "renew";
  const newer = (rule.version ?? 0) > (share.rule.version ?? 0);
  if (newer && fingerprintOf(rule.params) !== fingerprintOf(share.rule.params)) return "renew";
  const cost = costs.reduce((a, b) => a + b, 0) + leaseUnits;
  return share.kind === "window" && !share.short && cost > share.unitsLeft ? "renew" : "ready";
}

/** The ask renewing the share, and the record once sent (a window share's unused units go back: short, never over). */
export function shareAsk(
  record: DelegateRecord,
  holder: string,
  rule: LimiterRule,
  id: string,
  nowMs: number,
  release = false,
  pendingCost = 0,
): { readonly ask: ShareAsk; readonly record: DelegateRecord; readonly sentAtMs: number } {
  const pending = record.pending;
  if (pending !== undefined && nowMs >= pending.sentAtMs && nowMs - pending.sentAtMs < PENDING_RESEND_MS) {
    return { ask: pending.ask, record, sentAtMs: pending.sentAtMs };
  }
  const share = record.share;
  const giveBack = [...record.giveBack];
  let kept = share;
  if (share !== null && share.kind === "window") {
    // Unused at the term's end too: the key's object still counts them until given back (a past window's are ignored).
    if (share.unitsLeft > 0) giveBack.push({ units: share.unitsLeft, atMs: share.atMs });
    if (share.ahead !== undefined) giveBack.push({ units: share.ahead.units, atMs: share.ahead.atMs });
    const { ahead: _ahead, ...rest } = share;
    kept = { ...rest, unitsLeft: 0 };
  }
  const newest = share !== null && (share.rule.version ?? 0) > (rule.version ?? 0) ? share.rule : rule;
  // The batch waiting for this ask counts too (a new delegate has no term behind it yet), and a window share's pace.
  const demand = Math.max(demandPerTerm(record, nowMs), pendingCost, windowPace(share, nowMs));
  const units = release ? 0 : demand + 2 * Math.ceil(Math.sqrt(demand)) + 1;
  // A live rate share is cut when its demand fell (`keep`), and used `oldForMs` more at most (delegate_record.ts).
  const live = kept !== null && kept.kind === "rate" && nowMs < kept.endsAtMs;
  const cut = kept !== null && live && !release ? cutFor(kept, demand, nowMs) : null;
  if (cut !== null) kept = cut;
  const old = uses("oldShareFor") && live && !release && kept !== null ? usedUntilAnswer(kept, nowMs) : null;
  if (old !== null) kept = old.share;
  // No share (none yet, or a renewal that failed: its grant, if one came late, is never adopted): it holds no parts.
  const keep = cut !== null ? cut.parts : share === null && shareKindOf(newest.params) === "rate" ? 0 : undefined;
  const holding = kept?.kind === "rate" && kept.askId !== undefined ? { holding: kept.askId } : {};
  const rtt = share?.kind === "rate" && share.rttMs !== undefined ? { rttMs: share.rttMs } : {};
  const flags = { ...(release ? { release } : {}), ...(keep === undefined ? {} : { keep }), ...holding };
  const said = { ...flags, ...(old === null ? {} : { oldForMs: old.forMs }), ...rtt };
  const ask: ShareAsk = { rule: newest, holder, id, seq: (record.asks ?? 0) + 1, demand, units, giveBack, ...said };
  // Only a window share's grant is charged: a lost rate ask is asked anew, with the demand as it is now.
  const charged = shareKindOf(newest.params) === "window" && !release ? { pending: { ask, sentAtMs: nowMs } } : {};
  return { ask, record: { ...record, share: kept, giveBack: [], asks: ask.seq, ...charged }, sentAtMs: nowMs };
}

/** A live rate share cut to what `demand` needs (tokens over the smaller slice's burst dropped: safe); `null`: none. */
function cutFor(share: HeldShare, demand: number, nowMs: number): HeldShare | null {
  const least = leastParts(share.rule.params);
  const parts = Math.min(share.parts, Math.max(keptParts(share.parts, share.demand, demand), least));
  if (parts >= share.parts) return null;
  const from = sliceOf(share);
  const to = sliceOf({ ...share, parts });
  const carried = (state: AlgorithmState | null) =>
    to === null || from === null || state === null
      ? null
      : (carryOver(from, to, state, nowMs) ?? emptyState(to, nowMs));
  const out = handedOn(settled(share, nowMs), nowMs, (state) => ({ params: to, state: carried(state) }));
  return withReserved({ ...share, parts, state: out.state, demand }, out.reserved, out.takenOut);
}

/** Take the key's object's grant (asked at `sentAtMs`, this delegate's clock). */
export function adoptGrant(
  record: DelegateRecord,
  ask: ShareAsk,
  grant: ShareGrant,
  sentAtMs: number,
  nowMs: number,
): DelegateRecord {
  const { pending, ...unpended } = record;
  if (pending?.ask.id === ask.id) record = unpended;
  if (grant.kind === "none") return { ...record, share: null, hot: grant.hot };
  const old = record.share;
  const endsAtMs = sentAtMs + grant.termMs;
  const renewAtMs = endsAtMs - Math.floor(grant.termMs / 4);
  // A renewal's round trip only: a first ask's, at a cold start, waited in the key's object's queue too; unless its
  // grant ended on its way (the next ask's term then covers such a round trip: its waiting batches pass through else).
  const rtt = ask.holding === undefined && nowMs < endsAtMs ? {} : { rttMs: nowMs - sentAtMs };
  const common = { rule: grant.rule, atMs: grant.atMs, endsAtMs, renewAtMs, demand: ask.demand, askId: ask.id, ...rtt };
  if (grant.kind === "window") {
    const short = windowShort(grant, ask.units);
    const held = { parts: 0, state: null, units: grant.units, unitsLeft: grant.units, short };
    const share: HeldShare = { kind: "window", ...common, ...held, ...aheadHeld(grant, sentAtMs, nowMs) };
    // Units given back into the old share since its renewal was sent (its units left went with the ask) go on to the
    // key's object with the next ask, naming their grant: dropped with the old share, they left the key short.
    const back = old?.kind === "window" && old.unitsLeft > 0 ? [{ units: old.unitsLeft, atMs: old.atMs }] : [];
    // Units still lent out of the shares before, if of the same window and parameters, come back into this one.
    const same = old?.kind === "window" && fingerprintOf(old.rule.params) === fingerprintOf(grant.rule.params);
    const lent = same && sameWindow(grant.rule.params, old.atMs, grant.atMs) ? (old.lent ?? 0) : 0;
    return { ...record, share: withLent(share, lent), giveBack: [...record.giveBack, ...back], hot: grant.hot };
  }
  const next = delegateSlice(grant.rule.params, grant.parts);
  const from = old === null ? null : sliceOf(old);
  const into = (oldState: AlgorithmState | null) => {
    if (next === null) return { params: next, state: null };
    // The old bucket, refilled as far as its parts stayed promised (share_tokens.ts `adoptedStart`).
    const start = adoptedStart(grant, next, from, old === null ? null : { ...old, state: oldState }, nowMs);
    // Tokens moved with the grant (share_grant.ts `transfer`), and an ended share's refill counted above.
    const add = (grant.tokens ?? 0) + start.afterEnd;
    return { params: next, state: add > 0 ? refund(next, start.state, add, nowMs) : start.state };
  };
  const out = old?.kind === "rate" ? handedOn(old, nowMs, into) : { ...into(null), reserved: [], takenOut: 0 };
  const spare = grant.spare === true ? { spare: true } : {};
  const rate = { kind: "rate", ...common, parts: grant.parts, state: out.state, units: 0, unitsLeft: 0, short: false };
  const share: HeldShare = withReserved({ ...rate, kind: "rate", ...spare }, out.reserved, out.takenOut);
  return { ...record, share, giveBack: [...record.giveBack, ...shedBy(old, share, grant, nowMs)], hot: grant.hot };
}

/**
 * What a smaller slice (`share`, adopted from `grant`) drops of a live rate share's tokens: given back to the key's
 * object for the parts it freed, taken once those are its direct slice's again (`freedAtMs`; delegate_run.ts sends it).
 */
function shedBy(old: HeldShare | null, share: HeldShare, grant: ShareGrant, nowMs: number): LeaseReturn[] {
  const freedAtMs = grant.freedAtMs;
  if (old?.kind !== "rate" || nowMs > old.endsAtMs || grant.parts >= old.parts || freedAtMs === undefined) return [];
  const shed = freeTokens(old, nowMs) + (grant.tokens ?? 0) - freeTokens(share, nowMs);
  return shed >= 1 ? [{ units: shed, atMs: freedAtMs, shed: true }] : [];
}

/** A rate share's tokens at `nowMs`: its bucket's and those taken out of it, less the units its reservations hold. */
export function freeTokens(share: HeldShare, nowMs: number): number {
  const slice = sliceOf(share);
  if (slice === null || share.state === null) return 0;
  const reserved = (share.reserved ?? []).reduce((n, r) => n + r.units, 0);
  return peekState(slice, share.state, nowMs).remaining + (share.takenOut ?? 0) - reserved;
}

/** Decide a batch from a `ready` share: refunds first, then each request, then its sub-lease. */
export function delegateCall(
  record: DelegateRecord,
  input: CallInput,
  nowMs: number,
): { readonly result: CallResult; readonly record: DelegateRecord } {
  const seen = record.calls.find((c) => c.id === input.id);
  if (seen !== undefined) {
    // A retry: as remembered. A rate share's sub-lease too (a lost answer's tokens are held, then given back); not a
    // window share's (its share may be gone, and a refund naming it could land in another): short, never over.
    const waitMs = Math.max(1, (record.share?.endsAtMs ?? nowMs) - nowMs);
    const results = replayedResults(input, seen, nowMs, { remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs });
    const lease =
      record.share?.kind === "rate" && seen.leaseUnits > 0
        ? { units: seen.leaseUnits, atMs: seen.atMs, forMs: seen.leaseForMs, id: seen.id }
        : null;
    return { result: { atMs: nowMs, results, lease, replayed: true, hot: record.hot }, record };
  }
  const took = takeBack(record, input, nowMs);
  let share = took.share === null ? null : settled(took.share, nowMs);
  const giveBack = took.giveBack;
  const taken = took.taken?.filter((id) => id !== input.id);
  const results: CheckResult[] = [];
  for (const cost of input.costs) {
    const out = decideOne(share, input.rule, cost, nowMs);
    results.push(out.result);
    share = out.share;
  }
  const sub = share === null || !uses("subleases") ? null : subleaseFrom(share, input.lease, nowMs, input.id);
  share = sub?.share ?? share;
  const lease = sub?.lease ?? null;
  const applied = appliedCall(input.id, results, lease, nowMs);
  const calls = [...record.calls.slice(Math.max(0, record.calls.length - DELEGATE_CALL_MEMORY + 1)), applied];
  const { load, busy, spread } = countLoad(record, nowMs);
  const { taken: _t, ...rest } = record;
  const d = rolled(record.demand, nowMs);
  const demand = { ...d, curr: d.curr + callDemand(input) };
  const next: DelegateRecord = { ...rest, share, giveBack, calls, demand, load, ...(taken?.length ? { taken } : {}) };
  const wait = sub?.waitMs === undefined ? {} : { leaseWaitMs: contendedWaitMs(record, sub.share, sub.waitMs, nowMs) };
  const busyNews = busy ? { busy: true, ...(uses("spread") ? { spread } : {}) } : {};
  const result: CallResult = { atMs: nowMs, results, lease, ...wait, replayed: false, hot: record.hot, ...busyNews };
  return { result, record: next };
}

/** One request decided from the share, and the share after it. */
type Decided = { readonly result: CheckResult; readonly share: HeldShare | null };
function decideOne(share: HeldShare | null, rule: LimiterRule, cost: number, nowMs: number): Decided {
  const waitMs = Math.max(1, (share?.endsAtMs ?? nowMs) - nowMs);
  const refused = refusedFor(share?.rule.params ?? rule.params, cost, waitMs, nowMs);
  if (!refused.ok || share === null || nowMs >= share.endsAtMs) return { result: refused, share };
  if (share.kind === "window") {
    if (share.unitsLeft < cost) return { result: refused, share };
    const unitsLeft = share.unitsLeft - cost;
    const decision = { allowed: true, remaining: unitsLeft, resetAfterMs: waitMs, retryAfterMs: null, delayMs: 0 };
    return { result: { ok: true, atMs: share.atMs, decision }, share: { ...share, unitsLeft } };
  }
  const params = sliceOf(share);
  if (params === null || share.state === null || cost > capacityOf(params)) return { result: refused, share };
  // Admitted only if the bucket holds the cost on top of its sub-leases' units reserved in it; only the cost is charged.
  const reserved = inBucket(share);
  if (cost + reserved > capacityOf(params))
    return { result: refusedFor(params, cost, reservedBackInMs(share, nowMs), nowMs), share };
  const peek = reserved > 0 ? decide(params, share.state, cost + reserved, nowMs) : null;
  if (peek !== null && (!peek.ok || !peek.decision.allowed)) {
    return { result: peek.ok ? { ok: true, atMs: nowMs, decision: peek.decision } : refused, share };
  }
  const out = decide(params, share.state, cost, nowMs);
  if (!out.ok) return { result: refused, share };
  const decision = { ...out.decision, remaining: Math.max(0, out.decision.remaining - reserved) };
  return { result: { ok: true, atMs: nowMs, decision }, share: { ...share, state: out.state } };
}

/** A delegate record that is as good as none: no share, nothing to give back. */
export function delegateIdle(record: DelegateRecord, nowMs: number): boolean {
  return (record.share === null || nowMs >= record.share.endsAtMs) && record.giveBack.length === 0;
}

/** How long an isolate whose sub-lease ask found the slice empty waits, ms (`leaseWaitMs`: docs/production.md). */
function contendedWaitMs(record: DelegateRecord, share: HeldShare, waitMs: number, nowMs: number): number {
  const params = sliceOf(share);
  if (params === null || !("rate" in params)) return waitMs;
  const perTerm = (params.rate.tokens * SHARE_TERM_MS) / params.rate.perMs;
  const over = demandPerTerm(record, nowMs) / Math.max(1, perTerm);
  return Math.min(RATE_LEASE_TERM_MS, Math.ceil(waitMs * Math.max(1, over)));
}
