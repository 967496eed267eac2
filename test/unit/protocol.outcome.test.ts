/**
 * Probes, charges and bans on a key's record (src/protocol/outcome.ts, through store.ts `callRecord`): worked tables
 * with an explicit clock, and a property holding the record to an independent fold over the same probes and charges,
 * computed with the rational reference (test/support/reference.ts) replayed from scratch at every step.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type CallKind, stepRecord } from "../../src/protocol/outcome.ts";
import {
  type CallInput,
  type CheckResult,
  callRecord,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  recordFreshAtMs,
  refundRecord,
} from "../../src/protocol/store.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, gcraP, slidingCounter, slidingLog, tokenBucket } from "../support/params.ts";
import { referenceKey } from "../support/reference.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
let calls = 0;

/** A key's record driven one call at a time, as its object would. */
function key(rule: LimiterRule) {
  let record: LimiterRecord | null = null;
  const run = (kind: CallKind, cost: number, atMs: number): CheckResult => {
    const input: CallInput = { rule, id: `c${++calls}`, costs: [cost], kind };
    const out = callRecord(record, input, atMs);
    record = out.record;
    return out.result.results[0]!;
  };
  return {
    check: (atMs: number, cost = 1) => run("check", cost, atMs),
    probe: (atMs: number, cost = 1) => run("probe", cost, atMs),
    charge: (atMs: number, cost = 1) => run("charge", cost, atMs),
    get record() {
      return record;
    },
    set record(r: LimiterRecord | null) {
      record = r;
    },
  };
}

const decided = (r: CheckResult) => {
  if (!r.ok) throw new Error(r.error);
  return r;
};

describe("a probe: decided, never charged", () => {
  it("admits while the cost fits, with the key's figures as they stand, and changes nothing", () => {
    const k = key({ id: "r", params: tokenBucket(10, 1000, 5) });
    const first = decided(k.probe(T0, 2));
    expect(first.decision).toEqual({ allowed: true, remaining: 5, resetAfterMs: 0, retryAfterMs: null, delayMs: 0 });
    expect(k.record).toBeNull();
    decided(k.charge(T0, 4));
    expect(decided(k.probe(T0, 1)).decision).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 400 });
    // Two units do not fit: refused with the algorithm's own retry time (100 ms refills one token).
    expect(decided(k.probe(T0, 2)).decision).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 100 });
    expect(decided(k.probe(T0 + 100, 2)).decision.allowed).toBe(true);
  });

  it("an impossible cost is the same error as a check's", () => {
    const k = key({ id: "r", params: fixedWindow(3, 60_000) });
    expect(k.probe(T0, 4)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
  });
});

describe("a charge: as much as fits, exactly once", () => {
  it("charges in full while it fits, then fills the key and reports that it crossed the limit", () => {
    const k = key({ id: "r", params: fixedWindow(5, 60_000) });
    expect(decided(k.charge(T0, 3))).toMatchObject({ charged: 3, decision: { allowed: true, remaining: 2 } });
    const over = decided(k.charge(T0 + 1, 4));
    expect(over).toMatchObject({ charged: 2, decision: { allowed: false, remaining: 0 } });
    expect(over.decision.retryAfterMs).toBe(60_000 - 1 - (T0 % 60_000));
    expect(over.banUntilMs).toBeUndefined();
    expect(decided(k.probe(T0 + 2)).decision.allowed).toBe(false);
  });

  it("a retried charge (the same call id) is answered as remembered, not charged twice", () => {
    const rule: LimiterRule = { id: "r", params: slidingLog(5, 60_000) };
    const input: CallInput = { rule, id: "once", costs: [2], kind: "charge" };
    const first = callRecord(null, input, T0);
    const again = callRecord(first.record, input, T0 + 5);
    expect(again.result.replayed).toBe(true);
    expect(peekRecord(again.record, rule, T0 + 5).remaining).toBe(3);
  });
});

