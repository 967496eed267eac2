/**
 * An isolate's call to its region's delegates (src/isolate/delegate_call.ts), over simulated time: a reset delegate is
 * tried on the other shard, then again after a short wait within three quarters of the budget, and only then given up
 * on (briefly);
 * other failures give up at once (for `DELEGATE_BACKOFF_MS`); a busy delegate's failure is kept, never a fallback.
 */
import { describe, expect, it } from "vitest";
import type { CoalesceCounters, DelegateRoute, NotedCallInput } from "../../src/isolate/coalesce_types.ts";
import {
  avoidFor,
  awaitLate,
  byLender,
  callDelegates,
  callTarget,
  otherShard,
} from "../../src/isolate/delegate_call.ts";
import { KeyState, MAX_SPREAD } from "../../src/isolate/key_state.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import type { CallAnswer, ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CallInput, CallResult, LimiterRule } from "../../src/protocol/store.ts";
import {
  DELEGATE_BACKOFF_MS,
  DELEGATE_RESET_BACKOFF_MS,
  DELEGATE_RESET_RETRY_MS,
  HOT_HOLD_MS,
} from "../../src/protocol/tunables.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { concurrencyP, fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);
const HOP_MS = 5;
const rule: LimiterRule = { id: "w", params: fixedWindow(100, 60_000) };
const input: CallInput = { rule, id: "c1", costs: [1], giveBack: [{ units: 1, atMs: T0 - 10 }] };
const answered = (): CallResult => ({ atMs: T0, results: [], lease: null, replayed: false, hot: true });
const error = (kind: "reset" | "overloaded" | "other") =>
  Object.assign(
    new Error(kind),
    kind === "reset" ? { durableObjectReset: true } : kind === "overloaded" ? { overloaded: true } : {},
  );

/** A delegate that fails as `failing(nowMs)` says (or answers), one hop each way, recording the calls it got. */
function delegate(
  clock: EventClock,
  name: string,
  failing: (nowMs: number) => "reset" | "overloaded" | "other" | null,
) {
  const got: { atMs: number; input: CallInput }[] = [];
  const transport: ObjectTransport = {
    call: async (_name, call) => {
      await clock.sleep(HOP_MS);
      got.push({ atMs: clock.nowMs(), input: call });
      const kind = failing(clock.nowMs());
      await clock.sleep(HOP_MS);
      if (kind !== null) throw error(kind);
      return answered();
    },
    refund: () => Promise.reject(new Error("no refunds here")),
  };
  return { route: { transport, name } as DelegateRoute, got };
}

async function run(
  first: (nowMs: number) => "reset" | "overloaded" | "other" | null,
  other: ((nowMs: number) => "reset" | "overloaded" | "other" | null) | null,
  timeoutMs = 250,
) {
  const clock = new EventClock(T0);
  const a = delegate(clock, "delegate:weur.0", first);
  const b = delegate(clock, "delegate:weur.2", other ?? (() => null));
  const routes: DelegateRoute = other === null ? a.route : { ...a.route, ownShard: b.route };
  const counters: CoalesceCounters = newStats();
  let ids = 0;
  const deps = { clock: clock.clock, sleep: clock.sleep, counters, newId: () => `n${ids++}` };
  const pending = callDelegates(deps, routes, a.route, input, timeoutMs);
  await clock.runUntil(T0 + 1000);
  return { out: await pending, a: a.got, b: b.got, counters, endsAtMs: clock.nowMs() };
}

describe("otherShard and avoidFor", () => {
  it("names the first shard for this isolate's own, its own for the first, none without one", () => {
    const first: DelegateRoute = { transport: {} as ObjectTransport, name: "delegate:weur.0" };
    const own: DelegateRoute = { transport: {} as ObjectTransport, name: "delegate:weur.3" };
    expect(otherShard({ ...first, ownShard: own }, own)?.name).toBe("delegate:weur.0");
    expect(otherShard({ ...first, ownShard: own }, first)).toBe(own);
    expect(otherShard(first, first)).toBeNull();
  });

  it("avoids a reset delegate briefly, a failing one for DELEGATE_BACKOFF_MS, a busy or answering one not at all", () => {
    const failed = (failure: "reset" | "error" | "retryable" | "overloaded" | "timeout"): CallAnswer => ({
      kind: "failed",
      failure,
      message: failure,
      attempts: 1,
      late: null,
    });
    expect(DELEGATE_RESET_BACKOFF_MS).toBe(150);
    expect(DELEGATE_BACKOFF_MS).toBe(5000);
    expect(avoidFor(failed("reset"))).toBe(DELEGATE_RESET_BACKOFF_MS);
    expect(avoidFor(failed("error"))).toBe(DELEGATE_BACKOFF_MS);
    expect(avoidFor(failed("retryable"))).toBe(DELEGATE_BACKOFF_MS);
    expect(avoidFor(failed("overloaded"))).toBeNull();
    expect(avoidFor(failed("timeout"))).toBeNull();
    expect(avoidFor({ kind: "answered", result: answered(), attempts: 1 })).toBeNull();
  });
});

