/**
 * Exact tables for a key's record on its own (src/protocol/record.ts): which rules version decides, a check's new
 * record (and when it is the very same one), the bookkeeping a new record keeps, peeks, refunds and freshness.
 */
import { describe, expect, it } from "vitest";
import {
  type AppliedCall,
  CALL_MEMORY_MS,
  checkRecord,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  peekState,
  recordFreshAtMs,
  refundRecord,
  ruleFor,
} from "../../src/protocol/store.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const p10 = fixedWindow(10, 10_000);
const p20 = fixedWindow(20, 10_000);
const rec = (params = p10, count = 3, version?: number): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: { window: T0 / 10_000, count },
  ...(version === undefined ? {} : { version }),
});
const applied = (atMs: number): AppliedCall => ({ id: `c${atMs}`, atMs, verdicts: "1", leaseUnits: 0, leaseForMs: 0 });

describe("ruleFor", () => {
  const rule: LimiterRule = { id: "r", params: p20, version: 2 };

  it("is the call's own rule unless the record was made under a newer version", () => {
    expect(ruleFor(null, rule)).toBe(rule);
    expect(ruleFor(rec(p10, 3, 1), rule)).toBe(rule);
    expect(ruleFor(rec(p10, 3, 2), rule)).toBe(rule);
    expect(ruleFor(rec(p10, 3), { id: "r", params: p20 })).toEqual({ id: "r", params: p20 });
    expect(ruleFor(rec(p10, 3, 3), rule)).toEqual({ id: "r", params: p10, version: 3 });
    expect(ruleFor(rec(p10, 3, 1), { id: "u", params: p20 })).toEqual({ id: "u", params: p10, version: 1 });
  });
});

