/**
 * The delegate tier's pure protocol (src/protocol/share.ts, the key's object; src/protocol/delegate.ts, the holder):
 * tables for each step, and a small fleet driven at and above the limit through the real functions, checking the
 * promises docs/rules.md states (rate: never above `burst + rate × t` and the slices' extra burst, nothing per share,
 * within 1% of an exact single writer at 2× the limit; window: never above the limit in any window).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { capacityOf, sliceParams } from "../../src/algorithms/index.ts";
import {
  adoptGrant,
  type DelegateRecord,
  delegateCall,
  delegateNeed,
  NEW_DELEGATE,
  renewDue,
  shareAsk,
} from "../../src/protocol/delegate.ts";
import { directDemand, directParts, keyCall, keyFreshAtMs, keyPeek, settleShares } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import {
  type CallInput,
  CallPace,
  callRecord,
  type LimiterRecord,
  type LimiterRule,
} from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { BUSY_CALLS_PER_S, HOT_EARLY_MS, SHARE_PARTS } from "../../src/protocol/tunables.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, gcraP, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);
const ruleOf = (params: AlgorithmParams, version = 1): LimiterRule => ({ id: "r", params, version });
let ids = 0;
const call = (rule: LimiterRule, costs: number[], giveBack?: CallInput["giveBack"]): CallInput => ({
  rule,
  id: `c${ids++}`,
  costs,
  ...(giveBack === undefined ? {} : { giveBack }),
});
const admitted = (r: { results: readonly { ok: boolean; decision?: { allowed: boolean } }[] }) =>
  r.results.filter((x) => x.ok && x.decision?.allowed === true).length;

describe("sliceParams", () => {
  it("slices a bucket's rate exactly and its burst rounded down, at least 1", () => {
    const p = tokenBucket(5000, 1000, 200);
    const a = sliceParams(p, 300, 1000)!;
    const b = sliceParams(p, 700, 1000)!;
    expect(a).toMatchObject({ burst: 60, rate: { tokens: 3, perMs: 2 } });
    expect(b).toMatchObject({ burst: 140, rate: { tokens: 7, perMs: 2 } });
    expect(sliceParams(tokenBucket(10, 1000, 2), 1, 1000)).toMatchObject({ burst: 1 });
    expect(sliceParams(p, 1000, 1000)).toBe(p);
    expect(sliceParams(p, 0, 1000)).toBeNull();
    expect(sliceParams(fixedWindow(100, 60_000), 1, 2)).toBeNull();
  });

  it("a delegate's slice: its parts of the rate and burst, nothing more, and none too small for a unit", () => {
    const p = tokenBucket(5000, 1000, 200);
    // 300 parts: 1.5 tokens a ms, burst 60 (the 5% rate bound leaves no room for extra burst: tunables.ts).
    expect(delegateSlice(p, 300)).toEqual(sliceParams(p, 300, 1000));
    expect(delegateSlice(p, 300)).toMatchObject({ burst: 60, rate: { tokens: 3, perMs: 2 } });
    // No slice too small to hold a whole unit of the burst (share.ts `honestSlice`).
    expect(delegateSlice(p, 0)).toBeNull();
    expect(delegateSlice(tokenBucket(10, 1000, 2), 499)).toBeNull();
    expect(delegateSlice(tokenBucket(10, 1000, 2), 500)).toMatchObject({ burst: 1 });
  });
});

describe("keyCall on a cold key", () => {
  it("decides exactly as callRecord, and says nothing about heat at low traffic", () => {
    const rule = ruleOf(tokenBucket(10, 1000, 5));
    let a: LimiterRecord | null = null;
    let b: LimiterRecord | null = null;
    for (let i = 0; i < 40; i++) {
      const input = call(rule, [1]);
      const x = keyCall(a, input, T0 + i * 100);
      const y = callRecord(b, input, T0 + i * 100);
      a = x.record;
      b = y.record;
      expect(x.result).toEqual(y.result);
      expect(x.result.hot).toBeUndefined();
    }
  });

  it("says hot when the object is busy, for an algorithm with shares only", () => {
    for (const [params, hot] of [
      [tokenBucket(10_000, 1000, 100), true],
      [slidingLog(10_000, 1000), undefined],
    ] as const) {
      let rec: LimiterRecord | null = null;
      let last: boolean | undefined;
      for (let i = 0; i < BUSY_CALLS_PER_S; i++) {
        const out = keyCall(rec, call(ruleOf(params), [1]), T0 + i);
        rec = out.record;
        last = out.result.hot;
      }
      expect(last).toBe(hot);
    }
  });
});

describe("keyCall says hot early", () => {
  // A key that became hot at once (a cold start, a flash crowd) is told hot at BUSY_CALLS_PER_S's pace over
  // HOT_EARLY_MS, so its isolates go to the delegates (and mark it for their data centers) before the object has
  // counted a whole busy second: the first second's calls at the key's object (issue 36). Busy is still a second's.
  const early = Math.ceil((BUSY_CALLS_PER_S * HOT_EARLY_MS) / 1000);
  const run = (calls: number, gapMs: number) => {
    let rec: LimiterRecord | null = null;
    let last: ReturnType<typeof keyCall>["result"] | undefined;
    for (let i = 0; i < calls; i++) {
      const out = keyCall(rec, call(ruleOf(tokenBucket(10_000, 1000, 100)), [1]), T0 + i * gapMs);
      rec = out.record;
      last = out.result;
    }
    return last!;
  };
  const within = Math.floor((HOT_EARLY_MS - 1) / (early - 1));
  it("from that pace within HOT_EARLY_MS, not below it, and not busy", () => {
    expect(early).toBeLessThan(BUSY_CALLS_PER_S);
    expect(run(early, within)).toMatchObject({ hot: true });
    expect(run(early, within).busy).toBeUndefined();
    expect(run(early - 1, within).hot).toBeUndefined();
    // The same calls spread a little wider than HOT_EARLY_MS: not hot.
    expect(run(early, Math.ceil(HOT_EARLY_MS / (early - 1)) + 1).hot).toBeUndefined();
  });
});

describe("keyCall says hot at the pace of calls of every kind (CallPace)", () => {
  // A slow rule's spent key (free-global: 10/s per API key at 1,000x its rate) is refused by nearly every call, and a
  // refusal that changes nothing is not remembered in the record: counted by its record alone, the key's object never
  // had the busy pace and told the key hot only when overloaded. The shell's in-memory pace counts every call.
  const early = Math.ceil((BUSY_CALLS_PER_S * HOT_EARLY_MS) / 1000);
  const within = Math.floor((HOT_EARLY_MS - 1) / (early - 1));
  const spent = (paced: boolean, calls: number, gapMs: number) => {
    const rule = ruleOf(tokenBucket(1, 60_000, 2));
    let rec = keyCall(null, call(rule, [1, 1]), T0).record;
    const pace = new CallPace();
    let last: ReturnType<typeof keyCall>["result"] | undefined;
    for (let i = 0; i < calls; i++) {
      const now = T0 + 1 + i * gapMs;
      const noted = pace.note(now);
      const out = keyCall(rec, call(rule, [1]), now, paced && noted);
      expect(out.record?.calls).toEqual(rec?.calls); // refused: no call remembered
      rec = out.record;
      last = out.result;
    }
    return last!;
  };
  it("refusals at that pace within HOT_EARLY_MS say hot; not from the record alone, not below the pace", () => {
    expect(spent(true, early, within)).toMatchObject({ hot: true });
    expect(spent(false, early, within).hot).toBeUndefined();
    expect(spent(true, early - 1, within).hot).toBeUndefined();
    expect(spent(true, early, Math.ceil(HOT_EARLY_MS / (early - 1)) + 1).hot).toBeUndefined();
  });
  it("CallPace: the last `early` calls within HOT_EARLY_MS, a sliding count", () => {
    const pace = new CallPace();
    const seen = Array.from({ length: early + 2 }, (_, i) => pace.note(T0 + i * within));
    expect(seen.slice(0, early - 1).every((b) => !b)).toBe(true);
    expect(seen.slice(early - 1)).toEqual([true, true, true]);
    expect(pace.note(T0 + (early + 1) * within + HOT_EARLY_MS)).toBe(false);
    // A clock stepped back (a test's, a moved object's): the calls noted "later" say nothing of the pace now.
    const back = new CallPace();
    for (let i = 0; i < early - 1; i++) back.note(T0 + 10_000 + i);
    expect(back.note(T0)).toBe(false);
    // Stepped back below the last call only (not below the second): anew all the same.
    const last = new CallPace();
    for (let i = 0; i < early - 1; i++) last.note(T0 + i);
    expect(last.note(T0 + 10)).toBe(false);
  });
  it("CallPace: calls at one instant (a frozen clock) make the pace; a span of exactly HOT_EARLY_MS does not", () => {
    const frozen = new CallPace();
    const seen = Array.from({ length: early }, () => frozen.note(T0));
    expect(seen.at(-2)).toBe(false);
    expect(seen.at(-1)).toBe(true);
    const edge = new CallPace();
    for (let i = 0; i < early - 1; i++) edge.note(T0 + i);
    expect(edge.note(T0 + HOT_EARLY_MS)).toBe(false);
    const inside = new CallPace();
    for (let i = 0; i < early - 1; i++) inside.note(T0 + i);
    expect(inside.note(T0 + HOT_EARLY_MS - 1)).toBe(true);
  });
});

/** Make the key hot: BUSY_CALLS_PER_S direct calls in a second. */
function busy(params: AlgorithmParams, t: number): LimiterRecord | null {
  let rec: LimiterRecord | null = null;
  for (let i = 0; i < BUSY_CALLS_PER_S; i++) rec = keyCall(rec, call(ruleOf(params), [1]), t + i).record;
  return rec;
}

