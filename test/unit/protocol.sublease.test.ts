/**
 * Exact tables for sub-leases (src/protocol/sublease.ts): what a delegate grants an isolate out of its window units or
 * its rate slice, for how long, and how a call's demand is counted; and how a delegate's batch carries one
 * (delegate.ts `delegateCall`, `delegateNeed`, a retried call). A property: whatever is asked, a grant never holds
 * more than the share had, never outlives the window it was charged in, and takes exactly its units from the share.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmParams, capacityOf } from "../../src/algorithms/index.ts";
import {
  type DelegateRecord,
  delegateCall,
  delegateNeed,
  type HeldShare,
  NEW_DELEGATE,
} from "../../src/protocol/delegate.ts";
import { emptyState } from "../../src/protocol/share.ts";
import { type CallInput, fullState, type LimiterRule, peekState, shorter } from "../../src/protocol/store.ts";
import {
  burstFillMs,
  callDemand,
  delegateSlice,
  handedOn,
  inBucket,
  reservedBackInMs,
  settled,
  subleaseFrom,
  subleaseTermMs,
  takeBack,
} from "../../src/protocol/sublease.ts";
import { RATE_LEASE_TERM_MS, RESERVATION_WAIT_MS, SHARE_PARTS, SUBLEASE_TERM_MS } from "../../src/protocol/tunables.ts";
import { heldRateShare } from "../support/held_share.ts";
import { fixedWindow, gcraP, tokenBucket } from "../support/params.ts";
import { runs } from "../support/runs.ts";

/** 12:00:00 on a day: a 60 s window starts here. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const win: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 1 };
const rate: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 200), version: 1 };
/** A delegate's slice of 500 parts: 500/s, burst 100. */
const half = delegateSlice(rate.params, 500)!;

const windowShare = (over: Partial<HeldShare> = {}): HeldShare => ({
  kind: "window",
  rule: win,
  parts: 0,
  state: null,
  units: 40,
  unitsLeft: 30,
  short: false,
  atMs: T0 + 3,
  endsAtMs: T0 + 1000,
  renewAtMs: T0 + 750,
  ...over,
});
const rateShare = (over: Partial<HeldShare> = {}): HeldShare => heldRateShare(rate, 500, fullState(half, T0), T0, over);
const levelOf = (share: HeldShare, nowMs: number) => peekState(half, share.state, nowMs).remaining;
/** What a rate share may still admit or lend: its level less its sub-leases' units reserved in it (sublease.ts). */
const availableOf = (share: HeldShare, nowMs: number) => levelOf(share, nowMs) - inBucket(share);

describe("subleaseTermMs", () => {
  it("is the lease ttl, at most SUBLEASE_TERM_MS (half a share term), at least 1 ms", () => {
    expect(SUBLEASE_TERM_MS).toBe(500);
    expect([1000, 500, 499, 50, 1, 0, -5].map((t) => subleaseTermMs(t))).toEqual([500, 500, 499, 50, 1, 1, 1]);
  });
});

describe("burstFillMs", () => {
  it("is the time a rule's rate takes to fill its burst from empty, rounded up; none without a rate", () => {
    const rows: readonly [string, AlgorithmParams, number][] = [
      ["token bucket, 1,000/s burst 200", tokenBucket(1000, 1000, 200), 200],
      ["hot-rate and global-rate (cluster simulation)", tokenBucket(5000, 1000, 1000), 200],
      ["gcra, search-origin (200/s burst 200)", gcraP(200, 1000, 200), 1000],
      ["free-global (10/s burst 20)", tokenBucket(10, 1000, 20), 2000],
      ["rounded up", tokenBucket(3, 1000, 1), 334],
      ["a window", win.params, Infinity],
    ];
    for (const [name, params, ms] of rows) expect(burstFillMs(params), name).toBe(ms);
  });
});

