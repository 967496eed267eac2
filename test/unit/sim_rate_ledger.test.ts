/**
 * The cluster simulation's token ledger (src/sim/rate_ledger.ts): refill lost at full buckets, parts promised beyond
 * what their holders hold, denials by who refused, per 100 ms and over the run; and over a small simulated run, the
 * sinks account for the budget the run did not admit.
 */
import { describe, expect, it } from "vitest";
import { sliceParams } from "../../src/algorithms/index.ts";
import type { DelegateRecord } from "../../src/protocol/delegate.ts";
import { NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { emptyState } from "../../src/protocol/share.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import { fullState } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { exactAdmissions, simulateCluster } from "../../src/sim/cluster.ts";
import { ledgerLines, ledgerTotals, RateLedgerCount, withExact } from "../../src/sim/rate_ledger.ts";
import { heldRateShare } from "../support/held_share.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);
// 5 tokens a ms, burst 1000.
const params = tokenBucket(5000, 1000, 1000);
const rule = { id: "r", params, version: 1 };

function record(direct: number, promised: number): LimiterRecord {
  const slice = sliceParams(params, direct, 1000)!;
  return {
    v: 1,
    params,
    fingerprint: "f",
    state: fullState(params, T0),
    shares: {
      entries: [
        {
          holder: "wnam.0",
          parts: promised,
          units: 0,
          atMs: T0,
          endsAtMs: T0 + 1000,
          prevParts: 0,
          prevEndsAtMs: 0,
          demand: 1,
          askId: "a",
        },
      ],
      hotUntilMs: T0 + 5000,
      direct: { parts: direct, state: fullState(slice, T0) },
    },
  } as LimiterRecord;
}

function holding(parts: number, full: boolean): DelegateRecord {
  const slice = delegateSlice(params, parts)!;
  const state = full ? fullState(slice, T0) : emptyState(slice, T0);
  return {
    ...NEW_DELEGATE,
    share: heldRateShare(rule, parts, state, T0),
  };
}

describe("RateLedgerCount", () => {
  it("counts a full bucket's refill as overflow, and a fresh key as a full one", () => {
    let now = T0;
    const ledger = new RateLedgerCount(rule, T0, T0 + 10, () => now);
    for (; now < T0 + 10; now++) ledger.sample(now, null, [], 0);
    const out = ledger.finish([]);
    // 10 ms of a full 1000-token bucket refilling 5 a ms: 50 tokens lost; 1000 left; nothing admitted.
    expect(out.sinks.overflowDirect).toBeCloseTo(50);
    expect(out.sinks.left).toBe(1000);
    expect(out.supply).toBe(1050);
    expect(out.rest).toBeCloseTo(0);
  });

  it("splits the rate: direct slice, a holder's slice, and parts promised beyond what the holder holds", () => {
    const now = T0;
    const ledger = new RateLedgerCount(rule, T0, T0 + 100, () => now);
    // The key's object promises wnam.0 400 parts (600 direct, full); the delegate holds 300 of them, empty.
    const rec = record(600, 400);
    const delegates = [{ holder: "wnam.0", state: holding(300, false) }];
    ledger.sample(now, rec, delegates, 0);
    const out = ledger.finish([]);
    // One ms: the direct slice's 3 tokens lost at full, 100 parts unheld = 0.5 token, the holder's slice not full.
    expect(out.total.overflowDirect).toBeCloseTo(3);
    expect(out.total.promisedAboveHeld).toBeCloseTo(0.5);
    expect(out.total.overflowDelegates).toBe(0);
    // With the holder holding none: all 400 promised to nobody (2 tokens a ms).
    const none = new RateLedgerCount(rule, T0, T0 + 100, () => now);
    none.sample(now, rec, [{ holder: "wnam.0", state: NEW_DELEGATE }], 0);
    expect(none.finish([]).total.promisedUnheld).toBeCloseTo(2);
    // A full holder's slice loses its refill too.
    const full = new RateLedgerCount(rule, T0, T0 + 100, () => now);
    full.sample(now, rec, [{ holder: "wnam.0", state: holding(400, true) }], 0);
    expect(full.finish([]).total.overflowDelegates).toBeCloseTo(2);
  });

  it("bins denials, admissions and the exact writer's by 100 ms in the first 2 s, and totals the run", () => {
    const now = T0;
    const ledger = new RateLedgerCount(rule, T0, T0 + 3000, () => now);
    ledger.denied("delegateSlice", T0 + 150);
    ledger.denied("isolateLocal", T0 + 2500);
    ledger.denied("keyNoParts", T0 + 3000); // after the run: not counted
    const out = withExact(ledger.finish([T0 + 5, T0 + 120]), [T0, T0 + 1, T0 + 2999], T0, T0 + 3000);
    expect(out.bins[0]!.admitted).toBe(1);
    expect(out.bins[1]!.admitted).toBe(1);
    expect(out.bins[1]!.denied.delegateSlice).toBe(1);
    expect(out.bins[0]!.exact).toBe(2);
    expect(out.total.exact).toBe(3);
    expect(ledgerTotals(out).denied).toMatchObject({ delegateSlice: 1, isolateLocal: 1, keyNoParts: 0 });
  });

  it("bins a whole run when told to (`LedgerBins`: 500 ms x 6 here): the denial at 2.5 s lands in its bin", () => {
    const now = T0;
    const ledger = new RateLedgerCount(rule, T0, T0 + 3000, () => now, { ms: 500, count: 6 });
    ledger.denied("isolateLocal", T0 + 2500);
    const out = withExact(ledger.finish([T0 + 5, T0 + 499, T0 + 2999]), [T0 + 1000, T0 + 2999], T0, T0 + 3000);
    expect(out.bins.map((b) => b.admitted)).toEqual([2, 0, 0, 0, 0, 1]);
    expect(out.bins.map((b) => b.exact)).toEqual([0, 0, 1, 0, 0, 1]);
    expect(out.bins[5]!.denied.isolateLocal).toBe(1);
    expect(ledgerLines(out)[6]).toMatch(/^ 2500 /);
  });

  it("keeps the first second apart: its budget, admissions, sinks and what was still out at its end", () => {
    let now = T0;
    const ledger = new RateLedgerCount(rule, T0, T0 + 3000, () => now);
    // A full key sampled over the first 10 ms and at 1500 ms: only the first 10 ms' overflow is the first second's.
    for (; now < T0 + 10; now++) ledger.sample(now, null, [], 0);
    now = T0 + 1500;
    ledger.sample(now, null, [], 0);
    now = T0 + 500;
    ledger.lent(30);
    ledger.fromLease(T0 + 600);
    ledger.denied("delegateSlice", T0 + 999);
    ledger.denied("delegateSlice", T0 + 1000);
    const out = withExact(ledger.finish([T0 + 5, T0 + 1200]), [T0, T0 + 1, T0 + 1001], T0, T0 + 3000);
    expect(out.first.admitted).toBe(1);
    expect(out.first.exact).toBe(2);
    expect(out.first.denied.delegateSlice).toBe(1);
    expect(out.first.overflowDirect).toBeCloseTo(50);
    expect(out.total.overflowDirect).toBeCloseTo(55);
    const f = ledgerTotals(out).firstSecond!;
    // The burst and 1 s of the rate; 29 sub-lease tokens still out at its end, 1000 tokens left in the key's bucket.
    expect(f.supply).toBe(6000);
    expect(f.sinks.subleaseLost).toBe(29);
    expect(f.sinks.left).toBe(1000);
    expect(f.rest).toBe(6000 - 1 - 50 - 29 - 1000);
    // The bins show the direct slice's tokens and parts at their end (the whole key before any share).
    expect(out.bins[0]).toMatchObject({ leftDirect: 1000, directParts: 1000, holders: 0, heldParts: 0 });
  });
});

describe("the ledger of a simulated run", () => {
  it("accounts for what the run did not admit within 5% of the budget", async () => {
    const run = {
      rule,
      lowered: rule,
      isolates: 200,
      loadPerS: 5_000,
      durationMs: 1_000,
      scenario: "steady" as const,
      t0Ms: T0,
      tier: true,
      seed: 7,
    };
    const out = await simulateCluster(run);
    const exact = exactAdmissions(run, out.arrivals, out.newestFromMs);
    const l = withExact(out.ledger!, exact, T0, T0 + run.durationMs);
    expect(l.total.exact).toBe(exact.length);
    expect(l.total.admitted).toBeGreaterThan(0);
    // Every refusal has a known decider.
    expect(l.total.denied.unknown).toBe(0);
    expect(l.supply - l.total.admitted).toBeGreaterThan(0.2 * l.supply);
    // Within 5%: a grant's answer in flight leaves its parts' refill to nobody (the flight credit was removed), which
    // no sink samples.
    expect(Math.abs(l.rest)).toBeLessThan(0.05 * l.supply);
  }, 60_000);
});
