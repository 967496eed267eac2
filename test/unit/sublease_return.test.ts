/**
 * A rate sub-lease given back late (sublease.ts `takeBack`): many isolates share a delegate, and an isolate's unused
 * sub-lease rides with its next call, which may come long after the lease's term (an overload backoff, a quiet spell).
 * Taken out of the slice, if it refilled in between, those tokens came back anyway: taking them in again after another
 * isolate drained the slice admitted them twice, over the rate bound (`burst + rate × (t + RATE_BOUND_MS)` in any span
 * t). Reserved instead (sublease.ts `Reservation`), the bucket never refilled them: a return is exact whenever it comes
 * within its wait, and one after it finds its units charged in full. These tables drive the real `delegateCall` with
 * several callers on one delegate holding the whole rule.
 */
import { describe, expect, it } from "vitest";
import type { AlgorithmParams } from "../../src/algorithms/index.ts";
import {
  adoptGrant,
  type DelegateRecord,
  delegateCall,
  type HeldShare,
  NEW_DELEGATE,
  shareAsk,
} from "../../src/protocol/delegate.ts";
import type { ShareGrant } from "../../src/protocol/share.ts";
import { type CallInput, fullState, type LeaseReturn, type LimiterRule, peekState } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { RATE_BOUND_MS, RATE_LEASE_TERM_MS, RESERVATION_WAIT_MS, SHARE_PARTS } from "../../src/protocol/tunables.ts";
import { heldRateShare } from "../support/held_share.ts";
import { gcraP, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

interface Run {
  record: DelegateRecord;
  calls: number;
}

function call(run: Run, input: Omit<CallInput, "id">, nowMs: number) {
  const out = delegateCall(run.record, { ...input, id: `c${run.calls++}` }, nowMs);
  run.record = out.record;
  return out.result;
}

const admitted = (result: ReturnType<typeof call>) => result.results.filter((r) => r.ok && r.decision.allowed).length;

/**
 * `lenders` isolates each take a sub-lease from a full slice, each after the slice refilled; once it is full again
 * isolate B drains it, and right after each lender gives its lease back unused with a batch of as many requests.
 * Returns what was admitted from B's batch on, and over how many ms.
 */
function lateReturns(
  rule: LimiterRule,
  lenders: number,
  share: (s: HeldShare, nowMs: number) => HeldShare = (s) => s,
  options: { readonly gapMs?: number; readonly ask?: number } = {},
) {
  const params = rule.params as AlgorithmParams & { burst: number; rate: { amount: number; periodMs: number } };
  const slice = delegateSlice(params, SHARE_PARTS)!;
  const { burst } = params;
  const refillMs = options.gapMs ?? Math.ceil((burst * params.rate.periodMs) / params.rate.amount) + 1;
  const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, {
    endsAtMs: T0 + 60_000,
    renewAtMs: T0 + 59_000,
  });
  const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
  const leases: LeaseReturn[] = [];
  let nowMs = T0;
  for (let i = 0; i < lenders; i++) {
    const ask = { units: options.ask ?? burst, ttlMs: RATE_LEASE_TERM_MS };
    const lease = call(run, { rule, costs: [], lease: ask }, nowMs).lease;
    if (lease === null) throw new Error("a full slice lends");
    leases.push({ units: lease.units, atMs: lease.atMs });
    nowMs += refillMs;
  }
  // The slice is full again (or a renewed share is held: `share`).
  run.record = { ...run.record, share: share(run.record.share!, nowMs) };
  const fromMs = nowMs;
  let total = admitted(call(run, { rule, costs: Array<number>(burst).fill(1) }, nowMs));
  const drained = total;
  for (const back of leases) {
    nowMs += 1;
    total += admitted(call(run, { rule, costs: Array<number>(back.units).fill(1), giveBack: [back] }, nowMs));
  }
  const spanMs = nowMs - fromMs;
  const bound = burst + (params.rate.amount * (spanMs + RATE_BOUND_MS)) / params.rate.periodMs;
  return { drained, total, spanMs, bound, lent: leases.reduce((a, b) => a + b.units, 0) };
}