describe("callDelegates", () => {
  it("answers from the delegate when it answers: one call, no failure counted", async () => {
    const { out, a, b, counters } = await run(
      () => null,
      () => null,
    );
    expect(out).toMatchObject({ kind: "answer", answer: { kind: "answered" }, from: { name: "delegate:weur.0" } });
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(0);
    expect(counters.delegate_failures ?? 0).toBe(0);
  });

  it("tries the other shard when the delegate resets, with a new id and no refunds", async () => {
    const { out, a, b, counters } = await run(
      () => "reset",
      () => null,
    );
    expect(out).toMatchObject({ kind: "answer", from: { name: "delegate:weur.2" } });
    // The reset is retried once at once by callObject, then the other shard.
    expect(a).toHaveLength(2);
    expect(b.map((c) => [c.input.id, c.input.giveBack])).toEqual([["n0", []]]);
    expect(counters.delegate_failures).toBe(1);
  });

  it("asks the same delegate again after a short wait while both shards restart: the same input", async () => {
    // Both restart for 100 ms from T0.
    const down = (nowMs: number) => (nowMs < T0 + 100 ? "reset" : null);
    const { out, a, b } = await run(down, down);
    expect(out).toMatchObject({ kind: "answer", answer: { kind: "answered" }, from: { name: "delegate:weur.0" } });
    expect(b.length).toBeGreaterThan(0);
    const last = a.at(-1)!;
    expect(last.input).toBe(input);
    expect(last.atMs).toBeGreaterThanOrEqual(T0 + 100);
    // Retries DELEGATE_RESET_RETRY_MS apart, within three quarters of the budget.
    expect(last.atMs - T0).toBeLessThan(187.5 + DELEGATE_RESET_RETRY_MS);
  });

  it("outlasts a restart that began as the call was sent: its last retry starts up to three quarters of the budget in", async () => {
    // Down 110 ms from T0: the retry at 90 ms (attempts at 95 and 105) still meets the restart; within half the
    // budget (125 ms) that was the last, and the call went to the key's object. The retry at 160 ms is answered.
    const down = (nowMs: number) => (nowMs < T0 + 110 ? "reset" : null);
    const { out, a } = await run(down, down);
    expect(out).toMatchObject({ kind: "answer", answer: { kind: "answered" }, from: { name: "delegate:weur.0" } });
    expect(a.map((c) => c.atMs - T0)).toEqual([5, 15, 95, 105, 165]);
  });

  it("gives up on a reset that outlasts three quarters of the budget: the key's object, the delegate avoided briefly", async () => {
    const { out, a } = await run(
      () => "reset",
      () => "reset",
    );
    expect(out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_RESET_BACKOFF_MS });
    // Every retry started within three quarters of the budget (187.5 ms) of the first call.
    for (const c of a) expect(c.atMs - T0).toBeLessThan(187.5 + HOP_MS);
    expect(a.length).toBeGreaterThan(2);
    // Without another shard: the retries all the same.
    const alone = await run(() => "reset", null);
    expect(alone.out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_RESET_BACKOFF_MS });
    expect(alone.b).toHaveLength(0);
  });

  it("asks again every DELEGATE_RESET_RETRY_MS while the delegate resets, up to (not at) three quarters of the budget", async () => {
    // Each call to a reset delegate is two attempts (callObject retries a reset once), 2 hops each: 20 ms. The first
    // call and the other shard's take 40 ms; the retries start at 90, 160, 230 ms (a sleep of 50 ms, then a call).
    // A retry is started only while its start is before three quarters of the budget: at 250 ms (187.5) none after 160.
    const starts = (got: { atMs: number }[]) => got.map((c) => c.atMs - T0);
    const at250 = await run(
      () => "reset",
      () => "reset",
      250,
    );
    expect(starts(at250.a)).toEqual([5, 15, 95, 105, 165, 175]);
    // Three quarters of the budget just short of a retry's start (229.5 of 230 ms): not started.
    const at306 = await run(
      () => "reset",
      () => "reset",
      306,
    );
    expect(starts(at306.a)).toEqual([5, 15, 95, 105, 165, 175]);
    // Just past it (230.25 ms): started.
    const at307 = await run(
      () => "reset",
      () => "reset",
      307,
    );
    expect(starts(at307.a)).toEqual([5, 15, 95, 105, 165, 175, 235, 245]);
    expect(at307.out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_RESET_BACKOFF_MS });
    // Exactly at it (90 of a 120 ms budget: the first retry would start at 90 ms): not started.
    const at120 = await run(
      () => "reset",
      () => "reset",
      120,
    );
    expect(starts(at120.a)).toEqual([5, 15]);
    // A restart that outlasts the first retry is answered by the second.
    const long = await run(
      (nowMs) => (nowMs < T0 + 110 ? "reset" : null),
      () => "reset",
      400,
    );
    expect(long.out).toMatchObject({ kind: "answer", answer: { kind: "answered" }, from: { name: "delegate:weur.0" } });
    expect(starts(long.a)).toEqual([5, 15, 95, 105, 165]);
  });

  it("stops asking again at the first failure that is not a reset, though it would answer after", async () => {
    // Reset until 30 ms, an error at the first retry (95 ms), answers from 100 ms: given up at 95 ms all the same.
    const { out, a } = await run(
      (nowMs) => (nowMs < T0 + 30 ? "reset" : nowMs < T0 + 100 ? "other" : null),
      () => "reset",
      400,
    );
    expect(out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_BACKOFF_MS });
    expect(a.map((c) => c.atMs - T0)).toEqual([5, 15, 95]);
  });

  it("gives up at once on another failure, for DELEGATE_BACKOFF_MS, the other shard not tried", async () => {
    const { out, a, b } = await run(
      () => "other",
      () => null,
    );
    expect(out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_BACKOFF_MS });
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(0);
    // A reset, then another failure on the retry: given up then, for DELEGATE_BACKOFF_MS.
    const mixed = await run(
      (nowMs) => (nowMs < T0 + 30 ? "reset" : "other"),
      () => "reset",
    );
    expect(mixed.out).toEqual({ kind: "fallBack", avoidForMs: DELEGATE_BACKOFF_MS });
  });

  it("keeps a busy delegate's failure (overloaded): decided from what the isolate knew, not sent elsewhere", async () => {
    const { out, a, b } = await run(
      () => "overloaded",
      () => null,
    );
    expect(out).toMatchObject({ kind: "answer", answer: { kind: "failed", failure: "overloaded" } });
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(0);
  });
});

