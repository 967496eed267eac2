/**
 * Spare stays home (src/protocol/share_grant.ts `rateGrant`, delegate_run.ts `passRefused`): while a slow rate rule's
 * key has demand below its rate, a delegate's share is its demand with headroom, the rest of the rate (and its tokens)
 * stays in the key's object's direct slice, and what the share's slice refuses is decided there. Stands for the
 * search-origin rule (200/s, `key: global`) in a growth or a flash crowd: split by demand, every delegate ran a small
 * bucket and Poisson demand overflowed some while others idled (refusals below the rate).
 */
import { describe, expect, it, vi } from "vitest";
import { type DelegateRecord, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { DelegateRun, type DelegateWho } from "../../src/protocol/delegate_run.ts";
import { directParts, keyCall, type ShareAsk, type ShareGrant } from "../../src/protocol/share.ts";
import { rateTermMs, shareRecord } from "../../src/protocol/share_grant.ts";
import type { CallInput, CallResult, CheckResult, LimiterRule } from "../../src/protocol/store.ts";
import { gcraP } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** search-origin: 200/s, burst 200 (slow: not hot by construction). */
const slow: LimiterRule = { id: "s", params: gcraP(200, 1000, 200), version: 1 };
/** global-rate: 5,000/s, burst 1,000 (hot by construction: shares split by demand whatever the demand). */
const fast: LimiterRule = { id: "f", params: gcraP(5000, 1000, 1000), version: 1 };
const ask = (rule: LimiterRule, demand: number, holder = "weur.0"): ShareAsk => ({
  rule,
  holder,
  id: `${holder}:a1`,
  demand,
  units: demand,
  giveBack: [],
});

describe("shareRecord: spare stays home", () => {
  it("grants a slow rule's share its demand with headroom (2 sd of Poisson) of the rate; the rest stays direct", () => {
    // Demand 100 per term: 100 + 2 * 10 + 1 = 121 of 200 → 605 parts; 395 stay with the direct slice.
    const out = shareRecord(null, ask(slow, 100), T0);
    expect(out.grant).toMatchObject({ kind: "rate", parts: 605, spare: true });
    expect(directParts(out.record!.shares!, T0)).toBe(395);
    // With its tokens: the share takes its parts' proportion of the full bucket (121 of 200), not all of it.
    expect(out.grant.tokens).toBe(121);
  });

  it("splits by demand as before once the demands with headroom reach the rate, and for a fast rule", () => {
    const first = shareRecord(null, ask(slow, 100), T0);
    // A second delegate's 80: 121 + 80 + 18 + 1 = 220 ≥ 200, no spare: its demand's proportion of what is left.
    const second = shareRecord(first.record, ask(slow, 80, "weur.1"), T0 + 1);
    expect(second.grant.spare).toBeUndefined();
    expect(second.grant.parts).toBe(395);
    // A fast rule: no spare; its key's first ask gets a region's equal part (share_grant.ts `rateGrant`).
    const hot = shareRecord(null, ask(fast, 100), T0);
    expect(hot.grant).toMatchObject({ kind: "rate", parts: 112 });
    expect(hot.grant.spare).toBeUndefined();
  });

  it("gives a slow rule's share that grew by more than a quarter a whole term, not a quarter one", () => {
    // Stands for search-origin's growth: each of a few delegates sees a dozen requests a second; on quarter terms its
    // renewal often came late and its parts' tokens were lost while the key's object still promised them.
    const first = shareRecord(null, ask(slow, 100), T0);
    expect(first.grant).toMatchObject({ parts: 605, termMs: 250 });
    // Demand 130: 130 + 2 * 12 + 1 = 155 of 200 → 775 parts, up 170 from 605 (more than a quarter): a whole term.
    const grown = { ...ask(slow, 130), id: "weur.0:a2", holding: "weur.0:a1" };
    expect(shareRecord(first.record, grown, T0 + 200).grant).toMatchObject({ parts: 775, termMs: 1000 });
    // Shrunk by as much, or short of its demand's proportion: a quarter term as before; a fast rule's: half a term.
    expect(rateTermMs(775, 775, 605, 250, undefined, true)).toBe(1000);
    expect(rateTermMs(600, 600, 900, 250, undefined, true)).toBe(250);
    expect(rateTermMs(775, 900, 605, 250, undefined, true)).toBe(250);
    expect(rateTermMs(775, 775, 605, 250)).toBe(500);
  });
});

describe("shareRecord: spare stays home, exact edges (each kills a mutant of share_grant.ts; docs/testing.md)", () => {
  it("keeps spare home while the demands with headroom sum below the rate per term, not when they reach it", () => {
    // Demand 170: 170 + 2 * 14 + 1 = 199 of 200; the direct calls' demand is none, and none has no headroom (0, not 1).
    expect(shareRecord(null, ask(slow, 170), T0).grant).toMatchObject({ kind: "rate", parts: 995, spare: true });
    // Demand 171: 171 + 28 + 1 = 200, the rate per term itself: no spare, the share is split by demand (all of it).
    const at = shareRecord(null, ask(slow, 171), T0).grant;
    expect(at.parts).toBe(1000);
    expect(at.spare).toBeUndefined();
  });

  it("counts the direct calls' demand with its headroom: enough direct calls end the spare", () => {
    // 80 requests straight to the key's object in the last term: 80 + 18 + 1 = 99, with the delegate's 121: 220 ≥ 200.
    const direct = keyCall(null, { rule: slow, id: "d1", costs: Array<number>(80).fill(1) }, T0).record;
    const out = shareRecord(direct, ask(slow, 100), T0 + 500);
    expect(out.grant.spare).toBeUndefined();
    expect(out.grant.parts).toBe(556); // 100 of the 180 asked for, split by demand
    // 20 of them: 20 + 10 + 1 = 31, with 121: 152 < 200, spare.
    const few = keyCall(null, { rule: slow, id: "d1", costs: Array<number>(20).fill(1) }, T0).record;
    expect(shareRecord(few, ask(slow, 100), T0 + 500).grant).toMatchObject({ parts: 605, spare: true });
  });
});

const who: DelegateWho = { object: "s:key", holder: "weur.0", rule: slow };
const rateGrant = (over: Partial<ShareGrant> = {}): ShareGrant => ({
  atMs: T0,
  kind: "rate",
  parts: 100, // 20/s, burst 20
  tokens: 2,
  units: 0,
  remaining: 0,
  termMs: 1000,
  rule: slow,
  hot: true,
  ...over,
});
const allowed = (r: CheckResult) => r.ok && r.decision.allowed;
const admit = (n: number): CheckResult => ({
  ok: true,
  atMs: T0,
  decision: { allowed: true, remaining: n, resetAfterMs: 0, retryAfterMs: null, delayMs: 0 },
});

/** A delegate over a scripted key's object that admits the first `admits` requests passed to it. */
function delegate(grant: ShareGrant, admits: number) {
  let stored: DelegateRecord = NEW_DELEGATE;
  let left = admits;
  const calls: CallInput[] = [];
  const run = new DelegateRun({
    clock: () => T0 + 5,
    newId: () => "ask1",
    load: () => stored,
    save: (r) => {
      stored = r;
    },
    call: (_object, input): Promise<CallResult> => {
      calls.push(input);
      const results = input.costs.map(() => (left-- > 0 ? admit(left) : { ...admit(0), decision: refusedDecision }));
      return Promise.resolve({ atMs: T0 + 5, results, lease: null, replayed: false });
    },
    share: () => Promise.resolve(grant),
  });
  return { run, calls, stored: () => stored };
}
const refusedDecision = { allowed: false, remaining: 0, resetAfterMs: 5, retryAfterMs: 5, delayMs: 0 };

describe("DelegateRun.check: what a spare share's slice refuses", () => {
  it("goes to the key's object in one call, its admissions answered; one that admits nothing ends the passing", async () => {
    const d = delegate(rateGrant({ spare: true }), 1);
    const out = await d.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1, 1] });
    // The slice held 2: the other two requests went on, and the key's object admitted one of them.
    expect(d.calls).toEqual([{ rule: slow, id: "b1:spare", costs: [1, 1] }]);
    expect(out.results.map(allowed)).toEqual([true, true, true, false]);
    expect(d.stored().share?.spare).toBe(true);
    const next = await d.run.check(who, { rule: slow, id: "b2", costs: [1] });
    expect(next.results.map(allowed)).toEqual([false]);
    expect(d.calls).toHaveLength(2);
    // Nothing admitted there: no more passing under this grant (the direct slice is dry too).
    expect(d.stored().share?.spare).toBe(false);
    await d.run.check(who, { rule: slow, id: "b3", costs: [1] });
    expect(d.calls).toHaveLength(2);
  });

  it("is refused at the delegate when the grant says no spare", async () => {
    const d = delegate(rateGrant(), 5);
    const out = await d.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1] });
    expect(out.results.map(allowed)).toEqual([true, true, false]);
    expect(d.calls).toEqual([]);
  });
});