describe("a rate sub-lease given back after its slice was full again", () => {
  it("token_bucket 10/s burst 20 (free-global): past its wait, charged in full, within the rate bound", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const out = lateReturns(rule, 1);
    expect(out.lent).toBe(10);
    // 4 of the 10 taken out (the slice's refill over 480 ms), 6 reserved in the bucket. 2,001 ms after the lending
    // (past its 480 ms and RESERVATION_WAIT_MS) they are charged in full: the full bucket (20) less 6; B finds 14.
    expect(out.drained).toBe(14);
    // Taken and refunded capped (before 0ef22d2): 30 admitted in 1 ms against a bound of 25.01. Now the burst and the
    // 4 taken out, all 10 lent counted as used: 24.
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(14);
  });

  it("gcra 200/s burst 200 (search-origin), two lenders: the live one's return is exact, within the rate bound", () => {
    const rule: LimiterRule = { id: "search-origin", params: gcraP(200, 1000, 200), version: 1 };
    // Each lender asks for half the burst; the second 481 ms after the first (the slice full again, the first's
    // reservation live until its wait's end, 630 ms), B 481 ms later.
    const out = lateReturns(rule, 2, undefined, { gapMs: 481, ask: 100 });
    // The first 100: 96 taken out (the slice's refill over 480 ms), 4 reserved in the bucket. The second lender finds
    // the full bucket (200) less those 4: half of it, all reserved in the bucket (96 are out already).
    expect(out.lent).toBe(198);
    // The first reservation expired (charged in full: 100 of the bucket, the 96 out stay out for the second's units);
    // B takes what is not reserved: 200 - 100 - 2.
    expect(out.drained).toBe(98);
    // Before 0ef22d2: 400 admitted in 2 ms against a bound of 300.4. Now 196: the second lender's 98 come back whole
    // (its reservation held them), the first's return matches nothing (its 100 counted as used).
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(196);
  });

  it("into a renewed share (another bucket, full, without the reservations): not taken", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const slice = delegateSlice(rule.params, SHARE_PARTS)!;
    const renewed = (s: HeldShare, nowMs: number): HeldShare => {
      const { reserved: _reserved, ...rest } = s;
      return heldRateShare(rule, SHARE_PARTS, fullState(slice, nowMs), nowMs, { ...rest, atMs: nowMs });
    };
    const out = lateReturns(rule, 1, renewed);
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(20);
  });

  it("a return within its wait is exact: the full slice's units, never more, whatever the slice did meanwhile", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const slice = delegateSlice(rule.params, SHARE_PARTS)!;
    const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, { endsAtMs: T0 + 60_000 });
    const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
    const lease = call(run, { rule, costs: [], lease: { units: 20, ttlMs: RATE_LEASE_TERM_MS } }, T0).lease!;
    expect(lease.units).toBe(10);
    // B takes the other 10 at once; A gives its 10 back 5 ms later: all 10 admit again (as if never lent).
    expect(admitted(call(run, { rule, costs: Array<number>(10).fill(1) }, T0))).toBe(10);
    const back = { units: lease.units, atMs: lease.atMs };
    expect(admitted(call(run, { rule, costs: Array<number>(11).fill(1), giveBack: [back] }, T0 + 5))).toBe(10);
    // Lent again at +1,005 ms from 10 tokens: 5, for 120 ms (a quarter of the units asked), reserved until +1,275 ms
    // (4 taken out, 1 in the bucket). At +1,270 ms the bucket holds 8 (6 and 2.65 of refill), B takes the 7 not
    // reserved, and A gives its 5 back 1 ms later, after the lease's end: 5 admit, 12 in all (the 10 at +1,005 ms and
    // the refill since, exactly: as if never lent).
    const second = call(run, { rule, costs: [], lease: { units: 20, ttlMs: RATE_LEASE_TERM_MS } }, T0 + 1005).lease!;
    expect(second).toEqual({ units: 5, atMs: T0 + 1005, forMs: 120, id: "c3" });
    expect(run.record.share?.reserved?.[0]?.untilMs).toBe(T0 + 1005 + 120 + RESERVATION_WAIT_MS);
    expect(admitted(call(run, { rule, costs: Array<number>(20).fill(1) }, T0 + 1270))).toBe(7);
    const late = { units: second.units, atMs: second.atMs };
    expect(admitted(call(run, { rule, costs: Array<number>(6).fill(1), giveBack: [late] }, T0 + 1271))).toBe(5);
    // Past its wait, a reservation is charged in full and its return matches nothing (tables below).
  });
});

