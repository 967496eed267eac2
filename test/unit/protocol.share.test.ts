/**
 * Exact tables for the key's object's side of shares (src/protocol/share.ts): parts promised and live, the direct
 * slice, settling a book, the direct callers' demand, a direct call while rate shares are out (or refused when they
 * hold everything), the admin peek and when a record is as good as none.
 */
import { describe, expect, it } from "vitest";
import { sliceParams } from "../../src/algorithms/index.ts";
import {
  directDemand,
  directParts,
  EMPTY_BOOK,
  emptyState,
  keyCall,
  keyFreshAtMs,
  keyPeek,
  live,
  promisedParts,
  settleShares,
  shareKindOf,
} from "../../src/protocol/share.ts";
import {
  type AppliedCall,
  CALL_MEMORY_MS,
  type CallInput,
  fullState,
  type LimiterRecord,
  type LimiterRule,
  type ShareBook,
  type ShareEntry,
} from "../../src/protocol/store.ts";
import {
  HOT_EXIT_PER_S,
  HOT_HOLD_MS,
  LAPSE_GRACE_MS,
  RATE_LEASE_TERM_MS,
  SHARE_DELEGATES_MAX,
  SHARE_PARTS,
  SHARE_TERM_MS,
} from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, gcraP, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** 1 token per ms, burst 1000: a token is one scaled unit. */
const tbP = tokenBucket(1000, 1000, 1000);
const tb: LimiterRule = { id: "t", params: tbP };
/** Half the rate: 1 token per 2 ms (scaled by 2), burst 500. */
const halfP = sliceParams(tbP, 500, SHARE_PARTS)!;
const winP = fixedWindow(100, 60_000);

const entry = (over: Partial<ShareEntry> = {}): ShareEntry => ({
  holder: "weur.0",
  parts: 300,
  units: 0,
  atMs: T0,
  endsAtMs: T0 + 1000,
  prevParts: 0,
  prevEndsAtMs: 0,
  demand: 10,
  askId: "a1",
  ...over,
});
const record = (params: AlgorithmParams, state: unknown, over: Partial<LimiterRecord> = {}): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: state as never,
  ...over,
});
const book = (entries: ShareEntry[], over: Partial<ShareBook> = {}): ShareBook => ({ entries, hotUntilMs: 0, ...over });
const tbState = (tokensScaled: number, lastMs = T0) => ({ tokensScaled, lastMs });
const applied = (atMs: number, verdicts = "1"): AppliedCall => ({
  id: `c${atMs}-${verdicts}`,
  atMs,
  verdicts,
  leaseUnits: 0,
  leaseForMs: 0,
});
const input = (rule: LimiterRule, costs: number[], over: Partial<CallInput> = {}): CallInput => ({
  rule,
  id: "k1",
  costs,
  ...over,
});
const brief = (r: { ok: boolean; decision?: { allowed: boolean; remaining: number }; error?: string }) =>
  r.ok ? `${r.decision!.allowed ? "+" : "-"}${r.decision!.remaining}` : r.error;

describe("share constants and kinds", () => {
  it("are as documented", () => {
    expect([SHARE_PARTS, SHARE_TERM_MS, SHARE_DELEGATES_MAX, HOT_EXIT_PER_S, HOT_HOLD_MS]).toEqual([
      1000, 1000, 40, 50, 5000,
    ]);
    expect(EMPTY_BOOK).toEqual({ entries: [], hotUntilMs: 0 });
    expect(shareKindOf(tbP)).toBe("rate");
    expect(shareKindOf(gcraP(1, 1000, 1))).toBe("rate");
    expect(shareKindOf(winP)).toBe("window");
    expect(shareKindOf(slidingLog(5, 1000))).toBe("none");
  });
});