describe("subleaseFrom: a window share", () => {
  it("grants what is asked out of the units left, naming the share's charge, for the asked term", () => {
    const out = subleaseFrom(windowShare(), { units: 12, ttlMs: 500 }, T0 + 100);
    expect(out.lease).toEqual({ units: 12, atMs: T0 + 3, forMs: 500 });
    expect(out.share.unitsLeft).toBe(18);
    expect(out.share.units).toBe(40);
  });

  it("fewer than asked: a term as much shorter (down to a quarter), unless the window is spent", () => {
    expect(subleaseFrom(windowShare({ unitsLeft: 6 }), { units: 12, ttlMs: 500 }, T0).lease?.forMs).toBe(250);
    expect(subleaseFrom(windowShare({ unitsLeft: 2 }), { units: 12, ttlMs: 500 }, T0).lease?.forMs).toBe(125);
    expect(subleaseFrom(windowShare({ unitsLeft: 6, short: true }), { units: 12, ttlMs: 500 }, T0).lease?.forMs).toBe(
      500,
    );
    // Cut at the quarter of the limit: also fewer than asked.
    expect(subleaseFrom(windowShare({ unitsLeft: 90 }), { units: 50, ttlMs: 500 }, T0).lease).toEqual({
      units: 25,
      atMs: T0 + 3,
      forMs: 250,
    });
    expect([shorter(500, 1, 1), shorter(500, 3, 4), shorter(500, 1, 100), shorter(7, 1, 2)]).toEqual([
      500, 375, 125, 3,
    ]);
  });

  it("never more than the units left, nor than a quarter of the rule's limit", () => {
    expect(subleaseFrom(windowShare({ unitsLeft: 7 }), { units: 12, ttlMs: 500 }, T0).lease?.units).toBe(7);
    expect(subleaseFrom(windowShare({ unitsLeft: 90 }), { units: 60, ttlMs: 500 }, T0).lease?.units).toBe(25);
    expect(subleaseFrom(windowShare({ unitsLeft: 0 }), { units: 5, ttlMs: 500 }, T0).lease).toBeNull();
  });

  it("cuts the term at the window's end, with units in proportion (rounded up)", () => {
    // 200 ms before the window's end: 200 of the 500 ms asked, and 12 × 200 / 500 = 4.8 -> 5 units.
    const out = subleaseFrom(windowShare({ endsAtMs: T0 + 60_000 }), { units: 12, ttlMs: 500 }, T0 + 59_800);
    expect(out.lease).toEqual({ units: 5, atMs: T0 + 3, forMs: 200 });
    expect(out.share.unitsLeft).toBe(25);
  });

  it("a term over SUBLEASE_TERM_MS is cut to it; the units are not", () => {
    expect(subleaseFrom(windowShare(), { units: 12, ttlMs: 1000 }, T0).lease).toEqual({
      units: 12,
      atMs: T0 + 3,
      forMs: 500,
    });
  });

  it("nothing out of a window gone by (whatever the share's end says)", () => {
    const share = windowShare({ endsAtMs: T0 + 120_000 });
    expect(subleaseFrom(share, { units: 3, ttlMs: 500 }, T0 + 59_999).lease?.units).toBe(1);
    expect(subleaseFrom(share, { units: 3, ttlMs: 500 }, T0 + 60_000).lease).toBeNull();
  });

  it("nothing after the share's end, nor for an ask that is absent or not a positive integer", () => {
    const share = windowShare();
    for (const ask of [
      null,
      undefined,
      { units: 0, ttlMs: 500 },
      { units: 1.5, ttlMs: 500 },
      { units: -2, ttlMs: 9 },
    ]) {
      const out = subleaseFrom(share, ask, T0);
      expect(out.lease).toBeNull();
      expect(out.share).toBe(share);
    }
    expect(subleaseFrom(share, { units: 3, ttlMs: 500 }, T0 + 1000).lease).toBeNull();
    expect(subleaseFrom(share, { units: 3, ttlMs: 500 }, T0 + 999).lease?.units).toBe(3);
    // One unit is a positive integer too.
    expect(subleaseFrom(share, { units: 1, ttlMs: 500 }, T0).lease).toEqual({ units: 1, atMs: T0 + 3, forMs: 500 });
  });
});

