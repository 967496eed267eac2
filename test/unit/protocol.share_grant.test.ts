/**
 * Exact tables for the key's object's answer to a share ask (src/protocol/share_grant.ts): when a key is hot, a
 * window's units and a rate's parts by demand, retried asks, returns, letting go, a full book, newer rules versions.
 */
import { describe, expect, it } from "vitest";
import { directParts, type ShareAsk, type ShareGrant, settleShares } from "../../src/protocol/share.ts";
import { rateTermMs, rising, shareRecord } from "../../src/protocol/share_grant.ts";
import type { AppliedCall, LimiterRecord, LimiterRule, ShareBook, ShareEntry } from "../../src/protocol/store.ts";
import {
  LAPSE_GRACE_MS,
  SETTLED_SLACK_PARTS,
  SHARE_DELEGATES_MAX,
  SHARE_TERM_MAX_MS,
} from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, slidingLog, tokenBucket } from "../support/params.ts";

/** A minute's start. */
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const W = T0 / 60_000;
const winP = fixedWindow(100, 60_000);
const win: LimiterRule = { id: "w", params: winP, version: 1 };
const tbP = tokenBucket(1000, 1000, 1000);
const tb: LimiterRule = { id: "t", params: tbP, version: 1 };

const ask = (rule: LimiterRule, demand: number, over: Partial<ShareAsk> = {}): ShareAsk => ({
  rule,
  holder: "weur.0",
  id: "a1",
  demand,
  units: demand + 10,
  giveBack: [],
  ...over,
});
const entry = (over: Partial<ShareEntry> = {}): ShareEntry => ({
  holder: "other",
  parts: 0,
  units: 0,
  atMs: T0 - 100,
  endsAtMs: T0 + 900,
  prevParts: 0,
  prevEndsAtMs: T0 - 1000, // renewed before: not a first round of asks
  demand: 0,
  askId: "o1",
  ...over,
});
const record = (params: AlgorithmParams, state: unknown, over: Partial<LimiterRecord> = {}): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: state as never,
  version: 1,
  ...over,
});
const book = (entries: ShareEntry[], over: Partial<ShareBook> = {}): ShareBook => ({ entries, hotUntilMs: 0, ...over });
const count = (n: number) => ({ window: W, count: n });
const none = (rule: LimiterRule, atMs: number, hot = false): ShareGrant => ({
  atMs,
  kind: "none",
  parts: 0,
  units: 0,
  remaining: 0,
  termMs: 0,
  rule,
  hot,
});

/** The record after `weur.0`'s grant of every part at T0 (a quarter term, ask `a1`), its tokens moved out. */
const sole = (): LimiterRecord =>
  record(
    tbP,
    { tokensScaled: 1000, lastMs: T0 },
    {
      shares: book([entry({ holder: "weur.0", parts: 1000, atMs: T0, endsAtMs: T0 + 250, demand: 300, askId: "a1" })], {
        direct: { parts: 0, state: null },
        hotUntilMs: T0 + 5000,
      }),
    },
  );

describe("shareRecord: is the key hot", () => {
  it("is cold below 50 requests per second of demand: no share, the record as it was", () => {
    const rec = record(winP, count(5));
    const out = shareRecord(rec, ask(win, 49), T0);
    expect(out).toEqual({ record: rec, grant: none(win, T0) });
    expect(out.record).toBe(rec);
    expect(shareRecord(null, ask(win, 49.9), T0)).toEqual({ record: null, grant: none(win, T0) });
    expect(shareRecord(null, ask(win, -5), T0).grant.kind).toBe("none");
  });

  it("is hot from 50, its own demand, the direct calls' and the other holders' together", () => {
    expect(shareRecord(null, ask(win, 50), T0).grant.kind).toBe("window");
    const others = record(winP, count(5), {
      shares: book([entry({ demand: 30 }), entry({ holder: "x", demand: 10 })]),
    });
    expect(shareRecord(others, ask(win, 10), T0).grant.kind).toBe("window");
    expect(shareRecord(others, ask(win, 9), T0).grant.kind).toBe("none");
    // An ended holder's demand does not count.
    const ended = record(winP, count(5), { shares: book([entry({ demand: 45, endsAtMs: T0 })]) });
    expect(shareRecord(ended, ask(win, 10), T0).grant.kind).toBe("none");
    const calls: AppliedCall[] = [{ id: "d", atMs: T0 - 600, verdicts: "1".repeat(40), leaseUnits: 0, leaseForMs: 0 }];
    expect(shareRecord(record(winP, count(5), { calls }), ask(win, 10), T0).grant.kind).toBe("window");
    expect(shareRecord(record(winP, count(5), { calls }), ask(win, 9), T0).grant.kind).toBe("none");
  });

  it("is hot while the object is busy, whatever the demand; never for an algorithm without shares", () => {
    const calls = Array.from(
      { length: 100 },
      (_, i): AppliedCall => ({
        id: `c${i}`,
        atMs: T0 - 900,
        verdicts: "",
        leaseUnits: 0,
        leaseForMs: 0,
      }),
    );
    // No demand anywhere (the calls decided no request): what was asked.
    expect(shareRecord(record(winP, count(5), { calls }), ask(win, 0, { units: 7 }), T0).grant).toMatchObject({
      kind: "window",
      units: 7,
    });
    const log = slidingLog(100, 60_000);
    const logRule: LimiterRule = { id: "l", params: log, version: 1 };
    expect(shareRecord(null, ask(logRule, 5000), T0)).toEqual({ record: null, grant: none(logRule, T0) });
  });
});