/**
 * A delegate over a key's object that answers each passed call when the test says (`answer`: a result, or an error),
 * with a new ask id for each renewal.
 */
function held(grants: ShareGrant[]) {
  let stored: DelegateRecord = NEW_DELEGATE;
  let ids = 0;
  const calls: CallInput[] = [];
  const answers: ((r: CallResult | Error) => void)[] = [];
  const run = new DelegateRun({
    clock: () => T0 + 5,
    newId: () => `ask${ids++}`,
    load: () => stored,
    save: (r) => {
      stored = r;
    },
    call: (_object, input) => {
      calls.push(input);
      return new Promise<CallResult>((resolve, reject) => {
        answers.push((r) => (r instanceof Error ? reject(r) : resolve(r)));
      });
    },
    share: () => {
      const next = grants.shift();
      return next === undefined ? Promise.reject(new Error("no grant scripted")) : Promise.resolve(next);
    },
  });
  /** Answer the oldest call not answered yet. */
  const answer = (r: CallResult | Error) => answers.shift()?.(r);
  const settle = () => new Promise((r) => setTimeout(r, 0));
  return { run, calls, answer, settle, stored: () => stored };
}
const answered = (...admits: boolean[]): CallResult => ({
  atMs: T0 + 5,
  results: admits.map((a) => (a ? admit(0) : { ...admit(0), decision: refusedDecision })),
  lease: null,
  replayed: false,
});