describe("subleaseFrom: a rate share", () => {
  const term = RATE_LEASE_TERM_MS;
  it("reserves the units, taken out of the bucket up to its refill over a lease's term, for the asked term", () => {
    const share = rateShare();
    expect(levelOf(share, T0)).toBe(100);
    const out = subleaseFrom(share, { units: 30, ttlMs: term }, T0);
    expect(out.lease).toEqual({ units: 30, atMs: T0, forMs: term });
    expect(out.share.reserved).toEqual([{ atMs: T0, units: 30, untilMs: T0 + term + RESERVATION_WAIT_MS }]);
    // 500/s: 240 in 480 ms, so all 30 out of the bucket.
    expect(out.share.takenOut).toBe(30);
    expect(levelOf(out.share, T0)).toBe(70);
    // 10/s burst 20 (the slice's refill over 480 ms: 4): 10 lent, 4 taken out, 6 reserved in the bucket.
    const slow: LimiterRule = { id: "slow", params: tokenBucket(10, 1000, 20), version: 1 };
    const slice = delegateSlice(slow.params, SHARE_PARTS)!;
    const small = heldRateShare(slow, SHARE_PARTS, fullState(slice, T0), T0);
    const lent = subleaseFrom(small, { units: 20, ttlMs: term }, T0).share;
    expect(lent.takenOut).toBe(4);
    expect(peekState(slice, lent.state, T0).remaining).toBe(16);
    expect(inBucket(lent)).toBe(6);
  });

  it("at most RATE_LEASE_TERM_MS, with as many fewer units as the asked term is longer (the same pace)", () => {
    expect(term).toBe(480);
    // 50 asked for 1 s: 24 for 480 ms (rounded up).
    expect(subleaseFrom(rateShare(), { units: 50, ttlMs: 1000 }, T0).lease).toEqual({
      units: 24,
      atMs: T0,
      forMs: 480,
    });
  });

  it("at most half of what the bucket holds, and a term as much shorter, down to a quarter", () => {
    // 80 in the bucket: 40 of 80 asked (half of it), for 480 × 40 / 80 = 240 ms.
    const low = rateShare({ state: emptyState(half, T0 - 160) }); // refilled 160 ms at 500/s
    expect(levelOf(low, T0)).toBe(80);
    const out = subleaseFrom(low, { units: 80, ttlMs: term }, T0);
    expect(out.lease).toEqual({ units: 40, atMs: T0, forMs: 240 });
    expect(availableOf(out.share, T0)).toBe(40); // the other half stays for batches and other isolates' asks
    // 40 of 400: a tenth, but never under a quarter of the term.
    expect(subleaseFrom(low, { units: 400, ttlMs: term }, T0).lease).toEqual({ units: 40, atMs: T0, forMs: 120 });
  });

  it("a quarter of what the bucket holds while the share's demand is over twice its slice's rate", () => {
    // The slice refills 500 a term. A delegate asked by its isolates for twice that and more (a key at twice its rate:
    // global-rate 10,000 req/s at 5,000/s) lends each a quarter: units parked at one isolate are refused to the others'
    // requests until it spends them (10 seeds, section 8c's global-rate rows: up to 0.8 points nearer exact).
    const low = rateShare({ state: emptyState(half, T0 - 160) }); // 80 in the bucket
    const lent = (demand: number) => subleaseFrom({ ...low, demand }, { units: 80, ttlMs: term }, T0).lease;
    expect(lent(1001)).toEqual({ units: 20, atMs: T0, forMs: 120 });
    expect(lent(5000)?.units).toBe(20);
    // Up to twice its rate, or not known: half, as above.
    expect(lent(1000)).toEqual({ units: 40, atMs: T0, forMs: 240 });
    expect(lent(0)?.units).toBe(40);
    expect(subleaseFrom(low, { units: 80, ttlMs: term }, T0).lease?.units).toBe(40);
  });

  it("an empty bucket grants nothing and says when it will hold the ask (at most the term)", () => {
    const empty = rateShare({ state: emptyState(half, T0) }); // 500/s: 5 tokens in 10 ms, the burst (100) in 200 ms
    const five = subleaseFrom(empty, { units: 5, ttlMs: term }, T0);
    expect(five.lease).toBeNull();
    expect(five.waitMs).toBe(10);
    expect(subleaseFrom(empty, { units: 1000, ttlMs: term }, T0).waitMs).toBe(320);
    // A granted ask says nothing of it.
    expect(subleaseFrom(rateShare(), { units: 5, ttlMs: term }, T0).waitMs).toBeUndefined();
  });

  it("never more than the slice's burst; nothing from an empty bucket, no parts, or no state", () => {
    // Half of a full bucket at most: half the slice's burst.
    expect(subleaseFrom(rateShare(), { units: 1000, ttlMs: term }, T0).lease?.units).toBe(capacityOf(half) / 2);
    // The slice's burst: its part of the rule's (100), nothing more.
    expect(capacityOf(half)).toBe(100);
    expect(subleaseFrom(rateShare({ state: emptyState(half, T0) }), { units: 5, ttlMs: term }, T0).lease).toBeNull();
    expect(subleaseFrom(rateShare({ parts: 0 }), { units: 5, ttlMs: term }, T0).lease).toBeNull();
    expect(subleaseFrom(rateShare({ state: null }), { units: 5, ttlMs: term }, T0).lease).toBeNull();
    // One token: granted, whether one is asked or one is left.
    expect(subleaseFrom(rateShare(), { units: 1, ttlMs: term }, T0).lease).toEqual({ units: 1, atMs: T0, forMs: term });
    const one = rateShare({ state: emptyState(half, T0 - 2) }); // refilled 2 ms at 500/s
    expect(levelOf(one, T0)).toBe(1);
    expect(subleaseFrom(one, { units: 4, ttlMs: term }, T0).lease).toEqual({ units: 1, atMs: T0, forMs: 120 });
  });
});