/** `rec` past its key's first round of asks (share_grant.ts `rateGrant`): another holder renewed, holding no parts. */
function pastFirstRound(rec: LimiterRecord | null): LimiterRecord {
  const x = { holder: "x", parts: 0, units: 0, atMs: T0, endsAtMs: T0 + 10_000, prevParts: 0, prevEndsAtMs: T0 };
  return { ...rec!, shares: { entries: [{ ...x, demand: 0, askId: "x1" }], hotUntilMs: 0 } };
}

describe("shareRecord", () => {
  it("grants a rate share by demand, and direct calls then decide from what no share holds", () => {
    const params = tokenBucket(5000, 1000, 500);
    let rec: LimiterRecord | null = pastFirstRound(busy(params, T0));
    const g = shareRecord(rec, ask("weur.0", 3000, params, "a1"), T0 + 200);
    expect(directDemand(rec, T0 + 200)).toBe(500);
    rec = g.record;
    expect(g.grant.kind).toBe("rate");
    expect(g.grant.hot).toBe(true);
    // Direct demand: 100 requests within the last 200 ms, 500 per term; this holder asked for 3000: 3000/3500, rounded
    // up. A new holder's share is unsettled: half a term (a fast rule's).
    expect(g.grant).toMatchObject({ parts: 858, termMs: 500 });
    expect(directParts(rec!.shares!, T0 + 200)).toBe(SHARE_PARTS - g.grant.parts);
    // A retried ask is answered again, not granted twice.
    const again = shareRecord(rec, ask("weur.0", 3000, params, "a1"), T0 + 201);
    expect(again.grant.parts).toBe(g.grant.parts);
    expect(again.record).toBe(rec);
  });

  it("lets a share go when the key's demand falls: hot false, and the rate comes back at the term's end", () => {
    const params = tokenBucket(5000, 1000, 500);
    let rec = shareRecord(busy(params, T0), ask("weur.0", 3000, params, "a1"), T0 + 200).record;
    const cold = shareRecord(rec, ask("weur.0", 10, params, "a2"), T0 + 5_000);
    expect(cold.grant).toMatchObject({ kind: "none", hot: false });
    rec = cold.record;
    // Still promised until the first term ends (the holder may be using it until it hears).
    expect(directParts(rec!.shares!, T0 + 1_100)).toBe(SHARE_PARTS);
    const settled = settleShares(rec, T0 + 20_000);
    expect(settled?.shares).toBeUndefined();
    expect(keyFreshAtMs(rec!)).toBeGreaterThanOrEqual(T0 + 1_200);
  });

  it("grants window units charged in the record, and takes unused ones back", () => {
    const params = fixedWindow(1000, 60_000);
    let rec = busy(params, T0);
    const g = shareRecord(rec, ask("weur.0", 200, params, "w1"), T0 + 300);
    rec = g.record;
    expect(g.grant.kind).toBe("window");
    expect(g.grant.units).toBe(200 + 2 * Math.ceil(Math.sqrt(200)) + 1);
    const back = shareRecord(
      rec,
      { ...ask("weur.0", 0, params, "w2"), giveBack: [{ units: 50, atMs: T0 + 300 }] },
      T0 + 400,
    );
    const used = 100 + g.grant.units - 50 + (back.grant.units ?? 0);
    expect(back.record!.state).toMatchObject({ count: used });
  });
});

