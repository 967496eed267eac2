/**
 * Exact edges of a lease asked of a hot rate key (share.ts `keyCall`, `withHotTerm`): cut to `RATE_LEASE_TERM_MS`
 * while the key is hot (shares out or its object busy), never lengthened, and a window rule's or a cold key's lease
 * keeps its own term. Stands for the rate bound's term: a hot rate key's leases are used within `RATE_BOUND_MS`.
 */
import { describe, expect, it } from "vitest";
import { keyCall } from "../../src/protocol/share.ts";
import type { CallInput, LimiterRecord, LimiterRule } from "../../src/protocol/store.ts";
import { fullState } from "../../src/protocol/store.ts";
import { RATE_LEASE_TERM_MS } from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const rate: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 1000), version: 1 };
const win: LimiterRule = { id: "w", params: fixedWindow(1000, 60_000), version: 1 };
/** A key's record, not busy (no calls), hot until `hotUntilMs` (no share out). */
const record = (params: AlgorithmParams, hotUntilMs: number): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: fullState(params, T0 - 1000),
  version: 1,
  shares: { entries: [], hotUntilMs },
});
const call = (rule: LimiterRule, ttlMs: number): CallInput => ({
  rule,
  id: "c1",
  costs: [1],
  lease: { units: 10, ttlMs },
});
const termMs = (rec: LimiterRecord, input: CallInput, nowMs = T0) => keyCall(rec, input, nowMs).result.lease?.forMs;

describe("a lease asked of a hot key", () => {
  it("a rate key hot 1 ms more: a 2 s lease cut to the rate bound's term", () => {
    expect(termMs(record(rate.params, T0 + 1), call(rate, 2000))).toBe(RATE_LEASE_TERM_MS);
  });

  it("a shorter lease is not lengthened to it", () => {
    expect(termMs(record(rate.params, T0 + 1000), call(rate, 100))).toBe(100);
  });

  it("hot until this very ms: cold, its own term", () => {
    expect(termMs(record(rate.params, T0), call(rate, 2000))).toBe(2000);
    // With a share still out (the book kept): the same.
    const out = { ...record(rate.params, T0) };
    const entry = {
      holder: "x",
      parts: 100,
      units: 0,
      atMs: T0 - 100,
      endsAtMs: T0 + 900,
      prevParts: 0,
      prevEndsAtMs: 0,
    };
    out.shares = { entries: [{ ...entry, demand: 100, askId: "x1" }], hotUntilMs: T0 };
    expect(termMs(out, call(rate, 2000))).toBe(2000);
  });

  it("a window rule, hot: its own term (the window binds it)", () => {
    expect(termMs(record(win.params, T0 + 1000), call(win, 2000))).toBe(2000);
  });
});
