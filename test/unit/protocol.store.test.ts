/**
 * Exact tables for one call to a key's object (src/protocol/store.ts): a batch decided in order, retried ids answered
 * as remembered, lease returns, the call memory and the busy mark, and leases shared by demand.
 */
import { describe, expect, it } from "vitest";
import {
  type AppliedCall,
  CALL_MEMORY_MAX,
  CALL_MEMORY_MS,
  type CallInput,
  callRecord,
  isBusy,
  type LimiterRecord,
  type LimiterRule,
  leaseCapOf,
} from "../../src/protocol/store.ts";
import { BUSY_CALLS_PER_S } from "../../src/protocol/tunables.ts";
import { fixedWindow, gcraP, leakyQueue, slidingLog, tokenBucket } from "../support/params.ts";

/** A window start: 10 s windows begin here, and 1 s lease-ask buckets too. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const win: LimiterRule = { id: "w", params: fixedWindow(10, 10_000) };
const tb: LimiterRule = { id: "t", params: tokenBucket(10, 1000, 20) };
const call = (input: Partial<CallInput> & { rule: LimiterRule }): CallInput => ({ id: "c1", costs: [], ...input });

/** The admitted flags and remaining counts of a result's decisions. */
const verdicts = (results: readonly { ok: boolean; decision?: { allowed: boolean; remaining: number } }[]) =>
  results.map((r) => (r.ok ? `${r.decision!.allowed ? "+" : "-"}${r.decision!.remaining}` : "e"));

describe("leaseCapOf", () => {
  it.each([
    ["fixed_window 10", fixedWindow(10, 10_000), 2],
    ["fixed_window 8", fixedWindow(8, 10_000), 2],
    ["fixed_window 7", fixedWindow(7, 10_000), 1],
    ["fixed_window 3 (at least 1)", fixedWindow(3, 10_000), 1],
    ["sliding_log 40 (no leases: its capacity)", slidingLog(40, 10_000), 40],
    ["token_bucket (its capacity)", tokenBucket(10, 1000, 20), 20],
    ["gcra (its capacity)", gcraP(10, 1000, 7), 7],
  ])("%s: %i", (_name, params, cap) => {
    expect(leaseCapOf(params)).toBe(cap);
  });
});

describe("callRecord: a batch", () => {
  it("decides each cost in order, records the call compactly, and says nothing of busy or refunds", () => {
    const out = callRecord(null, call({ rule: win, costs: [3, 0, 11, 6, 2] }), T0 + 5);
    expect(verdicts(out.result.results)).toEqual(["+7", "e", "e", "+1", "-1"]);
    expect(out.result).toMatchObject({ atMs: T0 + 5, lease: null, replayed: false });
    expect("busy" in out.result).toBe(false);
    expect("refunded" in out.result).toBe(false);
    expect("hot" in out.result).toBe(false);
    expect(out.record?.calls).toEqual([{ id: "c1", atMs: T0 + 5, verdicts: "1ee10", leaseUnits: 0, leaseForMs: 0 }]);
    expect(out.record?.state).toEqual(callRecord(null, call({ rule: win, costs: [9] }), T0 + 5).record?.state);
  });

  it("changes nothing for a call with nothing in it (the very record back, no call remembered)", () => {
    expect(callRecord(null, call({ rule: win }), T0)).toEqual({
      result: { atMs: T0, results: [], lease: null, replayed: false },
      record: null,
    });
    const first = callRecord(null, call({ rule: win, costs: [1] }), T0).record;
    const empty = callRecord(first, call({ rule: win, id: "c2" }), T0 + 1);
    expect(empty.record).toBe(first);
    // Only errors: the state is unchanged and nothing is remembered.
    const errors = callRecord(first, call({ rule: win, id: "c3", costs: [0, 11] }), T0 + 1);
    expect(errors.record).toBe(first);
    expect(verdicts(errors.result.results)).toEqual(["e", "e"]);
  });

  it("keeps a shaping delay per request only when one is not 0", () => {
    const q: LimiterRule = { id: "q", params: leakyQueue(1, 1000, 3) };
    const out = callRecord(null, call({ rule: q, costs: [1, 1, 1] }), T0);
    expect(out.result.results.map((r) => (r.ok ? r.decision.delayMs : -1))).toEqual([0, 1000, 2000]);
    expect(out.record?.calls?.[0]).toEqual({
      id: "c1",
      atMs: T0,
      verdicts: "111",
      delaysMs: [0, 1000, 2000],
      leaseUnits: 0,
      leaseForMs: 0,
    });
    // A retry 300 ms later: the delays still to wait.
    const again = callRecord(out.record, call({ rule: q, costs: [1, 1, 1] }), T0 + 300);
    expect(again.result.replayed).toBe(true);
    expect(again.result.results.map((r) => (r.ok ? r.decision.delayMs : -1))).toEqual([0, 700, 1700]);
    const late = callRecord(out.record, call({ rule: q, costs: [1, 1, 1] }), T0 + 1500);
    expect(late.result.results.map((r) => (r.ok ? r.decision.delayMs : -1))).toEqual([0, 0, 500]);
  });
});

