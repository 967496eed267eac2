/**
 * Exact tables for a key's state in an isolate's coalescer (src/isolate/key_state.ts): a new key, the arrivals it
 * counts per lease ttl, the lease it asks for, whether it goes to its delegate, a late call's result, the spread seed.
 */
import { describe, expect, it } from "vitest";
import { type AskInput, AUTO_LEASE, type DelegateRoute } from "../../src/isolate/coalesce_types.ts";
import {
  decayedSpread,
  hashString,
  KeyState,
  lateResult,
  MAX_SPREAD,
  ownShardOf,
  shardOf,
  shortOf,
  windowSubleaseTermMs,
} from "../../src/isolate/key_state.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CallResult } from "../../src/protocol/store.ts";
import {
  DELEGATE_SHARDS,
  HOT_HOLD_MS,
  RATE_LEASE_TERM_MS,
  SHARE_TERM_MS,
  SPREAD_HALF_LIFE_MS,
} from "../../src/protocol/tunables.ts";
import type { LeaseSettings } from "../../src/rules/types.ts";
import { fixedWindow, rate, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const transport: ObjectTransport = {
  call: () => Promise.reject(new Error("unused")),
  refund: () => Promise.resolve(null),
};
const route: DelegateRoute = { transport, name: "k@weur.0" };
const input = (over: Partial<AskInput> = {}): AskInput => ({
  transport,
  name: "r:key",
  rule: { id: "r", params: tokenBucket(10, 1000, 20) },
  cost: 1,
  timeoutMs: 250,
  lease: null,
  ...over,
});
const keyWith = (lease: LeaseSettings | null, over: Partial<AskInput> = {}): KeyState =>
  new KeyState(input({ lease, ...over }), T0);

describe("knownBusy", () => {
  it("is true until each busy mark's end, exclusive; a hot key alone is not busy", () => {
    const rows: readonly [string, Partial<KeyState>, number, boolean][] = [
      ["nothing", {}, T0, false],
      ["the object said busy", { busyUntilMs: T0 + 10 }, T0 + 9, true],
      ["busy, at its end", { busyUntilMs: T0 + 10 }, T0 + 10, false],
      ["overloaded lately", { overloadedUntilMs: T0 + 10 }, T0 + 9, true],
      ["overloaded, at its end", { overloadedUntilMs: T0 + 10 }, T0 + 10, false],
      ["its last share cut (short)", { lastKnownUntilMs: T0 + 10 }, T0 + 9, true],
      ["short, at its end", { lastKnownUntilMs: T0 + 10 }, T0 + 10, false],
      ["hot (its batches to the delegate)", { hotUntilMs: T0 + 10, grantHotUntilMs: T0 + 10 }, T0 + 5, false],
    ];
    for (const [name, marks, now, busy] of rows) {
      expect(Object.assign(keyWith(null), marks).knownBusy(now), name).toBe(busy);
    }
  });
});

describe("KeyState", () => {
  it("takes the rule's lease, or the automatic one for an algorithm that leases", () => {
    const auto = new KeyState(input(), T0);
    expect(auto).toMatchObject({
      name: "r:key",
      timeoutMs: 250,
      leaseSettings: AUTO_LEASE,
      inFlight: false,
      lease: null,
      delegate: null,
      hotUntilMs: 0,
      lastKnownUntilMs: 0,
      seen: { bucket: 0, curr: 0, prev: 0, runCount: 0 },
      busyUntilMs: 0,
      spread: 0,
      hotMarkRead: true, // no way to read a mark: nothing to read
      spreadMark: null,
      grantHotUntilMs: 0,
    });
    expect(auto).toEqual({
      name: "r:key",
      transport,
      rule: { id: "r", params: tokenBucket(10, 1000, 20) },
      timeoutMs: 250,
      leaseSettings: AUTO_LEASE,
      inFlight: false,
      inFlightSinceMs: 0,
      queue: [],
      lease: null,
      returns: [],
      lastKnownUntilMs: 0,
      lastKnownRetryAtMs: 0,
      shortAtMs: Number.NEGATIVE_INFINITY,
      seen: { bucket: 0, curr: 0, prev: 0, runStartMs: 0, runCount: 0, lastMs: 0 },
      busyUntilMs: 0,
      refunds: [],
      refundWaiters: [],
      returnsArmed: false,
      returnsNotBeforeMs: 0,
      overloadedUntilMs: 0,
      grantHotUntilMs: 0,
      spread: 0,
      spreadAtMs: T0,
      hotMarkRead: true,
      spreadMark: null,
      delegate: null,
      hotUntilMs: 0,
      delegateDownUntilMs: 0,
    });
    const own = { ttlMs: 500, units: 3, above: null };
    expect(new KeyState(input({ lease: own }), T0)).toMatchObject({ leaseSettings: own });
    const none = new KeyState(input({ rule: { id: "r", params: slidingLog(5, 1000) } }), T0);
    expect(none).toMatchObject({ leaseSettings: null });
    expect(new KeyState(input({ delegate: route }), T0).delegate).toBe(route);
    expect(AUTO_LEASE).toEqual({ ttlMs: 1000, units: null, above: null });
  });
});

describe("arrivals per ttl", () => {
  it("counts arrivals per bucket of the ttl, the previous bucket kept for one bucket", () => {
    const st = keyWith({ ttlMs: 500, units: null, above: null });
    st.see(T0);
    st.see(T0 + 499);
    expect([st.seen.bucket, st.seen.curr, st.seen.prev]).toEqual([T0 / 500, 2, 0]);
    st.see(T0 + 500);
    expect([st.seen.bucket, st.seen.curr, st.seen.prev]).toEqual([T0 / 500 + 1, 1, 2]);
    st.roll(T0 + 1500);
    expect([st.seen.bucket, st.seen.curr, st.seen.prev]).toEqual([T0 / 500 + 3, 0, 0]);
    st.roll(T0 + 1999);
    expect([st.seen.bucket, st.seen.curr, st.seen.prev]).toEqual([T0 / 500 + 3, 0, 0]);
    expect(st.seen.lastMs).toBe(T0 + 500);
  });

  it("counts in 1 s buckets without a lease", () => {
    const st = keyWith(null, { rule: { id: "r", params: slidingLog(5, 1000) } });
    st.see(T0 + 999);
    st.see(T0 + 1000);
    expect([st.seen.bucket, st.seen.curr, st.seen.prev]).toEqual([T0 / 1000 + 1, 1, 1]);
  });

  it("starts a run after a quiet bucket, and extrapolates a young run from its third arrival", () => {
    const st = keyWith({ ttlMs: 1000, units: null, above: null });
    st.see(T0 + 100);
    st.see(T0 + 150);
    expect([st.seen.runStartMs, st.seen.runCount]).toEqual([T0 + 100, 2]);
    expect(st.seenPerTtl(T0 + 200)).toBe(2);
    st.see(T0 + 200);
    // 3 arrivals in 100 ms (at least a tenth of the ttl): (3 - 1) × 1000 / 100.
    expect(st.seenPerTtl(T0 + 200)).toBe(20);
    expect(st.seenPerTtl(T0 + 150)).toBe(20);
    expect(st.seenPerTtl(T0 + 600)).toBe(4);
    // A run a whole ttl old: what was seen.
    expect(st.seenPerTtl(T0 + 1100)).toBe(3);
    st.see(T0 + 1100);
    expect(st.seen.runStartMs).toBe(T0 + 100);
    // A whole bucket quiet (none in the last and none in this one): a new run.
    st.see(T0 + 3000);
    expect([st.seen.runStartMs, st.seen.runCount, st.seen.curr, st.seen.prev]).toEqual([T0 + 3000, 1, 1, 0]);
  });

  it("extrapolates over the rule's own ttl, and not once the run is a ttl old", () => {
    const st = keyWith({ ttlMs: 2000, units: null, above: null });
    for (let i = 0; i < 4; i++) st.see(T0 + 100);
    // 4 arrivals within 500 ms of a 2 s ttl: (4 - 1) × 2000 / 500.
    expect(st.seenPerTtl(T0 + 600)).toBe(12);
    // 5 in the last bucket of 1 s and 5 in this one, the run exactly a ttl old: what was seen, not 9.
    const edge = keyWith({ ttlMs: 1000, units: null, above: null });
    for (let i = 0; i < 5; i++) edge.see(T0 + 999);
    for (let i = 0; i < 5; i++) edge.see(T0 + 1000);
    expect(edge.seenPerTtl(T0 + 1998)).toBe(9);
    expect(edge.seenPerTtl(T0 + 1999)).toBe(5);
    expect(edge.seenPerTtl(T0 + 2000)).toBe(5);
  });

  it("keeps the run going while the last bucket saw the key", () => {
    const st = keyWith({ ttlMs: 1000, units: null, above: null });
    st.see(T0 + 900);
    st.see(T0 + 1900);
    expect([st.seen.runStartMs, st.seen.runCount]).toEqual([T0 + 900, 2]);
  });
});

describe("unsee: an arrival whose admission was given back", () => {
  it("comes off this bucket's count, else the last one's, and off the run; never below 0", () => {
    const st = keyWith({ ttlMs: 1000, units: null, above: null });
    for (let i = 0; i < 4; i++) st.see(T0 + 100);
    st.unsee(T0 + 200);
    expect([st.seen.curr, st.seen.prev, st.seen.runCount]).toEqual([3, 0, 3]);
    // In the next bucket, with none seen in it yet: off the last bucket's count.
    st.unsee(T0 + 1100);
    expect([st.seen.curr, st.seen.prev, st.seen.runCount]).toEqual([0, 2, 2]);
    st.see(T0 + 1200);
    st.unsee(T0 + 1300);
    expect([st.seen.curr, st.seen.prev, st.seen.runCount]).toEqual([0, 2, 2]);
    const none = keyWith({ ttlMs: 1000, units: null, above: null });
    none.unsee(T0);
    expect([none.seen.curr, none.seen.prev, none.seen.runCount]).toEqual([0, 0, 0]);
  });

  it("sizes the sub-lease by the admissions kept: half given back, half the units asked", () => {
    const st = keyWith(null);
    for (let i = 0; i < 40; i++) st.see(T0 - 2000);
    expect(st.subleaseAsk(T0 - 1000)).toEqual({ units: 20, ttlMs: RATE_LEASE_TERM_MS });
    for (let i = 0; i < 20; i++) st.unsee(T0 - 1000);
    expect(st.subleaseAsk(T0 - 1000)).toEqual({ units: 10, ttlMs: RATE_LEASE_TERM_MS });
  });
});

describe("sub-leases: what an isolate asks its delegate for", () => {
  const fill = (st: KeyState, n: number, atMs: number) => {
    for (let i = 0; i < n; i++) st.see(atMs);
  };

  it("seenOver: arrivals per lease ttl, scaled to another term (rounded up)", () => {
    const st = keyWith({ ttlMs: 1000, units: null, above: null });
    fill(st, 9, T0 - 2000);
    expect(st.seenOver(T0 - 1000, 1000)).toBe(9);
    expect(st.seenOver(T0 - 1000, 500)).toBe(5);
    expect(st.seenOver(T0 - 1000, 250)).toBe(3);
    const short = keyWith({ ttlMs: 200, units: null, above: null });
    fill(short, 4, T0 - 400);
    expect(short.seenOver(T0 - 200, 500)).toBe(10);
  });

  it("asks for what it saw over half a term, no margin, whatever `above` or the busy mark say", () => {
    // The automatic lease (no `lease:`), never busy: asked all the same, for RATE_LEASE_TERM_MS (a rate rule).
    const auto = keyWith(null);
    fill(auto, 30, T0 - 2000);
    expect(auto.subleaseAsk(T0 - 1000)).toEqual({ units: 15, ttlMs: RATE_LEASE_TERM_MS });
    expect(auto.leaseAsk(T0 - 1000, true)).toEqual({ units: 15, ttlMs: RATE_LEASE_TERM_MS });
    expect(auto.leaseAsk(T0 - 1000)).toBeNull();
    const above = keyWith({ ttlMs: 1000, units: null, above: rate(100, 1000) });
    fill(above, 30, T0 - 2000);
    expect(above.subleaseAsk(T0 - 1000)).toEqual({ units: 15, ttlMs: RATE_LEASE_TERM_MS });
    // A shorter ttl of the rule's own: that.
    const own = keyWith({ ttlMs: 200, units: null, above: null });
    fill(own, 10, T0 - 400);
    expect(own.subleaseAsk(T0 - 200)).toEqual({ units: 10, ttlMs: 200 });
  });

  it("a window rule's: shorter in the window's last 2 s, a quarter of what is left, at least 250 ms", () => {
    // 10 s windows: T0 is a window's end.
    const windowed = (at: number) => {
      const st = keyWith(null, { rule: { id: "w", params: fixedWindow(100_000, 10_000) } });
      fill(st, 60, at - 1000);
      return st;
    };
    const table: [number, number | null][] = [
      [T0 - 4000, 500],
      [T0 - 2000, 500],
      [T0 - 1600, 400],
      [T0 - 1000, 250],
      [T0 - 600, 250],
      [T0 - 250, 250],
      [T0 - 249, null],
    ];
    for (const [at, ttlMs] of table) {
      const st = windowed(at);
      expect(st.subleaseAsk(at)?.ttlMs ?? null).toBe(ttlMs);
      expect(windowSubleaseTermMs(st.rule.params, at, 500)).toBe(Math.max(250, Math.min(500, (T0 - at) / 4)));
    }
    // A short window (1 s) keeps whole terms: its every term would be in its last 2 s.
    const short = keyWith(null, { rule: { id: "w", params: fixedWindow(100_000, 1000) } });
    fill(short, 60, T0 - 1600);
    expect(short.subleaseAsk(T0 - 600)?.ttlMs).toBe(500);
    // A rate rule's term does not depend on the time: RATE_LEASE_TERM_MS (within the rate bound's term).
    const rated = keyWith(null);
    fill(rated, 60, T0 - 2000);
    expect(rated.subleaseAsk(T0 - 1000)?.ttlMs).toBe(RATE_LEASE_TERM_MS);
  });

  it("a rate one, while a grant was short of its pace in the last share term: at most the burst's fill time", () => {
    // 5,000/s with a burst of 1,000: 200 ms fill it; an isolate seeing 100 a second asks 20 for 200 ms, not 48 for 480.
    const fast = () => keyWith(null, { rule: { id: "hot-rate", params: tokenBucket(5000, 1000, 1000) } });
    const rows: readonly [string, number, { units: number; ttlMs: number }][] = [
      ["never short", -Infinity, { units: 48, ttlMs: RATE_LEASE_TERM_MS }],
      ["short just now", T0 - 1000, { units: 20, ttlMs: 200 }],
      ["short a term ago, less 1 ms", T0 - 1000 - SHARE_TERM_MS + 1, { units: 20, ttlMs: 200 }],
      ["short a whole term ago", T0 - 1000 - SHARE_TERM_MS, { units: 48, ttlMs: RATE_LEASE_TERM_MS }],
    ];
    for (const [name, shortAtMs, ask] of rows) {
      const st = fast();
      fill(st, 100, T0 - 2000);
      st.shortAtMs = shortAtMs;
      expect(st.subleaseAsk(T0 - 1000), name).toEqual(ask);
    }
    // A burst of 2 s of its rate (10/s, burst 20: the shipped free-global): the full term, short or not.
    const slow = keyWith(null);
    fill(slow, 30, T0 - 2000);
    slow.shortAtMs = T0 - 1000;
    expect(slow.subleaseAsk(T0 - 1000)).toEqual({ units: 15, ttlMs: RATE_LEASE_TERM_MS });
    // A window rule's term is its own (a window binds at its end, not by a burst).
    const windowed = keyWith(null, { rule: { id: "w", params: fixedWindow(100_000, 10_000) } });
    fill(windowed, 60, T0 - 6000);
    windowed.shortAtMs = T0 - 5000;
    expect(windowed.subleaseAsk(T0 - 5000)?.ttlMs).toBe(500);
  });

  it("none below 2 requests a term, nor without a lease setting", () => {
    // 2 a second: 1 in 500 ms, no lease; 3 a second: 1.5, rounded up to 2.
    const st = keyWith(null);
    fill(st, 2, T0 - 2000);
    expect(st.subleaseAsk(T0 - 1000)).toBeNull();
    const three = keyWith(null);
    fill(three, 3, T0 - 2000);
    expect(three.subleaseAsk(T0 - 1000)).toEqual({ units: 2, ttlMs: RATE_LEASE_TERM_MS });
    const none = keyWith(null, { rule: { id: "r", params: slidingLog(5, 1000) } });
    fill(none, 50, T0 - 2000);
    expect(none.subleaseAsk(T0 - 1000)).toBeNull();
  });

  it("at most the rule's units and a quarter of a window's limit; none the window's end would cut", () => {
    const capped = keyWith({ ttlMs: 1000, units: 6, above: null });
    fill(capped, 40, T0 - 2000);
    expect(capped.subleaseAsk(T0 - 1000)).toEqual({ units: 6, ttlMs: RATE_LEASE_TERM_MS });
    const win = keyWith(null, { rule: { id: "w", params: fixedWindow(40, 60_000) } });
    fill(win, 100, T0 - 2000);
    // 1 s before the 60 s window's end (T0): a quarter-second term (windowSubleaseTermMs).
    expect(win.subleaseAsk(T0 - 1000)).toEqual({ units: 10, ttlMs: 250 });
    // 250 ms before it, a whole term still fits; 249 ms before, none.
    fill(win, 100, T0 - 1000);
    expect(win.subleaseAsk(T0 - 250)).toEqual({ units: 10, ttlMs: 250 });
    expect(win.subleaseAsk(T0 - 249)).toBeNull();
  });
});

describe("shortOf", () => {
  const ask = (need: number, sub?: boolean) => ({ units: 20, ttlMs: 500, need, ...(sub === undefined ? {} : { sub }) });
  it("a lease from the key's object: fewer units than needed", () => {
    expect(shortOf(undefined, 0, 0)).toBe(false);
    expect(shortOf(ask(10), 9, 500)).toBe(true);
    expect(shortOf(ask(10), 10, 100)).toBe(false);
    expect(shortOf(ask(10, false), 0, 0)).toBe(true);
  });
  it("a delegate's sub-lease: none, or at a slower pace than the need over its term", () => {
    expect(shortOf(ask(10, true), 0, 0)).toBe(true);
    expect(shortOf(ask(10, true), 5, 250)).toBe(false);
    expect(shortOf(ask(10, true), 5, 251)).toBe(true);
    expect(shortOf(ask(10, true), 2, 125)).toBe(true);
    expect(shortOf(ask(10, true), 10, 500)).toBe(false);
  });
});

describe("leaseAsk", () => {
  const fill = (st: KeyState, n: number, atMs: number) => {
    for (let i = 0; i < n; i++) st.see(atMs);
  };

  it("asks for what it saw in one ttl with a margin, or the rule's units", () => {
    const st = keyWith({ ttlMs: 1000, units: null, above: null });
    expect(st.leaseAsk(T0)).toEqual({ units: 1, ttlMs: 1000 });
    fill(st, 9, T0 - 2000);
    expect(st.leaseAsk(T0 - 1000)).toEqual({ units: 9 + 6 + 1, ttlMs: 1000 });
    const fixed = keyWith({ ttlMs: 300, units: 7, above: null });
    fill(fixed, 50, T0);
    expect(fixed.leaseAsk(T0 + 1)).toEqual({ units: 7, ttlMs: 300 });
  });

  it("asks for none without a lease setting, and an automatic one only while the object is busy", () => {
    const none = keyWith(null, { rule: { id: "r", params: slidingLog(5, 1000) } });
    expect(none.leaseAsk(T0)).toBeNull();
    const auto = keyWith(null);
    fill(auto, 4, T0 - 2000);
    expect(auto.leaseAsk(T0 - 1000)).toBeNull();
    auto.busyUntilMs = T0 - 999;
    expect(auto.leaseAsk(T0 - 1000)).toEqual({ units: 4 + 4 + 1, ttlMs: 1000 });
    expect(auto.leaseAsk(T0 - 999)).toBeNull();
  });

  it("asks only above `above` (seen / ttl more than its rate), or while busy", () => {
    // Above 10 per second, ttl 1 s: 10 seen is not above, 11 is.
    const at = (n: number) => {
      const st = keyWith(
        { ttlMs: 1000, units: null, above: rate(10, 1000) },
        { rule: { id: "r", params: fixedWindow(100, 60_000) } },
      );
      fill(st, n, T0 - 2000);
      return st;
    };
    expect(at(10).leaseAsk(T0 - 1000)).toBeNull();
    expect(at(11).leaseAsk(T0 - 1000)).toEqual({ units: 11 + 8 + 1, ttlMs: 1000 });
    const busy = at(10);
    busy.busyUntilMs = T0;
    expect(busy.leaseAsk(T0 - 1000)).toEqual({ units: 10 + 8 + 1, ttlMs: 1000 });
    // A rate in other units: 3 per 500 ms over a 2 s ttl is 12 per ttl.
    const half = (n: number) => {
      const st = keyWith({ ttlMs: 2000, units: null, above: rate(3, 500) });
      fill(st, n, T0 - 4000);
      return st;
    };
    expect(half(12).leaseAsk(T0 - 2000)).toBeNull();
    expect(half(13).leaseAsk(T0 - 2000)).toEqual({ units: 13 + 8 + 1, ttlMs: 2000 });
  });
});

describe("hot keys and delegates", () => {
  it("goes to its delegate while hot and the delegate is not failing", () => {
    const st = keyWith(null, { delegate: route });
    expect(st.delegateFor(T0)).toBeNull();
    st.noteHot(true, T0);
    expect(st.hotUntilMs).toBe(T0 + HOT_HOLD_MS);
    expect(st.delegateFor(T0 + HOT_HOLD_MS - 1)).toBe(route);
    expect(st.delegateFor(T0 + HOT_HOLD_MS)).toBeNull();
    st.delegateDownUntilMs = T0 + 10;
    expect(st.delegateFor(T0 + 9)).toBeNull();
    expect(st.delegateFor(T0 + 10)).toBe(route);
    st.noteHot(undefined, T0 + 20);
    expect(st.hotUntilMs).toBe(T0 + HOT_HOLD_MS);
    st.noteHot(false, T0 + 20);
    expect(st.hotUntilMs).toBe(0);
    const without = keyWith(null);
    without.noteHot(true, T0);
    expect(without.delegateFor(T0)).toBeNull();
  });

  it("goes to its own shard once the spread is above its draw; a window rule's back once it decayed below it", () => {
    const own = { ...route, name: "r:key@weur.2" };
    const sharded = { ...route, ownShard: own, draw: 0.5 };
    const st = keyWith(null, { delegate: sharded, rule: { id: "w", params: fixedWindow(1000, 10_000) } });
    st.noteHot(true, T0);
    expect(st.delegateFor(T0)).toBe(sharded);
    // [ms from T0, spread heard then (a mark, `writeMark`), the spread then, where the next batch goes]
    const H = SPREAD_HALF_LIFE_MS;
    const steps: [number, number, number, DelegateRoute][] = [
      [0, 0.3, 0.3, sharded],
      [0, 0.5, 0.5, sharded],
      [0, 0.51, 0.51, own],
      [0, 0.2, 0.51, own],
      [0, 0.7, 0.7, own],
      // At most every shard alike: a quarter of the isolates stay on the first, a quarter on each other.
      [0, 2, MAX_SPREAD, own],
      // Heard no more: it halves every half-life; below the draw, the batches go back to the first shard.
      [H, 0, MAX_SPREAD / 2, sharded],
      [H, 0.3, MAX_SPREAD / 2, sharded],
      // A spread heard later than the first decays from then.
      [H, 0.6, 0.6, own],
      [2 * H, 0, 0.3, sharded],
    ];
    for (const [atMs, heard, kept, to] of steps) {
      st.spreadTo(heard, T0 + atMs);
      const seen = [st.spreadAt(T0 + atMs), st.delegateFor(T0 + atMs)];
      expect([atMs, heard, ...seen]).toEqual([atMs, heard, kept, to]);
    }
    // A rate rule's spread never decays: the highest heard, until the key goes cold.
    const rate = keyWith(null, { delegate: sharded });
    rate.noteHot(true, T0);
    rate.spreadTo(0.6, T0);
    rate.spreadTo(0.3, T0 + H);
    expect([rate.spreadAt(T0 + 2 * H), rate.delegateFor(T0 + 2 * H)]).toEqual([0.6, own]);
    // Not hot: no delegate at all; gone cold (`hot: false`): back to the first shard when hot again.
    expect(st.delegateFor(T0 + HOT_HOLD_MS)).toBeNull();
    st.noteHot(false, T0);
    expect(st.spread).toBe(0);
    st.noteHot(true, T0);
    expect(st.delegateFor(T0)).toBe(sharded);
    // A route without a draw moves at any spread; one without an own shard stays on the first.
    const drawless = keyWith(null, { delegate: { ...route, ownShard: own } });
    drawless.noteHot(true, T0);
    drawless.spreadTo(0.01, T0);
    expect(drawless.delegateFor(T0)).toBe(own);
    expect(MAX_SPREAD).toBe(1 - 1 / DELEGATE_SHARDS);
    const first = keyWith(null, { delegate: route });
    first.noteHot(true, T0);
    first.spreadTo(1, T0);
    expect(first.delegateFor(T0)).toBe(route);
  });
});

describe("the spread over time", () => {
  it("decayedSpread: halves every SPREAD_HALF_LIFE_MS; a spread heard now (or later: a clock stepping back) is kept", () => {
    const H = SPREAD_HALF_LIFE_MS;
    // [spread heard, ms since, the spread now]
    const table: [number, number, number][] = [
      [0.6, 0, 0.6],
      [0.6, -500, 0.6],
      [0.6, H, 0.3],
      [0.6, 2 * H, 0.15],
      [0.6, H / 2, 0.6 / Math.SQRT2],
      [0, H, 0],
    ];
    for (const [spread, ageMs, now] of table)
      expect([spread, ageMs, decayedSpread(spread, ageMs)]).toEqual([spread, ageMs, expect.closeTo(now, 12)]);
  });

  it("heardBusy: a window rule's spread grows by the first shard's share of the isolates still on it; a rate rule's to it", () => {
    const H = SPREAD_HALF_LIFE_MS;
    const window = { id: "w", params: fixedWindow(1000, 10_000) };
    // [the key's spread before (heard at T0), ms from T0 when the busy answer comes, its share to move, spread after]
    const table: [number, number, number, number][] = [
      [0, 0, 0.4, 0.4],
      // Half the region moved already: the first shard's 0.4 is 0.2 of the region more.
      [0.5, 0, 0.4, 0.7],
      [0.25, 0, 0.2, 0.4],
      // Measured against the spread now (decayed): 0.5 heard a half-life ago is 0.25.
      [0.5, H, 0.2, 0.4],
      // Overloaded (1), or more: every shard alike; nothing to move, or less than nothing: the spread as it is.
      [0.5, 0, 1, MAX_SPREAD],
      [0.5, 0, 7, MAX_SPREAD],
      [0.5, 0, 0, 0.5],
      [0.5, 0, -1, 0.5],
    ];
    for (const [before, atMs, moving, after] of table) {
      const st = keyWith(null, { delegate: route, rule: window });
      st.spreadTo(before, T0);
      st.heardBusy(moving, T0 + atMs);
      const seen = st.spreadAt(T0 + atMs);
      expect([before, atMs, moving, seen]).toEqual([before, atMs, moving, expect.closeTo(after, 12)]);
    }
    // A rate rule's (token bucket): the highest share heard, as before, never less.
    const rateTable: [number, number, number][] = [
      [0, 0.4, 0.4],
      [0.5, 0.4, 0.5],
      [0.25, 0.6, 0.6],
      [0.5, 1, MAX_SPREAD],
    ];
    for (const [before, moving, after] of rateTable) {
      const st = keyWith(null, { delegate: route });
      st.spreadTo(before, T0);
      st.heardBusy(moving, T0 + H);
      expect([before, moving, st.spreadAt(T0 + 5 * H)]).toEqual([before, moving, after]);
    }
  });
});

describe("lateResult", () => {
  const late: CallResult = {
    atMs: T0,
    results: [
      {
        ok: true,
        atMs: T0,
        decision: { allowed: true, remaining: 3, resetAfterMs: 5, retryAfterMs: null, delayMs: 0 },
      },
    ],
    lease: null,
    replayed: false,
  };

  it("is the request's result from the late answer, an error for one it does not have", async () => {
    expect(await lateResult(Promise.resolve(late), 0)).toBe(late.results[0]);
    expect(await lateResult(Promise.resolve(late), 1)).toEqual({ ok: false, error: "invalid_cost" });
  });

  it("marks a failed late call handled, and still fails for whoever awaits it", async () => {
    const failed = lateResult(Promise.reject(new Error("gone")), 0);
    await new Promise((r) => setTimeout(r, 0));
    await expect(failed).rejects.toThrow("gone");
  });
});

describe("hashString", () => {
  it("is FNV-1a, unsigned 32-bit, never 0", () => {
    expect(hashString("")).toBe(0x811c9dc5);
    expect(hashString("a")).toBe(0xe40c292c);
    expect(hashString("foobar")).toBe(0xbf9cf968);
    expect(hashString("r:key@weur.0")).toBeGreaterThan(0);
  });
});

describe("shardOf", () => {
  it("spreads similar ids evenly: the high bits of the hash, not its low bits", () => {
    // Isolates 0..4999 in 9 regions (i % 9), 4 shards each: per region about 555 / 4 = 139 per shard.
    const perShard = (pick: (text: string) => number) => {
      const counts = Array.from({ length: 9 }, () => [0, 0, 0, 0]);
      for (let i = 0; i < 5000; i++) counts[i % 9]![pick(`isolate-${i}-0`)]!++;
      return counts.flat();
    };
    const even = perShard((t) => shardOf(t, 4));
    expect(Math.min(...even)).toBeGreaterThanOrEqual(115);
    expect(Math.max(...even)).toBeLessThanOrEqual(165);
    // The low bits alone (what the shard used to be) are far from even on the same ids.
    const low = perShard((t) => hashString(t) % 4);
    expect(Math.max(...low)).toBeGreaterThan(230);
    expect(shardOf("x", 1)).toBe(0);
  });

  it("ownShardOf: an own shard other than the first, evenly, and a draw uniform and independent of it", () => {
    // Isolates 0..4999 as the simulation names them: per own shard (1 to 3) and per quarter of draws, about 417.
    const cells = Array.from({ length: DELEGATE_SHARDS * 4 }, () => 0);
    for (let i = 0; i < 5000; i++) {
      const { shard, draw } = ownShardOf(`isolate-${i}-0`);
      expect(draw >= 0 && draw < 1).toBe(true);
      cells[shard * 4 + Math.floor(draw * 4)]!++;
    }
    expect(cells.slice(0, 4)).toEqual([0, 0, 0, 0]);
    expect(Math.min(...cells.slice(4))).toBeGreaterThanOrEqual(360);
    expect(Math.max(...cells.slice(4))).toBeLessThanOrEqual(475);
    expect(ownShardOf("x")).toEqual(ownShardOf("x"));
  });
});
