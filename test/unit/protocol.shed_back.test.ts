/**
 * Shed tokens given back (`shedBack`): a rate share renewed with fewer parts than its delegate held makes a smaller
 * slice, which drops the tokens it cannot hold. The grant says when the parts it took away stop being promised
 * (`freedAtMs`); the delegate sends what its bucket dropped to the key's object for then, and the key's object takes
 * it into its direct slice from then only, no more than that slice lacked from full since (late_refund.ts).
 */
import { describe, expect, it } from "vitest";
import { adoptGrant, type DelegateRecord, freeTokens, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { type DelegatePorts, DelegateRun, type DelegateWho } from "../../src/protocol/delegate_run.ts";
import { emptyState, keyCall, keyPeek, type ShareAsk, type ShareGrant } from "../../src/protocol/share.ts";
import { shareRecord, withFreedAt } from "../../src/protocol/share_grant.ts";
import {
  type CallInput,
  type CallResult,
  callRecord,
  fullState,
  type LimiterRecord,
  type LimiterRule,
  newRecord,
  peekState,
} from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { DELEGATE_RESEND_MS, SHED_MARGIN_MS } from "../../src/protocol/tunables.ts";
import { heldRateShare, rateGrantOf, shareAskOf } from "../support/held_share.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** 1,000/s, burst 1,000: a part is one token of burst. */
const rule: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 1000), version: 2 };
const slice = (parts: number) => delegateSlice(rule.params, parts)!;
const ask = (holder: string, id: string, demand: number, over: Partial<ShareAsk> = {}): ShareAsk =>
  shareAskOf(rule, holder, id, demand, over);
/** A delegate holding 500 parts, full (500 tokens), granted at T0 (ask `a1`). */
const held = (state = fullState(slice(500), T0)): DelegateRecord => ({
  ...NEW_DELEGATE,
  share: heldRateShare(rule, 500, state, T0, { askId: "a1" }),
});
const smaller = (over: Partial<ShareGrant> = {}): ShareGrant =>
  rateGrantOf(rule, 200, T0 + 100, { held: 500, freedAtMs: T0 + 160, ...over });
const renewal = ask("weur.0", "a2", 50, { holding: "a1" });

describe("the key's object says when a smaller grant's parts are freed", () => {
  it("a renewal with fewer parts than held: `freedAtMs` is its entry's end of the old parts' promise", () => {
    let rec: LimiterRecord | null = null;
    rec = shareRecord(rec, ask("a", "a1", 600), T0).record;
    rec = shareRecord(rec, ask("b", "b1", 600), T0 + 1).record;
    const grown = shareRecord(rec, ask("a", "a2", 600, { holding: "a1", oldForMs: 100 }), T0 + 200);
    expect(grown.grant.parts).toBe(500);
    expect(grown.grant.freedAtMs).toBeUndefined();
    const cut = shareRecord(grown.record, ask("a", "a3", 60, { holding: "a2", oldForMs: 100 }), T0 + 400);
    const entry = cut.record?.shares?.entries.find((e) => e.holder === "a");
    expect(cut.grant.parts).toBe(91);
    expect(entry?.prevParts).toBe(500);
    expect(cut.grant.freedAtMs).toBe(entry?.prevEndsAtMs);
    // The grown share's half term ends at T0 + 700; the ask's `oldForMs` cuts the old parts' promise to T0 + 500.
    expect(cut.grant.freedAtMs).toBe(T0 + 500);
  });
});

describe("`freedAtMs` on a grant", () => {
  const grant = smaller({ freedAtMs: undefined });
  it.each([
    ["fewer parts than promised: when the rest stop being", { parts: 201, untilMs: T0 + 160 }, T0 + 160],
    ["a promise already over: now", { parts: 201, untilMs: T0 + 50 }, T0 + 100],
    ["as many parts: none", { parts: 200, untilMs: T0 + 160 }, undefined],
    ["no parts in use: none", null, undefined],
  ] as const)("%s", (_name, prev, freedAtMs) => {
    expect(withFreedAt(grant, prev, T0 + 100).freedAtMs).toBe(freedAtMs);
  });
  it("a window grant: none", () => {
    const window = { ...grant, kind: "window" as const, parts: 0, units: 5 };
    expect(withFreedAt(window, { parts: 201, untilMs: T0 + 160 }, T0 + 100).freedAtMs).toBeUndefined();
  });
});

