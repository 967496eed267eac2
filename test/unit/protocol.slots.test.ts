/**
 * Giving slots back on a key's record (src/protocol/slots.ts) and the slot a check takes (record.ts `checkRecord`):
 * exact tables with an explicit clock, each value written out.
 */
import { describe, expect, it } from "vitest";
import { holdsSlots, RELEASE_RETRY_MS, releaseRecord, renewRecord } from "../../src/protocol/slots.ts";
import { callRecord, checkRecord, type LimiterRecord, type LimiterRule } from "../../src/protocol/store.ts";
import { concurrencyP, fixedWindow } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const rule: LimiterRule = { id: "exports", params: concurrencyP(3, 60_000) };

/** Three slots taken at `T0`, `T0 + 1` and `T0 + 2`: the record and the slots' ids. */
function threeTaken(): { record: LimiterRecord; ids: number[] } {
  let record: LimiterRecord | null = null;
  const ids: number[] = [];
  for (let i = 0; i < 3; i++) {
    const out = checkRecord(record, { rule, cost: 1 }, T0 + i);
    if (!out.result.ok || out.result.slot === undefined) throw new Error("no slot taken");
    ids.push(out.result.slot);
    record = out.record;
  }
  return { record: record!, ids };
}

describe("slots on a key's record", () => {
  it("a concurrency check takes a slot, a new id each time; other algorithms hold none", () => {
    const { ids } = threeTaken();
    expect(new Set(ids).size).toBe(3);
    expect(ids[1]).toBeGreaterThan(ids[0]!);
    expect(holdsSlots(rule.params)).toBe(true);
    expect(holdsSlots(fixedWindow(3, 1000))).toBe(false);
  });

  it("a release gives back the held slots it names, once; unknown and non-integer ids change nothing", () => {
    const { record, ids } = threeTaken();
    const once = releaseRecord(record, { rule, slots: [ids[1]!, 12345, 1.5] }, T0 + 10);
    expect(once.result).toEqual({ released: 1, held: 2, atMs: T0 + 10 });
    const twice = releaseRecord(once.record, { rule, slots: [ids[1]!] }, T0 + 11);
    expect(twice.result).toEqual({ released: 0, held: 2, atMs: T0 + 11 });
    expect(twice.record).toBe(once.record);
    const all = releaseRecord(once.record, { rule, slots: [ids[0]!, ids[2]!] }, T0 + 12);
    expect(all.result).toEqual({ released: 2, held: 0, atMs: T0 + 12 });
  });

  it("a call sent again (its id) is answered with the slots the first took, so its admissions can still be released", () => {
    // The same call twice: a retry, or a call unanswered past its budget sent again (delegate_call.ts `awaitLate`).
    const call = { rule, id: "c1", costs: [1, 1, 1, 1] };
    const first = callRecord(null, call, T0);
    const again = callRecord(first.record, call, T0 + 300);
    const slotsOf = (r: typeof first) => r.result.results.map((x) => (x.ok ? (x.slot ?? null) : "e"));
    expect(slotsOf(first)).toEqual([T0 * 1000, T0 * 1000 + 1, T0 * 1000 + 2, null]);
    expect(again.result.replayed).toBe(true);
    expect(slotsOf(again)).toEqual(slotsOf(first));
    expect(again.result.results[3]).not.toHaveProperty("slot");
    expect(again.record).toBe(first.record);
    // Without slots (another algorithm), the call remembers none.
    const window: LimiterRule = { id: "w", params: fixedWindow(3, 1000) };
    expect(callRecord(null, { rule: window, id: "w1", costs: [1] }, T0).record?.calls?.[0]).not.toHaveProperty("slots");
  });

  it("no record, or a record of an algorithm without slots: nothing released, the same record", () => {
    expect(releaseRecord(null, { rule, slots: [1] }, T0)).toEqual({
      result: { released: 0, held: 0, atMs: T0 },
      record: null,
    });
    const window: LimiterRule = { id: "w", params: fixedWindow(3, 1000) };
    const record = checkRecord(null, { rule: window, cost: 1 }, T0).record!;
    const out = renewRecord(record, { rule: window, slots: [1] }, T0 + 5);
    expect(out.result).toEqual({ released: 0, held: 0, atMs: T0 + 5 });
    expect(out.record).toBe(record);
  });

  it("a renewal starts a slot's lease again; a slot whose lease ended is not revived", () => {
    const { record, ids } = threeTaken();
    const renewed = renewRecord(record, { rule, slots: [ids[1]!] }, T0 + 59_000);
    expect(renewed.result).toEqual({ released: 1, held: 3, atMs: T0 + 59_000 });
    // At T0 + 60,001 the first slot's lease (taken at T0, 60 s) has ended; the renewed one runs to T0 + 119,000.
    const late = renewRecord(renewed.record, { rule, slots: [ids[0]!] }, T0 + 60_001);
    expect(late.result).toEqual({ released: 0, held: 2, atMs: T0 + 60_001 });
    const later = releaseRecord(renewed.record, { rule, slots: [] }, T0 + 62_003);
    expect(later.result).toEqual({ released: 0, held: 1, atMs: T0 + 62_003 });
  });

  it("a failed release is retried after 250 ms, 1 s and 4 s", () => {
    expect(RELEASE_RETRY_MS).toEqual([250, 1_000, 4_000]);
  });
});