describe("shareRecord: window units", () => {
  it("grants what was asked while the window has room for every holder, charged now, the term cut at the window's end", () => {
    const out = shareRecord(null, ask(win, 50, { units: 60 }), T0);
    expect(out.grant).toEqual({
      atMs: T0,
      kind: "window",
      parts: 0,
      units: 60,
      remaining: 40,
      termMs: 1000,
      rule: win,
      hot: true,
    });
    expect(out.record).toEqual(
      record(winP, count(60), {
        shares: book(
          [
            {
              holder: "weur.0",
              parts: 0,
              units: 60,
              atMs: T0,
              endsAtMs: T0 + 1000,
              prevParts: 0,
              prevEndsAtMs: 0,
              demand: 50,
              askId: "a1",
            },
          ],
          { hotUntilMs: T0 + 5000 },
        ),
      }),
    );
    expect(shareRecord(null, ask(win, 50, { units: 60 }), T0 + 59_400).grant.termMs).toBe(600);
    expect(shareRecord(null, ask(win, 50, { units: 60.9 }), T0).grant.units).toBe(60);
    expect(shareRecord(null, ask(win, 50, { units: 160 }), T0).grant).toMatchObject({ units: 100, remaining: 0 });
  });

  it("grants its demand's proportion of what is left when the window is short, rounded up, at least 1", () => {
    const rec = record(winP, count(20), { shares: book([entry({ demand: 150 })]) });
    // 80 left, demand 50 of 200: 20.
    expect(shareRecord(rec, ask(win, 50, { units: 60 }), T0).grant).toMatchObject({ units: 20, remaining: 60 });
    // 80 left, demand 50 of 250: 16.
    const more = record(winP, count(20), { shares: book([entry({ demand: 200 })]) });
    expect(shareRecord(more, ask(win, 50, { units: 60 }), T0).grant).toMatchObject({ units: 16, remaining: 64 });
    // 1 left for a tiny demand: ceil(1 × 1 / 201) = 1.
    const tiny = record(winP, count(99), { shares: book([entry({ demand: 200 })]) });
    expect(shareRecord(tiny, ask(win, 1, { units: 5 }), T0).grant).toMatchObject({ units: 1, remaining: 0 });
    // Exactly the room left for every holder's demand: what was asked.
    const exact = record(winP, count(20), { shares: book([entry({ demand: 30 })]) });
    expect(shareRecord(exact, ask(win, 50, { units: 60 }), T0).grant).toMatchObject({ units: 60, remaining: 20 });
  });

  it("short: splits what is left and what the other live holders still hold, by demand, at most the ask over its term", () => {
    // 80 left; another holder granted 40 units 100 ms ago at a demand of 150 a term: it used 15 of them, holds 25.
    // Demand 50 of 200 over 80 + 25: 27 (over what is left only, 20: each grant in a round shrank the next).
    const held = entry({ demand: 150, units: 40, atMs: T0 + 900, endsAtMs: T0 + 1900 });
    const rec = record(winP, count(20), { shares: book([held]) });
    expect(shareRecord(rec, ask(win, 50, { units: 60 }), T0 + 1000).grant).toMatchObject({ units: 27, remaining: 53 });
    // Units the demand says it used are not counted (all 40 over 300 ms at 150 a term: 45); nor those of a share that
    // ended, of a past window, or the asker's own.
    const used = entry({ demand: 150, units: 40, atMs: T0 + 700, endsAtMs: T0 + 1700 });
    const ended = entry({ demand: 150, units: 40, atMs: T0, endsAtMs: T0 + 1000 });
    const past = entry({ demand: 150, units: 40, atMs: T0 - 100, endsAtMs: T0 + 1900 });
    const own = entry({ holder: "weur.0", demand: 0, units: 40, atMs: T0 + 900, endsAtMs: T0 + 1900 });
    const idle = entry({ holder: "idle", demand: 150, atMs: T0 + 900, endsAtMs: T0 + 1900 });
    for (const es of [[used], [ended, idle], [past]]) {
      const r = record(winP, count(20), { shares: book(es) });
      expect(shareRecord(r, ask(win, 50, { units: 60 }), T0 + 1000).grant).toMatchObject({ units: 20 });
    }
    const r = record(winP, count(20), { shares: book([held, own]) });
    expect(shareRecord(r, ask(win, 50, { units: 60 }), T0 + 1000).grant).toMatchObject({ units: 27 });
    // 600 ms before the window's end: 40 left, the other holds 25 of 40. A split of 65 is 17; 25 asked per term are
    // 15 of what is left of it, and no more (units it could not use before the window's end).
    const late = entry({ demand: 150, units: 40, atMs: T0 + 59_300, endsAtMs: T0 + 60_000 });
    const lateRec = record(winP, count(60), { shares: book([late]) });
    expect(shareRecord(lateRec, ask(win, 50, { units: 60 }), T0 + 59_400).grant).toMatchObject({ units: 17 });
    expect(shareRecord(lateRec, ask(win, 50, { units: 25 }), T0 + 59_400).grant).toMatchObject({
      units: 15,
      termMs: 600,
    });
  });

  it("grants all that is left when that is no more than the ask over its term, first come (the window is then spent)", () => {
    // 50 left, other demand 150: a proportion would be 13 (and every holder asks again as soon as it is used).
    const rec = record(winP, count(50), { shares: book([entry({ demand: 150 })]) });
    expect(shareRecord(rec, ask(win, 50, { units: 60 }), T0).grant).toMatchObject({ units: 50, remaining: 0 });
    expect(shareRecord(rec, ask(win, 50, { units: 50 }), T0).grant).toMatchObject({ units: 50, remaining: 0 });
    expect(shareRecord(rec, ask(win, 48, { units: 49 }), T0).grant).toMatchObject({ units: 13, remaining: 37 });
    // Over a term cut at the window's end (600 ms): 60 asked are 36 of it; 50 left is more, a proportion.
    const late = entry({ demand: 150, endsAtMs: T0 + 59_900 });
    const lateRec = record(winP, count(50), { shares: book([late]) });
    expect(shareRecord(lateRec, ask(win, 50, { units: 60 }), T0 + 59_400).grant).toMatchObject({
      units: 13,
      termMs: 600,
    });
    const fewer = record(winP, count(70), { shares: book([late]) });
    expect(shareRecord(fewer, ask(win, 50, { units: 60 }), T0 + 59_400).grant).toMatchObject({ units: 30 });
    // No demand: nothing, whatever is left.
    expect(shareRecord(rec, ask(win, 0, { units: 60 }), T0).grant).toMatchObject({ units: 0, remaining: 50 });
  });

  it("grants nothing from a spent window, and no units for no demand", () => {
    const spent = record(winP, count(100), { shares: book([entry({ demand: 150 })]) });
    const out = shareRecord(spent, ask(win, 50), T0);
    expect(out.grant).toMatchObject({ kind: "window", units: 0, remaining: 0 });
    expect(out.record?.state).toEqual(count(100));
    const idle = record(winP, count(20), { shares: book([entry({ demand: 150 })]) });
    expect(shareRecord(idle, ask(win, 0, { units: 5 }), T0).grant).toMatchObject({ units: 0, remaining: 80 });
  });

  it("takes the units given back before granting, as a call of the ask's id", () => {
    const rec = record(winP, count(100), { shares: book([entry({ demand: 150 })]) });
    const out = shareRecord(rec, ask(win, 50, { units: 5, giveBack: [{ units: 30, atMs: T0 + 1 }] }), T0 + 5);
    expect(out.grant).toMatchObject({ units: 5, remaining: 25 });
    expect(out.record?.state).toEqual(count(75));
    expect(out.record?.calls).toEqual([{ id: "a1:back", atMs: T0 + 5, verdicts: "", leaseUnits: 0, leaseForMs: 0 }]);
  });
});