describe("callDemand", () => {
  const call = (over: Partial<CallInput>): CallInput => ({ rule: win, id: "c", costs: [], ...over });
  it("counts the requests, and a lease ask's units net of the units given back, never below the requests", () => {
    expect(callDemand(call({ costs: [1, 2, 1] }))).toBe(4);
    expect(callDemand(call({ costs: [1, 2], lease: { units: 10, ttlMs: 500 } }))).toBe(13);
    expect(
      callDemand(
        call({
          costs: [1],
          lease: { units: 10, ttlMs: 500 },
          giveBack: [
            { units: 3, atMs: T0 },
            { units: 2, atMs: T0 },
          ],
        }),
      ),
    ).toBe(6);
    expect(callDemand(call({ costs: [1], lease: { units: 4, ttlMs: 500 }, giveBack: [{ units: 9, atMs: T0 }] }))).toBe(
      1,
    );
    // Given back without a lease ask: the requests only (refunds are not demand).
    expect(callDemand(call({ costs: [1], giveBack: [{ units: 9, atMs: T0 }] }))).toBe(1);
  });

  it("ignores costs, asks and returns that are not positive integers", () => {
    expect(
      callDemand(
        call({
          costs: [1, 0, -3, 1.5, 2],
          lease: { units: 5, ttlMs: 500 },
          giveBack: [
            { units: -4, atMs: T0 },
            { units: 1.5, atMs: T0 },
          ],
        }),
      ),
    ).toBe(8);
    expect(callDemand(call({ costs: [1], lease: { units: 2.5, ttlMs: 500 } }))).toBe(1);
    expect(callDemand(call({ costs: [1], lease: null }))).toBe(1);
  });
});

describe("a delegate's batch with a sub-lease ask", () => {
  const record = (share: HeldShare | null): DelegateRecord => ({ ...NEW_DELEGATE, share });
  const batch = (rule: LimiterRule, costs: number[], over: Partial<CallInput> = {}): CallInput => ({
    rule,
    id: "b1",
    costs,
    ...over,
  });

  it("decides the requests first, then grants the sub-lease from what is left, and remembers it", () => {
    const out = delegateCall(
      record(windowShare({ unitsLeft: 10 })),
      batch(win, [1, 1], { lease: { units: 20, ttlMs: 500 } }),
      T0,
    );
    expect(out.result.results.map((r) => r.ok && r.decision.allowed)).toEqual([true, true]);
    // 8 of the 20 asked: a term as much shorter (200 ms).
    expect(out.result.lease).toEqual({ units: 8, atMs: T0 + 3, forMs: 200 });
    expect(out.record.share?.unitsLeft).toBe(0);
    expect(out.record.calls.at(-1)).toMatchObject({ id: "b1", leaseUnits: 8, leaseForMs: 200 });
    // Its demand: the 2 requests and the 20 units asked.
    expect(out.record.demand.curr).toBe(22);
  });

  it("a retried call gets its rate sub-lease again (its tokens name the call), never taken twice", () => {
    const lease = { units: 10, ttlMs: RATE_LEASE_TERM_MS };
    const first = delegateCall(record(rateShare()), batch(rate, [1], { lease }), T0);
    // Its id is the call's: its return names that sub-lease's reservation and no other.
    expect(first.result.lease).toEqual({ units: 10, atMs: T0, forMs: RATE_LEASE_TERM_MS, id: "b1" });
    const again = delegateCall(first.record, batch(rate, [1], { lease }), T0 + 5);
    expect(again.result.replayed).toBe(true);
    expect(again.result.lease).toEqual({ units: 10, atMs: T0, forMs: RATE_LEASE_TERM_MS, id: "b1" });
    expect(again.record).toBe(first.record);
  });

  it("a retried call's window sub-lease is not given again (its units stay charged: short, never over)", () => {
    const first = delegateCall(record(windowShare()), batch(win, [1], { lease: { units: 5, ttlMs: 500 } }), T0);
    expect(first.result.lease?.units).toBe(5);
    const again = delegateCall(first.record, batch(win, [1], { lease: { units: 5, ttlMs: 500 } }), T0 + 5);
    expect(again.result.replayed).toBe(true);
    expect(again.result.lease).toBeNull();
  });

  it("units given back go into the share, then the sub-lease may take them", () => {
    const out = delegateCall(
      record(windowShare({ unitsLeft: 2 })),
      batch(win, [], { giveBack: [{ units: 6, atMs: T0 + 3 }], lease: { units: 5, ttlMs: 500 } }),
      T0,
    );
    expect(out.result.lease?.units).toBe(5);
    expect(out.record.share?.unitsLeft).toBe(3);
  });

  it("delegateNeed: a window share renews for the sub-lease's units too; short or rate shares do not", () => {
    const rec = record(windowShare({ unitsLeft: 10 }));
    expect(delegateNeed(rec, win, [4], T0, 6)).toBe("ready");
    expect(delegateNeed(rec, win, [4], T0, 7)).toBe("renew");
    expect(delegateNeed(record(windowShare({ unitsLeft: 10, short: true })), win, [4], T0, 70)).toBe("ready");
    expect(delegateNeed(record(rateShare()), rate, [4], T0, 7000)).toBe("ready");
  });
});

