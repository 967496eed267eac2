/**
 * Spare stays home (src/protocol/share_grant.ts `spareOf`, delegate_run.ts `passRefused`): while a slow rate rule's
 * key has demand below its rate, a delegate's share is its demand with headroom, the rest of the rate (and its tokens)
 * stays in the key's object's direct slice, and what the share's slice refuses is decided there. Stands for the
 * search-origin rule (200/s, `key: global`) in a growth or a flash crowd: split by demand, every delegate ran a small
 * bucket and Poisson demand overflowed some while others idled (refusals below the rate).
 */
import { describe, expect, it } from "vitest";
import { type DelegateRecord, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { DelegateRun, type DelegateWho } from "../../src/protocol/delegate_run.ts";
import { directParts, type ShareAsk, type ShareGrant } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
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
    const hot = shareRecord(null, ask(fast, 100), T0);
    expect(hot.grant).toMatchObject({ kind: "rate", parts: 1000 });
    expect(hot.grant.spare).toBeUndefined();
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