describe("parts promised", () => {
  it("an entry holds its parts until its end, and its previous ones until theirs", () => {
    const e = entry({ parts: 300, endsAtMs: T0 + 100, prevParts: 500, prevEndsAtMs: T0 + 50 });
    expect(promisedParts(e, T0 + 49)).toBe(500);
    expect(promisedParts(e, T0 + 50)).toBe(300);
    expect(promisedParts(e, T0 + 99)).toBe(300);
    // A rate share's parts stay promised `LAPSE_GRACE_MS` after its end (a late renewal finds them held).
    expect(promisedParts(e, T0 + 100)).toBe(300);
    expect(promisedParts(e, T0 + 99 + LAPSE_GRACE_MS)).toBe(300);
    expect(promisedParts(e, T0 + 100 + LAPSE_GRACE_MS)).toBe(0);
    expect(
      promisedParts(entry({ parts: 300, prevParts: 100, prevEndsAtMs: T0 + 2000 }), T0 + 1000 + LAPSE_GRACE_MS),
    ).toBe(100);
    expect(live(e, T0 + 99)).toBe(true);
    expect(live(e, T0 + 99 + LAPSE_GRACE_MS)).toBe(true);
    expect(live(e, T0 + 100 + LAPSE_GRACE_MS)).toBe(false);
    // No parts of its own (a window share, an ended one): no grace.
    expect(live(entry({ parts: 0, endsAtMs: T0, prevEndsAtMs: T0 + 1 }), T0)).toBe(true);
    expect(live(entry({ parts: 0, endsAtMs: T0, prevEndsAtMs: T0 + 1 }), T0 + 1)).toBe(false);
  });

  it("the direct slice is what no live share holds, never below 0", () => {
    expect(directParts(book([]), T0)).toBe(SHARE_PARTS);
    expect(directParts(book([entry({ parts: 300 }), entry({ holder: "b", parts: 200 })]), T0)).toBe(500);
    expect(directParts(book([entry({ parts: 700 }), entry({ holder: "b", parts: 700 })]), T0)).toBe(0);
    expect(directParts(book([entry({ parts: 700, endsAtMs: T0 })]), T0)).toBe(300);
    expect(directParts(book([entry({ parts: 700, endsAtMs: T0 - LAPSE_GRACE_MS })]), T0)).toBe(SHARE_PARTS);
  });
});

describe("full and empty states", () => {
  it("a full bucket and an empty one, made concrete at now", () => {
    expect(fullState(tbP, T0)).toEqual(tbState(1000));
    expect(emptyState(tbP, T0 + 5)).toEqual(tbState(0, T0 + 5));
    expect(emptyState(halfP, T0)).toEqual(tbState(0));
    expect(fullState(winP, T0)).toEqual({ window: T0 / 60_000, count: 0 });
    expect(emptyState(winP, T0)).toEqual({ window: T0 / 60_000, count: 100 });
  });

  it("throws for a rule that admits nothing", () => {
    expect(() => fullState(fixedWindow(0, 1000), T0)).toThrow("a fresh key admits one unit");
    expect(() => emptyState(fixedWindow(0, 1000), T0)).toThrow("a fresh key admits its capacity");
  });
});