describe("takeBack", () => {
  const record = (share: HeldShare | null): DelegateRecord => ({ ...NEW_DELEGATE, share });
  const back = (over: Partial<CallInput>): CallInput => ({
    rule: win,
    id: "c1",
    costs: [1],
    giveBack: [
      { units: 4, atMs: T0 + 3 },
      { units: 2, atMs: T0 - 60_000 },
      { units: 0, atMs: T0 + 3 },
    ],
    ...over,
  });

  it("into the share what is its own, the rest kept to give back; once per call id", () => {
    const taken = takeBack(record(windowShare({ unitsLeft: 30 })), back({}), T0);
    expect(taken.share?.unitsLeft).toBe(34);
    expect(taken.giveBack).toEqual([{ units: 2, atMs: T0 - 60_000 }]);
    expect(taken.taken).toEqual(["c1"]);
    // Again (a retry, or the batch decided after a renewal): nothing taken twice.
    expect(takeBack(taken, back({}), T0)).toBe(taken);
    const decided = delegateCall(taken, back({}), T0);
    expect(decided.record.share?.unitsLeft).toBe(33);
    expect(decided.record.giveBack).toEqual([{ units: 2, atMs: T0 - 60_000 }]);
    expect(decided.record.taken).toBeUndefined();
    expect(takeBack(decided.record, back({}), T0)).toBe(decided.record);
  });

  it("nothing to take: the record as it is; without a share, all kept to give back", () => {
    const rec = record(windowShare());
    expect(takeBack(rec, back({ giveBack: [] }), T0)).toBe(rec);
    expect(takeBack(rec, back({ giveBack: undefined }), T0)).toBe(rec);
    expect(takeBack(record(null), back({ id: "c2" }), T0).giveBack).toEqual([
      { units: 4, atMs: T0 + 3 },
      { units: 2, atMs: T0 - 60_000 },
    ]);
    // A rate share takes a return into the reservation it names (the 4 lent at T0 + 3: the 6 used are due now, for
    // `settled` to charge); one naming none (the 2 of a minute ago: expired, another share's, or taken in an older
    // record) is dropped, not sent on to the key's object (sublease_return.test.ts).
    const lent = rateShare({ state: emptyState(half, T0), reserved: [{ atMs: T0 + 3, units: 10, untilMs: T0 + 900 }] });
    const took = takeBack(record(lent), back({ rule: rate }), T0);
    expect(took.share?.reserved).toEqual([{ atMs: T0 + 3, units: 6, untilMs: T0 }]);
    expect(took.giveBack).toHaveLength(0);
    // A reservation past its wait matches nothing: its units are charged in full.
    const late = takeBack(record(lent), back({ rule: rate }), T0 + 900);
    expect(late.share).toBe(lent);
    expect(late.giveBack).toHaveLength(0);
  });

  it("takes units lent out of an earlier share of the same window, up to those lent; the rest goes back", () => {
    // The share holds 30 of its 40; 5 units are out with isolates from earlier shares of this window.
    const share = windowShare({ unitsLeft: 30, lent: 5 });
    const earlier = (units: number, atMs = T0 + 1): CallInput => ({ ...back({}), giveBack: [{ units, atMs }] });
    const taken = takeBack(record(share), earlier(3), T0);
    expect(taken.share).toEqual({ ...share, units: 43, unitsLeft: 33, lent: 2 });
    expect(taken.giveBack).toEqual([]);
    // More than lent: what was lent is taken, the rest goes to the key's object with the next ask.
    const over = takeBack(record(share), earlier(7), T0);
    expect(over.share).toEqual({ ...windowShare({ unitsLeft: 30 }), units: 45, unitsLeft: 35 });
    expect(over.giveBack).toEqual([{ units: 2, atMs: T0 + 1 }]);
    // One unit lent: that one taken, the rest goes back.
    const one = takeBack(record(windowShare({ unitsLeft: 30, lent: 1 })), earlier(3), T0);
    expect(one.share).toEqual({ ...windowShare({ unitsLeft: 30 }), units: 41, unitsLeft: 31 });
    expect(one.giveBack).toEqual([{ units: 2, atMs: T0 + 1 }]);
    // Nothing lent, or another window's: none of it taken.
    expect(takeBack(record(windowShare()), earlier(3), T0).giveBack).toEqual([{ units: 3, atMs: T0 + 1 }]);
    expect(takeBack(record(share), earlier(3, T0 - 1), T0).giveBack).toEqual([{ units: 3, atMs: T0 - 1 }]);
    // Its own units back: what was lent goes down by them too.
    expect(takeBack(record(share), earlier(4, T0 + 3), T0).share).toEqual({ ...share, unitsLeft: 34, lent: 1 });
    expect(takeBack(record(share), earlier(9, T0 + 3), T0).share).toEqual(windowShare({ unitsLeft: 39 }));
  });

  it("a window sub-lease counts as lent", () => {
    const out = subleaseFrom(windowShare({ unitsLeft: 30, lent: 2 }), { units: 5, ttlMs: 500 }, T0 + 10);
    expect(out.share).toEqual(windowShare({ unitsLeft: 25, lent: 7 }));
  });

  it("remembers the last 32 call ids taken", () => {
    let rec = record(windowShare());
    for (let i = 0; i < 40; i++) rec = takeBack(rec, back({ id: `c${i}` }), T0);
    expect(rec.taken).toHaveLength(32);
    expect(rec.taken?.[0]).toBe("c8");
  });
});

