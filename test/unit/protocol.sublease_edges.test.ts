/**
 * Exact edges of src/protocol/sublease.ts that its tables (protocol.sublease.test.ts) left to the simulator or never
 * reached, each row a case the delegate meets (docs/testing.md, session 10's `sublease.ts` rows): which reservation a
 * return lands in when several fit (`takeBack`), a rate return the delegate holds no share for, a rules change from a
 * rate to a window algorithm, an ask of 0 units, the wait a bucket that holds only reserved units says, and `charged`'s
 * safe side.
 */
import { describe, expect, it } from "vitest";
import {
  type DelegateRecord,
  delegateCall,
  type HeldShare,
  NEW_DELEGATE,
  type Reservation,
} from "../../src/protocol/delegate.ts";
import { emptyState } from "../../src/protocol/share.ts";
import { type CallInput, fullState, type LeaseReturn, type LimiterRule, peekState } from "../../src/protocol/store.ts";
import {
  charged,
  delegateSlice,
  handedOn,
  reservedBackInMs,
  subleaseFrom,
  takeBack,
} from "../../src/protocol/sublease.ts";
import { RATE_LEASE_TERM_MS, RESERVATION_WAIT_MS } from "../../src/protocol/tunables.ts";
import { heldRateShare } from "../support/held_share.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const rate: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 200), version: 1 };
/** A delegate's slice of 500 parts: 500/s (0.5 a ms), burst 100. */
const half = delegateSlice(rate.params, 500)!;
const res = (units: number, untilMs: number, atMs = T0): Reservation => ({ atMs, units, untilMs });
const rateShare = (over: Partial<HeldShare> = {}): HeldShare => heldRateShare(rate, 500, fullState(half, T0), T0, over);
const record = (share: HeldShare | null): DelegateRecord => ({ ...NEW_DELEGATE, share });
const giving = (giveBack: LeaseReturn[], rule: LimiterRule = rate): CallInput => ({
  rule,
  id: "c1",
  costs: [],
  giveBack,
});

describe("reservedBackInMs with no reservation", () => {
  it("a share with nothing reserved has nothing coming back: the longest wait, RATE_LEASE_TERM_MS", () => {
    expect(reservedBackInMs(rateShare(), T0)).toBe(RATE_LEASE_TERM_MS);
  });
});

describe("takeBack: which reservation a rate return lands in", () => {
  /** The reservations after `back` is taken into a share holding `reserved`, at T0 + 100. */
  const landedIn = (reserved: Reservation[], back: LeaseReturn) =>
    takeBack(record(rateShare({ reserved })), giving([back]), T0 + 100).share?.reserved;

  it("the fewest units that fit it, of the sub-leases lent in the same ms; the others untouched", () => {
    // Two isolates lent 10 and 4 in the same ms (both name T0): a return of 3 fits both and settles the 4 (1 used).
    const used = { atMs: T0, units: 1, untilMs: T0 + 100 };
    expect(landedIn([res(10, T0 + 900), res(4, T0 + 800)], { units: 3, atMs: T0 })).toEqual([res(10, T0 + 900), used]);
    expect(landedIn([res(4, T0 + 800), res(10, T0 + 900)], { units: 3, atMs: T0 })).toEqual([used, res(10, T0 + 900)]);
    // Two of the same size: the first.
    const first = { atMs: T0, units: 3, untilMs: T0 + 100 };
    expect(landedIn([res(5, T0 + 900), res(5, T0 + 800)], { units: 2, atMs: T0 })).toEqual([first, res(5, T0 + 800)]);
    // A return larger than the 4: only the 10 fits it.
    expect(landedIn([res(4, T0 + 800), res(10, T0 + 900)], { units: 6, atMs: T0 })).toEqual([
      res(4, T0 + 800),
      { atMs: T0, units: 4, untilMs: T0 + 100 },
    ]);
  });

  it("a rate return with no share held, or held under a rule now a window one, is dropped; an admission goes on", () => {
    // No share (it lapsed): an unused sub-lease's units are dropped (none left the key's object's bucket, and it may
    // have refilled since); an admission given back goes on to the key's object (its late refund makes it exact).
    const lost = { units: 3, atMs: T0 };
    const admitted: LeaseReturn = { units: 1, atMs: T0, admitted: true };
    expect(takeBack(record(null), giving([lost]), T0 + 100).giveBack).toEqual([]);
    expect(takeBack(record(null), giving([lost, admitted]), T0 + 100).giveBack).toEqual([admitted]);
    // The rule became a window rule (a rules change) while the delegate still holds its rate share: the return that
    // matches none of its reservations is still a rate one, dropped.
    const win: LimiterRule = { id: "t", params: fixedWindow(100, 60_000), version: 2 };
    const held = record(rateShare({ reserved: [res(10, T0 + 900)] }));
    expect(takeBack(held, giving([{ units: 3, atMs: T0 + 7 }], win), T0 + 100).giveBack).toEqual([]);
  });
});