describe("settleShares", () => {
  it("leaves a record without shares as it is", () => {
    expect(settleShares(null, T0)).toBeNull();
    const plain = record(tbP, tbState(3));
    expect(settleShares(plain, T0)).toBe(plain);
    const liveBook = record(tbP, tbState(3), {
      shares: book([entry()], { direct: { parts: 700, state: tbState(1) } }),
    });
    expect(settleShares(liveBook, T0 + 999)).toBe(liveBook);
  });

  it("drops ended entries and keeps the rest, with the direct slice while a rate share is live", () => {
    const direct = { parts: 700, state: tbState(5) };
    const rec = record(tbP, tbState(9), {
      shares: book([entry({ holder: "old", endsAtMs: T0 + 10 - LAPSE_GRACE_MS }), entry()], { direct }),
    });
    expect(settleShares(rec, T0 + 10)).toEqual({ ...rec, shares: book([entry()], { direct }) });
  });

  it("drops ended entries and keeps the rest", () => {
    const ended = entry({ holder: "old", parts: 0, units: 5, endsAtMs: T0 + 10 });
    const rec = record(
      winP,
      { window: T0 / 60_000, count: 5 },
      { shares: book([ended, entry()], { hotUntilMs: T0 + 99 }) },
    );
    expect(settleShares(rec, T0 + 10)).toEqual({ ...rec, shares: book([entry()], { hotUntilMs: T0 + 99 }) });
  });

  it("folds the direct slice back into the record's state once no rate share is live", () => {
    // The direct slice held 600 of 1000 parts, with 60 tokens (1 per 1.67 ms: scaled by 5): 60 tokens of the whole.
    const sixty = sliceParams(tbP, 600, SHARE_PARTS) as typeof tbP & { rate: { tokens: number; perMs: number } };
    expect(sixty.rate).toMatchObject({ tokens: 3, perMs: 5 });
    const rec = record(tbP, tbState(999), {
      shares: book([entry({ endsAtMs: T0 + 5 - LAPSE_GRACE_MS })], {
        direct: { parts: 600, state: tbState(300, T0 + 5) },
        hotUntilMs: T0 + 9,
      }),
    });
    const settled = settleShares(rec, T0 + 5);
    expect(settled).toEqual({ ...rec, state: tbState(60, T0 + 5), shares: book([], { hotUntilMs: T0 + 9 }) });
    expect(settled?.shares && "direct" in settled.shares).toBe(false);
    // No hot time left: the book goes too. Folded as at the share's end (T0 + 5): the whole rate's since (4 ms more:
    // 64 tokens at T0 + 9, not the slice's 62.4).
    const gone = settleShares(rec, T0 + 9);
    expect(gone).toEqual(record(tbP, tbState(60, T0 + 5)));
    expect(gone && "shares" in gone).toBe(false);
  });

  it("refills the parts a share gave back from the share's end, not from the direct slice's next write", () => {
    // Direct 500 parts (0.5 tokens a ms), empty at T0; of the shares, 300 parts end at T0 + 100, 200 stay promised.
    const rec = record(tbP, tbState(999), {
      shares: book(
        [
          entry({ holder: "weur.0", parts: 300, endsAtMs: T0 + 100 - LAPSE_GRACE_MS }),
          entry({ holder: "wnam.0", parts: 200, endsAtMs: T0 + 1000, askId: "a2" }),
        ],
        { direct: { parts: 500, state: tbState(0, T0) } },
      ),
    });
    // 50 tokens by T0 + 100, then 0.8 a ms over 200 ms (800 parts): 210, not 150 (0.5 a ms until the read).
    expect(keyPeek(rec, tb, T0 + 300).remaining).toBe(210);
    expect(settleShares(rec, T0 + 300)?.shares?.direct?.parts).toBe(800);
    // No share live: folded into the whole rate as at the last end: 50 + 200 ms of 1 a ms.
    const alone = record(tbP, tbState(999), {
      shares: book([entry({ parts: 500, endsAtMs: T0 + 100 - LAPSE_GRACE_MS })], {
        direct: { parts: 500, state: tbState(0, T0) },
      }),
    });
    expect(keyPeek(alone, tb, T0 + 300).remaining).toBe(250);
  });

  it("folds an empty slice (no parts, or no state) into an empty bucket", () => {
    const noParts = record(tbP, tbState(999), { shares: book([], { direct: { parts: 0, state: tbState(5) } }) });
    expect(settleShares(noParts, T0 + 3)).toEqual(record(tbP, tbState(0, T0 + 3)));
    const noState = record(tbP, tbState(999), { shares: book([], { direct: { parts: 500, state: null } }) });
    expect(settleShares(noState, T0 + 3)).toEqual(record(tbP, tbState(0, T0 + 3)));
  });

  it("folds a direct slice under a window rule (the rule changed kind) at once", () => {
    const rec = record(
      winP,
      { window: T0 / 60_000, count: 5 },
      { shares: book([entry()], { direct: { parts: 500, state: null } }) },
    );
    expect(settleShares(rec, T0)).toEqual({
      ...rec,
      state: { window: T0 / 60_000, count: 100 },
      shares: book([entry()]),
    });
  });

  it("keeps the slice while a share only promises previous parts", () => {
    const rec = record(tbP, tbState(1), {
      shares: book([entry({ parts: 0, endsAtMs: T0, prevParts: 200, prevEndsAtMs: T0 + 10 })], {
        direct: { parts: 800, state: tbState(4) },
      }),
    });
    expect(settleShares(rec, T0 + 9)).toBe(rec);
    // A live entry with no parts at all does not keep it.
    const zero = record(tbP, tbState(1), {
      shares: book([entry({ parts: 0, endsAtMs: T0 + 10 })], { direct: { parts: 1000, state: tbState(4) } }),
    });
    expect(settleShares(zero, T0 + 9)?.shares).toEqual(book([entry({ parts: 0, endsAtMs: T0 + 10 })]));
  });
});