describe("a grant notes the direct slice's deficit before it takes tokens out", () => {
  it("a shed charged before a grant that found the direct slice full gets nothing back, though parts came back empty", () => {
    let rec: LimiterRecord | null = shareRecord(null, ask("a", "a1", 600), T0).record;
    rec = shareRecord(rec, ask("b", "b1", 600), T0 + 1).record;
    // Grown to 500 parts at T0 + 200: tokens taken out of a full direct slice (its deficit then: 0).
    rec = shareRecord(rec, ask("a", "a2", 600, { holding: "a1", oldForMs: 100 }), T0 + 200).record;
    const cut = shareRecord(rec, ask("a", "a3", 60, { holding: "a2", oldForMs: 100 }), T0 + 400);
    expect(cut.grant.freedAtMs).toBe(T0 + 500);
    // At T0 + 500 the 409 freed parts are the direct slice's again, empty: it lacks tokens, but not since T0 + 100.
    const before = keyPeek(cut.record, rule, T0 + 500).remaining;
    const back: CallInput = { rule, id: "s", costs: [], giveBack: [{ units: 50, atMs: T0 + 100, shed: true }] };
    const after = keyCall(cut.record, back, T0 + 500).record;
    expect(before).toBeLessThan(800);
    expect(keyPeek(after, rule, T0 + 500).remaining).toBe(before);
    // Charged after that grant: all 50 come back.
    const later = keyCall(cut.record, { ...back, giveBack: [{ units: 50, atMs: T0 + 460, shed: true }] }, T0 + 500);
    expect(keyPeek(later.record, rule, T0 + 500).remaining).toBe(before + 50);
  });
});

describe("a delegate adopting a smaller grant gives back what its bucket drops", () => {
  it("a full 500-part bucket cut to 200 parts drops 300 tokens, sent for `freedAtMs`", () => {
    const out = adoptGrant(held(), renewal, smaller(), T0 + 90, T0 + 110);
    expect(out.share?.parts).toBe(200);
    expect(freeTokens(out.share!, T0 + 110)).toBe(200);
    expect(out.giveBack).toEqual([{ units: 300, atMs: T0 + 160, shed: true }]);
  });

  it("tokens moved with the grant count: a bucket of 100 and 50 moved into 200 parts drops nothing", () => {
    const low = peekState(slice(500), fullState(slice(500), T0), T0).remaining;
    expect(low).toBe(500);
    const state = emptyState(slice(500), T0 + 110);
    const out = adoptGrant(held(state), renewal, smaller({ tokens: 50 }), T0 + 90, T0 + 110);
    expect(freeTokens(out.share!, T0 + 110)).toBe(50);
    expect(out.giveBack).toEqual([]);
  });

  it("the tokens the grant moved count too: a full 500 with 50 moved into 200 parts drops 350", () => {
    expect(adoptGrant(held(), renewal, smaller({ tokens: 50 }), T0 + 90, T0 + 110).giveBack).toEqual([
      { units: 350, atMs: T0 + 160, shed: true },
    ]);
  });

  it("adopted at its term's last ms, the old share still sheds; a single token is given back", () => {
    expect(adoptGrant(held(), renewal, smaller(), T0 + 90, T0 + 1000).giveBack).toEqual([
      { units: 300, atMs: T0 + 160, shed: true },
    ]);
    // 201 tokens in 500 parts (half a token a ms for 402 ms), cut to 200: one token over.
    const state = peekState(slice(500), emptyState(slice(500), T0 + 110 - 402), T0 + 110);
    expect(state.remaining).toBe(201);
    const old = held(emptyState(slice(500), T0 + 110 - 402));
    expect(adoptGrant(old, renewal, smaller(), T0 + 90, T0 + 110).giveBack).toEqual([
      { units: 1, atMs: T0 + 160, shed: true },
    ]);
  });

  it("the same parts with tokens moved: none (the slice did not shrink)", () => {
    expect(adoptGrant(held(), renewal, smaller({ parts: 500, tokens: 50 }), T0 + 90, T0 + 110).giveBack).toEqual([]);
  });

  it("nothing when the grant says no `freedAtMs`, grows the share, or the old share had ended", () => {
    expect(adoptGrant(held(), renewal, smaller({ freedAtMs: undefined }), T0 + 90, T0 + 110).giveBack).toEqual([]);
    expect(adoptGrant(held(), renewal, smaller({ parts: 500 }), T0 + 90, T0 + 110).giveBack).toEqual([]);
    expect(adoptGrant(held(), renewal, smaller(), T0 + 90, T0 + 1001).giveBack).toEqual([]);
  });
});

