/**
 * Exact tables for a delegate's pure decisions (src/protocol/delegate.ts): when it must renew, its demand, the ask it
 * sends and what it gives back, how it adopts a grant, and how it decides a batch from its share (refunds, window
 * units, rate slices, retried calls, the call memory).
 */
import { describe, expect, it } from "vitest";
import { fingerprintOf } from "../../src/algorithms/index.ts";
import {
  adoptGrant,
  countLoad,
  type DelegateRecord,
  delegateCall,
  delegateIdle,
  delegateNeed,
  demandMoved,
  demandPerTerm,
  type HeldShare,
  keptParts,
  NEW_DELEGATE,
  oldShareForMs,
  renewDue,
  shareAsk,
} from "../../src/protocol/delegate.ts";
import { directParts, emptyState, type ShareAsk, type ShareGrant } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import {
  type AppliedCall,
  type CallInput,
  type CheckResult,
  type LimiterRecord,
  type LimiterRule,
  peekState,
  type ShareEntry,
} from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import {
  DELEGATE_AIM_CALLS_PER_S,
  DELEGATE_BUSY_CALLS_PER_S,
  DELEGATE_CALL_MEMORY,
  DEMAND_BUCKET_MS,
  OLD_SHARE_FOR_MS,
  PENDING_RESEND_MS,
  RENEW_LEAD_MS,
  SHARE_TERM_MS,
} from "../../src/protocol/tunables.ts";
import { heldRateShare, heldWindowShare } from "../support/held_share.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** The demand bucket T0 starts (a quarter term each). */
const B0 = T0 / DEMAND_BUCKET_MS;
const win: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 2 };
const rate: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 1000), version: 2 };
/** A delegate's slice of 500 parts: 500/s, burst 500. */
const half = delegateSlice(rate.params, 500)!;

const windowShare = (over: Partial<HeldShare> = {}): HeldShare => heldWindowShare(win, T0, over);
const rateShare = (over: Partial<HeldShare> = {}): HeldShare =>
  heldRateShare(rate, 500, emptyState(half, T0), T0, over);
const withShare = (share: HeldShare | null, over: Partial<DelegateRecord> = {}): DelegateRecord => ({
  ...NEW_DELEGATE,
  share,
  ...over,
});
const batch = (rule: LimiterRule, costs: number[], over: Partial<CallInput> = {}): CallInput => ({
  rule,
  id: "b1",
  costs,
  ...over,
});
const brief = (r: CheckResult) => (r.ok ? `${r.decision.allowed ? "+" : "-"}${r.decision.remaining}` : r.error);

describe("delegate.ts constants and replays (exact edges: mutants of delegate.ts; docs/testing.md)", () => {
  it("resends an unanswered renewal as it was for a quarter term: 250 ms", () => {
    expect(SHARE_TERM_MS).toBe(1000);
    expect(PENDING_RESEND_MS).toBe(250);
  });

  it("a retried call of a rate share answered without a sub-lease is replayed without one", () => {
    const first = delegateCall(withShare(rateShare()), batch(rate, [1]), T0);
    expect(first.result.lease).toBeNull();
    const again = delegateCall(first.record, batch(rate, [1]), T0 + 1);
    expect(again.result.replayed).toBe(true);
    expect(again.result.lease).toBeNull();
  });
});

describe("delegateNeed", () => {
  it("renews without a share, at its end, and for a newer rules version with other parameters", () => {
    const lowered = fixedWindow(90, 60_000);
    expect(delegateNeed(NEW_DELEGATE, win, [1], T0)).toBe("renew");
    expect(delegateNeed(withShare(windowShare()), win, [1], T0 + 999)).toBe("ready");
    expect(delegateNeed(withShare(windowShare()), win, [1], T0 + 1000)).toBe("renew");
    expect(delegateNeed(withShare(windowShare()), { ...win, params: lowered, version: 3 }, [1], T0)).toBe("renew");
    expect(delegateNeed(withShare(windowShare()), { ...win, params: lowered, version: 1 }, [1], T0)).toBe("ready");
    // Only a newer version renews: the same one (other parameters, written by hand) does not.
    expect(delegateNeed(withShare(windowShare()), { ...win, params: lowered, version: 2 }, [1], T0)).toBe("ready");
    const unversioned = windowShare({ rule: { id: "w", params: win.params } });
    expect(delegateNeed(withShare(unversioned), { id: "w", params: win.params }, [1], T0)).toBe("ready");
    expect(delegateNeed(withShare(unversioned), { ...win, params: lowered, version: 1 }, [1], T0)).toBe("renew");
  });

  it("a newer rules version with the same parameters decides from the share; its next ask carries the version", () => {
    const table: [HeldShare, LimiterRule, "ready" | "renew"][] = [
      [windowShare(), { ...win, version: 3 }, "ready"],
      [windowShare({ rule: { id: "w", params: win.params } }), { ...win, version: 1 }, "ready"],
      [rateShare(), { ...rate, version: 3 }, "ready"],
      [rateShare(), { ...rate, params: tokenBucket(900, 1000, 900), version: 3 }, "renew"],
    ];
    for (const [share, rule, need] of table) {
      expect(delegateNeed(withShare(share), rule, [1], T0)).toBe(need);
      expect(shareAsk(withShare(share), "weur.0", rule, "a", T0 + 800).ask.rule.version).toBe(rule.version);
    }
  });

  it("renews a window share short of a batch's cost, unless the window was spent at the grant", () => {
    expect(delegateNeed(withShare(windowShare()), win, [2, 2], T0)).toBe("ready");
    expect(delegateNeed(withShare(windowShare()), win, [2, 3], T0)).toBe("renew");
    expect(delegateNeed(withShare(windowShare({ short: true })), win, [2, 3], T0)).toBe("ready");
    expect(delegateNeed(withShare(rateShare()), rate, [5000], T0)).toBe("ready");
  });
});