describe("shareRecord: rate parts", () => {
  it("grants the demand's proportion of the parts with their proportion of the direct slice's tokens", () => {
    // A key's first ask: a region's equal part (112 parts, share_grant.ts `rateGrant`), and their 112 tokens of the
    // full bucket, moved out of the direct slice (888 of each stay: 111,000 scaled); a new holder's share lasts half a term.
    const out = shareRecord(null, ask(tb, 300), T0);
    expect(out.grant).toEqual({
      atMs: T0,
      kind: "rate",
      parts: 112,
      tokens: 112,
      units: 0,
      remaining: 0,
      termMs: 500,
      rule: tb,
      hot: true,
    });
    expect(out.record?.shares?.direct).toEqual({ parts: 888, state: { tokensScaled: 111_000, lastMs: T0 } });
    expect(out.record?.state).toEqual({ tokensScaled: 1000, lastMs: T0 });
    expect(out.record?.version).toBe(1);
    const plain = shareRecord(null, ask({ id: "t", params: tbP }, 300), T0).record;
    expect(plain && "version" in plain).toBe(false);
    expect(out.record?.shares?.entries).toEqual([
      {
        holder: "weur.0",
        parts: 112,
        units: 0,
        atMs: T0,
        endsAtMs: T0 + 500,
        prevParts: 0,
        prevEndsAtMs: 0,
        demand: 300,
        tokens: 112,
        askId: "a1",
      },
    ]);
    const rec = record(tbP, { tokensScaled: 10, lastMs: T0 }, { shares: book([entry({ demand: 100, parts: 100 })]) });
    // 300 of 400: 750 parts of the direct slice's 900, and floor(10 × 750 / 900) = 8 of its 10 tokens; 150 parts and 2
    // tokens stay (2 tokens of a 150-part slice, 3 per 20 ms: 40 scaled).
    const some = shareRecord(rec, ask(tb, 300), T0);
    expect(some.grant).toMatchObject({ parts: 750, tokens: 8, termMs: 500 });
    expect(some.record?.shares?.direct).toEqual({ parts: 150, state: { tokensScaled: 40, lastMs: T0 } });
    // A rounded-up share: 1 of 3 is 334 parts; no tokens when the slice's proportion is less than one.
    const third = record(tbP, { tokensScaled: 2, lastMs: T0 }, { shares: book([entry({ demand: 200 })]) });
    expect(shareRecord(third, ask(tb, 100), T0).grant).toMatchObject({ parts: 334 });
    expect(shareRecord(third, ask(tb, 100), T0).grant.tokens).toBeUndefined();
  });

  it("gives each new holder of a fast rule's first round of asks a region's equal part, whatever its demand", () => {
    // Each first ask's demand is one batch: split by it, the first asker of a cold key took up to 86% of the rate and
    // its tokens, the others 1-2% each, until the second round (half a term later).
    const first = shareRecord(null, ask(tb, 300), T0);
    const second = shareRecord(first.record, ask(tb, 1, { holder: "enam.0", id: "b1" }), T0 + 10);
    expect(second.grant).toMatchObject({ parts: 112, tokens: 112, termMs: 500 });
    // Once a holder renewed, new holders get their demand's proportion again (here of no room: none).
    const renewed = shareRecord(second.record, ask(tb, 301, { id: "a2" }), T0 + 200);
    expect(renewed.grant).toMatchObject({ parts: 888, tokens: 776 });
    expect(shareRecord(renewed.record, ask(tb, 1, { holder: "sam.0", id: "c1" }), T0 + 210).grant.parts).toBe(0);
    // A slow rule (below HOT_FROM_PER_S, hot by its traffic only) splits its first round by demand.
    const slow: LimiterRule = { id: "s", params: tokenBucket(100, 1000, 100), version: 1 };
    expect(shareRecord(null, ask(slow, 300), T0).grant.parts).toBe(1000);
  });

  it("cuts the grant to the parts the other live shares leave, for half a term", () => {
    const rec = record(tbP, { tokensScaled: 10, lastMs: T0 }, { shares: book([entry({ demand: 100, parts: 700 })]) });
    expect(shareRecord(rec, ask(tb, 300), T0).grant).toMatchObject({ parts: 300, termMs: 500 });
    const prev = record(
      tbP,
      { tokensScaled: 10, lastMs: T0 },
      {
        shares: book([entry({ demand: 100, parts: 0, prevParts: 900, prevEndsAtMs: T0 + 1 })]),
      },
    );
    expect(shareRecord(prev, ask(tb, 300), T0).grant).toMatchObject({ parts: 100, termMs: 500 });
    const full = record(tbP, { tokensScaled: 10, lastMs: T0 }, { shares: book([entry({ demand: 100, parts: 1000 })]) });
    expect(shareRecord(full, ask(tb, 300), T0).grant).toMatchObject({ kind: "rate", parts: 0, termMs: 500 });
  });

  it("grants no parts while busy with no demand at all", () => {
    const calls = Array.from(
      { length: 100 },
      (_, i): AppliedCall => ({
        id: `c${i}`,
        atMs: T0 - 900,
        verdicts: "",
        leaseUnits: 0,
        leaseForMs: 0,
      }),
    );
    const busy = record(tbP, { tokensScaled: 10, lastMs: T0 }, { calls });
    expect(shareRecord(busy, ask(tb, 0), T0).grant).toMatchObject({ kind: "rate", parts: 0 });
  });

  it("gives at least a part for any demand, none for no demand", () => {
    const rec = record(tbP, { tokensScaled: 10, lastMs: T0 }, { shares: book([entry({ demand: 100_000 })]) });
    expect(shareRecord(rec, ask(tb, 1), T0).grant).toMatchObject({ parts: 1, termMs: 500 });
    expect(shareRecord(rec, ask(tb, 0), T0).grant).toMatchObject({ kind: "rate", parts: 0, termMs: 500 });
  });
});

