/**
 * A copy of a call sent again (delegate_call.ts `awaitLate`, delegate_run.ts `timed`) is applied only where its first
 * copy is known not to have been: the key's object and a delegate remember the calls they applied (their ids), and
 * a copy they might have forgotten the first of is answered `unsure`, nothing applied, so a call is never charged
 * twice (a concurrency slot never taken twice); a share ask's copy is its entry's grant again if that entry answered
 * it, else applied. Exact tables.
 */
import { describe, expect, it } from "vitest";
import { type DelegateRecord, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { DelegateRun } from "../../src/protocol/delegate_run.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import {
  CALL_MEMORY_MAX,
  type CallInput,
  callRecord,
  type LimiterRecord,
  type LimiterRule,
  peekRecord,
  remembersSince,
} from "../../src/protocol/store.ts";
import { DELEGATE_CALL_MEMORY, LAPSE_GRACE_MS } from "../../src/protocol/tunables.ts";
import { shareAskOf } from "../support/held_share.ts";
import { concurrencyP, fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const window: LimiterRule = { id: "w", params: fixedWindow(1000, 60_000) };

/** A record that applied `n` calls, one per ms from `T0` (ids `p0`...). */
function busy(n: number, rule: LimiterRule = window): LimiterRecord | null {
  let record: LimiterRecord | null = null;
  for (let i = 0; i < n; i++) record = callRecord(record, { rule, id: `p${i}`, costs: [1] }, T0 + i).record;
  return record;
}

describe("remembersSince: whether the calls remembered hold all applied since a copy's first could have come", () => {
  const calls = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      id: `c${i}`,
      atMs: T0 + i * 10,
      verdicts: "1",
      leaseUnits: 0,
      leaseForMs: 0,
    }));
  it.each([
    // [remembered, the most, ms the first may precede, now, whether they hold all]
    [3, 4, 1_000, T0 + 100, true], // not full: every call of its time
    [4, 4, 60, T0 + 100, true], // full, the oldest (T0) at least 60 ms old
    [4, 4, 101, T0 + 100, false], // full, and the first copy may be older than the oldest remembered
    [4, 4, 100, T0 + 100, true], // the edge: the oldest exactly that old
    [4, 4, undefined, T0 + 100, true], // a first copy: nothing to know
    [4, 4, Number.NaN, T0 + 100, false], // no number: never sure
  ] as const)("%i of %i, %s ms at %s: %s", (n, max, resent, now, holds) => {
    expect(remembersSince(calls(n), max, { rule: window, id: "new", costs: [1], resent }, now)).toBe(holds);
  });
  it("a copy of a call remembered: nothing to know", () => {
    expect(remembersSince(calls(4), 4, { rule: window, id: "c2", costs: [1], resent: 101 }, T0 + 100)).toBe(true);
  });
});

describe("the key's object and a copy of a call", () => {
  it("a copy it might have forgotten the first of: `unsure`, nothing applied; else applied once, or replayed", () => {
    const full = busy(CALL_MEMORY_MAX)!;
    const now = T0 + CALL_MEMORY_MAX; // the oldest remembered applied 128 ms ago
    const copy = (id: string, resent: number): CallInput => ({ rule: window, id, costs: [1], resent });
    const unsure = callRecord(full, copy("x", 129), now);
    expect(unsure.result).toEqual({ atMs: now, results: [], lease: null, replayed: false, unsure: true });
    expect(unsure.record).toBe(full);
    // Within what it remembers: the first copy never came, so the copy is the call.
    const applied = callRecord(full, copy("x", 128), now);
    expect(applied.result.unsure).toBeUndefined();
    expect(peekRecord(applied.record, window, now).remaining).toBe(1000 - CALL_MEMORY_MAX - 1);
    // The first copy applied: the copy is answered as it was, however long ago it may have come.
    const again = callRecord(applied.record, copy("x", 10_000), now + 1);
    expect(again.result.replayed).toBe(true);
    expect(again.record).toBe(applied.record);
    // A quiet key remembers every call of the last minute: a copy is applied.
    expect(callRecord(busy(3), copy("y", 500), T0 + 10).result.unsure).toBeUndefined();
  });

  it("a concurrency take's copy, its first forgotten: `unsure`, so no second slot is taken", () => {
    const exports: LimiterRule = { id: "e", params: concurrencyP(1000, 60_000) };
    const full = busy(CALL_MEMORY_MAX, exports)!;
    const out = callRecord(full, { rule: exports, id: "x", costs: [1], resent: 500 }, T0 + CALL_MEMORY_MAX);
    expect(out.result.unsure).toBe(true);
    expect(out.record).toBe(full);
  });
});

