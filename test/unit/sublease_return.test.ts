/**
 * A rate sub-lease given back late (sublease.ts `takeBack`): many isolates share a delegate, and an isolate's unused
 * sub-lease rides with its next call, which may come long after the lease's term (an overload backoff, a quiet spell).
 * If the slice refilled in between, those tokens came back anyway: taking them in again after another isolate drained
 * the slice admitted them twice, over the rate bound (`burst + rate × (t + RATE_BOUND_MS)` in any span t).
 * These tables drive the real `delegateCall` with several callers on one delegate holding the whole rule.
 */
import { describe, expect, it } from "vitest";
import type { AlgorithmParams } from "../../src/algorithms/index.ts";
import { type DelegateRecord, delegateCall, type HeldShare, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { fullState } from "../../src/protocol/share.ts";
import type { CallInput, LeaseReturn, LimiterRule } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { RATE_BOUND_MS, RATE_LEASE_TERM_MS, SHARE_PARTS } from "../../src/protocol/tunables.ts";
import { heldRateShare } from "../support/held_share.ts";
import { gcraP, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

interface Run {
  record: DelegateRecord;
  calls: number;
}

function call(run: Run, input: Omit<CallInput, "id">, nowMs: number) {
  const out = delegateCall(run.record, { ...input, id: `c${run.calls++}` }, nowMs);
  run.record = out.record;
  return out.result;
}

const admitted = (result: ReturnType<typeof call>) => result.results.filter((r) => r.ok && r.decision.allowed).length;

/**
 * `lenders` isolates each take a sub-lease from a full slice, each after the slice refilled; once it is full again
 * isolate B drains it, and right after each lender gives its lease back unused with a batch of as many requests.
 * Returns what was admitted from B's batch on, and over how many ms.
 */
function lateReturns(rule: LimiterRule, lenders: number, share: (s: HeldShare, nowMs: number) => HeldShare = (s) => s) {
  const params = rule.params as AlgorithmParams & { burst: number; rate: { amount: number; periodMs: number } };
  const slice = delegateSlice(params, SHARE_PARTS)!;
  const { burst } = params;
  const refillMs = Math.ceil((burst * params.rate.periodMs) / params.rate.amount) + 1;
  const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, {
    endsAtMs: T0 + 60_000,
    renewAtMs: T0 + 59_000,
  });
  const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
  const leases: LeaseReturn[] = [];
  let nowMs = T0;
  for (let i = 0; i < lenders; i++) {
    const lease = call(run, { rule, costs: [], lease: { units: burst, ttlMs: RATE_LEASE_TERM_MS } }, nowMs).lease;
    if (lease === null) throw new Error("a full slice lends");
    leases.push({ units: lease.units, atMs: lease.atMs });
    nowMs += refillMs;
  }
  // The slice is full again (or a renewed share is held: `share`).
  run.record = { ...run.record, share: share(run.record.share!, nowMs) };
  const fromMs = nowMs;
  let total = admitted(call(run, { rule, costs: Array<number>(burst).fill(1) }, nowMs));
  const drained = total;
  for (const back of leases) {
    nowMs += 1;
    total += admitted(call(run, { rule, costs: Array<number>(back.units).fill(1), giveBack: [back] }, nowMs));
  }
  const spanMs = nowMs - fromMs;
  const bound = burst + (params.rate.amount * (spanMs + RATE_BOUND_MS)) / params.rate.periodMs;
  return { drained, total, spanMs, bound, lent: leases.reduce((a, b) => a + b.units, 0) };
}

describe("a rate sub-lease given back after its slice was full again", () => {
  it("token_bucket 10/s burst 20 (free-global): the return is not taken, within the rate bound", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const out = lateReturns(rule, 1);
    expect(out.lent).toBe(10);
    expect(out.drained).toBe(20);
    // Before the fix: 30 admitted in 1 ms against a bound of 25.01.
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(20);
  });

  it("gcra 200/s burst 200 (search-origin), two lenders: within the rate bound", () => {
    const rule: LimiterRule = { id: "search-origin", params: gcraP(200, 1000, 200), version: 1 };
    const out = lateReturns(rule, 2);
    expect(out.lent).toBe(200);
    expect(out.drained).toBe(200);
    // Before the fix: 400 admitted in 2 ms against a bound of 300.4.
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(200);
  });

  it("into a renewed share (another grant, full): not taken either", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const slice = delegateSlice(rule.params, SHARE_PARTS)!;
    const renewed = (s: HeldShare, nowMs: number): HeldShare => {
      const { lows: _lows, ...rest } = s;
      return heldRateShare(rule, SHARE_PARTS, fullState(slice, nowMs), nowMs, { ...rest, atMs: nowMs });
    };
    const out = lateReturns(rule, 1, renewed);
    expect(out.total).toBeLessThanOrEqual(out.bound);
    expect(out.total).toBe(20);
  });

  it("a return the slice still lacked is taken (exact: as if never lent), and no more than it lacked since", () => {
    const rule: LimiterRule = { id: "free-global", params: tokenBucket(10, 1000, 20), version: 1 };
    const slice = delegateSlice(rule.params, SHARE_PARTS)!;
    const held = heldRateShare(rule, SHARE_PARTS, fullState(slice, T0), T0, { endsAtMs: T0 + 60_000 });
    const run: Run = { record: { ...NEW_DELEGATE, share: held }, calls: 0 };
    const lease = call(run, { rule, costs: [], lease: { units: 20, ttlMs: RATE_LEASE_TERM_MS } }, T0).lease!;
    expect(lease.units).toBe(10);
    // B drains the other 10 at once; A gives its 10 back 5 ms later: all 10 (plus no refill yet) admit again.
    expect(admitted(call(run, { rule, costs: Array<number>(10).fill(1) }, T0))).toBe(10);
    const back = { units: lease.units, atMs: lease.atMs };
    expect(admitted(call(run, { rule, costs: Array<number>(11).fill(1), giveBack: [back] }, T0 + 5))).toBe(10);
    // Lent again at +1,005 ms from 10 tokens (5); at +2,405 ms the slice holds 19 of 20 (it lacked 1 at least since),
    // B takes 19, and A gives its 5 back 1 ms later: 1 comes back (never lent, the slice would have been full: 1 left).
    const second = call(run, { rule, costs: [], lease: { units: 20, ttlMs: RATE_LEASE_TERM_MS } }, T0 + 1005).lease!;
    expect(second.units).toBe(5);
    expect(admitted(call(run, { rule, costs: Array<number>(20).fill(1) }, T0 + 2405))).toBe(19);
    const late = { units: second.units, atMs: second.atMs };
    expect(admitted(call(run, { rule, costs: Array<number>(5).fill(1), giveBack: [late] }, T0 + 2406))).toBe(1);
  });
});
