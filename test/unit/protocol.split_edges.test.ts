/**
 * Exact edges of a scarce window's split (share_grant.ts `windowGrant`, `heldByOthers`): what the other holders still
 * hold is counted with what is left, and only units of this window that a live share holds. Stands for the cluster
 * finding that a nearly spent window split over what is left alone is renewed for in rounds of every delegate
 * (protocol.share_grant.test.ts has the split itself; these are the edges its cases do not reach).
 */
import { describe, expect, it } from "vitest";
import type { ShareAsk } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import type { LimiterRecord, LimiterRule, ShareEntry } from "../../src/protocol/store.ts";
import { fixedWindow } from "../support/params.ts";

/** A minute's start. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const params = fixedWindow(100, 60_000);
const win: LimiterRule = { id: "w", params, version: 1 };
const entry = (over: Partial<ShareEntry>): ShareEntry => ({
  holder: "other",
  parts: 0,
  units: 0,
  atMs: T0 + 900,
  endsAtMs: T0 + 1900,
  prevParts: 0,
  prevEndsAtMs: 0,
  demand: 0,
  askId: "o1",
  ...over,
});
/** 80 units of the window left; `idle` (demand 150, no units) makes it scarce for an ask of demand 50 (of 200). */
const record = (...entries: ShareEntry[]): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: { window: T0 / 60_000, count: 20 } as never,
  version: 1,
  shares: { entries: [entry({ holder: "idle", demand: 150, askId: "i1" }), ...entries], hotUntilMs: 0 },
});
const ask: ShareAsk = { rule: win, holder: "weur.0", id: "a1", demand: 50, units: 60, giveBack: [] };
const units = (rec: LimiterRecord) => shareRecord(rec, ask, T0 + 1000).grant.units;

describe("a scarce window's split counts what live holders still hold of it", () => {
  it("nothing held: 50 of 200 demand over the 80 left, 20", () => {
    expect(units(record())).toBe(20);
  });

  it("a holder still holding one unit (no demand to use it): 81, 21", () => {
    expect(units(record(entry({ holder: "one", units: 1, askId: "n1" })))).toBe(21);
  });

  it("a share that ended in this very ms, kept in the book by its older grant's longer promise: not counted, 20", () => {
    const ended = entry({ holder: "ended", units: 40, atMs: T0, endsAtMs: T0 + 1000, prevEndsAtMs: T0 + 1500 });
    expect(units(record(ended))).toBe(20);
    // 1 ms before its end it still holds its 40: 120, 30.
    expect(shareRecord(record(ended), ask, T0 + 999).grant.units).toBe(30);
  });

  it("a live share granted in the window before (its term crossing the minute): its units are not this window's, 20", () => {
    expect(units(record(entry({ holder: "past", units: 40, atMs: T0 - 100, askId: "p1" })))).toBe(20);
  });
});