describe("directDemand", () => {
  it("counts the requests of the direct calls within the last term", () => {
    expect(directDemand(null, T0)).toBe(0);
    expect(directDemand(record(tbP, tbState(0)), T0)).toBe(0);
    const calls = [applied(T0 - 1000, "111"), applied(T0 - 999, "11"), applied(T0 - 400, "1e0")];
    expect(directDemand(record(tbP, tbState(0), { calls }), T0)).toBe(5);
    expect(directDemand(record(tbP, tbState(0), { calls }), T0 + 599)).toBe(3);
    expect(directDemand(record(tbP, tbState(0), { calls }), T0 + 600)).toBe(0);
    expect(directDemand(record(tbP, tbState(0), { calls }), T0 + 1400)).toBe(0);
  });

  it("scales a memory younger than half a term up to one term (over at least a tenth)", () => {
    const calls = [applied(T0 - 200, "11"), applied(T0 - 100, "11")];
    expect(directDemand(record(tbP, tbState(0), { calls }), T0)).toBe(Math.floor((4 * 1000) / 200));
    expect(directDemand(record(tbP, tbState(0), { calls }), T0 + 300)).toBe(4);
    expect(directDemand(record(tbP, tbState(0), { calls }), T0 + 299)).toBe(Math.floor((4 * 1000) / 499));
    const burst = [applied(T0 - 5, "11111")];
    expect(directDemand(record(tbP, tbState(0), { calls: burst }), T0)).toBe(5 * 10);
    expect(directDemand(record(tbP, tbState(0), { calls: [applied(T0, "111")] }), T0)).toBe(30);
    expect(directDemand(record(tbP, tbState(0), { calls: [applied(T0, "")] }), T0)).toBe(0);
  });
});

