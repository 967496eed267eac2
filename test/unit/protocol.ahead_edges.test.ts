/**
 * Window shares granted ahead, at their edges (src/protocol/window_ahead.ts, delegate_record.ts): exact tables for each
 * bound and guard, both sides of it (one unit; the very ms a share ends; a max term the window's end does not cut; a
 * window already spent when the units ahead are charged; returns that are not whole units; a rate record), and the
 * delegate's alarm release (`releaseDue`). protocol.window_ahead.test.ts has the runs through the object and delegate.
 */
import { describe, expect, it } from "vitest";
import {
  adoptGrant,
  type DelegateRecord,
  type HeldShare,
  NEW_DELEGATE,
  shareAsk,
} from "../../src/protocol/delegate.ts";
import { aheadHeld, aheadWaitMs, releaseDue, rollAhead, windowPace } from "../../src/protocol/delegate_record.ts";
import type { ShareAsk, ShareGrant } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import type { LimiterRecord, LimiterRule, ShareBook } from "../../src/protocol/store.ts";
import { aheadGrant, applyAhead, takeAheadBack } from "../../src/protocol/window_ahead.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

/** Windows of a minute; W the index of the one starting at T0, END its end. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const W = T0 / 60_000;
const END = T0 + 60_000;
const win: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 1 };
const book = (ahead?: ShareBook["ahead"]): ShareBook => ({ entries: [], hotUntilMs: 0, ...(ahead ? { ahead } : {}) });
const record = (count: number, window = W, shares?: ShareBook): LimiterRecord => ({
  v: 1,
  params: win.params,
  fingerprint: JSON.stringify(win.params),
  state: { window, count } as never,
  version: 1,
  ...(shares ? { shares } : {}),
});
const ask = (units: number): ShareAsk => ({ rule: win, holder: "weur.0", id: "a", demand: 60, units, giveBack: [] });

describe("aheadGrant: the key's object's bounds", () => {
  it("grants one unit ahead when one is asked, or one is left of the next window's limit; none when none is", () => {
    expect(aheadGrant(book(), win, 1, 200, 1000, END - 200)?.ahead).toEqual({ units: 1, atMs: END, termMs: 1000 });
    const one = aheadGrant(book({ window: W + 1, units: 99 }), win, 30, 200, 1000, END - 200);
    expect(one?.ahead.units).toBe(1);
    expect(one?.book.ahead).toEqual({ window: W + 1, units: 100 });
    // The next window's limit granted ahead already: nothing, not a grant of 0 units.
    expect(aheadGrant(book({ window: W + 1, units: 100 }), win, 30, 200, 1000, END - 200)).toBeNull();
    expect(aheadGrant(book(), win, 0, 200, 1000, END - 200)).toBeNull();
  });

  it("grants none with a share the window's end does not cut: its term the whole max term, however short", () => {
    // A max term of 300 ms, 300 ms before the end: the share lasts its term, the window's end cuts nothing.
    expect(aheadGrant(book(), win, 30, 300, 300, END - 300)).toBeNull();
    expect(aheadGrant(book(), win, 30, 299, 300, END - 299)?.ahead.units).toBe(30);
  });
});

describe("shareRecord: no units ahead, no field", () => {
  it("a window share granted without units ahead has no `ahead` (nor `tokens`) in its entry, nor in a retry's grant", () => {
    // Stored records keep a field written as undefined (structured clone): absent is what a reader expects.
    const out = shareRecord(record(0), ask(30), T0 + 100);
    expect(out.grant.ahead).toBeUndefined();
    const entry = out.record?.shares?.entries[0];
    expect(entry !== undefined && ["ahead", "tokens"].filter((k) => k in entry)).toEqual([]);
    const retried = shareRecord(out.record, ask(30), T0 + 110).grant;
    expect(retried.units).toBe(30);
    expect("ahead" in retried).toBe(false);
    // With units ahead, both have them.
    const near = shareRecord(record(0), ask(30), END - 200);
    expect(near.record?.shares?.entries[0]?.ahead).toEqual({ units: 30, atMs: END, termMs: 1000 });
    expect(shareRecord(near.record, ask(30), END - 190).grant.ahead).toEqual({ units: 30, atMs: END, termMs: 1000 });
  });
});

describe("applyAhead: charging the units ahead when their window starts", () => {
  it("a record without shares, or without units ahead, is the very same", () => {
    const bare = record(5);
    expect(applyAhead(bare, END)).toBe(bare);
    const none = record(5, W, book());
    expect(applyAhead(none, END)).toBe(none);
  });

  it("charges one unit ahead", () => {
    const out = applyAhead(record(5, W, book({ window: W + 1, units: 1 })), END);
    expect(out.state).toEqual({ window: W + 1, count: 1 });
    expect(out.shares?.ahead).toBeUndefined();
  });

  it("fills what is left of a window charged already (never over its limit), instead of charging nothing", () => {
    // The state already in the next window with 90 of 100 (a hand-made record: nothing else charges it first).
    const out = applyAhead(record(90, W + 1, book({ window: W + 1, units: 30 })), END + 10);
    expect(out.state).toEqual({ window: W + 1, count: 100 });
    expect(out.shares?.ahead).toBeUndefined();
  });

  it("a book whose units ahead are not whole (a damaged record) charges nothing and drops them", () => {
    const out = applyAhead(record(5, W + 1, book({ window: W + 1, units: 1.5 })), END);
    expect(out.state).toEqual({ window: W + 1, count: 5 });
    expect(out.shares?.ahead).toBeUndefined();
  });
});

describe("takeAheadBack: returns of units ahead", () => {
  const withAhead = () => record(0, W, book({ window: W + 1, units: 30 }));

  it("a return that is not whole units goes on to the record's own refund, the book untouched", () => {
    for (const units of [0, -5, 1.5, Number.NaN]) {
      const rec = withAhead();
      const out = takeAheadBack(rec, [{ units, atMs: END }]);
      expect([units, out.record, out.rest]).toEqual([units, rec, [{ units, atMs: END }]]);
    }
    const one = takeAheadBack(withAhead(), [{ units: 1, atMs: END }]);
    expect(one.record?.shares?.ahead).toEqual({ window: W + 1, units: 29 });
    expect(one.rest).toEqual([]);
  });

  it("a record under a rate rule (its algorithm changed) passes every return on", () => {
    const tb = tokenBucket(100, 1000, 100);
    const rec: LimiterRecord = { ...withAhead(), params: tb, fingerprint: JSON.stringify(tb) };
    const back = [{ units: 5, atMs: END }];
    expect(takeAheadBack(rec, back)).toEqual({ record: rec, rest: back });
    expect(takeAheadBack(null, back)).toEqual({ record: null, rest: back });
  });
});

describe("units ahead: the delegate's edges", () => {
  const sent = END - 300;
  /** A window share asked at `sent`, granted 250 ms before the end with 30 units ahead, answered `rttMs` later. */
  const held = (rttMs: number): DelegateRecord => {
    const grant = shareRecord(record(0), ask(30), END - 250).grant;
    const asked = shareAsk({ ...NEW_DELEGATE }, "weur.0", win, "weur.0-a", sent);
    return adoptGrant(asked.record, asked.ask, grant, sent, sent + rttMs);
  };

  it("aheadHeld: one unit ahead is held", () => {
    const grant = shareRecord(record(0), ask(1), END - 250).grant;
    expect(grant.ahead?.units).toBe(1);
    expect(aheadHeld(grant, sent, sent + 10).ahead?.units).toBe(1);
    const none: ShareGrant = { ...grant, ahead: { units: 0, atMs: END, termMs: 1000 } };
    expect(aheadHeld(none, sent, sent + 10)).toEqual({});
  });

  it("aheadWaitMs and rollAhead at the very ms the share ends: it has ended", () => {
    const rec = held(100); // ends at sent + 250, units ahead from sent + 350
    expect(aheadWaitMs(rec, sent + 250)).toBe(100);
    expect(aheadWaitMs(rec, sent + 249)).toBe(0);
    // An answer with no round trip: the units ahead may be used from the share's very end.
    const now = held(0);
    expect(now.share?.ahead?.fromMs).toBe(now.share?.endsAtMs);
    expect(rollAhead(now, sent + 250).share).toMatchObject({ atMs: END, units: 30, unitsLeft: 30 });
    expect(rollAhead(now, sent + 249)).toBe(now);
  });

  it("rollAhead waits for the share's end, even when the units ahead may be used before it (a clock stepped back)", () => {
    // The answer came 40 ms before the ask was sent by this clock: the units may be used from sent + 210, the share
    // ends at sent + 250. Until then the share holds; after, the units ahead are the share.
    const rec = held(-40);
    expect(rec.share?.ahead?.fromMs).toBe(sent + 210);
    expect(rollAhead(rec, sent + 230)).toBe(rec);
    expect(rollAhead(rec, sent + 250).share?.atMs).toBe(END);
  });

  it("releaseDue: a window share ended with units left, or units kept for an ask and no live share; none ahead", () => {
    const rec = held(100);
    const share = (over: Partial<HeldShare>): DelegateRecord => ({
      ...rec,
      share: { ...rec.share!, ahead: undefined, ...over },
    });
    const ends = rec.share!.endsAtMs;
    // [record, now] -> due
    const table: [string, DelegateRecord, number, boolean][] = [
      ["ended, units left", share({ unitsLeft: 5 }), ends, true],
      ["later, one unit left", share({ unitsLeft: 1 }), ends + 1000, true],
      ["a ms before its end", share({ unitsLeft: 5 }), ends - 1, false],
      ["no unit left", share({ unitsLeft: 0 }), ends, false],
      ["units ahead", { ...rec, share: { ...rec.share!, unitsLeft: 5 } }, ends, false],
      ["a rate share", share({ kind: "rate", unitsLeft: 5 }), ends, false],
      ["no share", { ...rec, share: null }, ends, false],
      // Units kept for an ask that no batch made (a quiet key's): given back once no share is live to renew.
      ["no share, units to give back", { ...rec, share: null, giveBack: [{ units: 2, atMs: 0 }] }, ends, true],
      [
        "a rate share ended, units to give back",
        { ...share({ kind: "rate" }), giveBack: [{ units: 2, atMs: 0 }] },
        ends,
        true,
      ],
      [
        "a live share, units to give back",
        { ...share({ unitsLeft: 0 }), giveBack: [{ units: 2, atMs: 0 }] },
        ends - 1,
        false,
      ],
      ["units ahead, units to give back", { ...rec, giveBack: [{ units: 2, atMs: 0 }] }, ends, false],
    ];
    for (const [name, r, now, due] of table) expect([name, releaseDue(r, now)]).toEqual([name, due]);
  });
});

describe("windowPace at its edges", () => {
  it("counts units admitted, not those lent out; a pace only when it at least doubles the demand asked", () => {
    // A term of 1 s from T0 (renewed 250 ms before its end); at T0 + 300: 40 granted, 10 left.
    const share = { kind: "window" as const, endsAtMs: T0 + 1000, renewAtMs: T0 + 750, units: 40, unitsLeft: 10 };
    // [lent, demand asked] -> pace per term
    const table: [number, number | undefined, number][] = [
      [0, undefined, 100], // 30 used in 300 ms
      [10, undefined, 66], // 20 admitted, 10 out in sub-leases
      [30, undefined, 0], // all out in sub-leases: none admitted
      [0, 50, 100], // exactly twice the demand asked
      [0, 51, 0], // less than twice
      [0, 100, 0],
    ];
    for (const [lent, demand, pace] of table) {
      const s = { ...share, lent, ...(demand === undefined ? {} : { demand }) };
      expect([lent, demand, windowPace(s, T0 + 300)]).toEqual([lent, demand, pace]);
    }
  });
});
