/**
 * BENCHMARKS.md 8a's verdicts (bench/ablation_report.ts `verdictOf`, `ablationSection`): a mechanism's verdict comes
 * from its rows' figures, the concurrency row's included. Stands for the issue's rule for a cut as the report applies
 * it: late refunds stay because the concurrency row shows late slots kept and admissions lost without them, not
 * because a paragraph says so; a mechanism whose rows move by nothing goes.
 */
import { describe, expect, it } from "vitest";
import { type AblationData, ablationSection, keeps, verdictOf } from "../../bench/ablation_report.ts";
import { SLOT_LABEL, type SlotRow } from "../../bench/ablation_slots.ts";
import { type ClusterRow, clusterGoals, lowDecisionsOf } from "../../bench/cluster_rows.ts";

/** A rate row at 2x its limit meeting every goal but accuracy (as section 8's all-on rows do). */
function clusterRow(over: Partial<ClusterRow> = {}): ClusterRow {
  return {
    ...{ rule: "hot-rate", algorithm: "gcra", scenario: "steady", isolates: 1000, loadPerS: 10_000, durationS: 8 },
    ...{ requests: 80_000, keyCallsPerS: 40, keyBusiestSecond: 90, keyFirstSecond: 90, keyBusiestAfterFirst: 60 },
    keyFirstSecondBy: {} as ClusterRow["keyFirstSecondBy"],
    ...{ keyShareAsks: 400, keyRefundCalls: 0, delegateBusiestSecond: 300, delegateBusiestAfterFirst: 250 },
    ...{ delegateCalls: 10_000, overloaded: 0, overloadedAfterFirstSecond: 0, failedOpen: {}, failedOpenAll: 0 },
    ...{ lastKnown: 900, admitted: 36_000, exactAdmitted: 41_000, admittedVsExactPct: -12, firstSecondAdmitted: 5000 },
    ...{ firstSecondExact: 6000, reachesLimit: true, fromLeasePct: 60, overWindow: null, overRateBound: 0 },
    ...{ underAfterEventPct: null, latencyP50Ms: 0, latencyP99Ms: 240, keyKbPerCall: 1, runSeconds: 10 },
    ...over,
  };
}

/** The concurrency row: all on gives every late slot back; `over` says what changed. */
function slotRow(over: Partial<SlotRow> = {}): SlotRow {
  return {
    ...{ label: SLOT_LABEL, requests: 4900, admitted: 2900, exactAdmitted: 3850, admittedVsExactPct: -24.68 },
    ...{ lastKnown: 220, lateSlots: 130, lateKept: 0, heldAtEnd: 2, heldLost: 2, maxInFlight: 87, overLimit: 0 },
    ...{ failedOpen: 0, objectCalls: 7600 },
    ...over,
  };
}

const KEPT = { admitted: 1600, admittedVsExactPct: -58.44, lateSlots: 80, lateKept: 80, heldAtEnd: 85, heldLost: 5 };
const seeds = [0, 1000, 2000];
const same = seeds.map(() => ({ on: [clusterRow()], off: [clusterRow({ admittedVsExactPct: -12.2 })] }));

describe("the goals a table's rows can show (bench/cluster_rows.ts `clusterGoals`)", () => {
  it("a goal no row applies to is absent (reported not run), never a vacuous met", () => {
    const goals = clusterGoals([clusterRow()]);
    // Only a 10 req/s row is compared with one call per request; only an event's row measures the 2 s after it.
    expect(goals.low).toBeUndefined();
    expect(goals.underAfterEvent).toBeUndefined();
    expect(goals.rateBound).toEqual({ met: true, misses: "" });
    const lowDecisions = lowDecisionsOf("11001f1", "1110111");
    expect(lowDecisions).toEqual({ differ: 2, of: 7, refusedTier: 2, refusedPlain: 1 });
    const low = clusterGoals([clusterRow({ loadPerS: 10, lowDecisions })]).low;
    expect(low).toEqual({
      met: false,
      misses: "hot-rate/1000/10/s: 2 of 7 differ (refused: the tier 2, one call per request 1)",
    });
    const same = lowDecisionsOf("1101", "1101");
    expect(clusterGoals([clusterRow({ loadPerS: 10, lowDecisions: same })]).low).toEqual({ met: true, misses: "" });
  });

  it("a rate row at its limit counts in the accuracy goal though the exact writer refused nothing (3% there)", () => {
    const atLimit = (admittedVsExactPct: number) =>
      clusterRow({ loadPerS: 5000, reachesLimit: false, admittedVsExactPct });
    expect(clusterGoals([atLimit(-12.66)]).rateAccuracy).toEqual({
      met: false,
      misses: "hot-rate/1000/5000/s: -12.66%",
    });
    expect(clusterGoals([atLimit(-2.9)]).rateAccuracy).toEqual({ met: true, misses: "" });
    // Below the limit no accuracy goal applies (only the 10 req/s rows' decisions, compared one by one).
    expect(clusterGoals([clusterRow({ loadPerS: 1000, reachesLimit: false })]).rateAccuracy).toBeUndefined();
  });
});