describe("subleaseFrom (property)", () => {
  it("never more than asked or held; the share loses exactly the grant; a window's never outlives its window", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: -2, max: 300 }),
        fc.integer({ min: -10, max: 2000 }),
        fc.integer({ min: 0, max: 61_000 }),
        fc.integer({ min: 0, max: 400 }),
        (unitsLeft, units, ttlMs, atOffsetMs, refillMs) => {
          const nowMs = T0 + atOffsetMs;
          const ask = { units, ttlMs };
          const w = windowShare({ unitsLeft, endsAtMs: T0 + 61_000 });
          const wOut = subleaseFrom(w, ask, nowMs);
          if (wOut.lease === null) expect(wOut.share).toBe(w);
          else {
            expect(wOut.lease.units).toBeGreaterThanOrEqual(1);
            expect(wOut.lease.units).toBeLessThanOrEqual(Math.min(units, unitsLeft, 25));
            expect(wOut.share.unitsLeft).toBe(unitsLeft - wOut.lease.units);
            expect(nowMs + wOut.lease.forMs).toBeLessThanOrEqual(T0 + 60_000);
            expect(wOut.lease.forMs).toBeLessThanOrEqual(SUBLEASE_TERM_MS);
          }
          const r = rateShare({ state: emptyState(half, nowMs - refillMs), endsAtMs: nowMs + 1 });
          const before = levelOf(r, nowMs);
          const rOut = subleaseFrom(r, ask, nowMs);
          const granted = rOut.lease?.units ?? 0;
          expect(granted).toBeLessThanOrEqual(Math.max(0, Math.min(units, before)));
          expect(levelOf(rOut.share, nowMs)).toBe(before - granted);
          expect(availableOf(rOut.share, nowMs)).toBe(before - granted);
          if (rOut.lease !== null) {
            expect(rOut.lease.forMs).toBeGreaterThanOrEqual(Math.ceil(subleaseTermMs(ttlMs, "rate") / 4));
            expect(rOut.lease.forMs).toBeLessThanOrEqual(RATE_LEASE_TERM_MS);
          }
        },
      ),
      { numRuns: runs(300) },
    );
  });
});

