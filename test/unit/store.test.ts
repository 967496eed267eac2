/**
 * The Durable Object's record operations (src/protocol/store.ts), as pure functions: a refund that leaves the key as
 * good as fresh drops the record (the soak found an emptied sliding log kept with a fresh-at time of 0, whose alarm
 * the object then failed to arm: `setAlarm() cannot be called with an alarm time <= 0`, a failed refund).
 */
import { describe, expect, it } from "vitest";
import { checkRecord, type LimiterRule, refundRecord } from "../../src/protocol/store.ts";
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
});
