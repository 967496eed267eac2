/**
 * The replay's row path for rules that count by the response or ban (src/replay/outcome_rows.ts) held to the Durable
 * Object's record path (src/protocol/outcome.ts `stepRecord`, `chargeRecord`, record.ts `refundRecord`) step for
 * step: on random runs of probes or checks (costs valid, above the limit and invalid), charges after the response
 * (more than fits, so bans start), refunds of earlier admissions, and a clock that jumps ahead, idles past bans and
 * steps back, every decision and the key's state after every step are the same. This is what lets `sluice compare`
 * decide `count_when`/`block_for` rules without a record per request and print the same bytes.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AlgorithmParams } from "../../src/algorithms/index.ts";
import { chargeRecord, stepRecord } from "../../src/protocol/outcome.ts";
import { type LimiterRecord, type LimiterRule, refundRecord } from "../../src/protocol/record.ts";
import { outcomeRowsFor } from "../../src/replay/outcome_rows.ts";
import { slidingLog as log, tokenBucket } from "../support/params.ts";

const T0 = 1_800_000_000_000;

type Op =
  | { readonly kind: "ask"; readonly cost: number }
  | { readonly kind: "charge"; readonly cost: number }
  | { readonly kind: "refund"; readonly pick: number };

interface Step {
  readonly gapMs: number;
  readonly key: number;
  readonly op: Op;
}

function steps(limit: number, windowMs: number, blockForMs: number): fc.Arbitrary<Step[]> {
  const cost = fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 1, max: limit }) },
    { weight: 1, arbitrary: fc.constantFrom(0, -1, 1.5, limit + 1) },
  );
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant("ask" as const), cost }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("charge" as const), cost }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("refund" as const), pick: fc.nat(1000) }) },
  );
  const gapMs = fc.oneof(
    { weight: 4, arbitrary: fc.constant(0) },
    { weight: 6, arbitrary: fc.integer({ min: 1, max: Math.ceil(windowMs / limit) }) },
    { weight: 2, arbitrary: fc.integer({ min: -windowMs, max: -1 }) },
    { weight: 1, arbitrary: fc.integer({ min: windowMs, max: windowMs + blockForMs + 10 }) },
    // Exactly a ban's or an entry's end after a step that started it: the end itself is outside both.
    { weight: 1, arbitrary: fc.constantFrom(blockForMs, windowMs, blockForMs - 1, windowMs - 1) },
  );
  return fc.array(fc.record({ gapMs, key: fc.integer({ min: 0, max: 2 }), op }), { minLength: 1, maxLength: 120 });
}

function run(params: AlgorithmParams, blockForMs: number, deferred: boolean, run: readonly Step[]): void {
  const rule: LimiterRule = { id: "r", params, ...(blockForMs > 0 ? { blockForMs } : {}) };
  const rows = outcomeRowsFor(params, blockForMs)!;
  expect(rows).not.toBeNull();
  const records = new Map<number, LimiterRecord | null>();
  const admitted: { key: number; cost: number; atMs: number }[] = [];
  let nowMs = T0;
  for (const [i, s] of run.entries()) {
    nowMs += s.gapMs;
    const record = records.get(s.key) ?? null;
    const where = `step ${i} at ${nowMs - T0}: ${JSON.stringify(s)}`;
    if (s.op.kind === "ask") {
      const out = stepRecord(record, rule, s.op.cost, deferred ? "probe" : "check", nowMs);
      records.set(s.key, out.record);
      const expected = out.result.ok ? out.result.decision : null;
      const got = rows.ask(s.key, s.op.cost, deferred, nowMs);
      expect(got === null ? null : { ...got }, where).toEqual(expected === null ? null : { ...expected });
      if (!deferred && expected?.allowed === true) admitted.push({ key: s.key, cost: s.op.cost, atMs: nowMs });
    } else if (s.op.kind === "charge") {
      records.set(s.key, chargeRecord(record, rule, s.op.cost, nowMs).record);
      rows.charge(s.key, s.op.cost, nowMs);
    } else if (admitted.length > 0) {
      const a = admitted.splice(s.op.pick % admitted.length, 1)[0]!;
      const before = records.get(a.key) ?? null;
      records.set(a.key, refundRecord(before, { rule, cost: a.cost, admittedAtMs: a.atMs }, nowMs).record);
      rows.refund(a.key, a.cost, a.atMs, nowMs);
    }
    for (const key of [0, 1, 2]) {
      expect(rows.stateOf(key), `${where}: key ${key}`).toEqual(records.get(key)?.state ?? null);
    }
  }
}

describe("the replay's outcome rows decide as the object's records", () => {
  for (const [name, params, blockForMs] of [
    ["sliding_log 5 per 60 s, block_for 15 min", log(5, 60_000), 900_000],
    ["sliding_log 3 per 1 s, block_for 2 s", log(3, 1000), 2000],
    ["sliding_log 1 per 100 ms, no ban", log(1, 100), 0],
    ["sliding_log 32 per 10 s, block_for 1 s", log(32, 10_000), 1000],
  ] as const) {
    for (const deferred of [true, false]) {
      it(`${name}, ${deferred ? "count_when (probe, then charge)" : "check"}`, () => {
        const limit = params.algorithm === "sliding_log" ? params.limit : 1;
        const windowMs = params.algorithm === "sliding_log" ? params.windowMs : 1;
        fc.assert(
          fc.property(steps(limit, windowMs, blockForMs), (s) => run(params, blockForMs, deferred, s)),
          { numRuns: 300 },
        );
      });
    }
  }

  it("leaves records where the row kernel cannot say a fresh time, or the rule keeps lows or slots", () => {
    expect(outcomeRowsFor(log(33, 1000), 1000)).toBeNull();
    expect(outcomeRowsFor(tokenBucket(1, 1000, 5), 0)).toBeNull();
  });
});