describe("demand and renewDue", () => {
  const demand = { bucket: B0, curr: 5, prev: 8 };

  it("is the last half term's cost (this bucket's, and the last one's weighed by how much of it is in), per term", () => {
    expect(DEMAND_BUCKET_MS).toBe(SHARE_TERM_MS / 2);
    // (5 + 8) in the last 500 ms: 26 per 1 s term.
    expect(demandPerTerm(withShare(null, { demand }), T0)).toBe(26);
    // 5 + 8 × 250/500 = 9 in the last 500 ms.
    expect(demandPerTerm(withShare(null, { demand }), T0 + 250)).toBe(18);
    // 5 + 8 × 1/500 = 5.016: 10.032 per term, rounded down.
    expect(demandPerTerm(withShare(null, { demand }), T0 + 499)).toBe(10);
    expect(demandPerTerm(withShare(null, { demand: { bucket: B0, curr: 9, prev: 8 } }), T0)).toBe(34);
    // Rolled: the next bucket starts empty, this one's 5 becomes the last one's.
    expect(demandPerTerm(withShare(null, { demand }), T0 + 500)).toBe(10);
    expect(demandPerTerm(withShare(null, { demand }), T0 + 750)).toBe(5);
    expect(demandPerTerm(withShare(null, { demand }), T0 + 1000)).toBe(0);
    expect(demandPerTerm(withShare(null, { demand }), T0 + 10_000)).toBe(0);
  });

  it("renews in the background from the renewal time, at most RENEW_LEAD_MS before the end, only with demand", () => {
    // `perTerm` of demand per term: that times a bucket's share of a term, in the current bucket.
    const at = (ms: number, perTerm = 20) => ({
      demand: {
        bucket: Math.floor((T0 + ms) / DEMAND_BUCKET_MS),
        curr: (perTerm * DEMAND_BUCKET_MS) / SHARE_TERM_MS,
        prev: 0,
      },
    });
    expect(renewDue(withShare(null, at(900)), T0 + 900)).toBe(false);
    expect(renewDue(withShare(windowShare(), at(749)), T0 + 749)).toBe(false);
    expect(renewDue(withShare(windowShare(), at(750)), T0 + 750)).toBe(true);
    expect(renewDue(withShare(windowShare(), at(750, 0)), T0 + 750)).toBe(false);
    // A 4 s term: its last quarter starts 1 s before its end, but it renews RENEW_LEAD_MS before.
    const long = rateShare({ endsAtMs: T0 + 4000, renewAtMs: T0 + 3000, demand: 20 });
    expect(RENEW_LEAD_MS).toBe(300);
    expect(renewDue(withShare(long, at(3699)), T0 + 3699)).toBe(false);
    expect(renewDue(withShare(long, at(3700)), T0 + 3700)).toBe(true);
  });

  it("renews a rate share at least its last renewal's round trip before its end, at most half its term early", () => {
    const at = (ms: number) => ({
      demand: {
        bucket: Math.floor((T0 + ms) / DEMAND_BUCKET_MS),
        curr: (20 * DEMAND_BUCKET_MS) / SHARE_TERM_MS,
        prev: 0,
      },
    });
    // [share, the first ms of T0 + ms it renews at]: a quarter term (250 ms: renewAtMs 62 ms before its end).
    const quarter = { endsAtMs: T0 + 250, renewAtMs: T0 + 188, demand: 20 };
    const long = { endsAtMs: T0 + 4000, renewAtMs: T0 + 3000, demand: 20 };
    const table: [HeldShare, number][] = [
      [rateShare(quarter), 188], // no round trip known (a first ask's, an older record): its last quarter
      [rateShare({ ...quarter, rttMs: 0 }), 188],
      [rateShare({ ...quarter, rttMs: 40 }), 188], // within its last quarter
      [rateShare({ ...quarter, rttMs: 62 }), 188],
      [rateShare({ ...quarter, rttMs: 75 }), 175],
      [rateShare({ ...quarter, rttMs: 150 }), 126], // at most half of its 248 ms term
      [windowShare({ ...quarter, rttMs: 150 }), 188], // a window share: its last quarter only
      [rateShare({ ...long, rttMs: 190 }), 3700], // within RENEW_LEAD_MS
      [rateShare({ ...long, rttMs: 350 }), 3650],
    ];
    for (const [share, dueMs] of table) {
      const due = (ms: number) => renewDue(withShare(share, at(ms)), T0 + ms);
      expect([share.rttMs, due(dueMs - 1), due(dueMs)]).toEqual([share.rttMs, false, true]);
    }
  });

  it("renews a rate share of a whole term or more early, a quarter term old, when its demand moved by more than half", () => {
    // Demand per term `perTerm`: that times a bucket's share of a term, in the current bucket.
    const at = (ms: number, perTerm: number) => ({
      demand: {
        bucket: Math.floor((T0 + ms) / DEMAND_BUCKET_MS),
        curr: (perTerm * DEMAND_BUCKET_MS) / SHARE_TERM_MS,
        prev: 0,
      },
    });
    const long = rateShare({ endsAtMs: T0 + 4000, renewAtMs: T0 + 3000, demand: 20 });
    expect(renewDue(withShare(long, at(1000, 20)), T0 + 1000)).toBe(false);
    expect(renewDue(withShare(long, at(1000, 48)), T0 + 1000)).toBe(true);
    expect(renewDue(withShare(long, at(1000, 8)), T0 + 1000)).toBe(true);
    // 20 → 12 and 20 → 28: by 8, within half of 20 (10).
    expect(renewDue(withShare(long, at(1000, 12)), T0 + 1000)).toBe(false);
    expect(renewDue(withShare(long, at(1000, 28)), T0 + 1000)).toBe(false);
    // Too young: less than a quarter term since the term began (T0).
    expect(renewDue(withShare(long, at(249, 48)), T0 + 249)).toBe(false);
    expect(renewDue(withShare(long, at(250, 48)), T0 + 250)).toBe(true);
    // A quarter-term share renews soon anyway; a window share, and a share from before `demand` was kept, never early.
    const quarter = rateShare({ endsAtMs: T0 + 250, renewAtMs: T0 + 188, demand: 20 });
    expect(renewDue(withShare(quarter, at(100, 48)), T0 + 100)).toBe(false);
    // A half-term share, a quarter of SHARE_TERM_MS old and before its last quarter: not early either.
    const half = rateShare({ endsAtMs: T0 + 500, renewAtMs: T0 + 375, demand: 20 });
    expect(renewDue(withShare(half, at(300, 48)), T0 + 300)).toBe(false);
    expect(renewDue(withShare(half, at(375, 48)), T0 + 375)).toBe(true);
    expect(renewDue(withShare(rateShare({ demand: 20 }), at(300, 48)), T0 + 300)).toBe(true);
    expect(renewDue(withShare(windowShare({ demand: 20 }), at(300, 48)), T0 + 300)).toBe(false);
    expect(renewDue(withShare(rateShare(), at(300, 48)), T0 + 300)).toBe(false);
  });

  it("a busy delegate's rate share renews early once its demand fell by more than a quarter (its isolates move)", () => {
    const at = (ms: number, perTerm: number, load?: DelegateRecord["load"]) => ({
      demand: {
        bucket: Math.floor((T0 + ms) / DEMAND_BUCKET_MS),
        curr: (perTerm * DEMAND_BUCKET_MS) / SHARE_TERM_MS,
        prev: 0,
      },
      ...(load === undefined ? {} : { load }),
    });
    const long = rateShare({ endsAtMs: T0 + 4000, renewAtMs: T0 + 3000, demand: 100 });
    const s = Math.floor((T0 + 1000) / 1000);
    const busy = { second: s, curr: DELEGATE_BUSY_CALLS_PER_S, prev: 0 };
    // 100 → 74: fell by 26, more than a quarter; 100 → 75: by 25, not more.
    expect(renewDue(withShare(long, at(1000, 74, busy)), T0 + 1000)).toBe(true);
    expect(renewDue(withShare(long, at(1000, 75, busy)), T0 + 1000)).toBe(false);
    // Not busy (no load, one call short, or a load of a second gone by): only by more than half.
    expect(renewDue(withShare(long, at(1000, 74)), T0 + 1000)).toBe(false);
    const almost = { ...busy, curr: DELEGATE_BUSY_CALLS_PER_S - 1 };
    expect(renewDue(withShare(long, at(1000, 74, almost)), T0 + 1000)).toBe(false);
    expect(renewDue(withShare(long, at(1000, 74, { ...busy, second: s - 2 })), T0 + 1000)).toBe(false);
    // The last second's count counts too; a rise by a quarter renews no sooner than before.
    expect(renewDue(withShare(long, at(1000, 74, { ...busy, second: s - 1 })), T0 + 1000)).toBe(true);
    expect(renewDue(withShare(long, at(1000, 140, busy)), T0 + 1000)).toBe(false);
  });

  it("demandMoved: by more than half of what it was, and more than RENEW_SLACK", () => {
    const table: [number, number, boolean][] = [
      [100, 150, false],
      [100, 151, true],
      [100, 50, false],
      [100, 49, true],
      [10, 18, false],
      [10, 19, true],
      [0, 8, false],
      [0, 9, true],
      [20, 8, true],
      [20, 10, false],
    ];
    for (const [was, now, moved] of table) expect([was, now, demandMoved(was, now)]).toEqual([was, now, moved]);
  });

  it("keptParts: all the parts while demand holds, its proportion with a margin when it fell, at least 1", () => {
    const table: [number, number | undefined, number, number][] = [
      [100, undefined, 10, 100],
      [100, 0, 10, 100],
      [100, 400, 400, 100],
      [100, 400, 500, 100],
      // 100 of demand now needs 100 + 2 × 10 + 1 = 121 of the 400 it was granted for: 100 × 121/400, rounded up.
      [100, 400, 100, 31],
      [100, 400, 1, 1],
      [100, 400, 20, 8],
      [1, 400, 1, 1],
      [100, 400, 0, 1],
      [0, 400, 0, 0],
    ];
    for (const [parts, was, now, kept] of table) {
      expect([parts, was, now, keptParts(parts, was, now)]).toEqual([parts, was, now, kept]);
    }
  });
});