function ask(holder: string, demand: number, params: AlgorithmParams, id: string, version = 1) {
  return {
    rule: ruleOf(params, version),
    holder,
    id,
    demand,
    units: demand + 2 * Math.ceil(Math.sqrt(demand)) + 1,
    giveBack: [],
  };
}

/**
 * A small fleet through the real functions: `regions` delegates and direct callers, each with its own demand per
 * step, renewing as their shells would (before deciding when `delegateNeed` says so; in the last quarter of a term
 * otherwise). Every request is one unit. Returns the admissions per step.
 */
function fleet(params: AlgorithmParams, demandPerMs: number[], steps: number, stepMs: number, restartAt = -1) {
  let rec = busy(params, T0 - 2_000);
  let delegates: DelegateRecord[] = demandPerMs.map(() => NEW_DELEGATE);
  const perStep: number[] = [];
  let n = 0;
  for (let s = 0; s < steps; s++) {
    const now = T0 + s * stepMs;
    if (s === restartAt) delegates = delegates.map((d) => structuredClone(d)); // durable: the record survives
    let got = 0;
    delegates = delegates.map((d, i) => {
      const rule = ruleOf(params);
      const costs = Array.from({ length: demandPerMs[i]! * stepMs }, () => 1);
      if (delegateNeed(d, rule, costs, now) === "renew" || renewDue(d, now)) {
        const a = shareAsk(d, `r${i}`, rule, `s${n++}`, now);
        const out = shareRecord(rec, a.ask, now);
        rec = out.record;
        d = adoptGrant(a.record, a.ask, out.grant, now, now);
      }
      const out = delegateCall(d, call(rule, costs), now);
      got += admitted(out.result);
      return out.record;
    });
    perStep.push(got);
  }
  return perStep;
}