describe("the key's object and a copy of a share ask", () => {
  const rate: LimiterRule = { id: "r", params: tokenBucket(5000, 1000, 1000), version: 1 };
  it("the ask its holder's entry answered: that grant again; any other, applied (an earlier ask's entry, or none)", () => {
    const first = shareRecord(busy(150, rate), shareAskOf(rate, "weur.0", "a1", 500), T0 + 200);
    expect(first.grant.kind).toBe("rate");
    const ask = (id: string, holder = "weur.0") => shareAskOf(rate, holder, id, 500, { seq: 2 });
    const holders = (r: ReturnType<typeof shareRecord>) => r.record?.shares?.entries.map((e) => [e.holder, e.askId]);
    // No entry for this holder: its first copy was lost (or granted and ended since: a grant nobody takes), applied.
    const other = shareRecord(first.record, ask("b1", "eeur.0"), T0 + 201);
    expect(other.grant.kind).toBe("rate");
    expect(holders(other)).toEqual([
      ["weur.0", "a1"],
      ["eeur.0", "b1"],
    ]);
    // Its entry is of an earlier ask: the copy's first was never applied, so the copy is the ask.
    const renewed = shareRecord(first.record, ask("a2"), T0 + 300);
    expect(holders(renewed)).toEqual([["weur.0", "a2"]]);
    // The same ask again: its grant again, nothing granted twice.
    const again = shareRecord(renewed.record, ask("a2"), T0 + 301);
    expect(again.grant).toEqual(renewed.grant);
    expect(again.record).toEqual(renewed.record);
    // Its entry ended (its term and `LAPSE_GRACE_MS`): the delegate no longer uses that grant; a late copy is granted
    // anew (the delegate took the first answer, so this grant is one nobody takes: short, never over).
    const endedMs = T0 + 200 + first.grant.termMs + LAPSE_GRACE_MS;
    const late = shareRecord(first.record, ask("a1"), endedMs);
    expect([late.grant.atMs, holders(late)]).toEqual([endedMs, [["weur.0", "a1"]]]);
  });
});

describe("a delegate and a copy of a batch", () => {
  /** A delegate whose memory is full: `DELEGATE_CALL_MEMORY` calls, one per ms from `T0` (ids `p0`...); told cold. */
  const full = () => {
    const calls = Array.from({ length: DELEGATE_CALL_MEMORY }, (_, i) => ({
      id: `p${i}`,
      atMs: T0 + i,
      verdicts: "1",
      leaseUnits: 0,
      leaseForMs: 0,
    }));
    let stored: DelegateRecord = { ...NEW_DELEGATE, calls };
    const forwarded: CallInput[] = [];
    const run = new DelegateRun({
      clock: () => T0 + DELEGATE_CALL_MEMORY,
      newId: () => "ask",
      load: () => stored,
      save: (record) => {
        stored = record;
      },
      call: async (_object, input) => {
        forwarded.push(input);
        return { atMs: T0, results: [], lease: null, replayed: false };
      },
      share: async () => ({
        kind: "none",
        parts: 0,
        units: 0,
        remaining: 0,
        termMs: 0,
        atMs: T0,
        rule: window,
        hot: false,
      }),
    });
    return { calls, run, forwarded, stored: () => stored };
  };
  const who = { object: "w:k", holder: "weur.0", rule: window };
  const unsure = { atMs: T0 + DELEGATE_CALL_MEMORY, results: [], lease: null, replayed: false, unsure: true };

  it("remembers its calls: a copy it might have forgotten the first of is `unsure`, never decided twice", async () => {
    const d = full();
    const copy = { rule: window, id: "x", costs: [1], resent: DELEGATE_CALL_MEMORY + 1 };
    expect(await d.run.check(who, copy)).toEqual(unsure);
    expect(d.forwarded).toEqual([]);
    expect(d.stored().calls).toBe(d.calls);
  });

  it("decides a copy it remembers the first of, or whose first it would remember, and any first copy", async () => {
    // [the call's id, `resent`, whether `unsure`]
    const cases = [
      ["p0", DELEGATE_CALL_MEMORY + 1, false], // its first copy remembered: answered (not unsure)
      ["x", DELEGATE_CALL_MEMORY, false], // the oldest remembered that old: its first never came
      ["x", undefined, false], // a first copy
      ["x", DELEGATE_CALL_MEMORY + 1, true],
    ] as const;
    for (const [id, resent, isUnsure] of cases) {
      const d = full();
      const call = { rule: window, id, costs: [1], ...(resent === undefined ? {} : { resent }) };
      const out = await d.run.check(who, call);
      expect([id, resent, out.unsure === true]).toEqual([id, resent, isUnsure]);
    }
  });
});