describe("shareAsk", () => {
  it("asks for the demand and a margin of twice its square root, plus one", () => {
    const ask = (curr: number) =>
      shareAsk(withShare(null, { demand: { bucket: B0, curr, prev: 0 } }), "weur.0", win, "a1", T0).ask;
    expect(ask(0)).toEqual({ rule: win, holder: "weur.0", id: "a1", seq: 1, demand: 0, units: 1, giveBack: [] });
    // The last half term's cost, per term: 2 × 8 = 16, and 2 × 20 = 40.
    expect(ask(8).units).toBe(16 + 8 + 1);
    expect(ask(20).units).toBe(40 + 14 + 1);
    // The batch waiting for the ask counts when it is more.
    expect(shareAsk(NEW_DELEGATE, "weur.0", win, "a1", T0, false, 4).ask).toMatchObject({ demand: 4, units: 9 });
    const more = withShare(null, { demand: { bucket: B0, curr: 12, prev: 0 } });
    expect(shareAsk(more, "weur.0", win, "a1", T0, false, 4).ask.demand).toBe(24);
  });

  it("gives a window share's unused units back with earlier returns, and keeps the share without them", () => {
    const earlier = [{ units: 2, atMs: 5 }];
    const record = withShare(windowShare(), { giveBack: earlier });
    const out = shareAsk(record, "weur.0", win, "a1", T0);
    expect(out.ask.giveBack).toEqual([
      { units: 2, atMs: 5 },
      { units: 4, atMs: T0 - 7 },
    ]);
    expect(out.record).toEqual({
      ...record,
      share: windowShare({ unitsLeft: 0 }),
      giveBack: [],
      asks: 1,
      pending: { ask: out.ask, sentAtMs: T0 },
    });
    expect(out.sentAtMs).toBe(T0);
    expect(record.giveBack).toEqual(earlier);
    const spent = shareAsk(withShare(windowShare({ unitsLeft: 0 })), "weur.0", win, "a1", T0);
    expect(spent.ask.giveBack).toEqual([]);
    // A rate share gives nothing back; it is used `OLD_SHARE_FOR_MS` more at most (no round trip measured yet).
    const rated = withShare(rateShare());
    const cut = { endsAtMs: T0 + OLD_SHARE_FOR_MS, renewAtMs: T0 + OLD_SHARE_FOR_MS };
    expect(shareAsk(rated, "weur.0", rate, "a1", T0).record.share).toEqual({ ...rated.share, ...cut });
  });

  it("uses a live rate share `oldForMs` more at most after its renewal is sent, and says so", () => {
    // Its last round trip and 50 ms, at most 250 ms (or that with none measured): 30 -> 80, 199 -> 249, 201 -> 250.
    expect([undefined, 0, 30, 100, 199, 200, 201].map((rttMs) => oldShareForMs({ rttMs }))).toEqual([
      250, 250, 80, 150, 249, 250, 250,
    ]);
    const measured = withShare(rateShare({ rttMs: 30, askId: "a0" }));
    const out = shareAsk(measured, "weur.0", rate, "a1", T0 + 100);
    expect(out.ask).toMatchObject({ holding: "a0", oldForMs: 80 });
    expect(out.record.share).toMatchObject({ endsAtMs: T0 + 180, renewAtMs: T0 + 180, parts: 500 });
    // Ending sooner than that anyway: kept as it is (still said).
    const ending = shareAsk(measured, "weur.0", rate, "a1", T0 + 950);
    expect(ending.ask.oldForMs).toBe(80);
    expect(ending.record.share).toBe(measured.share);
    // Its renewal time before the cut stays (a share renewing from T0 + 750, cut at T0 + 780).
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 700).record.share).toMatchObject({
      endsAtMs: T0 + 780,
      renewAtMs: T0 + 750,
    });
    // An ended share, a release, a window share, no share: nothing said, nothing cut.
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 1000).ask.oldForMs).toBeUndefined();
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 100, true).ask.oldForMs).toBeUndefined();
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 100, true).record.share).toBe(measured.share);
    expect(shareAsk(withShare(windowShare()), "weur.0", win, "a1", T0).ask.oldForMs).toBeUndefined();
    expect(shareAsk(withShare(null), "weur.0", rate, "a1", T0).ask.oldForMs).toBeUndefined();
  });

  it("says the round trip of the renewal that answered its rate share (`rttMs`: the key's object sets the term by it)", () => {
    const measured = withShare(rateShare({ rttMs: 190, askId: "a0" }));
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 100).ask.rttMs).toBe(190);
    // Ended, it is still the last round trip known.
    expect(shareAsk(measured, "weur.0", rate, "a1", T0 + 1000).ask.rttMs).toBe(190);
    // None measured (a first grant), a window share, no share: not said.
    expect(shareAsk(withShare(rateShare()), "weur.0", rate, "a1", T0).ask.rttMs).toBeUndefined();
    expect(shareAsk(withShare(windowShare()), "weur.0", win, "a1", T0).ask.rttMs).toBeUndefined();
    expect(shareAsk(withShare(null), "weur.0", rate, "a1", T0).ask.rttMs).toBeUndefined();
  });

  it("cuts a rate share whose demand fell to the parts it still needs, and says so (`keep`)", () => {
    // Granted 500 parts for 400 of demand; 50 in the last half term: 100 per term, needing 100 + 21 = 121.
    const full = emptyState(half, T0 - 1000); // refilled: 500 tokens
    const record = withShare(rateShare({ demand: 400, state: full }), { demand: { bucket: B0, curr: 50, prev: 0 } });
    const out = shareAsk(record, "weur.0", rate, "a1", T0);
    expect(out.ask).toMatchObject({ demand: 100, keep: 152 });
    // It says which grant it holds (the ask its share answered), when its share kept that id.
    expect(out.ask.holding).toBeUndefined();
    const named = withShare(rateShare({ demand: 400, askId: "a0" }), { demand: { bucket: B0, curr: 50, prev: 0 } });
    expect(shareAsk(named, "weur.0", rate, "a1", T0).ask).toMatchObject({ keep: 152, holding: "a0" });
    // An ended share too: the key's object then says whether its parts were still held (`ShareGrant.held`).
    expect(shareAsk(named, "weur.0", rate, "a1", T0 + 1000).ask.holding).toBe("a0");
    // 500 × 121 / 400 = 151.25, rounded up; the bucket converted to the 152-part slice (its burst 152).
    expect(out.record.share).toMatchObject({ parts: 152, demand: 100 });
    const slice = delegateSlice(rate.params, 152)!;
    expect(peekState(slice, out.record.share!.state!, T0).remaining).toBe(152);
    // Demand that held or grew, a share that ended, a release, or a share from before `demand` was kept: no cut.
    const same = withShare(rateShare({ demand: 100 }), { demand: { bucket: B0, curr: 50, prev: 0 } });
    expect(shareAsk(same, "weur.0", rate, "a1", T0).ask.keep).toBeUndefined();
    expect(shareAsk(record, "weur.0", rate, "a1", T0 + 1000).ask.keep).toBeUndefined();
    expect(shareAsk(record, "weur.0", rate, "a1", T0, true).ask.keep).toBeUndefined();
    const old = withShare(rateShare(), { demand: { bucket: B0, curr: 50, prev: 0 } });
    const uncut = shareAsk(old, "weur.0", rate, "a1", T0).record.share;
    expect(uncut).toEqual({ ...old.share, endsAtMs: T0 + OLD_SHARE_FOR_MS, renewAtMs: T0 + OLD_SHARE_FOR_MS });
  });

  it("asks under the newest rules version it knows, and lets go with nothing asked", () => {
    const newer = windowShare({ rule: { ...win, version: 3 } });
    expect(shareAsk(withShare(newer), "weur.0", win, "a1", T0).ask.rule.version).toBe(3);
    expect(shareAsk(withShare(windowShare()), "weur.0", { ...win, version: 4 }, "a", T0).ask.rule.version).toBe(4);
    const same = windowShare({ rule: { id: "old", params: win.params, version: 2 } });
    expect(shareAsk(withShare(same), "weur.0", win, "a1", T0).ask.rule).toBe(win);
    const released = shareAsk(withShare(null, { demand: { bucket: B0, curr: 18, prev: 0 } }), "x", win, "a", T0, true);
    expect(released.ask).toEqual({
      rule: win,
      holder: "x",
      id: "a",
      seq: 1,
      demand: 36,
      units: 0,
      giveBack: [],
      release: true,
    });
  });
});