describe("keyCall", () => {
  it("is hot while the book says so or the object is busy, for an algorithm that takes shares", () => {
    const win = record(winP, { window: T0 / 60_000, count: 5 }, { shares: book([], { hotUntilMs: T0 + 10 }) });
    const rule: LimiterRule = { id: "w", params: winP };
    expect(keyCall(win, input(rule, [1]), T0 + 9).result.hot).toBe(true);
    expect("hot" in keyCall(win, input(rule, [1]), T0 + 10).result).toBe(false);
    const log = slidingLog(100, 60_000);
    const logRec = record(log, { times: [], costs: [] }, { shares: book([], { hotUntilMs: T0 + 10 }) });
    expect("hot" in keyCall(logRec, input({ id: "l", params: log }, [1]), T0).result).toBe(false);
    const busy = Array.from({ length: 100 }, (_, i) => applied(T0 - 999 + i));
    const busyRec = record(winP, { window: T0 / 60_000, count: 5 }, { calls: busy });
    expect(keyCall(busyRec, input(rule, [1]), T0).result).toMatchObject({ hot: true, busy: true });
    expect(keyCall(null, input(rule, [1]), T0).result.hot).toBeUndefined();
    // Not hot from the hot time's end on, while the book is kept for a live share.
    const kept = record(winP, { window: T0 / 60_000, count: 5 }, { shares: book([entry()], { hotUntilMs: T0 + 10 }) });
    expect(keyCall(kept, input(rule, [1]), T0 + 9).result.hot).toBe(true);
    expect("hot" in keyCall(kept, input(rule, [1]), T0 + 10).result).toBe(false);
  });

  it("decides direct calls from the slice no share holds, its state kept apart", () => {
    // A share holds 500 parts: direct calls get the other half, 1 token per 2 ms, starting from the slice's state.
    const rec = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(0, T0) }, hotUntilMs: T0 + 5000 }),
    });
    const out = keyCall(rec, input(tb, [1, 1, 1, 1, 1, 1]), T0 + 10);
    expect(out.result.results.map(brief)).toEqual(["+4", "+3", "+2", "+1", "+0", "-0"]);
    expect(out.result.hot).toBe(true);
    expect(out.record).toEqual({
      ...rec,
      calls: [{ id: "k1", atMs: T0 + 10, verdicts: "111110", leaseUnits: 0, leaseForMs: 0 }],
      // The slice (burst 500) held 5 before the call: a later refund of an earlier charge gets at most 495 back
      // (in halves of a request: the slice's perMs is 2).
      lows: { s: [[2 * (T0 + 10), 990]], slack: 0, per: 2 },
      shares: { ...rec.shares, direct: { parts: 500, state: tbState(0, T0 + 10) } },
    });
  });

  it("converts the slice's state when its parts changed (carry-over), from an empty one when it had none", () => {
    // The slice had 500 parts and 20 tokens; now 800 (a share of 200): the 20 tokens carry over.
    const rec = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 200 })], { direct: { parts: 500, state: tbState(40, T0) } }),
    });
    const out = keyCall(rec, input(tb, [1]), T0);
    expect(out.result.results.map(brief)).toEqual(["+19"]);
    const eight = sliceParams(tbP, 800, SHARE_PARTS) as typeof tbP & { rate: { perMs: number } };
    expect(out.record?.shares?.direct).toEqual({
      parts: 800,
      state: { tokensScaled: 19 * eight.rate.perMs, lastMs: T0 },
    });
    const none = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 200 })], { direct: { parts: 500, state: null } }),
    });
    const fresh = keyCall(none, input(tb, [1]), T0 + 5);
    // A slice with no state starts empty now.
    expect(fresh.result.results.map(brief)).toEqual(["-0"]);
    expect(fresh.record).toBe(none);
    const noParts = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 200 })], { direct: { parts: 0, state: tbState(40) } }),
    });
    expect(keyCall(noParts, input(tb, [1]), T0 + 5).result.results.map(brief)).toEqual(["-0"]);
  });

  it("keeps the rules version in the slice's view: a denial changes nothing, a retry is answered as remembered", () => {
    const rule: LimiterRule = { id: "t", params: tbP, version: 2 };
    const rec = record(tbP, tbState(1000), {
      version: 2,
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(0, T0) } }),
    });
    expect(keyCall(rec, input(rule, [1]), T0).record).toBe(rec);
    const first = keyCall(rec, input(rule, [1, 1]), T0 + 4);
    expect(first.result.results.map(brief)).toEqual(["+1", "+0"]);
    const again = keyCall(first.record, input(rule, [1, 1]), T0 + 4);
    expect(again.result.replayed).toBe(true);
    expect(again.record).toBe(first.record);
    expect(again.result.results.map(brief)).toEqual(["+0", "+0"]);
  });

  it("refills the slice to full when a return leaves its view as fresh", () => {
    // 499 of the half slice's 500 tokens, and one given back: full, so its view's record is dropped; the slice is full.
    const rec = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(998, T0) } }),
    });
    const out = keyCall(rec, input(tb, [], { giveBack: [{ units: 1, atMs: T0 }] }), T0);
    expect(out.result.refunded).toEqual({ remaining: 500, resetAfterMs: 0 });
    expect(out.record?.shares?.direct).toEqual({ parts: 500, state: tbState(1000, T0) });
    expect(out.record?.state).toEqual(tbState(1000));
  });

  it("returns the very record for a direct call that changes nothing", () => {
    const rec = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(0, T0) } }),
    });
    expect(keyCall(rec, input(tb, []), T0).record).toBe(rec);
  });

  it("moves the record to a newer rules version, its own state carried over, the slice's kept", () => {
    // Half the rate: 1 token per 2 ms, so 100 tokens are 200 scaled.
    const newer = tokenBucket(1000, 2000, 1000);
    const rec = record(tbP, tbState(100), {
      version: 1,
      leaseAsks: { ttlMs: 1000, bucket: 1, curr: 1, prev: 0 },
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(0, T0) } }),
    });
    const out = keyCall(rec, input({ id: "t", params: newer, version: 2 }, [1]), T0);
    expect(out.record).toMatchObject({
      params: newer,
      fingerprint: JSON.stringify(newer),
      version: 2,
      state: { tokensScaled: 200, lastMs: T0 },
      leaseAsks: rec.leaseAsks,
    });
    expect(out.record?.shares?.direct?.parts).toBe(500);
    const { version: _v, ...plain } = rec;
    const unversioned = keyCall(plain, input({ id: "t", params: tbP }, [1]), T0 + 10);
    expect(unversioned.record && "version" in unversioned.record).toBe(false);
    expect(unversioned.record?.state).toBe(rec.state);
  });

  it("refuses every direct request while the shares hold the whole rate, until the next share ends", () => {
    const rec = record(tbP, tbState(1000), {
      shares: book(
        [
          entry({ parts: 600, endsAtMs: T0 + 800 }),
          entry({ holder: "b", parts: 400, endsAtMs: T0 + 900, prevParts: 100, prevEndsAtMs: T0 + 300 }),
        ],
        { direct: { parts: 100, state: tbState(0) } },
      ),
    });
    const out = keyCall(rec, input(tb, [1, 0, 1001]), T0 + 100);
    expect(out.record).toBe(rec);
    expect(out.result).toEqual({
      atMs: T0 + 100,
      lease: null,
      replayed: false,
      results: [
        {
          ok: true,
          atMs: T0 + 100,
          decision: { allowed: false, remaining: 0, resetAfterMs: 200, retryAfterMs: 200, delayMs: 0 },
        },
        { ok: false, error: "invalid_cost" },
        { ok: false, error: "cost_exceeds_capacity" },
      ],
    });
    // A share that ended now (its previous parts still promised) is not the next end.
    const endedNow = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 0, endsAtMs: T0 + 100, prevParts: 1000, prevEndsAtMs: T0 + 500 })], {
        direct: { parts: 100, state: tbState(0) },
      }),
    });
    expect(keyCall(endedNow, input(tb, [1]), T0 + 100).result.results[0]).toMatchObject({
      decision: { retryAfterMs: 400 },
    });
    // Ends far off: at most a term's wait.
    const far = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 1000, endsAtMs: T0 + 5000 })], { direct: { parts: 100, state: tbState(0) } }),
    });
    expect(keyCall(far, input(tb, [1]), T0).result.results[0]).toMatchObject({
      decision: { retryAfterMs: SHARE_TERM_MS },
    });
  });
});