describe("a fleet of delegates", () => {
  for (const params of [tokenBucket(5000, 1000, 500), gcraP(5000, 1000, 500)]) {
    it(`${params.algorithm}: at 2× the limit, within the bound in every span and within 1% of the exact writer`, () => {
      const stepMs = 10;
      const steps = 2_000; // 20 s
      const perStep = fleet(params, [4, 3, 2, 1], steps, stepMs);
      const burst = capacityOf(params);
      const rateTokensPerMs = 5;
      for (const spanSteps of [1, 10, 100, 1000]) {
        let sum = 0;
        for (let s = 0; s < steps; s++) {
          sum += perStep[s]!;
          if (s >= spanSteps) sum -= perStep[s - spanSteps]!;
          // No unit per share: every slice holds a whole unit of the burst (share.ts `honestSlice`).
          expect(sum).toBeLessThanOrEqual(burst + rateTokensPerMs * spanSteps * stepMs);
        }
      }
      // After the first term (new shares start empty), the rate is met within 1%.
      const steady = perStep.slice(200).reduce((a, b) => a + b, 0);
      const exact = rateTokensPerMs * (steps - 200) * stepMs;
      expect(steady).toBeGreaterThanOrEqual(exact * 0.99);
      expect(steady).toBeLessThanOrEqual(exact + burst);
    });
  }

  it("fixed_window: never above the limit in a window, and the limit reached at 2× demand", () => {
    const params = fixedWindow(10_000, 1_000);
    const perStep = fleet(params, [8, 6, 4, 2], 1_000, 10);
    for (let w = 0; w < 10; w++) {
      const inWindow = perStep.slice(w * 100, (w + 1) * 100).reduce((a, b) => a + b, 0);
      expect(inWindow).toBeLessThanOrEqual(10_000);
      if (w > 0) expect(inWindow).toBeGreaterThanOrEqual(9_850);
    }
  });

  it("a delegate restart (its record reloaded) changes nothing", () => {
    const params = fixedWindow(10_000, 1_000);
    expect(fleet(params, [8, 6], 500, 10, 250)).toEqual(fleet(params, [8, 6], 500, 10));
  });
});

