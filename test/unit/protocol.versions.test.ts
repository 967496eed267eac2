/**
 * Two rule versions at once (a gradual deployment, an override change reaching isolates at different times): the key's
 * object obeys the newest rules version it has seen, decides calls from older versions under it, and never thrashes
 * its state between two fingerprints. Also: a refund or a lease return made under other parameters is taken back in
 * the record's terms, never dropped.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, carryOver, decide, fingerprintOf } from "../../src/algorithms/index.ts";
import { callRecord, type LimiterRecord, refundRecord } from "../../src/protocol/store.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);

describe("two rule versions at once", () => {
  it("obeys the newest version seen: older calls are decided under it, the state never goes back (property)", () => {
    const pairs: [AlgorithmParams, AlgorithmParams][] = [
      [tokenBucket(10, 1000, 20), tokenBucket(9, 1000, 18)],
      [fixedWindow(100, 60_000), fixedWindow(90, 60_000)],
      [fixedWindow(50, 60_000), tokenBucket(5, 1000, 10)],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...pairs),
        fc.array(
          fc.record({
            newer: fc.boolean(),
            gapMs: fc.integer({ min: 0, max: 300 }),
            cost: fc.integer({ min: 1, max: 3 }),
          }),
          {
            minLength: 1,
            maxLength: 80,
          },
        ),
        ([older, newer], calls) => {
          let record: LimiterRecord | null = null;
          // The exact single writer: the older rule until the first newer call, then the newer one (carried over once).
          let exactParams: AlgorithmParams = older;
          let exactState: AlgorithmState | null = null;
          let switched = false;
          let now = T0;
          calls.forEach((c, i) => {
            now += c.gapMs;
            const params = c.newer ? newer : older;
            const version = c.newer ? 2 : 1;
            if (c.newer && !switched) {
              switched = true;
              exactState = exactState === null ? null : carryOver(older, newer, exactState, now);
              exactParams = newer;
            }
            const out = callRecord(record, { rule: { id: "r", params, version }, id: `c${i}`, costs: [c.cost] }, now);
            record = out.record;
            const want = decide(exactParams, exactState, c.cost, now);
            if (want.ok) exactState = want.state;
            const got = out.result.results[0]!;
            expect(got.ok && got.decision.allowed).toBe(want.ok && want.decision.allowed);
            if (switched && record !== null) {
              expect(record.fingerprint).toBe(fingerprintOf(newer));
              expect(record.version).toBe(2);
            }
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("an unversioned caller behaves as before: the newest parameters it sends win", () => {
    const a = fixedWindow(10, 60_000);
    const b = fixedWindow(5, 60_000);
    let record = callRecord(null, { rule: { id: "r", params: a }, id: "1", costs: [1] }, T0).record;
    record = callRecord(record, { rule: { id: "r", params: b }, id: "2", costs: [1] }, T0 + 1).record;
    expect(record!.fingerprint).toBe(fingerprintOf(b));
    record = callRecord(record, { rule: { id: "r", params: a }, id: "3", costs: [1] }, T0 + 2).record;
    expect(record!.fingerprint).toBe(fingerprintOf(a));
  });
});

describe("a refund made under other parameters", () => {
  it("is taken back in the record's terms, not dropped (a lease return across a deploy)", () => {
    const older = fixedWindow(100, 60_000);
    const newer = fixedWindow(90, 60_000);
    // A lease of 20 charged under the older rule; the deploy arrives; 15 unused units come back from an old isolate.
    const leased = callRecord(
      null,
      { rule: { id: "r", params: older, version: 1 }, id: "a", costs: [], lease: { units: 20, ttlMs: 1000 } },
      T0,
    );
    expect(leased.record!.state).toMatchObject({ count: 20 });
    const deployed = callRecord(
      leased.record,
      { rule: { id: "r", params: newer, version: 2 }, id: "b", costs: [1] },
      T0 + 10,
    );
    expect(deployed.record!.state).toMatchObject({ count: 21 });
    const back = callRecord(
      deployed.record,
      { rule: { id: "r", params: older, version: 1 }, id: "c", costs: [], giveBack: [{ units: 15, atMs: T0 }] },
      T0 + 20,
    );
    expect(back.record!.state).toMatchObject({ count: 6 });
    expect(back.record!.fingerprint).toBe(fingerprintOf(newer));
    // refundRecord alone: the same, and never below zero.
    const alone = refundRecord(
      deployed.record,
      { rule: { id: "r", params: older }, cost: 500, admittedAtMs: T0 },
      T0 + 20,
    );
    expect(alone.record === null || (alone.record.state as { count: number }).count === 0).toBe(true);
  });
});