describe("checkRecord", () => {
  it("makes a new record with the version only when it is not 0", () => {
    const plain = checkRecord(null, { rule: { id: "r", params: p10 }, cost: 2 }, T0 + 1);
    expect(plain.record).toEqual(rec(p10, 2));
    expect(plain.result).toEqual({
      ok: true,
      atMs: T0 + 1,
      decision: { allowed: true, remaining: 8, resetAfterMs: 9_999, retryAfterMs: null, delayMs: 0 },
    });
    const zero = checkRecord(null, { rule: { id: "r", params: p10, version: 0 }, cost: 2 }, T0 + 1);
    expect(zero.record).toEqual(rec(p10, 2));
    expect(checkRecord(null, { rule: { id: "r", params: p10, version: 4 }, cost: 2 }, T0).record).toEqual(
      rec(p10, 2, 4),
    );
  });

  it("returns the very same record when nothing changed, and a new one for a newer version", () => {
    const full = rec(p10, 10, 2);
    const denied = checkRecord(full, { rule: { id: "r", params: p10, version: 2 }, cost: 1 }, T0 + 5);
    expect(denied.record).toBe(full);
    expect(denied.result).toMatchObject({ ok: true, decision: { allowed: false } });
    const older = checkRecord(full, { rule: { id: "r", params: p10, version: 1 }, cost: 1 }, T0 + 5);
    expect(older.record).toBe(full);
    const newer = checkRecord(full, { rule: { id: "r", params: p10, version: 3 }, cost: 1 }, T0 + 5);
    expect(newer.record).toEqual(rec(p10, 10, 3));
    const error = checkRecord(full, { rule: { id: "r", params: p10, version: 3 }, cost: 11 }, T0 + 5);
    expect(error).toEqual({ result: { ok: false, error: "cost_exceeds_capacity" }, record: full });
    // A bucket's denial under the same parameters: the very record (its state is not carried over to itself).
    const tb: LimiterRule = { id: "t", params: tokenBucket(1, 1000, 5) };
    const spent = checkRecord(null, { rule: tb, cost: 5 }, T0).record;
    expect(checkRecord(spent, { rule: tb, cost: 1 }, T0 + 10).record).toBe(spent);
    // The same state from another fingerprint (a rule change that carries the count over as it was) is a new record.
    const changed = checkRecord(rec(p10, 10), { rule: { id: "r", params: fixedWindow(10, 20_000) }, cost: 11 }, T0);
    expect(changed.record).toEqual(rec(p10, 10));
  });

  it("carries the state over to newer parameters, and decides older callers under the record's", () => {
    const newer = checkRecord(rec(p10, 8, 1), { rule: { id: "r", params: p20, version: 2 }, cost: 5 }, T0 + 5);
    expect(newer.record).toEqual(rec(p20, 13, 2));
    expect(newer.result).toMatchObject({ decision: { allowed: true, remaining: 7 } });
    const older = checkRecord(rec(p20, 8, 2), { rule: { id: "r", params: p10, version: 1 }, cost: 5 }, T0 + 5);
    expect(older.record).toEqual(rec(p20, 13, 2));
    expect(older.result).toMatchObject({ decision: { allowed: true, remaining: 7 } });
  });

  it("keeps the calls, lease asks and shares of the old record, and only those it had", () => {
    const rule: LimiterRule = { id: "r", params: p10 };
    const leaseAsks = { ttlMs: 1000, bucket: 5, curr: 2, prev: 1 };
    const shares = { entries: [], hotUntilMs: 7 };
    const calls = [applied(T0)];
    const all = checkRecord({ ...rec(), calls, leaseAsks, shares }, { rule, cost: 1 }, T0);
    expect(all.record).toEqual({ ...rec(p10, 4), calls, leaseAsks, shares });
    expect(checkRecord({ ...rec(), calls }, { rule, cost: 1 }, T0).record).toEqual({ ...rec(p10, 4), calls });
    expect(checkRecord({ ...rec(), leaseAsks }, { rule, cost: 1 }, T0).record).toEqual({ ...rec(p10, 4), leaseAsks });
    expect(checkRecord({ ...rec(), shares }, { rule, cost: 1 }, T0).record).toEqual({ ...rec(p10, 4), shares });
    // Only the fields the old record had, not the others as `undefined`.
    const keys = (old: LimiterRecord) => Object.keys(checkRecord(old, { rule, cost: 1 }, T0).record!).sort();
    expect(keys({ ...rec(), calls })).toEqual(["calls", "fingerprint", "params", "state", "v"]);
    expect(keys({ ...rec(), leaseAsks })).toEqual(["fingerprint", "leaseAsks", "params", "state", "v"]);
    expect(keys({ ...rec(), shares })).toEqual(["fingerprint", "params", "shares", "state", "v"]);
    const none = checkRecord(rec(), { rule, cost: 1 }, T0).record!;
    expect(Object.keys(none).sort()).toEqual(["fingerprint", "params", "state", "v"]);
  });
});

describe("peeks", () => {
  it("peeks a cost-1 request without charging it", () => {
    expect(peekRecord(null, { id: "r", params: p10 }, T0 + 100)).toEqual({
      remaining: 10,
      resetAfterMs: 0,
      retryAfterMs: null,
      atMs: T0 + 100,
    });
    expect(peekRecord(rec(p10, 3), { id: "r", params: p10 }, T0 + 100)).toEqual({
      remaining: 7,
      resetAfterMs: 9_900,
      retryAfterMs: null,
      atMs: T0 + 100,
    });
    expect(peekRecord(rec(p10, 10), { id: "r", params: p10 }, T0 + 100)).toEqual({
      remaining: 0,
      resetAfterMs: 9_900,
      retryAfterMs: 9_900,
      atMs: T0 + 100,
    });
    // Under the newest version: the record's 20 for an older caller, the caller's 20 when newer.
    expect(peekRecord(rec(p20, 3, 2), { id: "r", params: p10, version: 1 }, T0).remaining).toBe(17);
    expect(peekRecord(rec(p10, 3, 1), { id: "r", params: p20, version: 2 }, T0).remaining).toBe(17);
  });

  it("peeks a bare state, and a rule that admits nothing", () => {
    expect(peekState(p10, { window: T0 / 10_000, count: 4 } as never, T0 + 1)).toEqual({
      remaining: 6,
      resetAfterMs: 9_999,
      retryAfterMs: null,
      atMs: T0 + 1,
    });
    // A past window's state: fresh now.
    expect(peekState(p10, { window: T0 / 10_000 - 1, count: 10 } as never, T0 + 1)).toEqual({
      remaining: 10,
      resetAfterMs: 0,
      retryAfterMs: null,
      atMs: T0 + 1,
    });
    expect(peekState(fixedWindow(0, 10_000), null, T0)).toEqual({
      remaining: 0,
      resetAfterMs: 0,
      retryAfterMs: null,
      atMs: T0,
    });
    expect(peekState(fixedWindow(0, 10_000), { window: T0 / 10_000, count: 0 } as never, T0 + 2)).toEqual({
      remaining: 0,
      resetAfterMs: 9_998,
      retryAfterMs: null,
      atMs: T0 + 2,
    });
  });
});