describe("callRecord: a retried call", () => {
  // Built inside each test, never while the file is collected (that would make every mutant it reaches "static").
  const first = () => callRecord(null, call({ rule: win, costs: [4, 4, 4, 0] }), T0 + 10);

  it("is answered as remembered, with the key's figures now, and charges nothing", () => {
    const { record } = first();
    const again = callRecord(record, call({ rule: win, costs: [4, 4, 4, 0] }), T0 + 20);
    expect(again.record).toBe(record);
    expect(again.result).toEqual({
      atMs: T0 + 20,
      lease: null,
      replayed: true,
      results: [
        {
          ok: true,
          atMs: T0 + 10,
          decision: { allowed: true, remaining: 2, resetAfterMs: 9_980, retryAfterMs: null, delayMs: 0 },
        },
        {
          ok: true,
          atMs: T0 + 10,
          decision: { allowed: true, remaining: 2, resetAfterMs: 9_980, retryAfterMs: null, delayMs: 0 },
        },
        {
          ok: true,
          atMs: T0 + 10,
          decision: { allowed: false, remaining: 2, resetAfterMs: 9_980, retryAfterMs: 1, delayMs: 0 },
        },
        { ok: false, error: "invalid_cost" },
      ],
    });
  });

  it("answers a denial with the key's wait now, at least 1 ms, and an error for a request it did not see", () => {
    const full = callRecord(null, call({ rule: win, costs: [10, 1] }), T0 + 10);
    const again = callRecord(full.record, call({ rule: win, costs: [10, 1, 1, 11] }), T0 + 4_000);
    expect(again.result.results).toEqual([
      {
        ok: true,
        atMs: T0 + 10,
        decision: { allowed: true, remaining: 0, resetAfterMs: 6_000, retryAfterMs: null, delayMs: 0 },
      },
      {
        ok: true,
        atMs: T0 + 10,
        decision: { allowed: false, remaining: 0, resetAfterMs: 6_000, retryAfterMs: 6_000, delayMs: 0 },
      },
      { ok: false, error: "invalid_cost" },
      { ok: false, error: "cost_exceeds_capacity" },
    ]);
    // A denial remembered while the key has room now: the wait is still at least 1 ms.
    const room = callRecord(full.record, call({ rule: win, costs: [10, 1] }), T0 + 10_000);
    expect(room.result.results[1]).toMatchObject({ decision: { allowed: false, retryAfterMs: 1, remaining: 10 } });
  });

  it("gives back its lease as granted, and the key's figures when it gave units back", () => {
    const leased = callRecord(null, call({ rule: tb, costs: [1], lease: { units: 5, ttlMs: 1000 } }), T0);
    expect(leased.result.lease).toEqual({ units: 5, atMs: T0, forMs: 1000 });
    const again = callRecord(leased.record, call({ rule: tb, costs: [1], lease: { units: 5, ttlMs: 1000 } }), T0 + 7);
    expect(again.result.lease).toEqual({ units: 5, atMs: T0, forMs: 1000 });
    expect("refunded" in again.result).toBe(false);
    const back = [{ units: 2, atMs: T0 }];
    const returned = callRecord(leased.record, call({ rule: tb, id: "c2", giveBack: back }), T0 + 100);
    const retried = callRecord(returned.record, call({ rule: tb, id: "c2", giveBack: back }), T0 + 100);
    expect(retried.result.replayed).toBe(true);
    expect(retried.result.lease).toBeNull();
    expect(retried.result.refunded).toEqual(returned.result.refunded);
  });
});