describe("callTarget: the delegate while there is one, else the key's object", () => {
  type Outcome = "answer" | "busy" | "busy 0.4" | "overloaded" | "other" | "slow";
  /** A transport answering (`busy` in its result) or failing as `outcome` says, recording the calls it got. */
  const endpoint = (clock: EventClock, outcome: () => Outcome) => {
    const got: CallInput[] = [];
    const transport: ObjectTransport = {
      call: async (_name, call) => {
        got.push(call);
        const o = outcome();
        // "slow": answers after the call's budget (250 ms) and the late answer's wait (one more, and half of one before
        // the call is sent again: `awaitLate`): a timeout, not a sign of a busy shard.
        await clock.sleep(o === "slow" ? 700 : HOP_MS);
        if (o === "overloaded" || o === "other") throw error(o);
        const busy = o === "busy" ? { busy: true } : o === "busy 0.4" ? { busy: true, spread: 0.4 } : {};
        return { ...answered(), hot: false, ...busy };
      },
      refund: () => Promise.reject(new Error("no refunds here")),
    };
    return { transport, got };
  };
  async function target(opts: { object: Outcome; delegate: Outcome; route: boolean; bound: boolean; own?: boolean }) {
    const clock = new EventClock(T0);
    const object = endpoint(clock, () => opts.object);
    const del = endpoint(clock, () => opts.delegate);
    const own: DelegateRoute = { transport: del.transport, name: "delegate:weur.2" };
    const route: DelegateRoute = { transport: del.transport, name: "delegate:weur.0", ownShard: own, draw: 0.5 };
    const st = new KeyState(
      {
        transport: object.transport,
        name: "r:key",
        rule: { id: "r", params: tokenBucket(10, 1000, 20) },
        cost: 1,
        timeoutMs: 250,
        lease: null,
        ...(opts.bound ? { delegate: route } : {}),
      },
      T0,
    );
    let ids = 0;
    const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats(), newId: () => `n${ids++}` };
    const pending = callTarget(options, st, opts.route ? (opts.own === true ? own : route) : null, input);
    await clock.runUntil(T0 + 1000);
    return { answer: await pending, st, object: object.got, delegate: del.got };
  }

  it("without a route, or a key bound to no delegate, calls the key's object", async () => {
    for (const [route, bound] of [
      [false, true],
      [true, false],
    ] as const) {
      const r = await target({ object: "answer", delegate: "answer", route, bound });
      expect([r.object.length, r.delegate.length]).toEqual([1, 0]);
      expect(r.answer.kind).toBe("answered");
      expect(r.object[0]).toEqual(input);
    }
  });

  it("a busy first shard raises the key's spread to what it says (at most, overloaded or saying none); its answer is kept", async () => {
    // [the delegate's answer, called on the isolate's own shard, calls to it, the key's spread after, the answer's kind]
    const cases = [
      ["busy", false, 1, MAX_SPREAD, "answered"],
      ["busy 0.4", false, 1, 0.4, "answered"],
      ["answer", false, 1, 0, "answered"],
      ["overloaded", false, 1, MAX_SPREAD, "failed"],
      // A delegate that did not answer in time (its answer kept: decided from what the isolate knew) says no load;
      // the call was sent to it again half a budget later (`awaitLate`), as unanswered.
      ["slow", false, 2, 0, "failed"],
      // The own shard's load says nothing of the first's: no spread from it.
      ["busy 0.4", true, 1, 0, "answered"],
      ["overloaded", true, 1, 0, "failed"],
    ] as const;
    for (const [delegate, own, calls, spread, kind] of cases) {
      const r = await target({ object: "answer", delegate, route: true, bound: true, own });
      const seen = [r.object.length, r.delegate.length, r.st.spread, r.answer.kind];
      expect([delegate, own, ...seen]).toEqual([delegate, own, 0, calls, spread, kind]);
    }
  });

  it("a delegate's copy: its id, no units given back, and how long after its first it may come", async () => {
    const r = await target({ object: "answer", delegate: "slow", route: true, bound: true });
    expect(r.delegate).toHaveLength(2);
    expect(r.delegate[1]).toEqual({ ...r.delegate[0], giveBack: [], resent: 375 + 250 });
  });

  it("a failing delegate is avoided and the batch goes to the key's object, with a new id and no refunds", async () => {
    const r = await target({ object: "answer", delegate: "other", route: true, bound: true });
    expect(r.answer.kind).toBe("answered");
    expect(r.object).toHaveLength(1);
    expect(r.object[0]).toEqual({ ...input, id: "n0", giveBack: [] });
    expect(r.st.spread).toBe(0);
    expect(r.st.delegateDownUntilMs).toBe(T0 + HOP_MS + DELEGATE_BACKOFF_MS);
  });

  it("a key's object that is overloaded makes the key hot; one that fails otherwise does not", async () => {
    const busy = await target({ object: "overloaded", delegate: "answer", route: false, bound: true });
    expect(busy.answer.kind).toBe("failed");
    expect(busy.st.hotUntilMs).toBe(T0 + HOP_MS + HOT_HOLD_MS);
    const broken = await target({ object: "other", delegate: "answer", route: false, bound: true });
    expect(broken.answer.kind).toBe("failed");
    expect(broken.st.hotUntilMs).toBe(0);
  });
});