describe("an unanswered renewal (a restart, a failure)", () => {
  it("is sent again as it was, its id and send time, for a quarter term; then a new ask replaces it", () => {
    const first = shareAsk(withShare(windowShare(), { giveBack: [{ units: 2, atMs: 5 }] }), "weur.0", win, "a1", T0);
    // The share's units and the earlier returns went with the first ask: the same ask again, nothing given twice.
    for (const atMs of [T0, T0 + 1, T0 + PENDING_RESEND_MS - 1]) {
      const again = shareAsk(first.record, "weur.0", win, "a2", atMs);
      expect(again.ask).toBe(first.ask);
      expect(again.sentAtMs).toBe(T0);
      expect(again.record).toBe(first.record);
    }
    const late = shareAsk(first.record, "weur.0", win, "a3", T0 + PENDING_RESEND_MS);
    // Counted (`seq`): the key's object changes no share for an ask a later one overtook (share_grant.ts).
    expect([first.ask.seq, first.record.asks, late.ask.seq, late.record.asks]).toEqual([1, 1, 2, 2]);
    expect(late.ask).toMatchObject({ id: "a3", giveBack: [] });
    expect(late.record.pending).toEqual({ ask: late.ask, sentAtMs: T0 + PENDING_RESEND_MS });
    // A clock that reads earlier than the send: a new ask.
    expect(shareAsk(first.record, "weur.0", win, "a4", T0 - 1).ask.id).toBe("a4");
  });

  it("is answered by the grant for its id, not by another's", () => {
    const first = shareAsk(withShare(null), "weur.0", win, "a1", T0);
    const grant: ShareGrant = {
      atMs: T0 + 3,
      kind: "window",
      parts: 0,
      units: 7,
      remaining: 10,
      termMs: 1000,
      rule: win,
      hot: true,
    };
    expect(adoptGrant(first.record, first.ask, grant, T0, T0 + 5).pending).toBeUndefined();
    const other = { ...first.ask, id: "zz" };
    expect(adoptGrant(first.record, other, grant, T0, T0 + 5).pending).toEqual(first.record.pending);
  });
});