describe("a rate sub-lease's reservation (sublease.ts `Reservation`): lent, given back, expired, handed on", () => {
  // 10/s burst 20: the slice's refill over a lease's term (480 ms) is 4, the most its sub-leases take out of it.
  const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
  const slice = delegateSlice(rule.params, SHARE_PARTS)!;
  const level = (s: HeldShare | null, nowMs: number) => peekState(slice, s!.state!, nowMs).remaining;
  const lendTen = () => {
    const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, { endsAtMs: T0 + 60_000 });
    const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
    const lease = call(run, { rule, costs: [], lease: { units: 20, ttlMs: RATE_LEASE_TERM_MS } }, T0).lease!;
    return { run, lease, back: (units: number): LeaseReturn => ({ units, atMs: lease.atMs }) };
  };

  it("lent: 4 taken out, 6 reserved in the bucket; batches find the rest (10)", () => {
    const { run, lease } = lendTen();
    // Half of 20 asked: a term half as long.
    expect(lease).toEqual({ units: 10, atMs: T0, forMs: RATE_LEASE_TERM_MS / 2, id: "c0" });
    const share = run.record.share!;
    expect(share.reserved).toEqual([
      { atMs: T0, id: "c0", units: 10, untilMs: T0 + lease.forMs + RESERVATION_WAIT_MS },
    ]);
    expect(share.takenOut).toBe(4);
    expect(level(share, T0)).toBe(16);
    expect(admitted(call(run, { rule, costs: Array<number>(11).fill(1) }, T0))).toBe(10);
  });

  it("given back within its wait: the part used charged, the rest free again, however late in its wait", () => {
    for (const [sinceMs, exact] of [
      [1, 17],
      [200, 19],
      [RATE_LEASE_TERM_MS / 2 + RESERVATION_WAIT_MS - 1, 20],
    ] as const) {
      const { run, back } = lendTen();
      // 3 of 10 used: 7 back. As if the 3 were taken at the lending and nothing else: 17, refilled at 10/s since.
      call(run, { rule, costs: [], giveBack: [back(7)] }, T0 + sinceMs);
      expect(run.record.share?.reserved).toBeUndefined();
      expect(run.record.share?.takenOut).toBeUndefined();
      expect(level(run.record.share, T0 + sinceMs)).toBe(exact);
    }
  });

  it("expired (no return within its wait): charged in full; a return after matches nothing and is dropped", () => {
    const { run, back } = lendTen();
    const untilMs = T0 + RATE_LEASE_TERM_MS / 2 + RESERVATION_WAIT_MS;
    call(run, { rule, costs: [] }, untilMs);
    expect(run.record.share?.reserved).toBeUndefined();
    // The bucket (16, and 3.9 of refill) less the 6 still in it: the 10 counted as used (4 of them out already).
    expect(level(run.record.share, untilMs)).toBe(13);
    call(run, { rule, costs: [], giveBack: [back(10)] }, untilMs + 1);
    expect(level(run.record.share, untilMs + 1)).toBe(13);
    expect(run.record.giveBack).toEqual([]);
  });

  it("a return names its lending time and at most its units; the fewest such reservation takes it, once", () => {
    const { run, back } = lendTen();
    // Another lending's time, or more units than lent: no reservation of its.
    call(run, { rule, costs: [], giveBack: [{ units: 5, atMs: T0 + 1 }, back(11)] }, T0 + 1);
    expect(run.record.share?.reserved).toHaveLength(1);
    // The same return twice in one call: the second finds the reservation settled.
    call(run, { rule, costs: [], giveBack: [back(10), back(10)] }, T0 + 2);
    expect(run.record.share?.reserved).toBeUndefined();
    expect(level(run.record.share, T0 + 2)).toBe(20);
  });

  it("handed on: a renewal's bucket that holds them carries them; a smaller one charges them in full first", () => {
    const { run, back } = lendTen();
    const ask = shareAsk(run.record, "weur.0", rule, "a1", T0 + 100).ask;
    const grant = (parts: number): ShareGrant => ({
      atMs: T0 + 110,
      kind: "rate",
      parts,
      units: 0,
      remaining: 0,
      termMs: 1000,
      rule,
      hot: true,
      held: parts,
    });
    // The same parts: the bucket goes on, its reservation too, and the return is taken whole.
    const same = adoptGrant(run.record, ask, grant(SHARE_PARTS), T0 + 100, T0 + 110);
    expect(same.share?.reserved).toEqual(run.record.share?.reserved);
    const after = delegateCall(same, { rule, id: "r1", costs: [], giveBack: [back(10)] }, T0 + 120).record;
    expect(level(after.share, T0 + 120)).toBe(20);
    // A tenth of the parts (burst 2, refill over 480 ms 0): it cannot hold them: charged in full in the old bucket.
    const small = adoptGrant(run.record, ask, grant(SHARE_PARTS / 10), T0 + 100, T0 + 110);
    expect(small.share?.reserved).toBeUndefined();
    const smaller = delegateCall(small, { rule, id: "r2", costs: [], giveBack: [back(10)] }, T0 + 120).record;
    expect(smaller.share?.state).toEqual(small.share?.state);
  });

  it("a share from a record without reservations (its sub-leases' units taken): their returns are dropped", () => {
    const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, { endsAtMs: T0 + 60_000 });
    const out = delegateCall(
      { ...NEW_DELEGATE, share: held },
      { rule, id: "o", costs: [], giveBack: [{ units: 5, atMs: T0 - 100 }] },
      T0,
    );
    expect(out.record.share?.state).toEqual(held.state);
    expect(out.record.giveBack).toEqual([]);
  });
});