describe("a rate share's reservations: settled, handed on, when the next is due", () => {
  // What the delegate does with its isolates' sub-leases between their lending and their return (sublease.ts
  // `Reservation`): the slice's bucket keeps the reserved units until each is given back or expires (all used).
  const res = (units: number, untilMs: number) => ({ atMs: T0, units, untilMs });

  it("reservedBackInMs: the first reservation's term end from now, at least 1 ms, at most RATE_LEASE_TERM_MS", () => {
    const share = (...r: ReturnType<typeof res>[]) => rateShare({ reserved: r });
    expect(
      reservedBackInMs(share(res(5, T0 + 300 + RESERVATION_WAIT_MS), res(5, T0 + 400 + RESERVATION_WAIT_MS)), T0),
    ).toBe(300);
    expect(reservedBackInMs(share(res(5, T0 + RESERVATION_WAIT_MS)), T0 + 10)).toBe(1);
    expect(reservedBackInMs(share(res(5, T0 + 5_000 + RESERVATION_WAIT_MS)), T0)).toBe(RATE_LEASE_TERM_MS);
  });

  it("settled: reservations due are charged in full and dropped; live ones stay, what the bucket offers unchanged", () => {
    const share = rateShare({ reserved: [res(10, T0 + 5), res(4, T0 + 900)] });
    expect(settled(share, T0 + 4)).toBe(share);
    expect(availableOf(share, T0 + 5)).toBe(100 - 14);
    const out = settled(share, T0 + 5);
    expect(out.reserved).toEqual([res(4, T0 + 900)]);
    expect(out.takenOut).toBe(4);
    expect(levelOf(out, T0 + 5)).toBe(86);
    expect(availableOf(out, T0 + 5)).toBe(86);
    // All due: the fields go; the bucket (full again by then) charged now for every unit reserved.
    const all = settled(share, T0 + 900);
    expect(all.reserved).toBeUndefined();
    expect(all.takenOut).toBeUndefined();
    expect(levelOf(all, T0 + 900)).toBe(86);
    expect(levelOf(settled(share, T0 + 5), T0 + 5)).toBeLessThan(levelOf(share, T0 + 5));
    // No bucket (a share without state): the due ones dropped, nothing to charge.
    const bare = settled(rateShare({ state: null, reserved: [res(10, T0 + 5), res(4, T0 + 900)] }), T0 + 5);
    expect(bare.reserved).toEqual([res(4, T0 + 900)]);
    expect(bare.takenOut).toBeUndefined();
  });

  it("handedOn: the reservations go with a bucket that holds them; else charged in the old bucket first", () => {
    const share = rateShare({ reserved: [res(10, T0 + 900)] });
    const same = handedOn(share, T0 + 5, (state) => ({ params: half, state }));
    expect(same.reserved).toEqual([res(10, T0 + 900)]);
    // Its units out brought to the slice's refill over a term (240 here): all 10 out, what the bucket offers unchanged.
    expect(same.takenOut).toBe(10);
    expect(peekState(half, same.state, T0 + 5).remaining).toBe(availableOf(share, T0 + 5));
    // An empty new bucket: the 10 go on as taken out (within its refill over a term: the bound holds).
    const poor = handedOn(share, T0 + 5, () => ({ params: half, state: emptyState(half, T0 + 5) }));
    expect(poor.reserved).toEqual([res(10, T0 + 900)]);
    expect(poor.takenOut).toBe(10);
    // A slice of 10 parts (10/s, burst 2: 4 out at most) cannot hold the other 6: charged where they are, none carried.
    const tiny = delegateSlice(rate.params, 10)!;
    const seen: (number | null)[] = [];
    const small = handedOn(share, T0 + 5, (state) => {
      seen.push(state === null ? null : peekState(half, state, T0 + 5).remaining);
      return { params: tiny, state: fullState(tiny, T0 + 5) };
    });
    expect(small).toEqual({ state: fullState(tiny, T0 + 5), reserved: [], takenOut: 0 });
    expect(seen).toEqual([100, 90]);
    // Units out beyond a smaller slice's refill over a term come back into its bucket, if it has room for them.
    const out = rateShare({ reserved: [res(6, T0 + 900)], takenOut: 6 });
    const room = handedOn(out, T0 + 5, () => ({ params: tiny, state: emptyState(tiny, T0 + 5) }));
    expect(room.takenOut).toBe(4);
    expect(peekState(tiny, room.state, T0 + 5).remaining).toBe(2);
    expect(room.reserved).toEqual([res(6, T0 + 900)]);
    // Nothing reserved: the new bucket as it is.
    const plain = handedOn(rateShare(), T0 + 5, () => ({ params: null, state: null }));
    expect(plain).toEqual({ state: null, reserved: [], takenOut: 0 });
  });

  it("handedOn: a smaller bucket that holds the newer reservations only: the oldest charged in full, the rest go on", () => {
    // A delegate's share cut from 500 parts to 10 (burst 2, 4 out at most) while two isolates hold sub-leases: the
    // older (10 units) cannot go on, the newer (2) can. Charging both lost the newer one's return: its unused units
    // matched nothing (global-rate steady: ~50 units/s of returns dropped at such cuts).
    const older = { atMs: T0 + 1, id: "a", units: 10, untilMs: T0 + 900 };
    const newer = { atMs: T0 + 3, id: "b", units: 2, untilMs: T0 + 900 };
    const share = rateShare({ reserved: [newer, older] });
    const tiny = delegateSlice(rate.params, 10)!;
    const seen: number[] = [];
    const out = handedOn(share, T0 + 5, (state) => {
      seen.push(peekState(half, state, T0 + 5).remaining);
      return { params: tiny, state: fullState(tiny, T0 + 5) };
    });
    expect(out.reserved).toEqual([newer]);
    // The newer one's 2 units out of the new bucket (within its refill over a term), the older 10 charged in the old.
    expect(out.takenOut).toBe(2);
    expect(peekState(tiny, out.state, T0 + 5).remaining).toBe(0);
    expect(seen).toEqual([100, 90]);
    // Its return now finds its reservation: the unused unit is taken back, not dropped.
    const kept = rateShare({ parts: 10, state: out.state, reserved: out.reserved, takenOut: out.takenOut });
    const back: CallInput = { rule: rate, id: "c", costs: [], giveBack: [{ units: 1, atMs: T0 + 3, id: "b" }] };
    const record: DelegateRecord = { ...NEW_DELEGATE, share: kept };
    expect(takeBack(record, back, T0 + 6).share?.reserved).toEqual([{ ...newer, units: 1, untilMs: T0 + 6 }]);
  });

  it("handedOn: an oldest reservation charged in full is paid from the units taken out first, then the old bucket", () => {
    // The same cut, with 6 of the older sub-lease's units already taken out of the old bucket (a delegate whose lent
    // units passed its slice's refill): the 10 are paid 6 from those and 4 from the old bucket; nothing is taken out
    // twice, so the newer one's 2 go out of the new bucket, which is then empty.
    const older = { atMs: T0 + 1, id: "a", units: 10, untilMs: T0 + 900 };
    const newer = { atMs: T0 + 3, id: "b", units: 2, untilMs: T0 + 900 };
    const share = rateShare({ reserved: [newer, older], takenOut: 6 });
    const tiny = delegateSlice(rate.params, 10)!;
    const seen: number[] = [];
    const out = handedOn(share, T0 + 5, (state) => {
      seen.push(peekState(half, state, T0 + 5).remaining);
      return { params: tiny, state: fullState(tiny, T0 + 5) };
    });
    expect(seen).toEqual([100, 96]);
    expect(out.reserved).toEqual([newer]);
    expect(out.takenOut).toBe(2);
    expect(peekState(tiny, out.state, T0 + 5).remaining).toBe(0);
    // A new bucket that is none (the share ended): every reservation charged where it is, none carried.
    expect(handedOn(share, T0 + 5, () => ({ params: null, state: null }))).toEqual({
      state: null,
      reserved: [],
      takenOut: 0,
    });
    // An old bucket that is none: nothing to charge, and no bucket made up to charge them in.
    const bare = rateShare({ state: null, reserved: [older] });
    const none = handedOn(bare, T0 + 5, (state) => ({ params: tiny, state: state && fullState(tiny, T0 + 5) }));
    expect(none).toEqual({ state: null, reserved: [], takenOut: 0 });
  });
});