describe("delegate", () => {
  it("renews before deciding for a newer rules version, and decides under the newest", () => {
    const older = tokenBucket(5000, 1000, 500);
    const newer = tokenBucket(4000, 1000, 400);
    let rec = busy(older, T0);
    let d: DelegateRecord = NEW_DELEGATE;
    const a = shareAsk(d, "weur.0", ruleOf(older, 1), "v1", T0);
    const out = shareRecord(rec, a.ask, T0);
    rec = out.record;
    d = adoptGrant(a.record, a.ask, out.grant, T0, T0);
    expect(delegateNeed(d, ruleOf(older, 1), [1], T0 + 10)).toBe("ready");
    expect(delegateNeed(d, ruleOf(newer, 2), [1], T0 + 10)).toBe("renew");
    const b = shareAsk(d, "weur.0", ruleOf(newer, 2), "v2", T0 + 10);
    const out2 = shareRecord(rec, b.ask, T0 + 10);
    expect(out2.grant.rule.version).toBe(2);
    d = adoptGrant(b.record, b.ask, out2.grant, T0 + 10, T0 + 10);
    // An isolate still on the older version is decided under the newer share.
    expect(delegateNeed(d, ruleOf(older, 1), [1], T0 + 20)).toBe("ready");
    expect(d.share?.rule.params).toEqual(newer);
  });

  it("answers a retried call as remembered, and takes refunds of its own window units back", () => {
    const params = fixedWindow(1000, 60_000);
    const rec = busy(params, T0);
    const a = shareAsk(NEW_DELEGATE, "weur.0", ruleOf(params), "w", T0);
    const g = shareRecord(rec, { ...a.ask, demand: 100, units: 1 }, T0 + 100);
    expect(g.grant.units).toBe(1);
    let d = adoptGrant(a.record, { ...a.ask, units: 1 }, g.grant, T0 + 100, T0 + 100);
    const input = call(ruleOf(params), [1, 1]);
    const first = delegateCall(d, input, T0 + 1);
    d = first.record;
    const retry = delegateCall(d, input, T0 + 2);
    expect(retry.result.replayed).toBe(true);
    expect(retry.record).toBe(d);
    const left = d.share!.unitsLeft;
    d = delegateCall(d, call(ruleOf(params), [], [{ units: 1, atMs: g.grant.atMs }]), T0 + 3).record;
    expect(d.share!.unitsLeft).toBe(left + 1);
    // A refund of another share's units goes back to the key's object with the next ask.
    d = delegateCall(d, call(ruleOf(params), [], [{ units: 1, atMs: 5 }]), T0 + 4).record;
    expect(shareAsk(d, "weur.0", ruleOf(params), "x", T0 + 5).ask.giveBack).toContainEqual({ units: 1, atMs: 5 });
  });

  it("a new rate share starts with its parts' proportion of the tokens the key holds: moved, never made", () => {
    const params = tokenBucket(1000, 1000, 1000);
    const t = T0 + BUSY_CALLS_PER_S;
    // 100 requests in 100 ms at 1 token per ms: the bucket is full again at t.
    const rec = pastFirstRound(busy(params, T0));
    expect(keyPeek(rec, ruleOf(params), t).remaining).toBe(1000);
    const a = shareAsk(NEW_DELEGATE, "weur.0", ruleOf(params), "r", t);
    // Demand 5000 against the direct callers' 1000 (100 calls in 100 ms): 834 parts (rounded up), and 834 of the
    // 1000 tokens; a new holder's share is unsettled: half a term (a fast rule's).
    const g = shareRecord(rec, { ...a.ask, demand: 5000 }, t);
    expect(g.grant).toMatchObject({ kind: "rate", parts: 834, tokens: 834, termMs: 500 });
    expect(g.record!.shares!.direct!.parts).toBe(166);
    expect(keyPeek(g.record, ruleOf(params), t).remaining).toBe(166);
    // A retried ask is answered with the same tokens, and moves none again.
    const again = shareRecord(g.record, { ...a.ask, demand: 5000 }, t + 5);
    expect(again.grant).toMatchObject({ parts: 834, tokens: 834 });
    expect(again.record).toBe(g.record);
    const d = adoptGrant(a.record, a.ask, g.grant, t, t);
    const out = delegateCall(d, call(ruleOf(params), Array(835).fill(1)), t);
    expect(admitted(out.result)).toBe(834);
    // The holder's renewal with more parts brings their tokens too; with fewer, none (the direct slice keeps its own).
    const b = shareAsk(out.record, "weur.0", ruleOf(params), "r2", t + 200);
    const more = shareRecord(g.record, { ...b.ask, demand: 1_000_000 }, t + 200);
    // All 1000 parts (999.9, rounded up): the direct slice's 166 parts and its 166 tokens; a settled share (its parts
    // moved by less than a quarter): a whole term.
    expect(more.grant).toMatchObject({ parts: 1000, tokens: 166, termMs: 1000 });
    expect(more.record!.shares!.direct).toEqual({ parts: 0, state: null });
    expect(keyPeek(more.record, ruleOf(params), t + 200).remaining).toBe(0);
    const fewer = shareRecord(g.record, { ...b.ask, demand: 10 }, t + 200);
    // Demand 10 against the direct callers' 333 (100 calls in the last 300 ms): 30 parts, none moved.
    expect(fewer.grant).toMatchObject({ parts: 30, termMs: 500 });
    expect(fewer.grant.tokens).toBeUndefined();
    expect(keyPeek(fewer.record, ruleOf(params), t + 200).remaining).toBe(166);
  });
});