describe("returns across a renewal's hand-on (sublease.ts `handedOn`): once, and never more than was lent", () => {
  // gcra 200/s burst 200 (search-origin). A delegate holding the whole rule lends 100 (96 taken out: its refill over
  // 480 ms), then a renewal halves its parts (100/s, burst 100: 48 out at most). The reservation goes on in the new
  // bucket, its units out brought to 48 (the other 48 back into the full bucket: lost at its burst, which is safe).
  const rule: LimiterRule = { id: "search-origin", params: gcraP(200, 1000, 200), version: 1 };
  const whole = delegateSlice(rule.params, SHARE_PARTS)!;
  const half = delegateSlice(rule.params, SHARE_PARTS / 2)!;
  const renewed = () => {
    const held = heldRateShare(rule, SHARE_PARTS, fullState(whole, T0), T0, { endsAtMs: T0 + 1000 });
    const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
    const lease = call(run, { rule, costs: [], lease: { units: 100, ttlMs: RATE_LEASE_TERM_MS } }, T0).lease!;
    const ask = shareAsk(run.record, "weur.0", rule, "a1", T0 + 10).ask;
    const grant: ShareGrant = {
      atMs: T0 + 20,
      kind: "rate",
      parts: SHARE_PARTS / 2,
      units: 0,
      remaining: 0,
      termMs: 1000,
      rule,
      hot: true,
      held: SHARE_PARTS / 2,
    };
    run.record = adoptGrant(run.record, ask, grant, T0 + 10, T0 + 20);
    return { run, back: { units: lease.units, atMs: lease.atMs } as LeaseReturn };
  };
  const batch = (n: number) => Array<number>(n).fill(1);

  it("the renewed bucket carries the reservation: bucket and units out within its burst and 480 ms of refill", () => {
    const { run } = renewed();
    const share = run.record.share!;
    expect(share.parts).toBe(SHARE_PARTS / 2);
    expect(share.reserved).toEqual([
      { atMs: T0, id: "c0", units: 100, untilMs: T0 + RATE_LEASE_TERM_MS + RESERVATION_WAIT_MS },
    ]);
    expect(share.takenOut).toBe(48);
    expect(peekState(half, share.state!, T0 + 20).remaining + share.takenOut!).toBeLessThanOrEqual(100 + 48);
  });

  it("a duplicated return, a forged one and one after the charge credit nothing; the real one, its units once", () => {
    const { run, back } = renewed();
    // The bucket (100) holds 52 of the reservation: 48 admit.
    expect(admitted(call(run, { rule, costs: batch(200) }, T0 + 30))).toBe(48);
    // All 100 given back unused: the 52 reserved free again and the 48 out back in: 100 admit (the bucket's burst).
    expect(admitted(call(run, { rule, costs: batch(200), giveBack: [back] }, T0 + 31))).toBe(100);
    // The same return again (another call), and one naming no lending: nothing (the refill of 2 ms, under a token).
    expect(admitted(call(run, { rule, costs: batch(200), giveBack: [back] }, T0 + 32))).toBe(0);
    const forged: LeaseReturn = { units: 100, atMs: T0 + 1 };
    expect(admitted(call(run, { rule, costs: batch(200), giveBack: [forged] }, T0 + 33))).toBe(0);
    expect(run.record.share?.reserved).toBeUndefined();
    // 148 over 33 ms, the isolate using none: the new slice's burst and its 480 ms of refill, within the key's bound.
    expect(48 + 100).toBeLessThanOrEqual(200 + (200 * (33 + RATE_BOUND_MS)) / 1000);
  });

  it("a return after the reservation's wait finds it charged in full: dropped", () => {
    const { run, back } = renewed();
    const afterMs = T0 + RATE_LEASE_TERM_MS + RESERVATION_WAIT_MS;
    // Charged in full at its wait's end: the bucket (full again) less the 52 in it, the 48 out counted as used.
    expect(admitted(call(run, { rule, costs: batch(200) }, afterMs))).toBe(48);
    expect(run.record.share?.reserved).toBeUndefined();
    expect(admitted(call(run, { rule, costs: batch(200), giveBack: [back] }, afterMs + 1))).toBe(0);
  });
});