describe("a rate share's free tokens", () => {
  const share = (over: Parameters<typeof heldRateShare>[4] = {}) =>
    heldRateShare(rule, 500, fullState(slice(500), T0), T0, over);
  it.each([
    ["a full bucket", {}, 500],
    ["units taken out of it", { takenOut: 7 }, 507],
    [
      "less every reservation's units",
      {
        reserved: [
          { units: 30, atMs: T0 },
          { units: 20, atMs: T0 },
        ],
      },
      450,
    ],
    ["no state: none", { state: null }, 0],
    ["no slice (0 parts): none", { parts: 0 }, 0],
  ] as const)("%s", (_name, over, tokens) => {
    expect(freeTokens(share(over as never), T0)).toBe(tokens);
  });
});

describe("the key's object takes shed tokens from `atMs` on, not before", () => {
  /** The key's bucket at 600 of 1,000 (400 charged at T0), no shares; it refills a token a ms. */
  const spent = (): LimiterRecord => {
    const rec = newRecord(rule, fullState(rule.params, T0));
    return callRecord(rec, { rule, id: "c0", costs: [400] }, T0).record!;
  };
  const shed = (atMs: number): CallInput => ({
    rule,
    id: "s1",
    costs: [],
    giveBack: [{ units: 300, atMs, shed: true }],
  });
  const at10 = (rec: LimiterRecord | null) => peekState(rule.params, rec!.state, T0 + 10).remaining;

  it("before its parts are freed: nothing taken (600 refilled to 610 by T0 + 10)", () => {
    expect(at10(callRecord(spent(), shed(T0 + 11), T0 + 10).record)).toBe(610);
  });

  it("units given back that are not shed: taken whatever their time, as before", () => {
    const back: CallInput = { rule, id: "b1", costs: [], giveBack: [{ units: 300, atMs: T0 + 11 }] };
    expect(at10(callRecord(spent(), back, T0 + 10).record)).toBe(910);
  });

  it("at `atMs` itself: taken", () => {
    expect(at10(callRecord(spent(), shed(T0 + 10), T0 + 10).record)).toBe(910);
  });

  it("from then: all of it while the bucket lacked that much throughout", () => {
    expect(at10(callRecord(spent(), shed(T0 + 5), T0 + 10).record)).toBe(910);
  });

  it("no more than the bucket lacked at its lowest since: 8 from full before a charge at T0 + 2", () => {
    const given = callRecord(spent(), { rule, id: "r1", costs: [], giveBack: [{ units: 390, atMs: T0 }] }, T0 + 1);
    const one = callRecord(given.record, { rule, id: "c1", costs: [1] }, T0 + 2).record;
    const half = callRecord(one, { rule, id: "c2", costs: [500] }, T0 + 3).record;
    expect(peekState(rule.params, half!.state, T0 + 3).remaining).toBe(492);
    // 492 refilled to 499 by T0 + 10, and 8 of the 300 (299 more would have filled it past what it held at T0 + 2).
    expect(at10(callRecord(half, shed(T0 + 1), T0 + 10).record)).toBe(507);
  });
});