describe("block_for: a ban from the first refusal, exactly as long, held in the record", () => {
  const login: LimiterRule = { id: "login", params: slidingLog(5, 600_000), blockForMs: 3_600_000 };

  it("failed logins: five charged, the sixth attempt is refused and banned for an hour, to the millisecond", () => {
    const k = key(login);
    for (let i = 0; i < 5; i++) {
      expect(decided(k.probe(T0 + i * 1000)).decision.allowed).toBe(true);
      decided(k.charge(T0 + i * 1000 + 50));
    }
    const refused = decided(k.probe(T0 + 10_000));
    expect(refused.banUntilMs).toBe(T0 + 10_000 + 3_600_000);
    expect(refused.decision).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 3_600_000 });
    // Long after the log emptied (10 min), still banned; a refusal during the ban does not extend it.
    const during = decided(k.probe(T0 + 1_000_000));
    expect(during.decision.retryAfterMs).toBe(T0 + 3_610_000 - (T0 + 1_000_000));
    expect(during.banUntilMs).toBe(T0 + 3_610_000);
    expect(decided(k.check(T0 + 3_609_999)).decision.allowed).toBe(false);
    expect(decided(k.probe(T0 + 3_610_000)).decision.allowed).toBe(true);
    expect(k.record!.ban).toEqual({ sinceMs: T0 + 10_000, untilMs: T0 + 3_610_000 });
    expect(recordFreshAtMs(k.record!)).toBeGreaterThanOrEqual(T0 + 3_610_000);
  });

  it("a charge that does not fit (a request in flight past the limit) starts the ban", () => {
    const k = key(login);
    for (let i = 0; i < 7; i++) expect(decided(k.probe(T0)).decision.allowed).toBe(true);
    for (let i = 0; i < 5; i++) expect(decided(k.charge(T0 + 100 + i)).banUntilMs).toBeUndefined();
    const sixth = decided(k.charge(T0 + 200));
    expect(sixth).toMatchObject({ charged: 0, banUntilMs: T0 + 200 + 3_600_000, decision: { allowed: false } });
    // The seventh, also in flight, is charged during the ban: it does not move the ban's end.
    expect(decided(k.charge(T0 + 300)).banUntilMs).toBe(T0 + 200 + 3_600_000);
  });

  it("the retry time is the ban's end, or later when the algorithm alone would still refuse then", () => {
    const k = key({ id: "slow", params: tokenBucket(1, 60_000, 1), blockForMs: 1000 });
    expect(decided(k.check(T0)).decision.allowed).toBe(true);
    const refused = decided(k.check(T0 + 1));
    expect(refused.decision.retryAfterMs).toBe(59_999);
    const saved = k.record;
    // 1 ms earlier fails (and, refused again after the first ban ended, starts a new one); on time succeeds.
    expect(decided(k.check(T0 + 59_999)).decision.allowed).toBe(false);
    k.record = saved;
    expect(decided(k.check(T0 + 60_000)).decision.allowed).toBe(true);
  });

  it("plain checks ban too; a refund leaves the ban alone; no block_for, no ban", () => {
    const k = key({ id: "r", params: gcraP(1, 1000, 1), blockForMs: 5000 });
    decided(k.check(T0));
    expect(decided(k.check(T0)).banUntilMs).toBe(T0 + 5000);
    k.record = refundRecord(
      k.record,
      { rule: { id: "r", params: gcraP(1, 1000, 1) }, cost: 1, admittedAtMs: T0 },
      T0,
    ).record;
    expect(decided(k.check(T0 + 1)).decision).toMatchObject({ allowed: false, retryAfterMs: 4999 });
    const plain = key({ id: "p", params: gcraP(1, 1000, 1) });
    decided(plain.check(T0));
    expect(decided(plain.check(T0)).banUntilMs).toBeUndefined();
    expect(plain.record!.ban).toBeUndefined();
  });
});

/** One step of a trace: a probe or a charge of `cost` at `atMs`. */
interface Step {
  readonly kind: "probe" | "charge";
  readonly atMs: number;
  readonly cost: number;
}

/**
 * The independent fold: the charges applied so far, replayed on a fresh rational reference at every step (so a probe
 * never touches anything), a charge as the most units of it that a fresh replay admits, and a ban from the first
 * refusal or short charge while none runs.
 */