describe("DelegateRun.check: passing a spare share's refusals, exact edges (each kills a mutant; docs/testing.md)", () => {
  it("passes one call at a time: a batch refused while one is out is refused, not a second call", async () => {
    // A crowd on a spare share: its slice refuses many batches at once; the key's object gets one call of them.
    const d = held([rateGrant({ spare: true })]);
    const first = d.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1] });
    await d.settle();
    expect(d.calls.map((c) => c.id)).toEqual(["b1:spare"]);
    const second = d.run.check(who, { rule: slow, id: "b2", costs: [1] });
    await d.settle();
    expect(d.calls).toHaveLength(1);
    d.answer(answered(true));
    d.answer(answered(true)); // a second call's answer, should one have gone out
    expect((await second).results.map(allowed)).toEqual([false]);
    expect((await first).results.map(allowed)).toEqual([true, true, true]);
    // Once it is answered, the next refused batch passes again.
    const third = d.run.check(who, { rule: slow, id: "b3", costs: [1] });
    await d.settle();
    expect(d.calls.map((c) => c.id)).toEqual(["b1:spare", "b3:spare"]);
    d.answer(answered(false));
    expect((await third).results.map(allowed)).toEqual([false]);
  });

  it("a pass that fails: its refusals stand, no error, and the share keeps its spare (the next refusal passes)", async () => {
    // The key's object overloaded or lost the call: that says nothing of its direct slice being dry.
    const d = held([rateGrant({ spare: true })]);
    const first = d.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1] });
    await d.settle();
    d.answer(Object.assign(new Error("Durable Object is overloaded"), { overloaded: true }));
    expect((await first).results.map(allowed)).toEqual([true, true, false]);
    expect(d.stored().share?.spare).toBe(true);
    const next = d.run.check(who, { rule: slow, id: "b2", costs: [1] });
    await d.settle();
    expect(d.calls.map((c) => c.id)).toEqual(["b1:spare", "b2:spare"]);
    d.answer(answered(true));
    expect((await next).results.map(allowed)).toEqual([true]);
  });

  it("a pass that admits nothing ends the spare of its own grant only: not a newer grant's, nor a share let go", async () => {
    // A renewal landed while the pass was out: the newer grant's spare is the key's object's word now, kept.
    const renewed = held([rateGrant({ spare: true }), rateGrant({ spare: true, atMs: T0 + 4 })]);
    const first = renewed.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1] });
    await renewed.settle();
    await renewed.run.renew(who);
    expect(renewed.stored().share?.askId).toBe("ask1");
    renewed.answer(answered(false));
    expect((await first).results.map(allowed)).toEqual([true, true, false]);
    expect(renewed.stored().share).toMatchObject({ askId: "ask1", spare: true });
    // The share let go while the pass was out (the shell's alarm): nothing to mark, no error.
    const none: ShareGrant = { ...rateGrant(), kind: "none", parts: 0, termMs: 0, hot: false };
    const letGo = held([rateGrant({ spare: true }), none]);
    const out = letGo.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1] });
    await letGo.settle();
    await letGo.run.renew(who, true);
    expect(letGo.stored().share).toBeNull();
    letGo.answer(answered(false));
    expect((await out).results.map(allowed)).toEqual([true, true, false]);
    expect(letGo.stored().share).toBeNull();
  });
});