describe("a rate renewal that failed (timed out: its grant, if it came, is never adopted)", () => {
  it("says it holds no parts (`keep: 0`), so the key's object frees the lost grant's at once", () => {
    // The key's object granted weur.0's renewal a1 600 parts for a whole term; the answer came past the timeout.
    const entry = (holder: string, parts: number, askId: string): ShareEntry => ({
      holder,
      parts,
      units: 0,
      atMs: T0,
      endsAtMs: T0 + 1000,
      prevParts: 0,
      prevEndsAtMs: T0 - 1000,
      demand: 100,
      askId,
    });
    const shares = { entries: [entry("weur.0", 600, "a1"), entry("x", 400, "x1")], hotUntilMs: T0 + 5000 };
    const key: LimiterRecord = {
      v: 1,
      params: rate.params,
      fingerprint: fingerprintOf(rate.params),
      state: emptyState(rate.params, T0),
      version: 2,
      shares,
    };
    // The delegate, its share dropped by the failure, asks anew: no share, so none of its parts kept.
    const lost = withShare(null, { demand: { bucket: B0 + 1, curr: 50, prev: 0 } });
    const next = shareAsk(lost, "weur.0", rate, "a2", T0 + 600);
    expect(next.ask).toMatchObject({ keep: 0 });
    expect(next.ask.holding).toBeUndefined();
    const out = shareRecord(key, next.ask, T0 + 600);
    // Only the new grant is promised to weur.0: the 600 parts of a1 are not held over until T0 + 1500.
    const mine = out.record?.shares?.entries.find((e) => e.holder === "weur.0");
    expect(mine).toMatchObject({ prevParts: 0, parts: out.grant.parts });
    expect(directParts(out.record!.shares!, T0 + 600)).toBe(600 - out.grant.parts);
    // A window ask, or one from a delegate holding a share: no such claim.
    expect(shareAsk(withShare(null), "weur.0", win, "w1", T0).ask.keep).toBeUndefined();
    expect(shareAsk(withShare(rateShare()), "weur.0", rate, "r1", T0).ask.keep).toBeUndefined();
  });
});

describe("adoptGrant", () => {
  const ask: ShareAsk = { rule: win, holder: "weur.0", id: "a1", demand: 5, units: 7, giveBack: [] };
  const grant = (over: Partial<ShareGrant>): ShareGrant => ({
    atMs: T0 + 3,
    kind: "window",
    parts: 0,
    units: 3,
    remaining: 0,
    termMs: 1001,
    rule: win,
    hot: true,
    ...over,
  });

  it("holds window units from the ask's send for the term, renewing in its last quarter", () => {
    const got = adoptGrant(NEW_DELEGATE, ask, grant({}), T0 - 10, T0);
    expect(got).toEqual({
      ...NEW_DELEGATE,
      share: {
        kind: "window",
        rule: win,
        parts: 0,
        state: null,
        units: 3,
        unitsLeft: 3,
        short: true,
        atMs: T0 + 3,
        demand: 5,
        askId: "a1",
        endsAtMs: T0 + 991,
        renewAtMs: T0 + 991 - 250,
      },
      hot: true,
    });
    expect(adoptGrant(NEW_DELEGATE, ask, grant({ remaining: 1 }), T0, T0).share?.short).toBe(false);
    // A renewal's round trip is kept (a rate share renews that early: renewDue); a first ask's is not.
    expect(adoptGrant(NEW_DELEGATE, { ...ask, holding: "a0" }, grant({}), T0 - 10, T0).share?.rttMs).toBe(10);
    expect(adoptGrant(NEW_DELEGATE, ask, grant({}), T0 - 10, T0).share?.rttMs).toBeUndefined();
    expect(adoptGrant(NEW_DELEGATE, ask, grant({ units: 7 }), T0, T0).share?.short).toBe(false);
    expect(adoptGrant(NEW_DELEGATE, ask, grant({ units: 8 }), T0, T0).share?.short).toBe(false);
  });

  it("keeps a first ask's round trip when its grant ended on its way, and says it in the next ask", () => {
    // A cold start (global-rate at 5,000 isolates): a far delegate's first ask waited 410 ms in the key's object's queue,
    // past its 250 ms term. Its next ask says that round trip, so the next term (`UNSETTLED_TERM_RTTS` of them) outlasts
    // it and the batches waiting on it are decided from the share, not passed through to the key's object one by one.
    const first = { ...ask, rule: rate };
    const late = grant({ kind: "rate", parts: 40, units: 0, termMs: 250, rule: rate });
    const adopted = adoptGrant(NEW_DELEGATE, first, late, T0 - 410, T0);
    expect(adopted.share?.rttMs).toBe(410);
    expect(shareAsk(adopted, "weur.0", rate, "a2", T0).ask.rttMs).toBe(410);
    expect(adoptGrant(NEW_DELEGATE, first, late, T0 - 250, T0).share?.rttMs).toBe(250);
    // In time (its term not over on arrival): a first ask's round trip is not kept, as before.
    expect(adoptGrant(NEW_DELEGATE, first, late, T0 - 249, T0).share?.rttMs).toBeUndefined();
  });

  it("carries the units still lent over a grant of the same window and parameters only", () => {
    const lent = withShare(windowShare({ atMs: T0 + 1, lent: 6 }));
    expect(adoptGrant(lent, ask, grant({}), T0, T0).share?.lent).toBe(6);
    // Another window (the old share's was the last minute's), other parameters, or nothing lent: none.
    expect(adoptGrant(withShare(windowShare({ lent: 6 })), ask, grant({}), T0, T0).share?.lent).toBeUndefined();
    const other = { ...win, params: fixedWindow(90, 60_000) };
    expect(adoptGrant(lent, ask, grant({ rule: other }), T0, T0).share?.lent).toBeUndefined();
    expect(adoptGrant(withShare(windowShare({ atMs: T0 + 1 })), ask, grant({}), T0, T0).share).not.toHaveProperty(
      "lent",
    );
  });

  it("gives units given back into a window share while its renewal was out on to the key's object", () => {
    // The ask took the share's units left (shareAsk); an isolate then gave 2 back into it, naming its grant.
    const sent = shareAsk(withShare(windowShare({ atMs: T0 + 1, unitsLeft: 0 })), "weur.0", win, "a1", T0);
    const back = delegateCall(sent.record, batch(win, [], { giveBack: [{ units: 2, atMs: T0 + 1 }] }), T0 + 5);
    expect(back.record.share?.unitsLeft).toBe(2);
    expect(back.record.giveBack).toEqual([]);
    // Adopting the answer keeps them for the next ask (they were dropped with the old share, the key short of them).
    const adopted = adoptGrant(back.record, ask, grant({}), T0, T0 + 10);
    expect(adopted.share).toMatchObject({ units: 3, unitsLeft: 3 });
    expect(adopted.giveBack).toEqual([{ units: 2, atMs: T0 + 1 }]);
    expect(shareAsk(adopted, "weur.0", win, "a2", T0 + 20).ask.giveBack).toContainEqual({ units: 2, atMs: T0 + 1 });
    // Nothing given back since the ask: nothing added.
    expect(adoptGrant(sent.record, ask, grant({}), T0, T0 + 10).giveBack).toEqual([]);
  });

  it("holds no share for a grant of none, keeping what it has to give back", () => {
    const record = withShare(windowShare(), { giveBack: [{ units: 1, atMs: 2 }] });
    expect(adoptGrant(record, ask, grant({ kind: "none", hot: false }), T0, T0)).toEqual({
      ...record,
      share: null,
      hot: false,
    });
  });

  it("starts a new rate slice empty, and carries an old slice's tokens over to new parts", () => {
    const fresh = adoptGrant(NEW_DELEGATE, ask, grant({ kind: "rate", parts: 500, units: 0, rule: rate }), T0, T0);
    expect(fresh.share).toMatchObject({ kind: "rate", parts: 500, units: 0, unitsLeft: 0, short: false });
    expect(fresh.share?.state).toEqual(emptyState(half, T0));
    // 100 ms later the half slice holds 50 tokens; a quarter slice (1 token per 4 ms, burst 250) keeps the 50.
    const old = withShare(rateShare());
    const moved = adoptGrant(old, ask, grant({ kind: "rate", parts: 250, units: 0, rule: rate }), T0, T0 + 100);
    expect(moved.share?.state).toEqual({ tokensScaled: 50 * 4, lastMs: T0 + 100 });
    // From a window share (no slice), or no parts: empty, or none.
    const fromWindow = adoptGrant(
      withShare(windowShare()),
      ask,
      grant({ kind: "rate", parts: 500, rule: rate }),
      T0,
      T0,
    );
    expect(fromWindow.share?.state).toEqual(emptyState(half, T0));
    const noParts = adoptGrant(old, ask, grant({ kind: "rate", parts: 0, rule: rate }), T0, T0);
    expect(noParts.share).toMatchObject({ kind: "rate", parts: 0, state: null });
    const fromNone = adoptGrant(
      withShare(rateShare({ parts: 0, state: null })),
      ask,
      grant({ kind: "rate", parts: 500, rule: rate }),
      T0,
      T0 + 5,
    );
    // Its grant was on its way 2 ms (half the 5 ms round trip): no credit for them, empty.
    expect(peekState(half, fromNone.share!.state!, T0 + 5).remaining).toBe(0);
  });

  it("credits nothing for the parts it gained while the answer was on its way (the flight credit was removed)", () => {
    const rateGrant = (parts: number) => grant({ kind: "rate", parts, units: 0, rule: rate });
    const level = (r: DelegateRecord, parts: number, nowMs: number) =>
      peekState(delegateSlice(rate.params, parts)!, r.share!.state!, nowMs).remaining;
    // A first grant of 500 parts (0.5 token a ms), asked 100 ms before: empty at adoption.
    expect(level(adoptGrant(NEW_DELEGATE, ask, rateGrant(500), T0 - 100, T0), 500, T0)).toBe(0);
    // A renewal from 200 live parts (empty) to 500: the old bucket carried over (empty), nothing for the 300 gained.
    const held = withShare(
      rateShare({ parts: 200, state: emptyState(delegateSlice(rate.params, 200)!, T0), rttMs: 40 }),
    );
    expect(level(adoptGrant(held, ask, rateGrant(500), T0 - 100, T0), 500, T0)).toBe(0);
  });
});