describe("callRecord: units given back", () => {
  it("refunds valid returns before the batch, skips malformed ones, and reports the key's figures", () => {
    const charged = callRecord(null, call({ rule: win, costs: [10] }), T0).record;
    const giveBack = [
      { units: 0, atMs: T0 },
      { units: -2, atMs: T0 },
      { units: 1.5, atMs: T0 },
      { units: 3, atMs: T0 },
    ];
    const out = callRecord(charged, call({ rule: win, id: "c2", costs: [1], giveBack }), T0 + 1_000);
    expect(verdicts(out.result.results)).toEqual(["+2"]);
    expect(out.result.refunded).toEqual({ remaining: 2, resetAfterMs: 9_000 });
    // A return that leaves the key as fresh (a sliding log's only entry) drops the record.
    const log: LimiterRule = { id: "l", params: slidingLog(5, 10_000) };
    const one: LimiterRecord = {
      v: 1,
      params: log.params,
      fingerprint: JSON.stringify(log.params),
      state: { times: [T0], costs: [1] } as never,
    };
    expect(callRecord(one, call({ rule: log, id: "c4", giveBack: [{ units: 1, atMs: T0 }] }), T0 + 5)).toEqual({
      result: { atMs: T0 + 5, results: [], lease: null, replayed: false, refunded: { remaining: 5, resetAfterMs: 0 } },
      record: null,
    });
    // An empty list of returns reports nothing.
    const none = callRecord(charged, call({ rule: win, id: "c3", costs: [1], giveBack: [] }), T0 + 1_000);
    expect("refunded" in none.result).toBe(false);
    expect(verdicts(none.result.results)).toEqual(["-0"]);
  });
});

describe("callRecord: the call memory", () => {
  const applied = (id: string, atMs: number): AppliedCall => ({
    id,
    atMs,
    verdicts: "1",
    leaseUnits: 0,
    leaseForMs: 0,
  });
  const base: LimiterRecord = {
    v: 1,
    params: win.params,
    fingerprint: JSON.stringify(win.params),
    state: { window: T0 / 10_000, count: 1 } as never,
  };

  it(`forgets calls ${CALL_MEMORY_MS} ms old, and keeps one a ms younger`, () => {
    const rec: LimiterRecord = { ...base, calls: [applied("old", T0), applied("young", T0 + 1)] };
    const out = callRecord(rec, call({ rule: win, id: "new", costs: [1] }), T0 + CALL_MEMORY_MS);
    expect(out.record?.calls?.map((c) => c.id)).toEqual(["young", "new"]);
  });

  it(`keeps at most ${CALL_MEMORY_MAX}, the newest`, () => {
    const calls = Array.from({ length: CALL_MEMORY_MAX }, (_, i) => applied(`a${i}`, T0 + i));
    const out = callRecord({ ...base, calls }, call({ rule: win, id: "new", costs: [1] }), T0 + 500);
    const ids = out.record?.calls?.map((c) => c.id);
    expect(ids).toHaveLength(CALL_MEMORY_MAX);
    expect(ids?.[0]).toBe("a1");
    expect(ids?.at(-1)).toBe("new");
    const fewer = callRecord({ ...base, calls: calls.slice(2) }, call({ rule: win, id: "new", costs: [1] }), T0 + 500);
    expect(fewer.record?.calls).toHaveLength(CALL_MEMORY_MAX - 1);
    expect(fewer.record?.calls?.[0]?.id).toBe("a2");
  });
});