describe("a call unanswered past its budget and half of one more is sent again as it was (`awaitLate`)", () => {
  // A lost message or the network's tail, not a busy object: the same call (its id: the object applies it once) on
  // legs of its own. Not to a key's object its data center marks hot (hot_marks.ts): that one is busy, not lost.
  const setup = (mark: number | null | "none", lostFirst = true) => {
    const clock = new EventClock(T0);
    const got: { atMs: number; input: CallInput }[] = [];
    const transport: ObjectTransport = {
      call: async (_name, call) => {
        got.push({ atMs: clock.nowMs(), input: call });
        if (lostFirst && got.length === 1) return new Promise<CallResult>(() => {});
        await clock.sleep(HOP_MS);
        return { ...answered(), hot: false };
      },
      refund: () => Promise.reject(new Error("no refunds here")),
    };
    const st = new KeyState(
      {
        transport,
        name: "r:key",
        rule: { id: "r", params: tokenBucket(10, 1000, 20) },
        cost: 1,
        timeoutMs: 250,
        lease: null,
        ...(mark === "none" ? {} : { spreadMark: async () => mark }),
      },
      T0,
    );
    const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats(), newId: () => "n" };
    return { clock, got, st, options };
  };

  it("a lost call to the key's object: sent again at 375 ms with its id, and its answer decides", async () => {
    for (const mark of ["none", null] as const) {
      const { clock, got, st, options } = setup(mark);
      const pending = callTarget(options, st, null, input);
      await clock.runUntil(T0 + 1000);
      expect(await pending).toMatchObject({ kind: "answered", result: { atMs: T0 } });
      // The copy: its id, without the units given back (a first copy lost loses them: short, never over), and how long
      // after its first it may reach the object (375 ms, and a budget for its way): store.ts applies it only if it
      // remembers that far back.
      expect(got.map((g) => [g.atMs - T0, g.input])).toEqual([
        [0, input],
        [375, { ...input, giveBack: [], resent: 375 + 250 }],
      ]);
      expect(options.counters.late_answers).toBe(1);
    }
  });

  it("not again to a key marked hot in its data center (spread 0 or more), nor for a take of a slot: refused at 500 ms", async () => {
    // A marked key's object is busy, not lost; a copy of a concurrency take applied apart would hold a second slot.
    const cases = [
      { mark: 0, params: tokenBucket(10, 1000, 20) },
      { mark: 0.5, params: tokenBucket(10, 1000, 20) },
      { mark: "none", params: concurrencyP(5, 60_000) },
    ] as const;
    for (const { mark, params } of cases) {
      const { clock, got, st, options } = setup(mark);
      st.rule = { id: "r", params };
      let endedAtMs = 0;
      const pending = callTarget(options, st, null, input).finally(() => {
        endedAtMs = clock.nowMs() - T0;
      });
      await clock.runUntil(T0 + 1000);
      expect(await pending).toMatchObject({ kind: "failed", failure: "timeout" });
      expect([mark, got.length, endedAtMs]).toEqual([mark, 1, 500]);
    }
  });

  it("a copy answered `unsure` (the object may have forgotten the first) decides nothing: the first copy's answer does", async () => {
    const result = (over: Partial<CallResult> = {}): CallResult => ({ ...answered(), hot: false, ...over });
    for (const firstAtMs of [500, 2000]) {
      const { clock, st, options } = setup("none");
      let calls = 0;
      st.transport = {
        call: async () => {
          calls++;
          await clock.sleep(calls === 1 ? firstAtMs : HOP_MS);
          return calls === 1 ? result({ atMs: T0 + 1 }) : result({ unsure: true, results: [] });
        },
        refund: () => Promise.reject(new Error("no refunds here")),
      };
      const startMs = clock.nowMs();
      const pending = callTarget(options, st, null, input);
      await clock.runUntil(startMs + 3000);
      const out = await pending;
      // Its first copy at 500 ms, within the copy's budget: decided by it. At 2 s: past 625 ms, refused (a timeout).
      expect([firstAtMs, out.kind, calls]).toEqual([firstAtMs, firstAtMs === 500 ? "answered" : "failed", 2]);
    }
  });

  /** A key whose object never answers, with a 250 ms budget: `awaitLate` is given the timed-out call itself. */
  const silentKey = () =>
    new KeyState(
      {
        transport: { call: () => new Promise(() => {}), refund: () => new Promise(() => {}) },
        name: "k",
        rule,
        cost: 1,
        timeoutMs: 250,
        lease: null,
      },
      T0,
    );

  it("two copies the object applied apart: the one not taken is the duplicate; a replay or a failure among them, none", async () => {
    const fresh = (atMs: number): CallResult => ({ atMs, results: [], lease: null, replayed: false });
    // The call timed out at T0: its copy goes at 125 ms, and either answer by 375 ms decides.
    // [the first copy's answer: ms from T0, replayed or failed; the copy's, ms after it was sent; taken; duplicate]
    const cases = [
      [600, "fresh", 0, "fresh", "copy", "first"], // the copy answers first
      [200, "fresh", 150, "fresh", "first", "copy"], // the first copy's late answer comes first
      [600, "replayed", 0, "fresh", "copy", "none"],
      [600, "fresh", 0, "replayed", "copy", "none"],
      [200, "fresh", 150, "replayed", "first", "none"],
      [200, "failed", 0, "fresh", "copy", "none"], // the first copy failed: only the copy was applied
      [200, "fresh", 0, "failed", "first", "none"], // the copy failed
    ] as const;
    for (const [firstMs, firstIs, copyMs, copyIs, taken, expected] of cases) {
      const clock = new EventClock(T0);
      const st = silentKey();
      const first = { ...fresh(T0 + 1), replayed: firstIs === "replayed" };
      const copy = { ...fresh(T0 + 2), replayed: copyIs === "replayed" };
      const settleAt = <T>(ms: number, failed: boolean, value: T) =>
        new Promise<T>((resolve, reject) =>
          clock.after(ms, () => (failed ? reject(new Error("lost")) : resolve(value))),
        );
      const late = settleAt(firstMs, firstIs === "failed", first);
      const timedOut: CallAnswer = { kind: "failed", failure: "timeout", message: "", attempts: 1, late };
      const again = async () => ({ answer: settleAt(copyMs, copyIs === "failed", copy) });
      const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats() };
      const out = awaitLate(options, st, timedOut, again);
      await clock.runUntil(T0 + 1000);
      const answer = await out;
      expect(answer).toMatchObject({ kind: "answered", result: taken === "copy" ? copy : first });
      let duplicate: string = "none";
      void answer.duplicate?.then(
        (d) => {
          duplicate = d === first ? "first" : d === copy ? "copy" : "other";
        },
        () => {
          duplicate = "rejected";
        },
      );
      await clock.runUntil(T0 + 2000);
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect([firstMs, firstIs, copyMs, copyIs, duplicate]).toEqual([firstMs, firstIs, copyMs, copyIs, expected]);
    }
  });

  it("without a way to send the call again, the late answer is waited for one budget; no duplicate said", async () => {
    const clock = new EventClock(T0);
    const st = silentKey();
    const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats() };
    for (const lateMs of [200, 300]) {
      const startMs = clock.nowMs();
      const result: CallResult = { atMs: startMs, results: [], lease: null, replayed: false };
      const late = new Promise<CallResult>((resolve) => clock.after(lateMs, () => resolve(result)));
      const timedOut: CallAnswer = { kind: "failed", failure: "timeout", message: "", attempts: 1, late };
      let endedMs = -1;
      const out = awaitLate(options, st, timedOut).then((a) => {
        endedMs = clock.nowMs() - startMs;
        return a;
      });
      await clock.runUntil(startMs + 1000);
      const answer = await out;
      // Within the budget (200 ms): its answer; past it (300 ms): the timeout stands, at 250 ms.
      expect([lateMs, answer.kind, endedMs]).toEqual([
        lateMs,
        lateMs < 250 ? "answered" : "failed",
        lateMs < 250 ? 200 : 250,
      ]);
      expect("duplicate" in answer).toBe(false);
    }
  });

  it("an answer within half a budget more is not sent again", async () => {
    const { clock, got, st, options } = setup("none", false);
    const slow: ObjectTransport = {
      call: async (name, call) => {
        await clock.sleep(300);
        return st.transport === slow ? { ...answered(), hot: false } : Promise.reject(new Error(name + call.id));
      },
      refund: () => Promise.reject(new Error("no refunds here")),
    };
    st.transport = slow;
    const pending = callTarget(options, st, null, input);
    await clock.runUntil(T0 + 1000);
    expect(await pending).toMatchObject({ kind: "answered" });
    expect(got).toHaveLength(0);
    expect(options.counters.object_calls).toBe(1);
  });
});