describe("delegateCall", () => {
  it("decides a window batch in order from its units, counting the demand", () => {
    const out = delegateCall(withShare(windowShare()), batch(win, [1, 0, 2, 2, 101]), T0 + 400);
    expect(out.result.results.map(brief)).toEqual(["+3", "invalid_cost", "+1", "-0", "cost_exceeds_capacity"]);
    expect(out.result.results[0]).toEqual({
      ok: true,
      atMs: T0 - 7,
      decision: { allowed: true, remaining: 3, resetAfterMs: 600, retryAfterMs: null, delayMs: 0 },
    });
    expect(out.result.results[3]).toEqual({
      ok: true,
      atMs: T0 + 400,
      decision: { allowed: false, remaining: 0, resetAfterMs: 600, retryAfterMs: 600, delayMs: 0 },
    });
    expect(out.result).toMatchObject({ atMs: T0 + 400, lease: null, replayed: false, hot: true });
    expect(out.record.share?.unitsLeft).toBe(1);
    expect(out.record.demand).toEqual({ bucket: B0, curr: 1 + 2 + 2 + 101, prev: 0 });
    expect(out.record.calls).toEqual([{ id: "b1", atMs: T0 + 400, verdicts: "1e10e", leaseUnits: 0, leaseForMs: 0 }]);
    const cold = delegateCall(withShare(windowShare(), { hot: false }), batch(win, [1]), T0);
    expect(cold.result.hot).toBe(false);
  });

  it("adds the demand to this term's and rolls the previous one", () => {
    const record = withShare(windowShare(), { demand: { bucket: B0 - 1, curr: 7, prev: 3 } });
    expect(delegateCall(record, batch(win, [1, 1.5, -2]), T0).record.demand).toEqual({ bucket: B0, curr: 1, prev: 7 });
  });

  it("refuses without a share or after its end, waiting at least a ms", () => {
    const none = delegateCall(NEW_DELEGATE, batch(win, [1]), T0);
    expect(none.result.results[0]).toEqual({
      ok: true,
      atMs: T0,
      decision: { allowed: false, remaining: 0, resetAfterMs: 1, retryAfterMs: 1, delayMs: 0 },
    });
    const ended = delegateCall(withShare(windowShare()), batch(win, [1]), T0 + 1000);
    expect(ended.result.results.map(brief)).toEqual(["-0"]);
    expect(ended.record.share?.unitsLeft).toBe(4);
  });

  it("decides a rate batch from its slice's bucket", () => {
    const share = rateShare();
    const out = delegateCall(withShare(share), batch(rate, [1, 5, 501]), T0 + 10);
    // 10 ms of 500/s: 5 tokens (1 per 2 ms, so scaled by 2).
    expect(out.result.results.map(brief)).toEqual(["+4", "-4", "-0"]);
    expect(out.result.results[0]).toMatchObject({ ok: true, atMs: T0 + 10 });
    expect(out.record.share?.state).toEqual({ tokensScaled: 4 * 2, lastMs: T0 + 10 });
    // A full slice admits its whole capacity at once, and no more: its part of the burst (500).
    const full = rateShare({ state: { tokensScaled: 500 * 2, lastMs: T0 } });
    expect(delegateCall(withShare(full), batch(rate, [500]), T0).result.results.map(brief)).toEqual(["+0"]);
    expect(delegateCall(withShare(full), batch(rate, [1, 500]), T0).result.results.map(brief)).toEqual([
      "+499",
      "-499",
    ]);
    // It fills to it: empty at T0, 1.2 s of 500/s later it holds 500, the part's burst.
    const long = rateShare({ endsAtMs: T0 + 4000, renewAtMs: T0 + 3000 });
    const refilled = delegateCall(withShare(long), batch(rate, [500]), T0 + 1200);
    expect(refilled.result.results.map(brief)).toEqual(["+0"]);
    const noParts = delegateCall(withShare(rateShare({ parts: 0, state: null })), batch(rate, [1]), T0 + 10);
    expect(noParts.result.results.map(brief)).toEqual(["-0"]);
    const noState = delegateCall(withShare(rateShare({ state: null })), batch(rate, [1]), T0 + 10);
    expect(noState.result.results.map(brief)).toEqual(["-0"]);
  });

  it("takes its own window units back while the share lasts, capped at what it was granted", () => {
    const share = windowShare();
    const back = (units: number, atMs = share.atMs) => ({ units, atMs });
    const out = delegateCall(
      withShare(share),
      batch(win, [], { giveBack: [back(3), back(0), back(-2), back(1.5)] }),
      T0,
    );
    expect(out.record.share?.unitsLeft).toBe(7);
    expect(out.record.giveBack).toEqual([]);
    const capped = delegateCall(withShare(share), batch(win, [], { giveBack: [back(9)] }), T0);
    expect(capped.record.share?.unitsLeft).toBe(10);
    // Another grant's units, or after the share's end: kept to give back to the key's object.
    const other = delegateCall(withShare(share), batch(win, [], { giveBack: [back(2, 5)] }), T0);
    expect(other.record).toMatchObject({ giveBack: [back(2, 5)], share: { unitsLeft: 4 } });
    const late = delegateCall(withShare(share), batch(win, [], { giveBack: [back(2)] }), T0 + 1000);
    expect(late.record.giveBack).toEqual([back(2)]);
    const none = delegateCall(NEW_DELEGATE, batch(win, [], { giveBack: [back(2)] }), T0);
    expect(none.record.giveBack).toEqual([back(2)]);
    // Returns kept from earlier stay, with the new ones after them.
    const kept = delegateCall(
      withShare(null, { giveBack: [back(1, 9)] }),
      batch(win, [1], { giveBack: [back(2)] }),
      T0,
    );
    expect(kept.record.giveBack).toEqual([back(1, 9), back(2)]);
    expect(delegateCall(withShare(null, { giveBack: [back(1, 9)] }), batch(win, [1]), T0).record.giveBack).toEqual([
      back(1, 9),
    ]);
  });

  it("takes a sub-lease's return into its reservation (the used part charged), drops one naming none", () => {
    const level = (r: DelegateRecord, nowMs: number) => peekState(half, r.share!.state!, nowMs).remaining;
    // 5 tokens at T0 + 10 (500/s): 2 lent (half of them), reserved, taken out (within 480 ms of refill).
    const lent = delegateCall(withShare(rateShare()), batch(rate, [], { lease: { units: 4, ttlMs: 480 } }), T0 + 10);
    expect(lent.result.lease).toMatchObject({ units: 2, atMs: T0 + 10 });
    expect(level(lent.record, T0 + 10)).toBe(3);
    // 1 of the 2 back 10 ms later: the 1 used is charged (3 + 5 + 1 unused back), the reservation gone.
    const back = { units: 1, atMs: T0 + 10 };
    const out = delegateCall(lent.record, batch(rate, [], { id: "b2", giveBack: [back] }), T0 + 20);
    expect(level(out.record, T0 + 20)).toBe(9);
    expect(out.record.share?.reserved).toBeUndefined();
    expect(out.record.giveBack).toEqual([]);
    // The same again (another delegate's lease, a lease already settled): no reservation of its, dropped.
    const again = delegateCall(out.record, batch(rate, [], { id: "b3", giveBack: [back] }), T0 + 20);
    expect(again.record.share?.state).toEqual(out.record.share?.state);
    const noSlice = delegateCall(withShare(rateShare({ state: null })), batch(rate, [], { giveBack: [back] }), T0);
    // Not sent on to the key's object: its units never left the key's object's bucket (sublease.ts `takeBack`).
    expect(noSlice.record.giveBack).toEqual([]);
  });

  it("sends a rate rule's admission given back on to the key's object, even when it names a reservation", () => {
    // What a composed rule's refusal, or an answer that came after the isolate's budget, gives back
    // (src/isolate/coalesce_calls.ts marks it `admitted`): the key's object's late refund makes it exact; dropped
    // here, the key stays charged for a request that was never let through (test/integration/composition.test.ts).
    const lent = delegateCall(withShare(rateShare()), batch(rate, [], { lease: { units: 4, ttlMs: 480 } }), T0 + 10);
    const refund = { units: 1, atMs: T0 + 10, admitted: true as const };
    const out = delegateCall(lent.record, batch(rate, [], { id: "b2", giveBack: [refund] }), T0 + 20);
    expect(out.record.giveBack).toEqual([refund]);
    expect(out.record.share?.reserved).toEqual(lent.record.share?.reserved);
    expect(out.record.share?.state).toEqual(lent.record.share?.state);
    // A window rule's admission: into the share of its window as before (the flag changes nothing there).
    const win1 = delegateCall(withShare(windowShare()), batch(win, [], { giveBack: [refund] }), T0 + 20);
    const win0 = delegateCall(
      withShare(windowShare()),
      batch(win, [], { giveBack: [{ units: 1, atMs: T0 + 10 }] }),
      T0 + 20,
    );
    expect(win1.record.share).toEqual(win0.record.share);
    expect(win1.record.giveBack).toEqual(win0.record.giveBack.map((b) => ({ ...b, admitted: true })));
  });

  it("answers a retried call as remembered, the same record back", () => {
    const first = delegateCall(withShare(windowShare()), batch(win, [2, 3, 0]), T0 + 400);
    const again = delegateCall(first.record, batch(win, [2, 3, 0, 1, 101]), T0 + 500);
    expect(again.record).toBe(first.record);
    expect(again.result).toEqual({
      atMs: T0 + 500,
      lease: null,
      replayed: true,
      hot: true,
      results: [
        {
          ok: true,
          atMs: T0 + 400,
          decision: { allowed: true, remaining: 0, resetAfterMs: 500, retryAfterMs: null, delayMs: 0 },
        },
        {
          ok: true,
          atMs: T0 + 400,
          decision: { allowed: false, remaining: 0, resetAfterMs: 500, retryAfterMs: 500, delayMs: 0 },
        },
        { ok: false, error: "invalid_cost" },
        { ok: false, error: "invalid_cost" },
        { ok: false, error: "cost_exceeds_capacity" },
      ],
    });
    const noShare = delegateCall({ ...first.record, share: null, hot: false }, batch(win, [2]), T0 + 500);
    expect(noShare.result.results[0]).toMatchObject({ decision: { resetAfterMs: 1 } });
    expect(noShare.result.hot).toBe(false);
    const ended = delegateCall(first.record, batch(win, [2, 3]), T0 + 5000);
    expect(ended.result.results[1]).toMatchObject({ decision: { resetAfterMs: 1, retryAfterMs: 1 } });
  });

  it(`remembers the last ${DELEGATE_CALL_MEMORY} calls`, () => {
    const calls: AppliedCall[] = Array.from({ length: DELEGATE_CALL_MEMORY }, (_, i) => ({
      id: `c${i}`,
      atMs: T0,
      verdicts: "1",
      leaseUnits: 0,
      leaseForMs: 0,
    }));
    const out = delegateCall(withShare(windowShare(), { calls }), batch(win, [1]), T0);
    expect(out.record.calls.map((c) => c.id)).toEqual([...calls.slice(1).map((c) => c.id), "b1"]);
    const fewer = delegateCall(withShare(windowShare(), { calls: calls.slice(2) }), batch(win, [1]), T0);
    expect(fewer.record.calls).toHaveLength(DELEGATE_CALL_MEMORY - 1);
  });
});