describe("a delegate sends shed tokens in a call of their own, timed for `freedAtMs`", () => {
  const who: DelegateWho = { object: "t:key", holder: "weur.0", rule };
  const passed: CallResult = { atMs: T0, results: [], lease: null, replayed: false };

  function harness(
    stored: DelegateRecord,
    grant: ShareGrant,
    opts: { sleeps?: boolean; duringSleep?: () => void; duringAsk?: () => void; fails?: boolean } = {},
  ) {
    let now = T0 + 90;
    const calls: CallInput[] = [];
    const slept: number[] = [];
    const ports: DelegatePorts = {
      clock: () => now,
      newId: () => "id",
      load: () => stored,
      save: (record) => {
        stored = record;
      },
      call: (_object, input) => {
        calls.push(input);
        return opts.fails === true ? Promise.reject(new Error("reset")) : Promise.resolve(passed);
      },
      share: () => {
        now = T0 + 110;
        opts.duringAsk?.();
        return Promise.resolve(grant);
      },
      sleep: (ms) => {
        slept.push(ms);
        // A call's wait before it is sent again, raced with it (`timed`): never over first here.
        if (ms === DELEGATE_RESEND_MS) return new Promise(() => {});
        now += ms;
        opts.duringSleep?.();
        return Promise.resolve();
      },
    };
    if (opts.sleeps === false) delete (ports as { sleep?: unknown }).sleep;
    const record = () => stored;
    const take = (r: DelegateRecord) => {
      stored = r;
    };
    return { run: new DelegateRun(ports), calls, slept, record, take };
  }

  it("once the key's clock is past `freedAtMs`: the call gives them back, the record keeps none", async () => {
    const h = harness(held(), smaller());
    await h.run.renew(who);
    await new Promise((resolve) => setTimeout(resolve, 0));
    // Granted at T0 + 100 (the key's clock), sent at T0 + 90 and answered at T0 + 110 (this one's): the key's clock is
    // taken as T0 + 100 + 10 now, 50 ms before T0 + 160. The ask and the call each race their budget.
    expect(h.slept).toEqual([DELEGATE_RESEND_MS, 50 + SHED_MARGIN_MS, DELEGATE_RESEND_MS]);
    expect(h.calls).toEqual([{ rule, id: "id", costs: [], giveBack: [{ units: 300, atMs: T0 + 160, shed: true }] }]);
    expect(h.record().giveBack).toEqual([]);
  });

  const flush = () => new Promise((resolve) => setTimeout(resolve, 0));
  const other = { units: 4, atMs: T0 };

  it("only its own shed: other units given back stay for the next ask", async () => {
    // Given back by batches while the ask was out (the ask took what the record held when it was sent).
    const late = [other, { units: 9, atMs: T0 + 1, shed: true as const }, { units: 2, atMs: T0 + 160 }];
    let h: ReturnType<typeof harness> | undefined;
    h = harness(held(), smaller(), { duringAsk: () => h!.take({ ...h!.record(), giveBack: late }) });
    await h.run.renew(who);
    await flush();
    expect(h.calls.map((c) => c.giveBack)).toEqual([[{ units: 300, atMs: T0 + 160, shed: true }]]);
    expect(h.record().giveBack).toEqual(late);
  });

  it("parts already freed by the key's clock: sent at once", async () => {
    const h = harness(held(), smaller({ freedAtMs: T0 + 100 }));
    await h.run.renew(who);
    await flush();
    expect(h.slept).toEqual([DELEGATE_RESEND_MS, DELEGATE_RESEND_MS]);
    expect(h.calls).toHaveLength(1);
  });

  it("an ask that took them while it waited: no call", async () => {
    let h: ReturnType<typeof harness> | undefined;
    h = harness(held(), smaller(), { duringSleep: () => h!.take({ ...h!.record(), giveBack: [] }) });
    await h.run.renew(who);
    await flush();
    expect(h.calls).toEqual([]);
  });

  it("without a way to wait (no `sleep`): left for the next ask", async () => {
    const h = harness(held(), smaller(), { sleeps: false });
    await h.run.renew(who);
    await flush();
    expect(h.calls).toEqual([]);
    expect(h.record().giveBack).toEqual([{ units: 300, atMs: T0 + 160, shed: true }]);
  });

  it("a call that fails loses them, quietly (short, never over)", async () => {
    const h = harness(held(), smaller(), { fails: true });
    await h.run.renew(who);
    await flush();
    expect(h.calls).toHaveLength(1);
    expect(h.record().giveBack).toEqual([]);
  });

  it("none when the grant shed nothing", async () => {
    const h = harness(held(), smaller({ parts: 500 }));
    await h.run.renew(who);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(h.calls).toEqual([]);
    expect(h.slept).toEqual([DELEGATE_RESEND_MS]);
  });
});