describe("a call whose outcome is unknown is sent once more, its answer a late one (`resendUnknown`)", () => {
  // The key's object may have applied a call whose answer was lost (`retryable`) or that it reset on (`reset`), on
  // both attempts; or that failed otherwise (`error`). Its copy's answer, late, tells the coalescer what it charged:
  // a request refused meanwhile is given back (coalesce.ts `settle`, judge.ts `giveBack`).
  const thrown = (kind: string) =>
    Object.assign(new Error(kind), {
      retryable: kind === "retryable" || undefined,
      durableObjectReset: kind === "reset" || undefined,
      overloaded: kind === "overloaded" || undefined,
    });
  /** A key's object that fails `fails` sends as `kind` (after applying them), then answers; the calls it got. */
  const setup = (kind: string, fails: number, params = tokenBucket(10, 1000, 20), mark: number | null = null) => {
    const clock = new EventClock(T0);
    const got: CallInput[] = [];
    const transport: ObjectTransport = {
      call: async (_name, call) => {
        got.push(call);
        await clock.sleep(HOP_MS);
        if (got.length <= fails) throw thrown(kind);
        return { ...answered(), hot: false, atMs: clock.nowMs(), replayed: got.length > 1 };
      },
      refund: () => Promise.reject(new Error("no refunds here")),
    };
    const st = new KeyState(
      {
        transport,
        name: "r:key",
        rule: { id: "r", params },
        cost: 1,
        timeoutMs: 250,
        lease: null,
        spreadMark: async () => mark,
      },
      T0,
    );
    const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats(), newId: () => "n" };
    return { clock, got, st, options };
  };

  it("lost or reset on both attempts: a copy goes at once, and its answer is the late one", async () => {
    for (const [kind, fails] of [
      ["retryable", 2],
      ["reset", 2],
    ] as const) {
      const { clock, got, st, options } = setup(kind, fails);
      const pending = callTarget(options, st, null, input);
      await clock.runUntil(T0 + 1000);
      const out = await pending;
      expect([kind, out.kind, out.kind === "failed" && out.failure]).toEqual([kind, "failed", kind]);
      // The copy: its id, no units given back (they may have been taken: short, never over), how old it may be.
      expect(got.slice(fails)).toEqual([{ ...input, giveBack: [], resent: fails * HOP_MS + 250 }]);
      const late = out.kind === "failed" ? await out.late : null;
      expect([kind, late?.replayed]).toEqual([kind, true]);
    }
  });

  it("not for an overloaded object (it applied nothing), a plain error (never retried), a call of returns only, a slot's take or a key marked hot", async () => {
    const cases = [
      { kind: "overloaded", call: input, params: tokenBucket(10, 1000, 20), mark: null, failure: "overloaded" },
      { kind: "other", call: input, params: tokenBucket(10, 1000, 20), mark: null, failure: "error" },
      {
        kind: "retryable",
        call: { ...input, costs: [] },
        params: tokenBucket(10, 1000, 20),
        mark: null,
        failure: "retryable",
      },
      { kind: "retryable", call: input, params: concurrencyP(5, 60_000), mark: null, failure: "retryable" },
      { kind: "retryable", call: input, params: tokenBucket(10, 1000, 20), mark: 0, failure: "retryable" },
    ] as const;
    for (const { kind, call, params, mark, failure } of cases) {
      const { clock, got, st, options } = setup(kind, 2, params, mark);
      const pending = callTarget(options, st, null, call);
      await clock.runUntil(T0 + 1000);
      const out = await pending;
      expect([kind, mark, out.kind, out.kind === "failed" && out.failure, out.kind === "failed" && out.late]).toEqual([
        kind,
        mark,
        "failed",
        failure,
        null,
      ]);
      expect(got.length).toBe(kind === "overloaded" || kind === "other" ? 1 : 2);
    }
    // Nor, of course, for a call answered: one send.
    const { clock, got, st, options } = setup("retryable", 0);
    const pending = callTarget(options, st, null, input);
    await clock.runUntil(T0 + 1000);
    expect(await pending).toMatchObject({ kind: "answered" });
    expect(got).toEqual([input]);
  });

  it("a copy answered past its own budget is still taken: what it charged is known", async () => {
    const { clock, got, st, options } = setup("retryable", 2);
    const call = st.transport.call;
    st.transport = {
      ...st.transport,
      call: async (name, c) => {
        if (got.length === 2) await clock.sleep(1000); // the copy: well past its 250 ms budget
        return call(name, c);
      },
    };
    const pending = callTarget(options, st, null, input);
    await clock.runUntil(T0 + 3000);
    const out = await pending;
    const late = out.kind === "failed" ? await out.late : null;
    expect([got.length, late?.replayed]).toEqual([3, true]);
  });

  it("a copy that fails too (on its own retry as well), or is answered `unsure`, rejects its late answer", async () => {
    for (const fails of [4, 2]) {
      const { clock, st, options } = setup("retryable", fails);
      if (fails === 2) {
        const call = st.transport.call;
        st.transport = {
          ...st.transport,
          call: async (name, c) => {
            const r = await call(name, c);
            return { ...r, unsure: true, results: [] };
          },
        };
      }
      const pending = callTarget(options, st, null, input);
      await clock.runUntil(T0 + 1000);
      const out = await pending;
      const late = out.kind === "failed" ? out.late : null;
      expect(late).not.toBeNull();
      await expect(late).rejects.toThrow("no answer");
    }
  });
});