describe("DelegateRun.check: what a spare share's slice does not refuse, or a batch that is not a check", () => {
  it("sends nothing to the key's object when the slice admits the whole batch, and keeps the spare", async () => {
    const d = delegate(rateGrant({ spare: true }), 5);
    const out = await d.run.check(who, { rule: slow, id: "b1", costs: [1, 1] });
    expect(out.results.map(allowed)).toEqual([true, true]);
    expect(d.calls).toEqual([]);
    expect(d.stored().share?.spare).toBe(true);
  });

  it("passes only a check's refusals: a probe's or a charge's are the slice's answer", async () => {
    // A probe charges nothing and a charge counts what was decided already (outcome.ts): neither is admitted again.
    for (const kind of ["probe", "charge"] as const) {
      const d = delegate(rateGrant({ spare: true }), 5);
      await d.run.check(who, { rule: slow, id: "b1", costs: [1, 1, 1], kind });
      expect(d.calls).toEqual([]);
    }
  });
});

describe("shareRecord with spare home switched off (the ablation, bench/ablation.ts)", () => {
  it("splits a slow rule's rate by demand, as before spare home", async () => {
    // Switching off is for the process: fresh copies of the modules here, so the rest of the file keeps it on.
    vi.resetModules();
    const mechanisms = await import("../../src/protocol/mechanisms.ts");
    mechanisms.ablate("spareHome");
    const fresh = await import("../../src/protocol/share_grant.ts");
    const out = fresh.shareRecord(null, ask(slow, 100), T0);
    expect(out.grant).toMatchObject({ kind: "rate", parts: 1000 });
    expect(out.grant.spare).toBeUndefined();
    // The module the rest of the file uses still has it on.
    expect(shareRecord(null, ask(slow, 100), T0).grant.spare).toBe(true);
  });
});
