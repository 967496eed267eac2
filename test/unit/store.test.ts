/**
 * The Durable Object's record operations (src/protocol/store.ts), as pure functions: a refund that leaves the key as
 * good as fresh drops the record (the soak found an emptied sliding log kept with a fresh-at time of 0, whose alarm
 * the object then failed to arm: `setAlarm() cannot be called with an alarm time <= 0`, a failed refund).
 */
import { describe, expect, it } from "vitest";
import {
  callRecord,
  checkRecord,
  isBusy,
  type LimiterRecord,
  type LimiterRule,
  refundRecord,
} from "../../src/protocol/store.ts";
import { BUSY_CALLS_PER_S } from "../../src/protocol/tunables.ts";
import { fixedWindow, gcraP, leakyQueue, slidingCounter, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

describe("refundRecord", () => {
  it.each([
    ["sliding_log", slidingLog(5, 10_000)],
    ["token_bucket", tokenBucket(10, 1000, 20)],
    ["gcra", gcraP(10, 1000, 20)],
    ["leaky_queue", leakyQueue(10, 1000, 5)],
    ["fixed_window", fixedWindow(5, 10_000)],
    ["sliding_counter", slidingCounter(5, 10_000)],
  ])(
    "%s: refunding a fresh key's only admission leaves the key as fresh (an emptied log: no record)",
    (_name, params) => {
      const rule: LimiterRule = { id: "r", params };
      const checked = checkRecord(null, { rule, cost: 1 }, T0);
      expect(checked.result.ok && checked.result.decision.allowed).toBe(true);
      const refunded = refundRecord(checked.record, { rule, cost: 1, admittedAtMs: T0 }, T0);
      if (params.algorithm === "sliding_log") expect(refunded.record).toBeNull();
      // The next request sees the key as fresh whatever was kept.
      const again = checkRecord(refunded.record, { rule, cost: 1 }, T0);
      expect(again.result).toEqual(checkRecord(null, { rule, cost: 1 }, T0).result);
    },
  );

  it("keeps a record that is not fresh yet", () => {
    const rule: LimiterRule = { id: "r", params: slidingLog(5, 10_000) };
    const first = checkRecord(null, { rule, cost: 1 }, T0);
    const second = checkRecord(first.record, { rule, cost: 1 }, T0 + 10);
    const refunded = refundRecord(second.record, { rule, cost: 1, admittedAtMs: T0 + 10 }, T0 + 10);
    expect(refunded.record).not.toBeNull();
    expect(refunded.result).toEqual({ remaining: 4, resetAfterMs: 9_990 }); // the first entry, at T0, is the newest left
  });

  // A refund that leaves the state fresh keeps whatever else the record holds (issue 18: the sim's "half refunded"
  // rows lost the call ids the busy mark counts, so the key never went hot; and the newest rules version).
  const bucket = tokenBucket(10, 1000, 2);
  const admittedOnce = (): LimiterRecord => {
    const out = checkRecord(null, { rule: { id: "r", params: bucket }, cost: 1 }, T0);
    return out.record!;
  };
  it.each<[string, (r: LimiterRecord) => LimiterRecord]>([
    ["call ids", (r) => ({ ...r, calls: [{ id: "a", atMs: T0, verdicts: "1", leaseUnits: 0, leaseForMs: 0 }] })],
    ["lease asks", (r) => ({ ...r, leaseAsks: { ttlMs: 1000, bucket: 1, curr: 1, prev: 0 } })],
    ["a share book", (r) => ({ ...r, shares: { entries: [], hotUntilMs: T0 + 5000 } })],
    ["a rules version", (r) => ({ ...r, version: 3 })],
  ])("a refund that leaves the state fresh keeps a record holding %s", (_what, withIt) => {
    const record = withIt(admittedOnce());
    const rule: LimiterRule = { id: "r", params: bucket };
    const out = refundRecord(record, { rule, cost: 1, admittedAtMs: T0 }, T0);
    expect(out.result).toEqual({ remaining: 2, resetAfterMs: 0 });
    // Kept with a state fresh at any time (made at 0): a clock that later reads earlier finds the key fresh too.
    // (The key's deficit after the refund is noted for later refunds: none, late_refund.ts.)
    expect(out.record).toEqual({
      ...record,
      state: { tokensScaled: 200, lastMs: 0 },
      lows: { s: [[2 * T0 + 1, 0]], slack: 0, per: 100 },
    });
    const earlier = checkRecord(out.record, { rule, cost: 1 }, T0 - 60_000);
    expect(earlier.result).toEqual(checkRecord(null, { rule, cost: 1 }, T0 - 60_000).result);
  });

  it("the admin guard's charge and give-back (gcra 5/min, call ids kept) leave the address fresh, whatever the clock", () => {
    const rule: LimiterRule = { id: "_sluice/admin-auth", params: gcraP(5, 60_000, 5) };
    let record: LimiterRecord | null = null;
    for (const [i, at] of [T0 + 12_000, T0, T0 + 60_000, T0].entries()) {
      const charged = callRecord(record, { rule, id: `g${i}`, costs: [1] }, at);
      const r = charged.result.results[0]!;
      expect(r.ok && r.decision).toMatchObject({ allowed: true, remaining: 4 });
      record = refundRecord(charged.record, { rule, cost: 1, admittedAtMs: at }, at).record;
      expect(record!.calls!.at(-1)!.id).toBe(`g${i}`);
    }
  });

  it("a refund that leaves a bare record fresh drops it", () => {
    const rule: LimiterRule = { id: "r", params: bucket };
    const out = refundRecord(admittedOnce(), { rule, cost: 1, admittedAtMs: T0 }, T0);
    expect(out).toEqual({ result: { remaining: 2, resetAfterMs: 0 }, record: null });
    // A bare record whose refund leaves it one unit short is kept: fresh 100 ms later.
    const twice = checkRecord(admittedOnce(), { rule, cost: 1 }, T0).record;
    const kept = refundRecord(twice, { rule, cost: 1, admittedAtMs: T0 }, T0);
    expect(kept.result).toEqual({ remaining: 1, resetAfterMs: 100 });
    expect(kept.record).not.toBeNull();
  });

  it("a call whose give-backs leave the bucket full keeps its call ids, so a busy key stays busy", () => {
    const rule: LimiterRule = { id: "r", params: tokenBucket(1000, 1000, 1000), version: 2 };
    let record: LimiterRecord | null = null;
    for (let i = 0; i < BUSY_CALLS_PER_S; i++) {
      const giveBack = i === 0 ? [] : [{ units: 1, atMs: T0 + i - 1 }];
      record = callRecord(record, { rule, id: `c${i}`, costs: [1], giveBack }, T0 + i).record;
      expect(record).not.toBeNull();
      expect(record!.calls).toHaveLength(i + 1);
      expect(record!.version).toBe(2);
    }
    expect(isBusy(record, T0 + BUSY_CALLS_PER_S - 1)).toBe(true);
    // A retry of the first call is answered as remembered, not charged again.
    const retry = callRecord(record, { rule, id: "c0", costs: [1] }, T0 + BUSY_CALLS_PER_S);
    expect(retry.result.replayed).toBe(true);
    expect(retry.record).toBe(record);
  });
});