describe("a rate grant's tokens are moved, never made (property)", () => {
  it("tokens granted + the direct slice's level after <= its level before; within the new slice's burst", () => {
    let moving = 0;
    fc.assert(
      fc.property(
        fc.constantFrom(tokenBucket(1000, 1000, 1000), gcraP(500, 1000, 300), tokenBucket(7, 3000, 13)),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 600 }),
            holder: fc.integer({ min: 0, max: 3 }),
            demand: fc.integer({ min: 0, max: 5000 }),
            direct: fc.integer({ min: 0, max: 30 }),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        (params, steps) => {
          const rule = ruleOf(params);
          let rec = busy(params, T0);
          let t = T0 + BUSY_CALLS_PER_S;
          let moved = 0;
          for (const [i, step] of steps.entries()) {
            t += step.gapMs;
            rec = keyCall(rec, call(rule, Array(step.direct).fill(1)), t).record;
            const before = keyPeek(rec, rule, t).remaining;
            const a = { ...ask(`h${step.holder}`, step.demand, params, `a${i}`), units: 0 };
            const g = shareRecord(rec, a, t);
            rec = g.record;
            const tokens = g.grant.tokens ?? 0;
            expect(tokens + keyPeek(rec, rule, t).remaining).toBeLessThanOrEqual(before);
            if (tokens > 0) expect(tokens).toBeLessThanOrEqual(capacityOf(sliceParams(params, g.grant.parts, 1000)!));
            moved += tokens;
          }
          if (moved > 0) moving++;
        },
      ),
      { numRuns: 300, seed: 7 },
    );
    // Not vacuous: most runs move tokens.
    expect(moving).toBeGreaterThan(150);
  });
});
