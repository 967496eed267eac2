/**
 * Window shares granted ahead (src/protocol/window_ahead.ts, delegate_record.ts): a window share renewed shortly before
 * its window's end gets units of the next window, charged against that window when it starts, never beyond its
 * limit; the delegate takes them as its share from the next window's start (after the ask's round trip), without
 * renewing at the window's turn; given back before that window started, they come off the book.
 */
import { describe, expect, it } from "vitest";
import { adoptGrant, type DelegateRecord, NEW_DELEGATE, renewDue, shareAsk } from "../../src/protocol/delegate.ts";
import { aheadWaitMs, releaseDue, rollAhead, windowPace, windowShort } from "../../src/protocol/delegate_record.ts";
import { DelegateRun } from "../../src/protocol/delegate_run.ts";
import { keyCall, type ShareAsk, settleShares } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import type { CallInput, LimiterRecord, LimiterRule } from "../../src/protocol/store.ts";
import { AHEAD_LEAD_MS } from "../../src/protocol/tunables.ts";
import { applyAhead, takeAheadBack } from "../../src/protocol/window_ahead.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

/** A minute's start: windows of a minute, W the index of the one starting at T0. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const W = T0 / 60_000;
const END = T0 + 60_000;
const win: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 1 };
const ask = (holder: string, units: number, over: Partial<ShareAsk> = {}): ShareAsk => ({
  rule: win,
  holder,
  id: `${holder}-a`,
  demand: 60, // hot: at least HOT_EXIT_PER_S
  units,
  giveBack: [],
  ...over,
});
const charged = (count: number): LimiterRecord => ({
  v: 1,
  params: win.params,
  fingerprint: JSON.stringify(win.params),
  state: { window: W, count } as never,
  version: 1,
});

describe("windowGrant ahead: the key's object", () => {
  it("grants units of the next window with a share its window's end cuts to AHEAD_LEAD_MS or less", () => {
    const at = END - 200;
    const out = shareRecord(charged(10), ask("weur.0", 30), at);
    expect(out.grant).toMatchObject({ units: 30, termMs: 200, ahead: { units: 30, atMs: END, termMs: 1000 } });
    // The current window is charged the current units only; the next window's wait in the book.
    expect(out.record?.state).toEqual({ window: W, count: 40 });
    expect(out.record?.shares?.ahead).toEqual({ window: W + 1, units: 30 });
    expect(out.record?.shares?.entries[0]).toMatchObject({ endsAtMs: END + 1000, ahead: { units: 30, atMs: END } });
    // At exactly AHEAD_LEAD_MS before the end too; not earlier, nor with a whole term, nor for a rate rule.
    expect(shareRecord(charged(10), ask("weur.0", 30), END - AHEAD_LEAD_MS).grant.ahead?.units).toBe(30);
    expect(shareRecord(charged(10), ask("weur.0", 30), END - AHEAD_LEAD_MS - 1).grant.ahead).toBeUndefined();
    expect(shareRecord(charged(10), ask("weur.0", 30), T0 + 100).grant.ahead).toBeUndefined();
    const tb: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 1000), version: 1 };
    expect(shareRecord(null, { ...ask("weur.0", 30), rule: tb }, END - 200).grant.ahead).toBeUndefined();
  });

  it("never grants more of the next window than its limit, over every holder; a spent window's holder gets them too", () => {
    let rec: LimiterRecord | null = charged(100);
    const got: number[] = [];
    for (const [i, units] of [60, 30, 30, 5].entries()) {
      const out = shareRecord(rec, ask(`h${i}`, units), END - 100 + i);
      rec = out.record;
      got.push(out.grant.ahead?.units ?? 0);
      expect(out.grant.units).toBe(0); // this window is spent
    }
    expect(got).toEqual([60, 30, 10, 0]);
    expect(rec?.shares?.ahead).toEqual({ window: W + 1, units: 100 });
    // At the next window's start they are its count: nothing is left for anyone else.
    const next = settleShares(rec, END);
    expect(next?.state).toEqual({ window: W + 1, count: 100 });
    expect(next?.shares?.ahead).toBeUndefined();
    const direct = keyCall(rec, { rule: win, id: "d", costs: [1] }, END + 5);
    expect(direct.result.results[0]).toMatchObject({ ok: true, decision: { allowed: false } });
  });

  it("charges the units ahead when the window starts, before any call decides in it; drops them once it passed", () => {
    const out = shareRecord(charged(0), ask("weur.0", 30), END - 50);
    const direct = keyCall(out.record, { rule: win, id: "d", costs: [1] }, END + 1);
    expect(direct.result.results[0]).toMatchObject({ decision: { allowed: true, remaining: 100 - 31 } });
    expect(direct.record?.state).toEqual({ window: W + 1, count: 31 });
    expect(applyAhead(out.record!, END - 1)).toBe(out.record);
    expect(applyAhead(out.record!, END + 60_000).shares?.ahead).toBeUndefined();
    expect(applyAhead(out.record!, END + 60_000).state).toEqual(out.record?.state);
    // A newer version lowering the limit below what was granted ahead: the window is spent, never more.
    const low = { ...out.record!, params: fixedWindow(20, 60_000) };
    expect(applyAhead(low, END).state).toEqual({ window: W + 1, count: 20 });
  });

  it("takes units given back before their window started off the book; after, the state refunds them", () => {
    const out = shareRecord(charged(0), ask("weur.0", 30), END - 50);
    const back = takeAheadBack(out.record, [
      { units: 12, atMs: END },
      { units: 3, atMs: T0 + 5 },
    ]);
    expect(back.record?.shares?.ahead).toEqual({ window: W + 1, units: 18 });
    expect(back.rest).toEqual([{ units: 3, atMs: T0 + 5 }]);
    expect(takeAheadBack(out.record, [{ units: 99, atMs: END }]).record?.shares?.ahead).toBeUndefined();
    // Through a renewal in the same window: given back, then granted anew (30 again).
    const again = shareRecord(
      out.record,
      ask("weur.0", 30, { id: "a2", giveBack: [{ units: 30, atMs: END }] }),
      END - 20,
    );
    expect(again.record?.shares?.ahead).toEqual({ window: W + 1, units: 30 });
    // After the window started, a return naming its start is the record's own refund.
    const later = shareRecord(
      out.record,
      ask("weur.0", 0, { id: "a3", giveBack: [{ units: 10, atMs: END }] }),
      END + 5,
    );
    expect(later.record?.state).toEqual({ window: W + 1, count: 20 });
  });

  it("answers a retried ask with its units ahead", () => {
    const first = shareRecord(charged(0), ask("weur.0", 30), END - 200);
    const retried = shareRecord(first.record, ask("weur.0", 30), END - 190);
    expect(retried.grant).toEqual({ ...first.grant, remaining: retried.grant.remaining });
    expect(retried.record?.shares?.ahead).toEqual({ window: W + 1, units: 30 });
  });
});

describe("units ahead: the delegate", () => {
  const sent = END - 300;
  const granted = (units = 30) => shareRecord(charged(0), ask("weur.0", units), END - 250).grant;
  /** The grant (its term 250 ms from the object's clock) answered 100 ms after it was asked. */
  const held = (): DelegateRecord => {
    const asked = shareAsk({ ...NEW_DELEGATE }, "weur.0", win, "weur.0-a", sent);
    return adoptGrant(asked.record, asked.ask, granted(), sent, sent + 100);
  };

  it("keeps them beside its share, used from the answer's arrival plus the term, and renews nothing meanwhile", () => {
    const rec = held();
    expect(rec.share).toMatchObject({ units: 30, endsAtMs: sent + 250 });
    expect(rec.share?.ahead).toEqual({ units: 30, atMs: END, fromMs: sent + 350, endsAtMs: sent + 1250 });
    const busy: DelegateRecord = { ...rec, demand: { bucket: Math.floor((sent + 240) / 500), curr: 500, prev: 500 } };
    expect(renewDue(busy, sent + 240)).toBe(false);
    expect(renewDue({ ...busy, share: { ...busy.share!, ahead: undefined } }, sent + 240)).toBe(true);
    expect(releaseDue({ ...rec, share: { ...rec.share!, unitsLeft: 5 } }, sent + 260)).toBe(false);
  });

  it("takes them as its share once its share ended and they may be used; waits in between", () => {
    const rec = held();
    expect(rollAhead(rec, sent + 249)).toBe(rec);
    expect(aheadWaitMs(rec, sent + 249)).toBe(0);
    expect(rollAhead(rec, sent + 300)).toBe(rec);
    expect(aheadWaitMs(rec, sent + 300)).toBe(50);
    const rolled = rollAhead(rec, sent + 350).share;
    expect(rolled).toMatchObject({ atMs: END, units: 30, unitsLeft: 30, endsAtMs: sent + 1250, short: false });
    expect(rolled?.ahead).toBeUndefined();
    expect(rolled?.renewAtMs).toBe(sent + 1250 - 225);
  });

  it("gives them back, naming the next window's start, with a renewal before they were used", () => {
    const rec = held();
    const out = shareAsk(rec, "weur.0", win, "a2", sent + 200);
    expect(out.ask.giveBack).toEqual([
      { units: 30, atMs: END - 250 },
      { units: 30, atMs: END },
    ]);
    expect(out.record.share?.ahead).toBeUndefined();
  });

  it("is short, cut with units ahead, only when less is left in the window than it asked for", () => {
    const g = (units: number, remaining: number, ahead: boolean) => ({
      ...granted(),
      units,
      remaining,
      ...(ahead ? {} : { ahead: undefined }),
    });
    // [units granted, left in the window, with units ahead, asked] -> short
    const table: [number, number, boolean, number, boolean][] = [
      [30, 5, true, 30, false], // all it asked
      [10, 0, false, 30, true], // spent
      [10, 20, true, 30, true], // nearly spent, with units ahead: no renewal for the last few
      [10, 20, false, 30, false], // nearly spent, none ahead: asks again once used
      [10, 30, true, 30, false], // as much left as it asked: asks again once used
    ];
    for (const [units, remaining, ahead, asked, short] of table) {
      expect([units, remaining, ahead, asked, windowShort(g(units, remaining, ahead), asked)]).toEqual([
        units,
        remaining,
        ahead,
        asked,
        short,
      ]);
    }
  });

  it("windowPace: units used since the term began, per term, over at least a tenth of a term", () => {
    const share = { kind: "window" as const, endsAtMs: T0 + 1000, renewAtMs: T0 + 750, units: 40, unitsLeft: 10 };
    expect(windowPace(share, T0 + 300)).toBe(100); // 30 used in 300 ms
    expect(windowPace(share, T0 + 20)).toBe(300); // 30 used, over 100 ms at least
    expect(windowPace({ ...share, unitsLeft: 40 }, T0 + 300)).toBe(0);
    expect(windowPace({ ...share, kind: "rate" }, T0 + 300)).toBe(0);
    expect(windowPace(null, T0)).toBe(0);
    // A new delegate's first share, run dry at once: its renewal asks for its pace, not its one batch.
    const rec = held();
    const dry = { ...rec, share: { ...rec.share!, unitsLeft: 0 }, demand: { bucket: 0, curr: 0, prev: 0 } };
    // 30 used in 148 ms (the term 250 ms, its start found from its quarter lead of 62 ms).
    expect(shareAsk(dry, "weur.0", win, "a2", sent + 150).ask.demand).toBe(202);
  });

  it("DelegateRun: a batch after the share's end waits for the units ahead and is decided from them, no ask", async () => {
    let now = sent + 300;
    let stored = held();
    const asks: ShareAsk[] = [];
    const slept: number[] = [];
    const run = new DelegateRun({
      clock: () => now,
      newId: () => "x",
      load: () => stored,
      save: (r) => {
        stored = r;
      },
      call: () => Promise.reject(new Error("no pass-through")),
      share: (_o, a) => {
        asks.push(a);
        return Promise.reject(new Error("no ask"));
      },
      sleep: (ms) => {
        slept.push(ms);
        now += ms;
        return Promise.resolve();
      },
    });
    const call: CallInput = { rule: win, id: "b1", costs: [1, 1] };
    const out = await run.check({ object: "w:key", holder: "weur.0", rule: win }, call);
    expect(slept).toEqual([50]);
    expect(asks).toEqual([]);
    expect(out.results.map((r) => r.ok && r.decision.allowed)).toEqual([true, true]);
    expect(out.results[0]).toMatchObject({ atMs: END });
    expect(stored.share).toMatchObject({ atMs: END, unitsLeft: 28 });
  });
});