function fold(params: AlgorithmParams, blockForMs: number | null, steps: readonly Step[]) {
  const applied: { atMs: number; cost: number }[] = [];
  let banUntil = Number.NEGATIVE_INFINITY;
  const replay = () => {
    const ref = referenceKey(params);
    for (const a of applied) ref.check(a.cost, a.atMs);
    return ref;
  };
  return steps.map((s) => {
    const banned = s.atMs < banUntil;
    if (s.kind === "probe") {
      if (banned) return { allowed: false, banned: true };
      const allowed = replay().check(s.cost, s.atMs).allowed;
      if (!allowed && blockForMs !== null) banUntil = s.atMs + blockForMs;
      return { allowed, banned: !allowed && blockForMs !== null };
    }
    let take = 0;
    for (let k = s.cost; k >= 1; k--) {
      if (replay().check(k, s.atMs).allowed) {
        take = k;
        break;
      }
    }
    if (take > 0) applied.push({ atMs: s.atMs, cost: take });
    if (take < s.cost && blockForMs !== null && !banned) banUntil = s.atMs + blockForMs;
    return { allowed: take === s.cost, charged: take };
  });
}

describe("property: the record answers exactly what the independent fold answers", () => {
  const paramsArb = fc.oneof(
    fc
      .record({ l: fc.integer({ min: 1, max: 6 }), w: fc.integer({ min: 10, max: 400 }) })
      .map(({ l, w }) => fixedWindow(l, w)),
    fc
      .record({ l: fc.integer({ min: 1, max: 6 }), w: fc.integer({ min: 10, max: 400 }) })
      .map(({ l, w }) => slidingLog(l, w)),
    fc
      .record({ l: fc.integer({ min: 1, max: 6 }), w: fc.integer({ min: 10, max: 400 }) })
      .map(({ l, w }) => slidingCounter(l, w)),
    fc
      .record({
        a: fc.integer({ min: 1, max: 5 }),
        p: fc.integer({ min: 10, max: 400 }),
        b: fc.integer({ min: 1, max: 6 }),
      })
      .map(({ a, p, b }) => tokenBucket(a, p, b)),
    fc
      .record({
        a: fc.integer({ min: 1, max: 5 }),
        p: fc.integer({ min: 10, max: 400 }),
        b: fc.integer({ min: 1, max: 6 }),
      })
      .map(({ a, p, b }) => gcraP(a, p, b)),
  );
  const stepsArb = fc.array(
    fc.record({
      kind: fc.constantFrom<"probe" | "charge">("probe", "charge"),
      gapMs: fc.integer({ min: 0, max: 120 }),
      cost: fc.integer({ min: 1, max: 3 }),
    }),
    { minLength: 1, maxLength: 40 },
  );

  it("probes, charges and bans", () => {
    fc.assert(
      fc.property(
        paramsArb,
        fc.option(fc.integer({ min: 1, max: 500 }), { nil: null }),
        stepsArb,
        (params, blockForMs, raw) => {
          let t = T0;
          const capacity =
            params.algorithm === "token_bucket" || params.algorithm === "gcra"
              ? params.burst
              : "limit" in params
                ? params.limit
                : 1;
          const steps: Step[] = raw.map((s) => {
            t += s.gapMs;
            return { kind: s.kind, atMs: t, cost: Math.min(s.cost, capacity) };
          });
          const rule: LimiterRule = { id: "p", params, ...(blockForMs === null ? {} : { blockForMs }) };
          const expected = fold(params, blockForMs, steps);
          let record: LimiterRecord | null = null;
          steps.forEach((s, i) => {
            const out = stepRecord(record, rule, s.cost, s.kind, s.atMs);
            record = out.record;
            const r = decided(out.result);
            const want = expected[i]!;
            expect(r.decision.allowed, `step ${i}`).toBe(want.allowed);
            if (s.kind === "charge") expect(r.charged, `step ${i}`).toBe((want as { charged: number }).charged);
            else expect(r.banUntilMs !== undefined, `step ${i} banned`).toBe((want as { banned: boolean }).banned);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