describe("isBusy and the busy mark", () => {
  const applied = (atMs: number): AppliedCall => ({
    id: `i${atMs}`,
    atMs,
    verdicts: "1",
    leaseUnits: 0,
    leaseForMs: 0,
  });
  const base: LimiterRecord = {
    v: 1,
    params: win.params,
    fingerprint: JSON.stringify(win.params),
    state: { window: T0 / 10_000, count: 1 } as never,
  };
  const withCalls = (n: number, firstMs: number) => ({
    ...base,
    calls: Array.from({ length: n }, (_, i) => applied(firstMs + i)),
  });

  it(`is busy from ${BUSY_CALLS_PER_S} calls within the last second`, () => {
    expect(BUSY_CALLS_PER_S).toBe(100);
    expect(isBusy(null, T0)).toBe(false);
    expect(isBusy(base, T0)).toBe(false);
    expect(isBusy(withCalls(99, T0), T0 + 100)).toBe(false);
    expect(isBusy(withCalls(100, T0), T0 + 999)).toBe(true);
    expect(isBusy(withCalls(100, T0), T0 + 1000)).toBe(false);
    // The 100th newest decides, not the oldest.
    expect(isBusy(withCalls(101, T0 - 1), T0 + 999)).toBe(true);
    expect(isBusy(withCalls(101, T0 - 1), T0 + 1000)).toBe(false);
  });

  it("marks a call's answer busy, also when the call changed nothing", () => {
    const out = callRecord(withCalls(99, T0), call({ rule: win, id: "n", costs: [1] }), T0 + 500);
    expect(out.result.busy).toBe(true);
    const idle = callRecord(withCalls(100, T0), call({ rule: win, id: "n" }), T0 + 500);
    expect(idle.record).toEqual(withCalls(100, T0));
    expect(idle.result.busy).toBe(true);
    const quiet = callRecord(withCalls(98, T0), call({ rule: win, id: "n", costs: [1] }), T0 + 500);
    expect("busy" in quiet.result).toBe(false);
  });
});