describe("keyCall: a lease a direct call to a hot rate key asks for", () => {
  const busy = Array.from({ length: 100 }, (_, i) => applied(T0 - 999 + i));
  const lease = (rec: LimiterRecord | null, over: Partial<CallInput> = {}, rule = tb, atMs = T0) =>
    keyCall(rec, input(rule, [1, 1], over), atMs).result.lease;

  it("is never granted unasked (the hot lease was removed), the slice full or not", () => {
    // Busy (100 calls in the last second), no share yet: the whole key's bucket, full; the batch alone is charged.
    const full = record(tbP, tbState(1000), { calls: busy });
    const out = keyCall(full, input(tb, [1, 1]), T0);
    expect(out.result.results.map(brief)).toEqual(["+999", "+998"]);
    expect(out.result.lease).toBeNull();
    expect(keyPeek(out.record, tb, T0).remaining).toBe(998);
    // Shares out, the key hot by its book, the direct slice full: none either.
    const rec = record(tbP, tbState(0), {
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(1000) }, hotUntilMs: T0 + 10 }),
    });
    expect(lease(rec)).toBeNull();
  });

  it("a call that asked its own: a hot rate key's lasts RATE_LEASE_TERM_MS at most; none to a cold key or a window rule", () => {
    expect(lease(record(tbP, tbState(1000)))).toBeNull();
    expect(lease(null)).toBeNull();
    // A lease the call asked for itself: as asked, but a hot rate key's lasts RATE_LEASE_TERM_MS at most (the rate
    // bound's term); a cold key's keeps its ttl.
    const full = record(tbP, tbState(1000), { calls: busy });
    expect(lease(full, { lease: { units: 3, ttlMs: 1000 } })).toEqual({
      units: 3,
      atMs: T0,
      forMs: RATE_LEASE_TERM_MS,
    });
    expect(lease(record(tbP, tbState(1000)), { lease: { units: 3, ttlMs: 1000 } })).toEqual({
      units: 3,
      atMs: T0,
      forMs: 1000,
    });
    const win = record(winP, { window: T0 / 60_000, count: 5 }, { calls: busy });
    expect(lease(win, {}, { id: "w", params: winP })).toBeNull();
  });
});