describe("shareRecord: asks again, letting go, a full book", () => {
  it("answers a retried ask as granted, changing nothing", () => {
    const first = shareRecord(null, ask(win, 50, { units: 60 }), T0);
    const again = shareRecord(first.record, ask(win, 50, { units: 60 }), T0 + 10);
    expect(again.record).toBe(first.record);
    expect(again.grant).toEqual({ ...first.grant, remaining: 40 });
    const rate = shareRecord(null, ask(tb, 300), T0);
    expect(shareRecord(rate.record, ask(tb, 300), T0 + 10).grant).toEqual(rate.grant);
    // A retried ask whose share is live but whose key's hot time is over: the same grant, not hot.
    const cooled = record(
      tbP,
      { tokensScaled: 10, lastMs: T0 },
      {
        shares: book([entry({ holder: "weur.0", askId: "a1", parts: 400, atMs: T0 - 100, endsAtMs: T0 + 900 })], {
          hotUntilMs: T0 + 10,
          direct: { parts: 600, state: { tokensScaled: 100, lastMs: T0 } },
        }),
      },
    );
    expect(shareRecord(cooled, ask(tb, 300), T0 + 9).grant).toMatchObject({ kind: "rate", parts: 400, hot: true });
    expect(shareRecord(cooled, ask(tb, 300), T0 + 10).grant).toEqual({
      atMs: T0 - 100,
      kind: "rate",
      parts: 400,
      units: 0,
      remaining: 0,
      termMs: 1000,
      rule: tb,
      hot: false,
    });
  });

  it("answers a retried ask that got nothing with nothing", () => {
    const spent = record(winP, count(100), { shares: book([entry({ demand: 150 })]) });
    const first = shareRecord(spent, ask(win, 50), T0);
    expect(shareRecord(first.record, ask(win, 50), T0 + 1).grant).toEqual({ ...none(win, T0, true), termMs: 1000 });
    const rateNone = record(tbP, { tokensScaled: 10, lastMs: T0 }, { shares: book([entry({ demand: 100 })]) });
    const zero = shareRecord(rateNone, ask(tb, 0), T0);
    expect(shareRecord(zero.record, ask(tb, 0), T0 + 1).grant).toMatchObject({ kind: "rate", parts: 0, termMs: 500 });
  });

  it("answers a retried letting-go as nothing, even when it ended the share in the ms it was granted", () => {
    const first = shareRecord(null, ask(tb, 300), T0);
    const released = shareRecord(first.record, ask(tb, 300, { id: "a2", release: true }), T0);
    expect(released.record?.shares?.entries[0]).toMatchObject({ parts: 0, atMs: T0, endsAtMs: T0, askId: "a2" });
    expect(shareRecord(released.record, ask(tb, 300, { id: "a2", release: true }), T0 + 1).grant).toMatchObject({
      kind: "none",
      parts: 0,
      termMs: 0,
    });
  });

  it("renews a holder's share, its earlier parts promised until their end; settled, a whole term", () => {
    const next = shareRecord(sole(), ask(tb, 300, { id: "a2" }), T0 + 200);
    // The same parts (none gained, so no tokens move), settled: a whole term.
    expect(next.grant).toMatchObject({ parts: 1000, termMs: 1000 });
    expect(next.grant.tokens).toBeUndefined();
    expect(next.record?.shares?.entries).toEqual([
      {
        holder: "weur.0",
        parts: 1000,
        units: 0,
        atMs: T0 + 200,
        endsAtMs: T0 + 1200,
        prevParts: 1000,
        prevEndsAtMs: T0 + 250,
        demand: 300,
        askId: "a2",
      },
    ]);
    expect(next.record?.shares?.hotUntilMs).toBe(T0 + 5200);
    // Parts moving by more than a quarter: half a term; by a quarter exactly: settled, its last term (1 s) doubled.
    const other = (parts: number, xParts = 750) =>
      record(
        tbP,
        { tokensScaled: 0, lastMs: T0 },
        {
          shares: book([
            entry({ holder: "weur.0", parts, demand: 100 }),
            entry({ holder: "x", parts: xParts, demand: 300 }),
          ]),
        },
      );
    expect(shareRecord(other(400), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 500 });
    expect(shareRecord(other(200), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 2000 });
    expect(shareRecord(other(199), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 500 });
    // Another holder with fewer parts than its demand's proportion (749 of 750) changes nothing: it asks again itself
    // (an unsettled term for every holder while one is short doubled the asks at the key's object).
    expect(shareRecord(other(200, 749), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({
      parts: 250,
      termMs: 2000,
    });
  });

  it("keeps a settled share's term at 1 s while its demand rises by more than a quarter (growing load)", () => {
    // A growing key: holders whose terms doubled to 4 s kept their parts while new delegates got only what was left.
    const was = (demand: number) =>
      record(
        tbP,
        { tokensScaled: 0, lastMs: T0 },
        {
          shares: book([
            entry({ holder: "weur.0", parts: 200, demand }),
            entry({ holder: "x", parts: 750, demand: 300 }),
          ]),
        },
      );
    // 80 -> 100: up by a quarter exactly (and 2 standard deviations, 18): its last term (1 s) doubled.
    expect(shareRecord(was(80), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 2000 });
    // 79 -> 100: by more: a whole term, not doubled; still settled (not a quarter term).
    expect(shareRecord(was(79), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 1000 });
    expect(shareRecord(was(10), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 1000 });
    // Falling demand: doubled as before.
    expect(shareRecord(was(120), ask(tb, 100, { id: "a3" }), T0).grant).toMatchObject({ parts: 250, termMs: 2000 });
  });

  it("rising: a small demand must rise by two standard deviations of a Poisson count, not only by a quarter", () => {
    // 10 per term: a quarter is 2, two standard deviations 8 (2 x ceil(sqrt 10)); Poisson noise alone moves it by 8.
    expect([rising(10, 18), rising(10, 19), rising(0, 1), rising(0, 0)]).toEqual([false, true, true, false]);
    // 400: the quarter (100) is the larger; falling is never rising.
    expect([rising(400, 500), rising(400, 501), rising(400, 10)]).toEqual([false, true, false]);
  });

  it("lengthens a settled share's term at each renewal, 1 s, 2 s, 4 s, and no more", () => {
    let rec: LimiterRecord | null = sole();
    const terms: number[] = [];
    let at = T0;
    for (let i = 0; i < 5; i++) {
      const out = shareRecord(rec, ask(tb, 300, { id: `r${i}` }), at);
      terms.push(out.grant.termMs);
      rec = out.record;
      at += out.grant.termMs - 100;
    }
    expect(terms).toEqual([1000, 2000, 4000, 4000, 4000]);
    expect(SHARE_TERM_MAX_MS).toBe(4000);
    // A share let go and asked for again within its old term: settled, but from a whole term (its last is over, not
    // doubled: the 800 ms it ran).
    const ended = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", atMs: T0 - 800, endsAtMs: T0, prevParts: 600, prevEndsAtMs: T0 + 900 }),
          entry({ holder: "x", parts: 400, demand: 200 }),
        ]),
      },
    );
    expect(shareRecord(ended, ask(tb, 300, { id: "a3" }), T0 + 10).grant).toMatchObject({ parts: 600, termMs: 1000 });
  });

  it("keeps promised only the parts a holder says it keeps (`keep`) until its old term ends", () => {
    // weur.0 held 600 parts until T0 + 900; its demand fell, and it kept 200 of them when it asked.
    const rec = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", parts: 600, demand: 300 }),
          entry({ holder: "x", parts: 400, demand: 200 }),
        ]),
      },
    );
    const out = shareRecord(rec, ask(tb, 100, { id: "a3", keep: 200 }), T0);
    // 100 of 300 of demand: 334 parts (rounded up), within the 600 the other share leaves.
    expect(out.grant).toMatchObject({ parts: 334 });
    const mine = out.record?.shares?.entries.find((e) => e.holder === "weur.0");
    expect(mine).toMatchObject({ parts: 334, prevParts: 200, prevEndsAtMs: T0 + 900 });
    // Keeping none (0 is a count): none stay promised.
    const kept0 = shareRecord(rec, ask(tb, 100, { id: "a3", keep: 0 }), T0);
    expect(kept0.record?.shares?.entries.find((e) => e.holder === "weur.0")).toMatchObject({ prevParts: 0 });
    // Without `keep`, or one above what it held (or not a count), all 600 stay promised.
    for (const keep of [undefined, 700, -1, 1.5]) {
      const plain = shareRecord(rec, ask(tb, 100, { id: "a3", ...(keep === undefined ? {} : { keep }) }), T0);
      expect(plain.record?.shares?.entries.find((e) => e.holder === "weur.0")).toMatchObject({ prevParts: 600 });
      // Every part promised: the direct slice has none, and no state.
      expect(plain.record?.shares?.direct).toEqual({ parts: 0, state: null });
    }
    // Letting go with `keep`: only those stay promised too (a delegate letting go sends none: delegate.ts `shareAsk`).
    const gone = shareRecord(rec, ask(tb, 100, { id: "a3", keep: 50, release: true }), T0);
    expect(gone.record?.shares?.entries.find((e) => e.holder === "weur.0")).toMatchObject({ parts: 0, prevParts: 50 });
  });

  it("changes no share for an ask overtaken by a later one of its delegate (`seq`), its units given back counted", () => {
    // weur.0's ask 5 (a5) got 600 parts until T0 + 900, adopted. Its ask 4 (a4, which it gave up on after the
    // delegate's timeout, cutting to 100 parts for 10 ms) arrives late: believed, 500 of a5's parts would go free.
    const rec = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", parts: 600, demand: 300, askId: "a5", seq: 5 }),
          entry({ holder: "x", parts: 400, demand: 200 }),
        ]),
      },
    );
    const late = ask(tb, 100, { id: "a4", seq: 4, keep: 100, holding: "a3", oldForMs: 10, giveBack: [] });
    const out = shareRecord(rec, late, T0);
    expect(out.grant).toMatchObject({ kind: "none", parts: 0 });
    expect(out.record?.shares?.entries).toEqual(rec.shares?.entries);
    // Its units given back still count: a window share's (a past lease of the key's) are refunded all the same.
    const spent = record(winP, count(100), { shares: book([entry({ holder: "weur.0", askId: "b5", seq: 5 })]) });
    const back = shareRecord(spent, ask(win, 10, { id: "b4", seq: 4, giveBack: [{ units: 30, atMs: T0 }] }), T0 + 5);
    expect(back.record?.state).toEqual(count(70));
    // Its next ask (6), or one that says no `seq` (an older delegate), changes it as before.
    for (const next of [{ id: "a6", seq: 6 }, { id: "a6" }]) {
      const after = shareRecord(rec, ask(tb, 100, { ...next, keep: 100, holding: "a5" }), T0);
      const mine = after.record?.shares?.entries.find((e) => e.holder === "weur.0");
      expect(mine).toMatchObject({ prevParts: 100, askId: "a6" });
      expect(mine?.seq).toBe(next.seq);
    }
  });

  it("keeps only the last grant's parts promised when the holder says it adopted it (`holding`)", () => {
    // weur.0's last grant (ask a2): 300 parts until T0 + 900; its grant before: 600 parts, promised until T0 + 500.
    const rec = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", parts: 300, prevParts: 600, prevEndsAtMs: T0 + 500, demand: 300, askId: "a2" }),
          entry({ holder: "x", parts: 400, demand: 300 }),
        ]),
      },
    );
    const mine = (out: ReturnType<typeof shareRecord>) =>
      out.record?.shares?.entries.find((e) => e.holder === "weur.0");
    // Holding a2: the 600 are no longer in use; 300 stay promised until a2's end.
    const adopted = shareRecord(rec, ask(tb, 300, { id: "a3", holding: "a2" }), T0);
    expect(mine(adopted)).toMatchObject({ prevParts: 300, prevEndsAtMs: T0 + 900 });
    // Holding an older grant (a2's answer lost), or not saying: all it held or holds, until the later end.
    for (const holding of ["a1", undefined]) {
      const out = shareRecord(rec, ask(tb, 300, { id: "a3", ...(holding === undefined ? {} : { holding }) }), T0);
      expect(mine(out)).toMatchObject({ prevParts: 600, prevEndsAtMs: T0 + 900 });
    }
    // With `keep` too: the less of the two.
    const both = shareRecord(rec, ask(tb, 100, { id: "a3", holding: "a2", keep: 120 }), T0);
    expect(mine(both)).toMatchObject({ prevParts: 120, prevEndsAtMs: T0 + 900 });
    // A last grant already ended, within the grace: its parts held until now (the grant says so), none after; past it,
    // nothing of it in use.
    const late = shareRecord(rec, ask(tb, 300, { id: "a3", holding: "a2" }), T0 + 950);
    expect(late.grant.held).toBe(300);
    expect(mine(late)?.prevEndsAtMs).toBeLessThan(T0 + 950);
    const lapsed = shareRecord(rec, ask(tb, 300, { id: "a3", holding: "a2" }), T0 + 900 + LAPSE_GRACE_MS);
    expect(mine(lapsed)).toMatchObject({ prevParts: 0 });
    // Ended in this very ms (an older grant still promised for longer keeps the entry).
    const longer = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", parts: 300, prevParts: 600, prevEndsAtMs: T0 + 1000, demand: 300, askId: "a2" }),
          entry({ holder: "x", parts: 400, demand: 300 }),
        ]),
      },
    );
    // Within its grace its parts count as held, but stay promised no later than now.
    expect(mine(shareRecord(longer, ask(tb, 300, { id: "a3", holding: "a2" }), T0 + 900))?.prevEndsAtMs).toBe(T0 + 900);
    const past = shareRecord(longer, ask(tb, 300, { id: "a3", holding: "a2" }), T0 + 900 + LAPSE_GRACE_MS);
    expect(mine(past)).toMatchObject({ prevParts: 0 });
  });

  it("keeps the old parts promised until the ask's receipt plus `oldForMs` only, when that is sooner", () => {
    // weur.0 holds 600 parts until T0 + 900 and asks at T0 with demand for 100 of 300: 334 parts.
    const rec = record(
      tbP,
      { tokensScaled: 0, lastMs: T0 },
      {
        shares: book([
          entry({ holder: "weur.0", parts: 600, demand: 300, askId: "a2" }),
          entry({ holder: "x", parts: 400, demand: 200 }),
        ]),
      },
    );
    const mine = (out: ReturnType<typeof shareRecord>) =>
      out.record?.shares?.entries.find((e) => e.holder === "weur.0");
    const bounded = shareRecord(rec, ask(tb, 100, { id: "a3", holding: "a2", oldForMs: 80 }), T0);
    expect(bounded.grant).toMatchObject({ parts: 334 });
    expect(mine(bounded)).toMatchObject({ parts: 334, prevParts: 600, prevEndsAtMs: T0 + 80 });
    // Past it, only the new parts are promised: the direct slice gets the other 266.
    const after = settleShares(bounded.record, T0 + 80);
    expect(after?.shares?.entries.find((e) => e.holder === "weur.0")).toMatchObject({ parts: 334 });
    expect(directParts(after!.shares!, T0 + 80)).toBe(266);
    expect(directParts(after!.shares!, T0 + 79)).toBe(0);
    // With `keep`: those, that long. Longer than the old term, 0, or not a count of ms: the old term, or now.
    const kept = shareRecord(rec, ask(tb, 100, { id: "a3", holding: "a2", keep: 200, oldForMs: 80 }), T0);
    expect(mine(kept)).toMatchObject({ prevParts: 200, prevEndsAtMs: T0 + 80 });
    for (const [oldForMs, endsAtMs] of [
      [2000, T0 + 900],
      [0, T0],
      [-1, T0 + 900],
      [1.5, T0 + 900],
      [undefined, T0 + 900],
    ] as const) {
      const out = shareRecord(rec, ask(tb, 100, { id: "a3", ...(oldForMs === undefined ? {} : { oldForMs }) }), T0);
      expect(mine(out)?.prevEndsAtMs).toBe(endsAtMs);
    }
    // Letting go: the old parts that long only too.
    const gone = shareRecord(rec, ask(tb, 100, { id: "a3", release: true, oldForMs: 50 }), T0);
    expect(mine(gone)).toMatchObject({ parts: 0, prevParts: 600, prevEndsAtMs: T0 + 50 });
  });

  it("rateTermMs: half a term when new, cut short or moving; settled, the last term doubled up to 4 s", () => {
    // [parts, fair, held, prevTermMs, termMs]
    const table: [number, number, number, number, number][] = [
      [100, 100, 0, 0, 500], // new
      [5, 5, 0, 0, 500],
      [100, 100, 100, 500, 1000], // settled after a half term: a whole one
      [100, 100, 100, 250, 1000],
      [100, 100, 100, 1000, 2000],
      [100, 100, 100, 2000, 4000],
      [100, 100, 100, 4000, 4000],
      [100, 100, 100, 3000, 4000],
      [100, 112, 100, 1000, 2000], // short by 12 of 112: within an eighth (14)
      [100, 115, 100, 1000, 500], // short by 15 > 14
      [5, 15, 5, 1000, 2000], // short by 10: within SETTLED_SLACK_PARTS
      [4, 15, 4, 1000, 500], // short by 11
      [125, 125, 100, 1000, 2000], // moved by a quarter
      [126, 126, 100, 1000, 500], // by more
      [74, 74, 100, 1000, 500],
      [75, 75, 100, 1000, 2000],
      [12, 12, 2, 1000, 2000], // by 10: within SETTLED_SLACK_PARTS
      [13, 13, 2, 1000, 500],
    ];
    for (const [parts, fair, held, prev, term] of table) {
      expect([parts, fair, held, prev, rateTermMs(parts, fair, held, prev)]).toEqual([parts, fair, held, prev, term]);
    }
    expect(SETTLED_SLACK_PARTS).toBe(10);
  });

  it("rateTermMs: a slow rule's share that grew by more than a quarter, not short: a whole term, never doubled", () => {
    // search-origin (200/s): a holder seeing a dozen requests a second renewed a quarter term late as its parts grew.
    const slow = (parts: number, fair: number, held: number, prev: number) =>
      rateTermMs(parts, fair, held, prev, undefined, true);
    expect([slow(500, 500, 300, 2000), slow(500, 500, 300, 250), rateTermMs(500, 500, 300, 2000)]).toEqual([
      1000, 1000, 500,
    ]);
    // Shrunk, short of its fair parts, or new: a quarter term (a fast rule's half); settled: doubled as for any rule.
    expect([
      slow(300, 300, 500, 2000),
      slow(500, 900, 300, 2000),
      slow(500, 500, 0, 0),
      slow(500, 500, 500, 2000),
    ]).toEqual([250, 250, 250, 4000]);
  });

  it("rateTermMs: an unsettled share's term is at least 4 of its delegate's round trips, at most a term", () => {
    // A far delegate's quarter term ended before its renewal's answer came back (the ask says its round trip).
    const term = (rttMs: number | undefined, held = 0, prev = 0) => rateTermMs(100, 100, held, prev, rttMs);
    expect([undefined, 0, 30, 125, 126, 190, 250, 400].map((rtt) => term(rtt))).toEqual([
      500, 500, 500, 500, 504, 760, 1000, 1000,
    ]);
    // A slow rule's unsettled term is a quarter one, at least the same 4 round trips.
    const slowTerm = (rttMs?: number) => rateTermMs(100, 100, 0, 0, rttMs, true);
    expect([undefined, 62, 63, 190].map(slowTerm)).toEqual([250, 250, 252, 760]);
    // Cut short or moving: the same; settled: its own term (a whole one or more), whatever the round trip.
    expect(rateTermMs(100, 115, 100, 1000, 190)).toBe(760);
    expect(rateTermMs(126, 126, 100, 1000, 190)).toBe(760);
    expect(term(190, 100, 1000)).toBe(2000);
    expect(term(400, 100, 250)).toBe(1000);
    // Not a count of ms: ignored.
    for (const bad of [-190, 2.5, Number.NaN, Number.POSITIVE_INFINITY]) expect(term(bad)).toBe(500);
    // Through the grant: a new delegate whose renewals took 190 ms gets 760 ms; one that says none, half a term.
    expect(shareRecord(null, ask(tb, 300, { rttMs: 190 }), T0).grant.termMs).toBe(760);
    expect(shareRecord(null, ask(tb, 300), T0).grant.termMs).toBe(500);
    // A window share's term is the window's: the round trip changes nothing.
    expect(shareRecord(null, ask(win, 50, { units: 60, rttMs: 190 }), T0 + 59_400).grant.termMs).toBe(600);
  });

  it("lets a share go: its parts stay promised until its term ends, and the key stays hot for others", () => {
    const out = shareRecord(sole(), ask(tb, 300, { id: "a2", release: true }), T0 + 200);
    expect(out.grant).toEqual(none(tb, T0 + 200));
    expect(out.record?.shares?.entries).toEqual([
      {
        holder: "weur.0",
        parts: 0,
        units: 0,
        atMs: T0,
        endsAtMs: T0 + 200,
        prevParts: 1000,
        prevEndsAtMs: T0 + 250,
        demand: 0,
        askId: "a2",
      },
    ]);
    expect(out.record?.shares?.hotUntilMs).toBe(T0 + 5200);
    // Gone cold: the entry ends, the hot time is not extended.
    const cold = shareRecord(sole(), ask(tb, 3, { id: "a3" }), T0 + 200);
    expect(cold.grant).toEqual(none(tb, T0 + 200));
    expect(cold.record?.shares?.hotUntilMs).toBe(T0 + 5000);
    // A window share let go after its term: nothing promised, the entry dropped.
    const w = shareRecord(null, ask(win, 50), T0);
    const late = shareRecord(w.record, ask(win, 3, { id: "w2" }), T0 + 1000);
    expect(late.record?.shares?.entries).toEqual([]);
  });

  it(`grants none to a new holder when ${SHARE_DELEGATES_MAX} others hold shares, saying the key is hot`, () => {
    const many = Array.from({ length: SHARE_DELEGATES_MAX }, (_, i) => entry({ holder: `h${i}`, demand: 10 }));
    const rec = record(winP, count(5), { shares: book(many) });
    const out = shareRecord(rec, ask(win, 50), T0);
    expect(out.grant).toEqual(none(win, T0, true));
    expect(out.record).toBe(rec);
    const fewer = record(winP, count(5), { shares: book(many.slice(1)) });
    expect(shareRecord(fewer, ask(win, 50), T0).grant.kind).toBe("window");
    // A holder already in the book keeps its place.
    const mine = record(winP, count(5), { shares: book([...many, entry({ holder: "weur.0" })]) });
    expect(shareRecord(mine, ask(win, 50, { id: "a9" }), T0).grant.kind).toBe("window");
  });
});