describe("callRecord: leases", () => {
  it("a window lease: at most a quarter of the limit, its term cut at the window's end", () => {
    const out = callRecord(null, call({ rule: win, costs: [1], lease: { units: 5, ttlMs: 3_000 } }), T0 + 8_000);
    expect(out.result.lease).toEqual({ units: 2, atMs: T0 + 8_000, forMs: 2_000 });
    expect(out.record?.calls?.[0]).toMatchObject({ leaseUnits: 2, leaseForMs: 2_000 });
    expect(out.record?.leaseAsks).toEqual({ ttlMs: 3_000, bucket: Math.floor((T0 + 8_000) / 3_000), curr: 5, prev: 0 });
    expect(
      verdicts(callRecord(out.record, call({ rule: win, id: "c2", costs: [7] }), T0 + 8_000).result.results),
    ).toEqual(["+0"]);
  });

  it("asks no lease for units below 1 or not whole, and counts a fractional ttl as a whole ms", () => {
    for (const units of [0, -1, 1.5]) {
      const out = callRecord(null, call({ rule: tb, costs: [1], lease: { units, ttlMs: 1000 } }), T0);
      expect(out.result.lease).toBeNull();
      expect(out.record?.leaseAsks).toBeUndefined();
    }
    const tiny = callRecord(null, call({ rule: tb, costs: [1], lease: { units: 1, ttlMs: 0.4 } }), T0);
    expect(tiny.result.lease).toEqual({ units: 1, atMs: T0, forMs: 1 });
    expect(tiny.record?.leaseAsks).toEqual({ ttlMs: 1, bucket: T0, curr: 1, prev: 0 });
  });

  it("a rate lease takes what the key holds, and is shorter when that is less than its share", () => {
    // Burst 20 held, 10 refilled per ttl: a supply of 30 for an ask of 30, so a share of 30, but 20 held now.
    const out = callRecord(null, call({ rule: tb, lease: { units: 30, ttlMs: 1000 } }), T0);
    expect(out.result.lease).toEqual({ units: 20, atMs: T0, forMs: 666 });
    // Another isolate asks 30 half a ttl later: demand 60, supply 5 held + 10 refill, so a share of ceil(30 × 15 / 60).
    const second = callRecord(out.record, call({ rule: tb, id: "c2", lease: { units: 30, ttlMs: 1000 } }), T0 + 500);
    expect(second.record?.leaseAsks).toEqual({ ttlMs: 1000, bucket: T0 / 1000, curr: 60, prev: 0 });
    expect(second.result.lease).toEqual({ units: 5, atMs: T0 + 500, forMs: 625 });
    // A quarter of the ttl at least.
    const third = callRecord(second.record, call({ rule: tb, id: "c3", lease: { units: 200, ttlMs: 1000 } }), T0 + 600);
    expect(third.result.lease).toEqual({ units: 1, atMs: T0 + 600, forMs: 250 });
  });

  it("a lease within its share and what is held runs for the whole ttl", () => {
    const out = callRecord(null, call({ rule: tb, lease: { units: 8, ttlMs: 1000 } }), T0);
    expect(out.result.lease).toEqual({ units: 8, atMs: T0, forMs: 1000 });
    // Exactly what is held, and the share no more than that: a whole ttl too.
    const exact = callRecord(null, call({ rule: tb, lease: { units: 20, ttlMs: 1000 } }), T0);
    expect(exact.result.lease).toEqual({ units: 20, atMs: T0, forMs: 1000 });
  });

  it("weighs the previous ttl's asks by how much of it is still in the last ttl", () => {
    const rule: LimiterRule = { id: "t", params: tokenBucket(100, 1000, 1000) };
    const first = callRecord(null, call({ rule, costs: [1000], lease: { units: 400, ttlMs: 1000 } }), T0);
    expect(first.result.lease).toBeNull();
    // 125 held after 1.25 s: demand 200 + 400 × 3/4 = 500, supply 125 + 100: ceil(200 × 225 / 500) = 90.
    const next = callRecord(first.record, call({ rule, id: "c2", lease: { units: 200, ttlMs: 1000 } }), T0 + 1_250);
    expect(next.record?.leaseAsks).toEqual({ ttlMs: 1000, bucket: T0 / 1000 + 1, curr: 200, prev: 400 });
    expect(next.result.lease).toEqual({ units: 90, atMs: T0 + 1_250, forMs: 1000 });
    // At the bucket's start all of the previous one counts: 200 + 400, ceil(200 × 200 / 600) = 67 of 100 held.
    const start = callRecord(first.record, call({ rule, id: "c2", lease: { units: 200, ttlMs: 1000 } }), T0 + 1_000);
    expect(start.result.lease).toEqual({ units: 67, atMs: T0 + 1_000, forMs: 1000 });
    // Two buckets on, the old asks are gone.
    const later = callRecord(next.record, call({ rule, id: "c3", lease: { units: 3, ttlMs: 1000 } }), T0 + 3_000);
    expect(later.record?.leaseAsks).toEqual({ ttlMs: 1000, bucket: T0 / 1000 + 3, curr: 3, prev: 0 });
    // An ask with another ttl starts over.
    const other = callRecord(next.record, call({ rule, id: "c4", lease: { units: 3, ttlMs: 500 } }), T0 + 1_300);
    expect(other.record?.leaseAsks).toEqual({ ttlMs: 500, bucket: Math.floor((T0 + 1_300) / 500), curr: 3, prev: 0 });
    // So does one whose ttl is a ms longer, although its bucket number is lower.
    const longer = callRecord(next.record, call({ rule, id: "c6", lease: { units: 3, ttlMs: 1001 } }), T0 + 1_300);
    expect(longer.record?.leaseAsks).toEqual({
      ttlMs: 1001,
      bucket: Math.floor((T0 + 1_300) / 1001),
      curr: 3,
      prev: 0,
    });
    // An earlier clock counts in the current bucket.
    const back = callRecord(next.record, call({ rule, id: "c5", lease: { units: 3, ttlMs: 1000 } }), T0 + 800);
    expect(back.record?.leaseAsks).toEqual({ ttlMs: 1000, bucket: T0 / 1000 + 1, curr: 203, prev: 400 });
  });

  it("grants nothing when nothing is held, and still remembers the ask", () => {
    const spent = callRecord(null, call({ rule: win, costs: [10] }), T0).record;
    const out = callRecord(spent, call({ rule: win, id: "c2", lease: { units: 2, ttlMs: 1000 } }), T0 + 1);
    expect(out.result.lease).toBeNull();
    expect(out.record?.leaseAsks).toEqual({ ttlMs: 1000, bucket: T0 / 1000, curr: 2, prev: 0 });
    expect(out.record?.calls?.at(-1)).toMatchObject({ id: "c2", verdicts: "", leaseUnits: 0, leaseForMs: 0 });
  });
});