describe("a sub-lease's unused units go back to the delegate that lent it (byLender)", () => {
  // An isolate that moved from its region's first shard to its own (or to another region's delegate) gives a
  // sub-lease of the first shard back: that one holds its reservation; any other drops it (it matches none there).
  const recorder = (clock: EventClock, name: string, overloaded = false, failing = false) => {
    const got: CallInput[] = [];
    const transport: ObjectTransport = {
      call: async (_name, call) => {
        got.push(call);
        await clock.sleep(HOP_MS);
        if (overloaded || failing) throw error(overloaded ? "overloaded" : "other");
        return answered();
      },
      refund: () => Promise.reject(new Error("no refunds here")),
    };
    return { route: { transport, name } as DelegateRoute, got };
  };
  const setup = (ownOverloaded = false, ownFailing = false) => {
    const clock = new EventClock(T0);
    const object = recorder(clock, "r:key");
    const first = recorder(clock, "delegate:weur.0");
    const own = recorder(clock, "delegate:weur.2", ownOverloaded, ownFailing);
    const next = recorder(clock, "delegate:eeur.1");
    const st = new KeyState(
      {
        transport: object.route.transport,
        name: "r:key",
        rule: { id: "r", params: tokenBucket(10, 1000, 20) },
        cost: 1,
        timeoutMs: 250,
        lease: null,
        delegate: { ...first.route, ownShard: own.route, draw: 0 },
      },
      T0,
    );
    const call: NotedCallInput = {
      rule,
      id: "c1",
      costs: [1],
      giveBack: [
        { units: 3, atMs: T0 - 40, lender: first.route },
        { units: 2, atMs: T0 - 30, lender: own.route },
        { units: 4, atMs: T0 - 20, lender: next.route },
        { units: 1, atMs: T0 - 10 },
        { units: 5, atMs: T0 - 50, lender: first.route },
      ],
    };
    let ids = 0;
    const options = { clock: clock.clock, sleep: clock.sleep, counters: newStats(), newId: () => `n${ids++}` };
    return { clock, object, first, own, next, st, call, options };
  };

  it("splits by lender: the called delegate's own and unnoted ones here, the others per lender; notes dropped", () => {
    const { own, first, next, call } = setup();
    const out = byLender(own.route, call.giveBack ?? []);
    expect(out.here).toEqual([
      { units: 2, atMs: T0 - 30 },
      { units: 1, atMs: T0 - 10 },
    ]);
    expect(out.away.map((a) => [a.to, a.giveBack])).toEqual([
      [
        first.route,
        [
          { units: 3, atMs: T0 - 40 },
          { units: 5, atMs: T0 - 50 },
        ],
      ],
      [next.route, [{ units: 4, atMs: T0 - 20 }]],
    ]);
  });

  it("callTarget: the batch to the delegate called with its own, each lender a call of its own with its units", async () => {
    const { clock, object, first, own, next, st, call, options } = setup();
    const pending = callTarget(options, st, own.route, call);
    await clock.runUntil(T0 + 1000);
    expect((await pending).kind).toBe("answered");
    expect(own.got).toEqual([
      {
        ...call,
        giveBack: [
          { units: 2, atMs: T0 - 30 },
          { units: 1, atMs: T0 - 10 },
        ],
      },
    ]);
    const back = (id: string, giveBack: CallInput["giveBack"]) => ({ rule, id, costs: [], giveBack, lease: null });
    expect(first.got).toEqual([
      back("n0", [
        { units: 3, atMs: T0 - 40 },
        { units: 5, atMs: T0 - 50 },
      ]),
    ]);
    expect(next.got).toEqual([back("n1", [{ units: 4, atMs: T0 - 20 }])]);
    expect(object.got).toEqual([]);
  });

  it("the batch's answer does not wait for the lenders: their calls are the request's background work", async () => {
    // A lender may be another region's delegate: its round trip (or its timeout) must not hold the batch's requests.
    const { clock, first, own, next, st, call, options } = setup();
    const kept: Promise<unknown>[] = [];
    let answeredAtMs: number | null = null;
    const pending = callTarget(options, st, own.route, call, (work) => kept.push(work)).then((answer) => {
      answeredAtMs = clock.clock();
      return answer;
    });
    await clock.runUntil(T0 + 1000);
    expect((await pending).kind).toBe("answered");
    // Answered when the delegate called answered (one hop), not a hop later when the lenders did.
    expect(answeredAtMs).toBe(T0 + HOP_MS);
    expect([own.got.length, first.got.length, next.got.length]).toEqual([1, 1, 1]);
    expect(kept).toHaveLength(1);
    await Promise.all(kept);
  });

  it("not after an overloaded call (the coalescer sends them all again: a lender must not get one twice)", async () => {
    const { clock, first, own, next, st, call, options } = setup(true);
    const pending = callTarget(options, st, own.route, call);
    await clock.runUntil(T0 + 1000);
    expect((await pending).kind).toBe("failed");
    expect([own.got.length, first.got.length, next.got.length]).toEqual([1, 0, 0]);
  });

  it("not on a fallback to the key's object (the delegate failing): dropped there, short, never twice", async () => {
    const { clock, object, first, next, st, call, options } = setup(false, true);
    const pending = callTarget(options, st, st.delegate?.ownShard ?? null, call);
    await clock.runUntil(T0 + 1000);
    expect((await pending).kind).toBe("answered");
    expect(object.got).toEqual([{ ...call, id: "n0", giveBack: [] }]);
    expect([first.got.length, next.got.length]).toEqual([0, 0]);
  });

  it("to the key's object (no delegate): all of it with the call, the notes dropped", async () => {
    const { clock, object, first, st, call, options } = setup();
    const pending = callTarget(options, st, null, call);
    await clock.runUntil(T0 + 1000);
    await pending;
    expect(object.got).toEqual([{ ...call, giveBack: (call.giveBack ?? []).map(({ lender: _l, ...b }) => b) }]);
    expect(first.got).toEqual([]);
  });
});