describe("a rate sub-lease's id (LeaseGrant.id, the lending call's): its return matches its own reservation only", () => {
  // token_bucket 10/s burst 20, the delegate holding the whole rule. Two isolates each take 5 in the same ms (the same
  // `atMs`): by time alone, a return could be taken into the other's reservation.
  const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
  const slice = delegateSlice(rule.params, SHARE_PARTS)!;
  const twoInOneMs = () => {
    const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, { endsAtMs: T0 + 60_000 });
    const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
    const ask = { units: 5, ttlMs: RATE_LEASE_TERM_MS };
    const a = call(run, { rule, costs: [], lease: ask }, T0).lease!;
    const b = call(run, { rule, costs: [], lease: ask }, T0).lease!;
    return { run, a, b };
  };
  const back = (lease: { units: number; atMs: number; id?: string }, units: number): LeaseReturn => ({
    units,
    atMs: lease.atMs,
    ...(lease.id === undefined ? {} : { id: lease.id }),
  });

  it("each sub-lease has its call's id; a return naming it settles that reservation, the other stays", () => {
    const { run, a, b } = twoInOneMs();
    expect([a.id, b.id, a.atMs === b.atMs]).toEqual(["c0", "c1", true]);
    call(run, { rule, costs: [], giveBack: [back(b, 5)] }, T0 + 1);
    expect(run.record.share?.reserved?.map((r) => r.id)).toEqual(["c0"]);
  });

  it("a return delivered twice (a call the delegate took, sent again) is credited once, not into the other's", () => {
    // A used none of its 5 (gives 5 back), B used all 5 (gives nothing back). By time alone, A's duplicate would be
    // taken into B's reservation: B's 5 uncharged, 5 more admitted than lent out and used.
    const { run, a } = twoInOneMs();
    const first = call(run, { rule, costs: Array<number>(20).fill(1), giveBack: [back(a, 5)] }, T0 + 1);
    const again = call(run, { rule, costs: Array<number>(20).fill(1), giveBack: [back(a, 5)] }, T0 + 2);
    // 20 - 10 lent, + A's 5 back: 15 admit; the duplicate nothing. B's 5 stay reserved, charged in full later.
    expect([admitted(first), admitted(again)]).toEqual([15, 0]);
    expect(run.record.share?.reserved?.map((r) => [r.id, r.units])).toEqual([["c1", 5]]);
  });

  it("a return naming no sub-lease's id (forged, or another delegate's) matches nothing, whatever its time", () => {
    const { run, a } = twoInOneMs();
    const before = run.record.share;
    call(run, { rule, costs: [], giveBack: [{ units: 5, atMs: a.atMs, id: "x" }] }, T0 + 1);
    expect(run.record.share?.reserved).toEqual(before?.reserved);
    expect(run.record.giveBack).toEqual([]);
  });
});
