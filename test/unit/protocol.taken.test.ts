/**
 * A batch's units given back are taken once per call id (sublease.ts `takeBack`): `taken` holds the ids of calls whose
 * units were taken and that are not decided yet (say, waiting for a renewal). Deciding another call
 * (delegate.ts `delegateCall`) must keep them, or a retry of a waiting call would give its units back twice.
 */
import { describe, expect, it } from "vitest";
import { type DelegateRecord, delegateCall, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import type { CallInput, LimiterRule } from "../../src/protocol/store.ts";
import { takeBack } from "../../src/protocol/sublease.ts";
import { fixedWindow } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const rule: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 1 };
const call = (id: string, units: number): CallInput => ({
  rule,
  id,
  costs: [1],
  giveBack: units > 0 ? [{ units, atMs: T0 - 10 }] : [],
});

describe("taken: units given back, once per call id", () => {
  it("deciding another call keeps the ids of calls taken and not decided yet; their retries take nothing again", () => {
    // Call a's 2 units taken (no share: kept for the key's object), a still waiting; then b is decided.
    const took: DelegateRecord = takeBack({ ...NEW_DELEGATE }, call("a", 2), T0);
    expect(took.giveBack).toEqual([{ units: 2, atMs: T0 - 10 }]);
    expect(took.taken).toEqual(["a"]);
    const after = delegateCall(took, call("b", 3), T0 + 1).record;
    expect(after.taken).toEqual(["a"]);
    expect(after.giveBack).toEqual([
      { units: 2, atMs: T0 - 10 },
      { units: 3, atMs: T0 - 10 },
    ]);
    // a's retry: its units are not taken twice; once decided, a is remembered as a call and leaves `taken`.
    expect(takeBack(after, call("a", 2), T0 + 2).giveBack).toEqual(after.giveBack);
    const decided = delegateCall(after, call("a", 2), T0 + 3).record;
    expect(decided.giveBack).toEqual(after.giveBack);
    expect(decided.taken).toBeUndefined();
  });
});
