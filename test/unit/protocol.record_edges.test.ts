/**
 * Edges of a key's record the other tables leave open (src/protocol/record.ts, outcome.ts, store.ts): an impossible
 * cost during a ban or in a charge, a `block_for` of 0, what a ban does to the figures a peek and a refusal report, a
 * record kept for its ban alone, a bucket's refund with nothing to give back, and a window's leases under demand.
 * Exact values, explicit clock.
 */
import { describe, expect, it } from "vitest";
import { stepRecord } from "../../src/protocol/outcome.ts";
import {
  type CallInput,
  type CheckResult,
  callRecord,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  refundRecord,
} from "../../src/protocol/store.ts";
import { fixedWindow, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const login: LimiterRule = { id: "login", params: slidingLog(5, 600_000), blockForMs: 3_600_000 };

const decided = (r: CheckResult) => {
  if (!r.ok) throw new Error(r.error);
  return r;
};

/** `login`'s record banned at `T0 + 10` (five admitted at `T0`..`T0 + 4`, the sixth refused). */
function banned(): LimiterRecord {
  let record: LimiterRecord | null = null;
  for (let i = 0; i < 6; i++) record = stepRecord(record, login, 1, "check", T0 + (i < 5 ? i : 10)).record;
  expect(record!.ban).toEqual({ sinceMs: T0 + 10, untilMs: T0 + 3_600_010 });
  return record!;
}

describe("bans: impossible costs, a block_for of 0, the figures", () => {
  it("an impossible cost during a ban is the same error as without one, and changes nothing", () => {
    const record = banned();
    for (const kind of ["check", "probe"] as const) {
      expect(stepRecord(record, login, 6, kind, T0 + 20)).toEqual({
        result: { ok: false, error: "cost_exceeds_capacity" },
        record,
      });
    }
  });

  it("a charge of an impossible cost is that error, charging nothing", () => {
    expect(stepRecord(null, login, 6, "charge", T0)).toEqual({
      result: { ok: false, error: "cost_exceeds_capacity" },
      record: null,
    });
  });

  it("a block_for of 0 bans nothing: not from a refusal, not from a charge that did not fit", () => {
    const rule: LimiterRule = { id: "r", params: slidingLog(2, 60_000), blockForMs: 0 };
    const first = stepRecord(null, rule, 1, "check", T0);
    const full = stepRecord(first.record, rule, 1, "check", T0 + 1);
    const refused = stepRecord(full.record, rule, 1, "check", T0 + 2);
    expect(decided(refused.result).decision.allowed).toBe(false);
    expect(decided(refused.result).banUntilMs).toBeUndefined();
    expect(refused.record?.ban).toBeUndefined();
    const over = stepRecord(first.record, rule, 2, "charge", T0 + 3);
    expect(decided(over.result)).toMatchObject({ charged: 1, decision: { allowed: false } });
    expect(over.record?.ban).toBeUndefined();
  });

  it("a refusal during a ban resets no sooner than the ban's end (the log alone would reset sooner)", () => {
    const during = decided(stepRecord(banned(), login, 1, "probe", T0 + 700_000).result);
    expect(during.decision).toEqual({
      allowed: false,
      remaining: 0,
      resetAfterMs: 2_900_010,
      retryAfterMs: 2_900_010,
      delayMs: 0,
    });
  });

  it("a peek during a ban: nothing left, and the ban's end (the log is empty by then)", () => {
    expect(peekRecord(banned(), login, T0 + 700_000)).toEqual({
      remaining: 0,
      resetAfterMs: 2_900_010,
      retryAfterMs: 2_900_010,
      atMs: T0 + 700_000,
      banUntilMs: T0 + 3_600_010,
    });
  });

  it("a peek during a ban the bucket outlasts: the bucket's retry and reset, which come later", () => {
    const slow: LimiterRule = { id: "slow", params: tokenBucket(1, 60_000, 1), blockForMs: 1000 };
    let record = stepRecord(null, slow, 1, "check", T0).record;
    record = stepRecord(record, slow, 1, "check", T0 + 1).record;
    expect(record?.ban).toEqual({ sinceMs: T0 + 1, untilMs: T0 + 1001 });
    expect(peekRecord(record, slow, T0 + 500)).toEqual({
      remaining: 0,
      resetAfterMs: 59_500,
      retryAfterMs: 59_500,
      atMs: T0 + 500,
      banUntilMs: T0 + 1001,
    });
  });
});

describe("a rule change the state survives as it is", () => {
  it("a refusal under a lowered limit still writes the new parameters (the window's count carried over as is)", () => {
    const before: LimiterRule = { id: "w", params: fixedWindow(10, 60_000) };
    const after: LimiterRule = { id: "w", params: fixedWindow(4, 60_000) };
    let record: LimiterRecord | null = null;
    for (let i = 0; i < 5; i++) record = stepRecord(record, before, 1, "check", T0 + i).record;
    const out = stepRecord(record, after, 1, "check", T0 + 10);
    expect(decided(out.result).decision.allowed).toBe(false);
    expect(out.record?.state).toBe(record?.state);
    expect(out.record?.params).toEqual(after.params);
    expect(out.record?.fingerprint).not.toBe(record?.fingerprint);
  });
});

describe("refunds that leave a record as good as fresh", () => {
  it("a record that holds a ban is kept (with a fresh state), not dropped", () => {
    const rule: LimiterRule = { id: "r", params: slidingLog(1, 60_000), blockForMs: 5000 };
    const first = stepRecord(null, rule, 1, "check", T0);
    const refused = stepRecord(first.record, rule, 1, "check", T0 + 1);
    const out = refundRecord(refused.record, { rule, cost: 1, admittedAtMs: T0 }, T0 + 2);
    expect(out.result).toEqual({ remaining: 1, resetAfterMs: 0 });
    expect(out.record?.ban).toEqual({ sinceMs: T0 + 1, untilMs: T0 + 5001 });
  });

  it("a bucket's refund with nothing to give back (full again before a later charge) answers the key's figures", () => {
    const rule: LimiterRule = { id: "t", params: tokenBucket(10, 1000, 20) };
    const charged = stepRecord(null, rule, 1, "check", T0);
    const later = stepRecord(charged.record, rule, 1, "check", T0 + 60_000);
    const out = refundRecord(later.record, { rule, cost: 1, admittedAtMs: T0 }, T0 + 60_001);
    const { remaining, resetAfterMs } = peekRecord(later.record, rule, T0 + 60_001);
    expect(remaining).toBe(19);
    expect(out.result).toEqual({ remaining, resetAfterMs });
    expect(out.record?.state).toBe(later.record?.state);
  });
});

describe("a window's leases under demand", () => {
  it("go first come: the fourth ask of a quarter gets the whole last quarter, whatever the demand", () => {
    const win: LimiterRule = { id: "w", params: fixedWindow(100, 10_000) };
    let record: LimiterRecord | null = null;
    const units: number[] = [];
    for (let i = 0; i < 4; i++) {
      const input: CallInput = { rule: win, id: `c${i}`, costs: [], lease: { units: 25, ttlMs: 1000 } };
      const out = callRecord(record, input, T0 + i);
      record = out.record;
      units.push(out.result.lease?.units ?? 0);
    }
    expect(units).toEqual([25, 25, 25, 25]);
  });
});