describe("keyPeek", () => {
  it("peeks a key it has no record of", () => {
    expect(keyPeek(null, tb, T0)).toEqual({ remaining: 1000, resetAfterMs: 0, retryAfterMs: null, atMs: T0 });
  });

  it("peeks the record without a direct slice, and the slice with one", () => {
    expect(keyPeek(record(tbP, tbState(7)), tb, T0)).toMatchObject({ remaining: 7, retryAfterMs: null });
    const rec = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 500 })], { direct: { parts: 500, state: tbState(20, T0) } }),
    });
    expect(keyPeek(rec, tb, T0 + 4)).toEqual({ remaining: 12, resetAfterMs: 976, retryAfterMs: null, atMs: T0 + 4 });
    // The slice's state converted to what the direct calls get now (800 parts).
    const moved = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 200 })], { direct: { parts: 500, state: tbState(20, T0) } }),
    });
    expect(keyPeek(moved, tb, T0).remaining).toBe(10);
  });

  it("says a term's wait when the direct calls have no slice", () => {
    const none = { remaining: 0, resetAfterMs: SHARE_TERM_MS, retryAfterMs: SHARE_TERM_MS, atMs: T0 };
    const full = record(tbP, tbState(1000), {
      shares: book([entry({ parts: 1000 })], { direct: { parts: 500, state: tbState(20) } }),
    });
    expect(keyPeek(full, tb, T0)).toEqual(none);
    const noFrom = record(tbP, tbState(1000), {
      shares: book([entry()], { direct: { parts: 0, state: tbState(20) } }),
    });
    expect(keyPeek(noFrom, tb, T0)).toEqual(none);
    const noState = record(tbP, tbState(1000), { shares: book([entry()], { direct: { parts: 700, state: null } }) });
    expect(keyPeek(noState, tb, T0)).toEqual(none);
  });
});

describe("keyFreshAtMs", () => {
  it("is the latest of the state's fresh time, a call's memory, the hot time, the shares' ends and the slice's", () => {
    const base = record(winP, { window: T0 / 60_000, count: 5 });
    expect(keyFreshAtMs(base)).toBe(T0 + 60_000);
    expect(keyFreshAtMs({ ...base, calls: [applied(T0 + 1)] })).toBe(T0 + 1 + CALL_MEMORY_MS);
    expect(keyFreshAtMs({ ...base, shares: book([], { hotUntilMs: T0 + 70_000 }) })).toBe(T0 + 70_000);
    expect(keyFreshAtMs({ ...base, shares: book([entry({ endsAtMs: T0 + 80_000 })]) })).toBe(
      T0 + 80_000 + LAPSE_GRACE_MS,
    );
    expect(keyFreshAtMs({ ...base, shares: book([entry({ prevEndsAtMs: T0 + 90_000 })]) })).toBe(T0 + 90_000);
    expect(keyFreshAtMs({ ...base, shares: book([entry()]) })).toBe(T0 + 60_000);
    // A rate record whose slice refills later than its own state (1 token per 2 ms from empty: 1000 ms for 500).
    const rate = record(tbP, tbState(1000), { shares: book([], { direct: { parts: 500, state: tbState(0, T0) } }) });
    expect(keyFreshAtMs(rate)).toBe(T0 + 1000);
    const rateNoParts = record(tbP, tbState(1000), { shares: book([], { direct: { parts: 0, state: tbState(0) } }) });
    expect(keyFreshAtMs(rateNoParts)).toBe(T0);
    const rateNoState = record(tbP, tbState(1000), { shares: book([], { direct: { parts: 500, state: null } }) });
    expect(keyFreshAtMs(rateNoState)).toBe(T0);
  });
});