describe("subleaseFrom and charged: the edges of a rate slice", () => {
  it("an ask of 0 units is no ask: nothing granted, and no wait said", () => {
    const share = rateShare();
    expect(subleaseFrom(share, { units: 0, ttlMs: RATE_LEASE_TERM_MS }, T0)).toStrictEqual({ lease: null, share });
  });

  it("a bucket holding only reserved units says when it holds the ask on top of them", () => {
    // 20 in the bucket, all reserved for a sub-lease out: an ask of 10 waits until 30 are in (0.5 a ms: 20 ms).
    const state = charged(half, fullState(half, T0), 80, T0);
    expect(peekState(half, state, T0).remaining).toBe(20);
    const share = rateShare({ state, reserved: [res(20, T0 + 900)] });
    const out = subleaseFrom(share, { units: 10, ttlMs: RATE_LEASE_TERM_MS }, T0);
    expect(out.lease).toBeNull();
    expect(out.waitMs).toBe(20);
  });

  it("charged: nothing charged is the bucket itself; more than it holds empties it (the safe side)", () => {
    const state = charged(half, fullState(half, T0), 80, T0);
    expect(charged(half, state, 0, T0)).toBe(state);
    expect(charged(half, state, -3, T0)).toBe(state);
    expect(peekState(half, charged(half, state, 30, T0), T0).remaining).toBe(0);
    expect(peekState(half, charged(half, state, 20, T0), T0).remaining).toBe(0);
    expect(peekState(half, charged(half, state, 5, T0), T0).remaining).toBe(15);
  });
});

describe("handedOn: a renewal's new bucket and the reservations out of the old one", () => {
  // A delegate's share renewed (or cut) while sub-leases are out: 60 units reserved, 40 of them taken out of the
  // old bucket (at 60 then). `into` is the renewal: the new bucket from the old one as it is.
  const tenth = delegateSlice(rate.params, 100)!; // 100/s, burst 20: takes out at most 48 (its refill over 480 ms)
  const old = () =>
    rateShare({ state: charged(half, fullState(half, T0), 40, T0), reserved: [res(60, T0 + 900)], takenOut: 40 });
  const level = (params: typeof half, state: unknown, atMs = T0 + 5) =>
    state === null ? null : peekState(params, state as never, atMs).remaining;
  const hand = (share: HeldShare, nowMs: number, params: typeof half | null, state: (at: number) => unknown) => {
    const seen: (number | null)[] = [];
    const out = handedOn(share, nowMs, (s) => {
      seen.push(level(half, s, nowMs));
      return { params, state: params === null ? null : (state(nowMs) as never) };
    });
    return { seen, level: params === null ? null : level(params, out.state, nowMs), ...out };
  };

  it("a bucket as large: carried, the rest of the reserved units taken out (up to its refill over a term)", () => {
    const out = hand(old(), T0 + 5, half, (at) => fullState(half, at));
    expect([out.seen, out.level, out.reserved, out.takenOut]).toEqual([[62], 80, [res(60, T0 + 900)], 60]);
  });

  it("a smaller slice: carried with only its refill over a term out (48), 8 more charged; it holds just the 12 left", () => {
    const out = hand(old(), T0 + 5, tenth, (at) => fullState(tenth, at));
    expect([out.seen, out.level, out.reserved, out.takenOut]).toEqual([[62], 12, [res(60, T0 + 900)], 48]);
  });

  it("a new bucket that cannot hold them: the 20 reserved in the old bucket charged there, none carried", () => {
    const out = hand(old(), T0 + 5, tenth, (at) => emptyState(tenth, at));
    expect([out.seen, out.level, out.reserved, out.takenOut]).toEqual([[62, 42], 0, [], 0]);
  });

  it("a share ended before its hand-on: its reserved units charged as of its end (the bucket refilled since)", () => {
    // 60 reserved in a full bucket, more than the smaller slice takes out (48) or holds (empty): charged in the old
    // one. Ended at T0 + 1000 and handed on 100 ms later: charged at its end, 50 refilled since (40 -> 90).
    const ended = rateShare({ state: fullState(half, T0), reserved: [res(60, T0 + 1900)] });
    expect(hand(ended, T0 + 1100, tenth, (at) => emptyState(tenth, at)).seen).toEqual([100, 90]);
    // Handed on before its end: charged now.
    expect(hand(ended, T0 + 900, tenth, (at) => emptyState(tenth, at)).seen).toEqual([100, 40]);
  });

  it("no bucket (no parts), or nothing reserved: the new bucket asked for once, nothing charged", () => {
    const bare = hand(rateShare({ state: null, reserved: [res(30, T0 + 900)] }), T0 + 5, tenth, () => null);
    expect([bare.seen, bare.reserved]).toEqual([[null, null], []]);
    const plain = hand(rateShare(), T0 + 5, null, () => null);
    expect([plain.seen, plain.reserved, plain.takenOut]).toEqual([[100], [], 0]);
  });
});

describe("a batch decided beside reservations (delegate.ts `decideOne`)", () => {
  // A delegate's rate slice (500/s, burst 100) with 20 or 60 units reserved in its bucket for sub-leases out (their
  // term ends at T0 + 300): a request is admitted only if the bucket holds it on top of them.
  const decided = (level: number, reserved: number, cost: number) => {
    const state = charged(half, fullState(half, T0), 100 - level, T0);
    const share = rateShare({ state, reserved: [res(reserved, T0 + 300 + RESERVATION_WAIT_MS)] });
    const out = delegateCall(record(share), { rule: rate, id: "b1", costs: [cost] }, T0).result.results[0]!;
    if (!out.ok) throw new Error("not ok");
    const { allowed, remaining, retryAfterMs } = out.decision;
    return { allowed, remaining, retryAfterMs };
  };

  it("admitted: what it says remains is the bucket less the reserved units", () => {
    expect(decided(100, 20, 10)).toMatchObject({ allowed: true, remaining: 70 });
  });

  it("the bucket holds the cost but not on top of the reserved units: refused, as the slice says", () => {
    expect(decided(30, 20, 15)).toMatchObject({ allowed: false });
  });

  it("more than the burst with the reserved units: refused until the first sub-lease is back (300 ms)", () => {
    expect(decided(100, 60, 50)).toMatchObject({ allowed: false, retryAfterMs: 300 });
  });
});