describe("delegateIdle", () => {
  it("is idle with no live share and nothing to give back", () => {
    expect(delegateIdle(NEW_DELEGATE, T0)).toBe(true);
    expect(delegateIdle(withShare(windowShare()), T0 + 999)).toBe(false);
    expect(delegateIdle(withShare(windowShare()), T0 + 1000)).toBe(true);
    expect(delegateIdle(withShare(null, { giveBack: [{ units: 1, atMs: 1 }] }), T0)).toBe(false);
    expect(delegateIdle(withShare(windowShare(), { giveBack: [{ units: 1, atMs: 1 }] }), T0 + 1000)).toBe(false);
  });
});

describe("a delegate's load (its shards)", () => {
  const S0 = Math.floor(T0 / 1000);
  it("counts calls in the current and the last second", () => {
    const countCall = (load: DelegateRecord["load"], nowMs: number) => countLoad({ load }, nowMs).load;
    expect(countCall(undefined, T0)).toEqual({ second: S0, curr: 1, prev: 0 });
    expect(countCall({ second: S0, curr: 4, prev: 2 }, T0 + 999)).toEqual({ second: S0, curr: 5, prev: 2 });
    expect(countCall({ second: S0, curr: 4, prev: 2 }, T0 + 1000)).toEqual({ second: S0 + 1, curr: 1, prev: 4 });
    expect(countCall({ second: S0, curr: 4, prev: 2 }, T0 + 2000)).toEqual({ second: S0 + 2, curr: 1, prev: 0 });
    // A clock stepping back counts nothing new.
    const load = { second: S0, curr: 4, prev: 2 };
    expect(countCall(load, T0 - 1)).toBe(load);
  });

  it("says busy from DELEGATE_BUSY_CALLS_PER_S calls in a second (its isolates then spread over the shards)", () => {
    const S = Math.floor((T0 + 400) / 1000);
    // (A call the last second: not a first second of calls, where twice the busy pace says busy sooner, below.)
    const under = withShare(windowShare(), { load: { second: S, curr: DELEGATE_BUSY_CALLS_PER_S - 2, prev: 1 } });
    const quiet = delegateCall(under, batch(win, [1]), T0 + 400);
    expect(quiet.result.busy).toBeUndefined();
    expect(quiet.record.load).toEqual({ second: S, curr: DELEGATE_BUSY_CALLS_PER_S - 1, prev: 1 });
    expect(delegateCall(quiet.record, batch(win, [1], { id: "next" }), T0 + 400).result.busy).toBe(true);
    const last = withShare(windowShare(), { load: { second: S - 1, curr: DELEGATE_BUSY_CALLS_PER_S, prev: 0 } });
    expect(delegateCall(last, batch(win, [1]), T0 + 400).result.busy).toBe(true);
  });

  it("a busy answer carries the spread: the share of its calls to move for the rest to be DELEGATE_AIM_CALLS_PER_S", () => {
    const busyAt = DELEGATE_BUSY_CALLS_PER_S;
    expect([busyAt, DELEGATE_AIM_CALLS_PER_S]).toEqual([250, 200]);
    // [calls this second before the batch, calls the last second, ms into the second, the answer's busy and spread]
    const table: [number, number, number, { busy?: true; spread?: number }][] = [
      [busyAt - 2, 1, 400, {}],
      // 250 calls in 400 ms: 625 a second, 200 of them stay.
      [busyAt - 1, 1, 400, { busy: true, spread: 1 - 200 / 625 }],
      // A first second of calls (none the last): busy from twice the busy pace too (a cold start's surge at the first
      // shard), over at least a quarter second: 200 calls in 400 ms, 125 in 100 ms; 199 and 124 are under it.
      [198, 0, 400, {}],
      [199, 0, 400, { busy: true, spread: 1 - 200 / 500 }],
      [123, 0, 100, {}],
      [124, 0, 100, { busy: true, spread: 1 - 200 / 500 }],
      [busyAt - 2, 0, 400, { busy: true, spread: 1 - 200 / 622.5 }],
      // Not a first second: the same pace, and one call the last second, is not busy.
      [199, 1, 400, {}],
      // The current second over at least a quarter second: 250 calls in 100 ms count as 1,000 a second, not 2,500.
      [busyAt - 1, 0, 100, { busy: true, spread: 1 - 200 / 1000 }],
      [busyAt - 1, 0, 900, { busy: true, spread: 1 - 200 / (250 / 0.9) }],
      // Busy by the last second: its 300 calls, more than the current second's pace.
      [10, 300, 500, { busy: true, spread: 1 - 200 / 300 }],
      [400, 300, 500, { busy: true, spread: 1 - 200 / 802 }],
      // Twice the threshold in a second: all (the isolates take as many as there are other shards).
      [2 * busyAt - 1, 0, 999, { busy: true, spread: 1 }],
      [0, 2 * busyAt, 999, { busy: true, spread: 1 }],
    ];
    for (const [curr, prev, ms, answer] of table) {
      const record = withShare(windowShare(), { load: { second: Math.floor(T0 / 1000), curr, prev } });
      const { busy, spread } = delegateCall(record, batch(win, [1]), T0 + ms).result;
      const got = { ...(busy === undefined ? {} : { busy }), ...(spread === undefined ? {} : { spread }) };
      expect([curr, prev, ms, got]).toEqual([curr, prev, ms, answer]);
    }
  });
});

describe("a sub-lease ask an empty rate slice cannot grant (leaseWaitMs)", () => {
  // The slice: 500/s, empty at T0. An ask of 10 for 480 ms: the bucket holds 10 in 20 ms.
  const ask = (demand: DelegateRecord["demand"]) =>
    delegateCall(withShare(rateShare(), { demand }), batch(rate, [], { lease: { units: 10, ttlMs: 480 } }), T0).result;

  it("says when the slice will hold the ask, when the delegate is asked no more than its rate", () => {
    const out = ask({ bucket: B0, curr: 0, prev: 0 });
    expect(out.lease).toBeNull();
    expect(out.leaseWaitMs).toBe(20);
  });

  it("k times longer when its demand is k times its slice's rate, never beyond the sub-lease's term", () => {
    // 1,000 asked in the last half term: 2,000 a term, 4 times the slice's 500/s.
    expect(ask({ bucket: B0, curr: 0, prev: 1000 }).leaseWaitMs).toBe(80);
    expect(ask({ bucket: B0, curr: 0, prev: 100_000 }).leaseWaitMs).toBe(480);
  });
});
