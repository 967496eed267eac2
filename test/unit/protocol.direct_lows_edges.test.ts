/**
 * A late refund through a direct call while rate shares are out (share.ts `directCall`, late_refund.ts): the direct
 * slice's view carries the record's lows (the deficit noted before each charge), so a refund gives back no more than
 * the slice lacked from full at every instant since the charge. Stands for the late-refund rule inside the delegate
 * tier: a refund never makes tokens, whichever slice decides the key's direct calls.
 */
import { describe, expect, it } from "vitest";
import { sliceParams } from "../../src/algorithms/index.ts";
import { keyCall } from "../../src/protocol/share.ts";
import type { CallInput, CheckResult, LimiterRecord, LimiterRule, ShareEntry } from "../../src/protocol/store.ts";
import { fullState } from "../../src/protocol/store.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** 1,000/s, burst 1,000: the direct slice's 500 parts refill 0.5 token a ms, burst 500. */
const params = tokenBucket(1000, 1000, 1000);
const rule: LimiterRule = { id: "t", params, version: 1 };
const share: ShareEntry = {
  holder: "x",
  parts: 500,
  units: 0,
  atMs: T0 - 100,
  endsAtMs: T0 + 900,
  prevParts: 0,
  prevEndsAtMs: 0,
  demand: 100,
  askId: "x1",
};
/** Another delegate holds 500 parts until T0 + 900; the direct slice's 500 are full. */
const record = (): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: fullState(params, T0 - 1000),
  version: 1,
  shares: {
    entries: [share],
    hotUntilMs: T0 + 5000,
    direct: { parts: 500, state: fullState(sliceParams(params, 500, 1000)!, T0 - 1000) },
  },
});
const call = (id: string, costs: number[], over: Partial<CallInput> = {}): CallInput => ({ rule, id, costs, ...over });
const remaining = (r: CheckResult) => (r.ok ? r.decision.remaining : null);

describe("a late refund of a direct charge while shares are out", () => {
  it("gives back no more than the direct slice lacked since the charge", () => {
    // 400 charged at T0 (100 left); 700 ms later 450, and 10 more charged (the slice lacked 50 just before).
    const first = keyCall(record(), call("c1", [400]), T0);
    expect(remaining(first.result.results[0]!)).toBe(100);
    const second = keyCall(first.record, call("c2", [10]), T0 + 700);
    expect(remaining(second.result.results[0]!)).toBe(440);
    // The 400 given back at T0 + 710 with one more request: 445 refilled, at most 50 of the 400 back (the slice was
    // never more than 50 short since the charge), 495, less the request: 494. Without the lows, 499: 5 tokens made.
    const third = keyCall(second.record, call("c3", [1], { giveBack: [{ units: 400, atMs: T0 }] }), T0 + 710);
    expect(remaining(third.result.results[0]!)).toBe(494);
  });
});