describe("refundRecord", () => {
  it("gives back nothing for a key it has no record of", () => {
    expect(refundRecord(null, { rule: { id: "r", params: p10 }, cost: 1, admittedAtMs: T0 }, T0)).toEqual({
      result: null,
      record: null,
    });
  });

  it("gives units back in the record's terms and reports the key's figures", () => {
    const out = refundRecord(rec(p10, 10), { rule: { id: "r", params: p10 }, cost: 4, admittedAtMs: T0 }, T0 + 500);
    expect(out.result).toEqual({ remaining: 4, resetAfterMs: 9_500 });
    expect(out.record).toEqual(rec(p10, 6));
    // A record under newer parameters takes them back in its own (20 per window).
    const newer = refundRecord(
      rec(p20, 15, 2),
      { rule: { id: "r", params: p10, version: 1 }, cost: 4, admittedAtMs: T0 },
      T0 + 500,
    );
    expect(newer.result).toEqual({ remaining: 9, resetAfterMs: 9_500 });
    expect(newer.record).toEqual(rec(p20, 11, 2));
  });

  it("drops a bare record whose refund makes it fresh at this very ms", () => {
    const tb: LimiterRule = { id: "t", params: tokenBucket(1, 1000, 5) };
    const spent = checkRecord(null, { rule: tb, cost: 5 }, T0).record;
    expect(refundRecord(spent, { rule: tb, cost: 5, admittedAtMs: T0 }, T0)).toEqual({
      result: { remaining: 5, resetAfterMs: 0 },
      record: null,
    });
  });

  it("reports 0 remaining while the key is still spent", () => {
    // A unit admitted in the window before: nothing to give back in this one.
    const out = refundRecord(rec(p10, 10), { rule: { id: "r", params: p10 }, cost: 1, admittedAtMs: T0 - 1 }, T0 + 500);
    expect(out.result).toEqual({ remaining: 0, resetAfterMs: 9_500 });
    expect(out.record).toEqual(rec(p10, 10));
    const tb: LimiterRule = { id: "t", params: tokenBucket(1, 1000, 5) };
    const spent = checkRecord(null, { rule: tb, cost: 5 }, T0).record;
    const one = refundRecord(spent, { rule: tb, cost: 1, admittedAtMs: T0 }, T0);
    expect(one.result).toEqual({ remaining: 1, resetAfterMs: 4_000 });
  });
});

describe("recordFreshAtMs", () => {
  it("is the state's fresh time, or a call's memory's end when that is later", () => {
    expect(recordFreshAtMs(rec(p10, 3))).toBe(T0 + 10_000);
    expect(recordFreshAtMs({ ...rec(p10, 3), calls: [applied(T0 - CALL_MEMORY_MS), applied(T0 + 1)] })).toBe(
      T0 + 1 + CALL_MEMORY_MS,
    );
    expect(recordFreshAtMs({ ...rec(p10, 3), calls: [applied(T0 + 1), applied(T0 - CALL_MEMORY_MS)] })).toBe(
      T0 + 10_000,
    );
    expect(recordFreshAtMs({ ...rec(p10, 3), calls: [] })).toBe(T0 + 10_000);
    expect(
      recordFreshAtMs({ ...rec(p10, 3), calls: [applied(T0), applied(T0 + 1), applied(T0 - CALL_MEMORY_MS)] }),
    ).toBe(T0 + 10_000);
  });
});