describe("shareRecord: rules versions", () => {
  it("moves the record to a newer version an ask brings, even when it grants nothing", () => {
    const newer: LimiterRule = { id: "w", params: fixedWindow(200, 60_000), version: 2 };
    const out = shareRecord(record(winP, count(30)), ask(newer, 1), T0);
    expect(out.grant).toEqual(none(newer, T0));
    expect(out.record).toEqual(record(newer.params, count(30), { version: 2 }));
    // The same parameters under a newer version: the same state, the new version.
    const same = record(winP, count(30));
    const bumped = shareRecord(same, ask({ ...win, version: 3 }, 1), T0).record;
    expect(bumped).toEqual({ ...same, version: 3 });
    expect(bumped?.state).toBe(same.state);
    // A bucket's state under a newer version with the same parameters: the very state, not carried over to itself.
    const tbRec = record(tbP, { tokensScaled: 10, lastMs: T0 });
    expect(shareRecord(tbRec, ask({ ...tb, version: 2 }, 1), T0 + 50).record?.state).toBe(tbRec.state);
    // Another algorithm: its state starts full.
    const other = shareRecord(record(winP, count(30)), ask({ ...tb, version: 2 }, 1), T0 + 7);
    expect(other.record).toEqual(record(tbP, { tokensScaled: 1000, lastMs: T0 + 7 }, { version: 2 }));
  });

  it("decides an older ask under the record's newer version", () => {
    const newer = fixedWindow(200, 60_000);
    const rec = record(newer, count(30), { version: 2 });
    const out = shareRecord(rec, ask(win, 50, { units: 60 }), T0);
    expect(out.grant).toMatchObject({ units: 60, remaining: 110, rule: { id: "w", params: newer, version: 2 } });
    expect(out.record?.version).toBe(2);
    expect(shareRecord(rec, ask({ ...win, version: 2 }, 1), T0).record).toBe(rec);
    const unversioned = record(winP, count(30), { version: undefined });
    expect(shareRecord(unversioned, ask({ id: "w", params: winP }, 1), T0).record).toBe(unversioned);
  });
});