describe("the ablation's verdict (bench/ablation_report.ts)", () => {
  it("rate rows that move by under half a point and no concurrency row: nothing depends on the mechanism", () => {
    expect(verdictOf(same)).toBe("no goal, bound or 0.5 points depends on it here");
  });

  it("late slots kept without the mechanism on every seed: a missed goal made met, and the points it is worth", () => {
    const slots = seeds.map(() => ({ on: slotRow(), off: slotRow(KEPT) }));
    expect(verdictOf(same, slots)).toBe(
      "turns missed into met: lateSlotsBack; 33.76 points closer to exact with it on the concurrency row",
    );
  });

  it("a late slot kept with every mechanism on too: the goal is not the mechanism's to claim", () => {
    const slots = seeds.map((_, i) => ({ on: slotRow(i === 1 ? { lateKept: 1 } : {}), off: slotRow(KEPT) }));
    expect(verdictOf(same, slots)).not.toContain("turns missed into met");
  });

  it("more requests at the origin than the limit without it: a bound it guards", () => {
    const slots = seeds.map(() => ({ on: slotRow(), off: slotRow({ overLimit: 3 }) }));
    expect(verdictOf(same, slots)).toBe("guards a bound (concurrencyLimit broken without it)");
  });

  it("more than 10 calls/s at the key's object after the 1st s without it: it stays; 10 or fewer, or fewer calls: not", () => {
    const calls = (extra: number) =>
      seeds.map(() => ({
        on: [clusterRow({ keyBusiestAfterFirst: 160 })],
        off: [clusterRow({ keyBusiestAfterFirst: 160 + extra })],
      }));
    expect(verdictOf(calls(102))).toBe("key's object 102 more calls/s after the 1st s without it");
    expect(keeps(verdictOf(calls(102)))).toBe(true);
    expect(keeps(verdictOf(calls(10)))).toBe(false);
    expect(keeps(verdictOf(calls(-40)))).toBe(false);
    expect(keeps(verdictOf(same))).toBe(false);
  });

  it("at 5,000 isolates, over 200 calls in the first second without it on one seed: a missed goal made met", () => {
    const rows = (first: number) => [clusterRow({ isolates: 5000, keyFirstSecond: first })];
    const runs = seeds.map((_, i) => ({ on: rows(180), off: rows(i === 2 ? 240 : 190) }));
    expect(verdictOf(runs)).toBe("turns missed into met: firstSecond");
    expect(keeps(verdictOf(runs))).toBe(true);
    // At 1,000 isolates the goal does not apply.
    const small = seeds.map(() => ({
      on: [clusterRow({ keyFirstSecond: 180 })],
      off: [clusterRow({ keyFirstSecond: 400 })],
    }));
    expect(verdictOf(small)).toBe("no goal, bound or 0.5 points depends on it here");
  });

  it("the section: the concurrency row's table and goals, and late refunds kept by the rule", () => {
    const rows = [clusterRow()];
    const goals = {};
    const data: AblationData = {
      wallSeconds: 200,
      variants: seeds.flatMap((seed) => [
        { off: null, seed, rows, goals },
        { off: "lateRefunds", seed, rows, goals },
      ]),
      slots: seeds.flatMap((seed) => [
        { off: null, seed, row: slotRow() },
        { off: "lateRefunds", seed, row: slotRow(KEPT) },
      ]),
    };
    const text = ablationSection(data).join("\n");
    expect(text).toContain(`| lateRefunds | ${SLOT_LABEL} | 4900 | 1600 | 3850 | -58.44% | 220 | 80 | 80 | 85 (5) |`);
    expect(text).toContain("given back (none left to `slot_ttl`) (3 seed(s)): **met**");
    expect(text).toMatch(/\| lateRefunds \| turns missed into met: lateSlotsBack; [^|]+ \| stays \|/);
    const before = ablationSection({ ...data, slots: undefined }).join("\n");
    expect(before).not.toContain("The concurrency row");
    expect(before).toMatch(/\| lateRefunds \| no goal, bound or 0.5 points depends on it here \| goes \|/);
  });
});
