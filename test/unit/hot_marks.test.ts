/**
 * A data center's hot marks (src/isolate/hot_marks.ts, src/edge/hot_mark_cache.ts, src/sim/hot_marks.ts): when an
 * isolate writes one, what a read gives, the Cache API's store (over a fake cache), and a coalescer that takes a mark
 * for a key it does not track: its first batch goes to the delegate (its own shard when the mark's spread is above the
 * isolate's draw), not the key's object.
 */
import { describe, expect, it } from "vitest";
import type { AlgorithmParams } from "../../src/algorithms/index.ts";
import { cacheMarks, markUrl, parseMark } from "../../src/edge/hot_mark_cache.ts";
import { Coalescer, type DelegateRoute } from "../../src/isolate/coalesce.ts";
import {
  type HotMarkStore,
  hotByConstruction,
  markFrom,
  type StoredMark,
  spreadOfMark,
  WrittenMarks,
  writeMark,
} from "../../src/isolate/hot_marks.ts";
import { MAX_SPREAD } from "../../src/isolate/key_state.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CallInput, CallResult, LimiterRule } from "../../src/protocol/store.ts";
import {
  HOT_FROM_PER_S,
  HOT_HOLD_MS,
  HOT_MARK_TTL_MS,
  MARKS_REMEMBERED,
  SPREAD_HALF_LIFE_MS,
} from "../../src/protocol/tunables.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { MARK_LATENCY_MS, SimMarks } from "../../src/sim/hot_marks.ts";
import { MARK_PROPAGATION_MS } from "../../src/sim/network.ts";
import { fixedWindow, gcraP, leakyBucket, slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);

describe("hot marks: when to write one, what a read gives", () => {
  it("markFrom: hot for the mark's ttl from now, its spread as stored (an older Worker's true: 1); nothing from nothing", () => {
    expect(HOT_MARK_TTL_MS).toBe(HOT_HOLD_MS);
    expect(markFrom(null, T0)).toBeNull();
    const table: [StoredMark, number][] = [
      [{ spread: false }, 0],
      [{ spread: true }, 1],
      [{ spread: 0.4 }, 0.4],
      [{ spread: 0 }, 0],
      [{ spread: -1 }, 0],
      [{ spread: 3 }, 1],
      [{ spread: Number.NaN }, 0],
      // As of when it was written: decayed since (key_state.ts `spreadAt`); written later (another clock): as is.
      [{ spread: 0.4, atMs: T0 - SPREAD_HALF_LIFE_MS }, 0.2],
      [{ spread: 0.4, atMs: T0 - 2 * SPREAD_HALF_LIFE_MS }, 0.1],
      [{ spread: 0.4, atMs: T0 + 100 }, 0.4],
      [{ spread: true, atMs: T0 - SPREAD_HALF_LIFE_MS }, 0.5],
    ];
    for (const [stored, spread] of table)
      expect([stored, markFrom(stored, T0)]).toEqual([stored, { untilMs: T0 + HOT_MARK_TTL_MS, spread }]);
  });

  it("markFrom: a key hot by construction is taken as marked without a stored mark, its spread only as stored", () => {
    expect(markFrom(null, T0, true)).toEqual({ untilMs: T0 + HOT_MARK_TTL_MS, spread: 0 });
    expect(markFrom({ spread: 0.5 }, T0, true)).toEqual({ untilMs: T0 + HOT_MARK_TTL_MS, spread: 0.5 });
  });

  it("hotByConstruction: a rule at HOT_FROM_PER_S per second or more, whatever its key, of an algorithm that takes shares", () => {
    // A fast rule keyed per API key (section 8's hot-rate, hot-window) is hot from its first request, as a fast
    // `key: global` rule is: the function reads the rule's pace only. A slow one's keys learn it from an answer or a mark.
    const at = HOT_FROM_PER_S;
    const table: [string, AlgorithmParams, boolean][] = [
      ["token_bucket at the threshold", tokenBucket(at, 1000, 100), true],
      ["token_bucket 1/s below", tokenBucket(at - 1, 1000, 100), false],
      ["token_bucket 5000/s (hot-rate, per API key)", tokenBucket(5 * at, 1000, 1000), true],
      ["gcra, per minute, at the threshold", gcraP(at * 60, 60_000, 100), true],
      ["gcra 200/s (search-origin)", gcraP(200, 1000, 200), false],
      ["leaky_bucket well above", leakyBucket(5 * at, 1000, 100), true],
      ["fixed_window per 10 s at the threshold", fixedWindow(10 * at, 10_000), true],
      ["fixed_window per 10 s, one below", fixedWindow(10 * at - 1, 10_000), false],
      ["fixed_window per day, far below", fixedWindow(500_000, 86_400_000), false],
      ["sliding_log (takes no shares)", slidingLog(100 * at, 1000), false],
    ];
    for (const [what, params, hot] of table) expect([what, hotByConstruction(params)]).toEqual([what, hot]);
  });

  it("WrittenMarks: due for a first mark, a key whose spread rose since, or half a ttl after the last write", () => {
    const hot = { untilMs: T0 + 1000, spread: 0 };
    const moved = { untilMs: T0 + 1000, spread: 0.5 };
    const table: [typeof hot | null, { spread: number; atMs: number } | undefined, number, boolean][] = [
      [null, undefined, T0, false],
      [hot, undefined, T0, true],
      [hot, { spread: 0, atMs: T0 }, T0 + HOT_MARK_TTL_MS / 2 - 1, false],
      [hot, { spread: 0, atMs: T0 }, T0 + HOT_MARK_TTL_MS / 2, true],
      [moved, { spread: 0, atMs: T0 }, T0 + 1, true],
      [moved, { spread: 0.4, atMs: T0 }, T0 + 1, true],
      [moved, { spread: 0.5, atMs: T0 }, T0 + 1, false],
      [hot, { spread: 0.5, atMs: T0 }, T0 + 1, false],
    ];
    for (const [mark, last, now, due] of table) {
      const w = new WrittenMarks();
      if (last !== undefined) w.take("k", { untilMs: T0 + 1000, spread: last.spread }, last.atMs);
      expect([mark, last, now, w.take("k", mark, now)]).toEqual([mark, last, now, due]);
    }
  });

  it("WrittenMarks: takes a due mark once, remembers at most MARKS_REMEMBERED keys", () => {
    const w = new WrittenMarks();
    const hot = { untilMs: T0 + 1000, spread: 0 };
    expect(w.take("a", hot, T0)).toBe(true);
    expect(w.take("a", hot, T0 + 1)).toBe(false);
    expect(w.take("a", { ...hot, spread: 0.3 }, T0 + 2)).toBe(true);
    expect(w.take("a", null, T0 + HOT_MARK_TTL_MS)).toBe(false);
    expect(w.take("a", hot, T0 + 2 + HOT_MARK_TTL_MS / 2)).toBe(true);
    for (let i = 0; i < MARKS_REMEMBERED; i++) w.take(`k${i}`, hot, T0);
    // MARKS_REMEMBERED keys kept: "a" forgotten, the first of the others still there.
    expect(w.take("k0", hot, T0 + 1)).toBe(false);
    // "a" was the oldest: forgotten, so due again.
    expect(w.take("a", hot, T0 + 3 + HOT_MARK_TTL_MS / 2)).toBe(true);
    expect(w.take(`k${MARKS_REMEMBERED - 1}`, hot, T0 + 1)).toBe(false);
  });
});

describe("hot marks: writing one", () => {
  /** A store over a map, with every read and write written down. */
  function store(initial: StoredMark | null) {
    let stored = initial;
    const log: string[] = [];
    const s: HotMarkStore = {
      read: async () => {
        log.push("read");
        return stored;
      },
      write: async (_name, mark) => {
        log.push(`write ${mark.spread}`);
        stored = mark;
      },
    };
    return { s, log, stored: () => stored };
  }
  it("writes a mark as of now over none or a lower spread now; never over a higher one: the isolate takes that one", async () => {
    const H = SPREAD_HALF_LIFE_MS;
    // [the mark's spread, stored before, reads and writes, stored after, spread taken by the isolate]
    const table: [number, StoredMark | null, string[], StoredMark | null, number | null][] = [
      [0, null, ["read", "write 0"], { spread: 0, atMs: T0 }, null],
      [0.5, null, ["read", "write 0.5"], { spread: 0.5, atMs: T0 }, null],
      [0.5, { spread: 0.25 }, ["read", "write 0.5"], { spread: 0.5, atMs: T0 }, null],
      [0.5, { spread: 0.5 }, ["read", "write 0.5"], { spread: 0.5, atMs: T0 }, null],
      [0.5, { spread: false }, ["read", "write 0.5"], { spread: 0.5, atMs: T0 }, null],
      [0.25, { spread: 0.5 }, ["read"], { spread: 0.5 }, 0.5],
      [0, { spread: true }, ["read"], { spread: true }, 1],
      [0.75, { spread: 0.5 }, ["read", "write 0.75"], { spread: 0.75, atMs: T0 }, null],
      // Both as of now: 0.6 written a half-life ago is 0.3 now, under 0.4; over 0.25, taken as 0.3.
      [0.4, { spread: 0.6, atMs: T0 - H }, ["read", "write 0.4"], { spread: 0.4, atMs: T0 }, null],
      [0.25, { spread: 0.6, atMs: T0 - H }, ["read"], { spread: 0.6, atMs: T0 - H }, 0.3],
    ];
    for (const [spread, initial, log, after, taken] of table) {
      const st = store(initial);
      let took: number | null = null;
      const spreadHere = (s: number) => {
        took = s;
      };
      await writeMark(st.s, "k", { untilMs: T0 + 1000, spread, decays: true }, spreadHere, () => T0);
      expect([spread, initial, st.log, st.stored(), took]).toEqual([spread, initial, log, after, taken]);
    }
    // A spread that does not decay (a rate rule's, key_state.ts `spreadDecays`) is written without its time.
    const rate = store(null);
    await writeMark(
      rate.s,
      "k",
      { untilMs: T0 + 1000, spread: 0.5 },
      () => {},
      () => T0,
    );
    expect(rate.stored()).toEqual({ spread: 0.5 });
  });
});

/** A fake Cache API: a map of URL to body and max-age. */
/** A sleep that never ends: the cache always answers first. */
const never = () => new Promise<void>(() => {});

function fakeCache(fail = false) {
  const stored = new Map<string, { body: string; cacheControl: string | null }>();
  const cache = {
    match: async (url: string) => {
      if (fail) throw new Error("cache down");
      const hit = stored.get(url);
      return hit === undefined ? undefined : new Response(hit.body);
    },
    put: async (url: string, response: Response) => {
      if (fail) throw new Error("cache down");
      stored.set(url, { body: await response.text(), cacheControl: response.headers.get("cache-control") });
    },
  } as unknown as Cache;
  return { cache, stored };
}

describe("hot marks: reading one's spread (`spreadOfMark`)", () => {
  const reading = (stored: StoredMark | null): HotMarkStore => ({
    read: async () => stored,
    write: async () => {},
  });
  it("`null` without a mark (a resend may go: delegate_call.ts), the spread with one, 0 included", async () => {
    const at = (mark: StoredMark | null) => spreadOfMark(reading(mark), () => 1_000)("k");
    expect(await at(null)).toBeNull();
    expect(await at({ spread: 0 })).toBe(0);
    expect(await at({ spread: true })).toBe(1);
    expect(await at({ spread: 0.5, atMs: 1_000 })).toBe(0.5);
  });
});

describe("the Cache API's store", () => {
  it("writes a mark under the object's name for the mark's ttl, and reads it back", async () => {
    const { cache, stored } = fakeCache();
    const marks = cacheMarks(cache, never)!;
    expect(await marks.read("limiter:r:abc")).toBeNull();
    await marks.write("limiter:r:abc", { spread: true });
    expect(stored.get(markUrl("limiter:r:abc"))).toEqual({ body: '{"spread":true}', cacheControl: "max-age=5" });
    expect(await marks.read("limiter:r:abc")).toEqual({ spread: true });
    await marks.write("limiter:r:abc", { spread: 0.5, atMs: T0 });
    expect(await marks.read("limiter:r:abc")).toEqual({ spread: 0.5, atMs: T0 });
    expect(markUrl("a b/c")).toBe("https://hot-marks.sluice.invalid/a%20b%2Fc");
  });

  it("reads no mark when the cache fails or holds something else; writes fail quietly; no cache, no store", async () => {
    const down = cacheMarks(fakeCache(true).cache, never)!;
    await down.write("n", { spread: false });
    expect(await down.read("n")).toBeNull();
    const table: [string, unknown][] = [
      ['{"spread":false}', { spread: false }],
      ['{"spread":true}', { spread: true }],
      ['{"spread":0.25}', { spread: 0.25 }],
      ['{"spread":0.25,"atMs":5}', { spread: 0.25, atMs: 5 }],
      ['{"spread":0.25,"atMs":"5"}', { spread: 0.25 }],
      ['{"spread":0.25,"atMs":null}', { spread: 0.25 }],
      ['{"spread":"1"}', null],
      ["null", null],
      ["[]", null],
      ["not json", null],
    ];
    for (const [body, mark] of table) expect([body, parseMark(body)]).toEqual([body, mark]);
    expect(cacheMarks(null)).toBeNull();
  });

  it("reads no mark from a cache that stalls, once its read budget is slept, and a mark from one that answers", async () => {
    const stalled = { match: () => new Promise(() => {}), put: async () => {} } as unknown as Cache;
    const slept: number[] = [];
    const sleep = async (ms: number) => {
      slept.push(ms);
    };
    expect(await cacheMarks(stalled, sleep, 20)!.read("n")).toBeNull();
    expect(slept).toEqual([20]);
    const { cache } = fakeCache();
    const marks = cacheMarks(cache, never)!;
    await marks.write("n", { spread: false });
    expect(await marks.read("n")).toEqual({ spread: false });
  });
});

describe("the simulation's store", () => {
  it("takes MARK_LATENCY_MS to read or write, shows a mark MARK_PROPAGATION_MS after its write, forgets it its ttl after", async () => {
    const clock = new EventClock(T0);
    const marks = new SimMarks(clock);
    const seen: unknown[] = [];
    // A read that started before the write lands finds nothing.
    void marks.read("k").then((m) => seen.push(["early", m]));
    void marks.write("k", { spread: false });
    // Written (at MARK_LATENCY_MS) but not yet propagated to the data center's other readers.
    clock.after(
      MARK_LATENCY_MS + MARK_PROPAGATION_MS - 2,
      () => void marks.read("k").then((m) => seen.push(["propagating", m])),
    );
    clock.after(
      MARK_LATENCY_MS + MARK_PROPAGATION_MS,
      () => void marks.read("k").then((m) => seen.push(["written", m])),
    );
    clock.after(MARK_LATENCY_MS + HOT_MARK_TTL_MS, () => void marks.read("k").then((m) => seen.push(["late", m])));
    await clock.runUntil(T0 + 2 * HOT_MARK_TTL_MS);
    expect(seen).toEqual([
      ["early", null],
      ["propagating", null],
      ["written", { spread: false }],
      ["late", null],
    ]);
    expect([marks.reads, marks.writes]).toEqual([4, 1]);
  });

  it("keeps when a mark's spread was heard (`atMs`), for its readers to decay it", async () => {
    const clock = new EventClock(T0);
    const marks = new SimMarks(clock);
    const seen: unknown[] = [];
    void marks.write("k", { spread: 0.5, atMs: T0 - 7 });
    clock.after(MARK_LATENCY_MS + MARK_PROPAGATION_MS, () => void marks.read("k").then((m) => seen.push(m)));
    await clock.runUntil(T0 + HOT_MARK_TTL_MS);
    expect(seen).toEqual([{ spread: 0.5, atMs: T0 - 7 }]);
  });
});

describe("a coalescer taking a mark", () => {
  const rule: LimiterRule = { id: "w", params: fixedWindow(100_000, 60_000) };
  const answer = (input: CallInput, hot: boolean): CallResult => ({
    atMs: T0,
    results: input.costs.map(() => ({
      ok: true,
      atMs: T0,
      decision: { allowed: true, remaining: 1, resetAfterMs: 1, retryAfterMs: null, delayMs: 0 },
    })),
    lease: null,
    replayed: false,
    hot,
  });
  const transport = (calls: string[], who: string, hot: boolean): ObjectTransport => ({
    call: async (_name, input) => {
      calls.push(who);
      return answer(input, hot);
    },
    refund: () => Promise.reject(new Error("none")),
  });

  function isolate(clock = () => T0, draw?: number) {
    const calls: string[] = [];
    const coalescer = new Coalescer({
      clock,
      sleep: () => new Promise(() => {}),
      counters: newStats(),
      newId: () => "id",
    });
    const delegate: DelegateRoute = {
      transport: transport(calls, "delegate.0", true),
      name: "delegate:weur.0",
      ownShard: { transport: transport(calls, "delegate.2", true), name: "delegate:weur.2" },
      ...(draw === undefined ? {} : { draw }),
    };
    const ask = (
      hotMark: { untilMs: number; spread: number } | null,
      withDelegate = true,
      more: { objectHot?: boolean; spreadMark?: (name: string) => Promise<number> } = {},
    ) =>
      coalescer.ask({
        transport: transport(calls, "object", more.objectHot ?? false),
        ...(more.spreadMark === undefined ? {} : { spreadMark: more.spreadMark }),
        name: "k",
        rule,
        cost: 1,
        timeoutMs: 250,
        lease: null,
        delegate: withDelegate ? delegate : null,
        hotMark,
      });
    return { calls, coalescer, ask };
  }

  it("sends a marked key's first batch to the delegate, its own shard when the mark says so; unmarked, to the key's object", async () => {
    const marked = isolate();
    expect(marked.coalescer.tracks("k")).toBe(false);
    expect(marked.coalescer.markOf("k")).toBeNull();
    await marked.ask({ untilMs: T0 + 1000, spread: 0 });
    expect(marked.calls).toEqual(["delegate.0"]);
    expect(marked.coalescer.tracks("k")).toBe(true);
    // The delegate said hot: the isolate knows it hot for HOT_HOLD_MS, not on its own shard.
    expect(marked.coalescer.markOf("k")).toEqual({ untilMs: T0 + HOT_HOLD_MS, spread: 0, decays: true });
    const moved = isolate();
    await moved.ask({ untilMs: T0 + 1000, spread: 1 });
    expect(moved.calls).toEqual(["delegate.2"]);
    expect(moved.coalescer.markOf("k")?.spread).toBe(MAX_SPREAD);
    const plain = isolate();
    await plain.ask(null);
    expect(plain.calls).toEqual(["object"]);
    expect(plain.coalescer.markOf("k")).toBeNull();
  });

  it("a key hot by construction whose delegate says cold: its next batches go to the key's object, no mark taken again", async () => {
    const calls: string[] = [];
    const coalescer = new Coalescer({
      clock: () => T0,
      sleep: () => new Promise(() => {}),
      counters: newStats(),
      newId: () => "id",
    });
    const delegate: DelegateRoute = { transport: transport(calls, "delegate.0", false), name: "delegate:weur.0" };
    const ask = (hotMark?: { untilMs: number; spread: number } | null) =>
      coalescer.ask({
        transport: transport(calls, "object", false),
        name: "g",
        rule,
        cost: 1,
        timeoutMs: 250,
        lease: null,
        delegate,
        ...(hotMark === undefined ? {} : { hotMark }),
      });
    await ask(markFrom(null, T0, true));
    expect(calls).toEqual(["delegate.0"]);
    expect(coalescer.markOf("g")).toBeNull();
    expect(coalescer.tracks("g")).toBe(true);
    await ask();
    expect(calls).toEqual(["delegate.0", "object"]);
  });

  it("a mark's spread moves the isolates whose draw is below it, and only those", async () => {
    // [the isolate's draw, the mark's spread, where its first batch goes]
    const table: [number, number, string][] = [
      [0, 0, "delegate.0"],
      [0, 0.01, "delegate.2"],
      [0.3, 0.25, "delegate.0"],
      [0.3, 0.3, "delegate.0"],
      [0.3, 0.31, "delegate.2"],
      [0.7, 0.71, "delegate.2"],
      // At most MAX_SPREAD (every shard alike): a draw at or above it stays on the first shard.
      [0.74, 1, "delegate.2"],
      [0.75, 1, "delegate.0"],
    ];
    for (const [draw, spread, to] of table) {
      const iso = isolate(() => T0, draw);
      await iso.ask({ untilMs: T0 + 1000, spread });
      expect([draw, spread, iso.calls]).toEqual([draw, spread, [to]]);
      expect(iso.coalescer.markOf("k")?.spread).toBe(Math.min(MAX_SPREAD, spread));
    }
  });

  it("spreadTo: raises the spread of a key it tracks with a delegate (its next batch moves if above its draw); never lowers it", async () => {
    const first = isolate(() => T0, 0.5);
    first.coalescer.spreadTo("k", 1); // not tracked: nothing to raise
    await first.ask({ untilMs: T0 + 1000, spread: 0 });
    expect(first.coalescer.markOf("k")?.spread).toBe(0);
    first.coalescer.spreadTo("k", 0.4);
    expect(first.coalescer.markOf("k")?.spread).toBe(0.4);
    await first.ask(null);
    first.coalescer.spreadTo("k", 0.6);
    first.coalescer.spreadTo("k", 0.2);
    expect(first.coalescer.markOf("k")?.spread).toBe(0.6);
    await first.ask(null);
    expect(first.calls).toEqual(["delegate.0", "delegate.0", "delegate.2"]);
    const none = isolate();
    await none.ask(null, false);
    none.coalescer.spreadTo("k", 1);
    expect(none.coalescer.markOf("k")).toBeNull();
  });

  it("its spread decays: a half-life later half of it, and a batch goes back to the first shard once it is below the draw", async () => {
    let now = T0;
    const iso = isolate(() => now, 0.4);
    await iso.ask({ untilMs: T0 + HOT_HOLD_MS, spread: 0.6 });
    expect(iso.coalescer.markOf("k")?.spread).toBe(0.6);
    now = T0 + SPREAD_HALF_LIFE_MS;
    expect(iso.coalescer.markOf("k")?.spread).toBeCloseTo(0.3, 12);
    await iso.ask(null);
    // Raised again (a mark, a busy first shard): from the new spread on.
    iso.coalescer.spreadTo("k", 0.5);
    await iso.ask(null);
    expect(iso.calls).toEqual(["delegate.2", "delegate.0", "delegate.2"]);
    expect(iso.coalescer.markOf("k")?.spread).toBe(0.5);
  });

  it("takes a mark only for a key it does not track, and never without a delegate", async () => {
    const known = isolate();
    await known.ask(null);
    await known.ask({ untilMs: T0 + 1000, spread: 1 });
    expect(known.calls).toEqual(["object", "object"]);
    const none = isolate();
    await none.ask({ untilMs: T0 + 1000, spread: 1 }, false);
    expect(none.calls).toEqual(["object"]);
    expect(none.coalescer.markOf("k")).toBeNull();
  });

  it("takes a mark again for a key whose hot spell here lapsed: a mark renews it, none ends it", async () => {
    let now = T0;
    const iso = isolate(() => now);
    await iso.ask({ untilMs: T0 + 1000, spread: 0 });
    expect(iso.coalescer.tracks("k")).toBe(true);
    // No answer for HOT_HOLD_MS (an isolate with few requests): the spell lapsed, its data center's mark is wanted.
    now = T0 + HOT_HOLD_MS;
    expect(iso.coalescer.tracks("k")).toBe(false);
    await iso.ask({ untilMs: now + 1000, spread: 1 });
    expect(iso.coalescer.tracks("k")).toBe(true);
    // Lapsed again, and no mark any more: to the key's object, which says the key is cold.
    now += HOT_HOLD_MS;
    expect(iso.coalescer.tracks("k")).toBe(false);
    await iso.ask(null);
    expect(iso.coalescer.tracks("k")).toBe(true);
    // Known cold here: a mark is not taken (only for a key not tracked, or lapsed).
    await iso.ask({ untilMs: now + 1000, spread: 0 });
    expect(iso.calls).toEqual(["delegate.0", "delegate.2", "object", "object"]);
  });

  it("reads the mark once per hot spell before its first call to the delegate, and moves to its own shard at once if it says so", async () => {
    // [the mark read after the key's object said hot, a mark taken at the start, calls, mark reads]
    // The isolate's draw is 0.5.
    const table: [number | "fails" | "no reader", boolean, string[], number][] = [
      [1, false, ["object", "delegate.2", "delegate.2"], 1],
      [0.6, false, ["object", "delegate.2", "delegate.2"], 1],
      [0.4, false, ["object", "delegate.0", "delegate.0"], 1],
      [0, false, ["object", "delegate.0", "delegate.0"], 1],
      ["fails", false, ["object", "delegate.0", "delegate.0"], 1],
      ["no reader", false, ["object", "delegate.0", "delegate.0"], 0],
      // Started from a mark (read then): no read again, whatever the store says now.
      [1, true, ["delegate.0", "delegate.0", "delegate.0"], 0],
    ];
    for (const [mark, startMarked, calls, reads] of table) {
      const iso = isolate(() => T0, 0.5);
      let read = 0;
      const spreadMark =
        mark === "no reader"
          ? undefined
          : (name: string) => {
              read++;
              expect(name).toBe("k");
              return mark === "fails" ? Promise.reject(new Error("cache down")) : Promise.resolve(mark);
            };
      const more = { objectHot: true, ...(spreadMark === undefined ? {} : { spreadMark }) };
      const first = startMarked ? { untilMs: T0 + 1000, spread: 0 } : null;
      for (const hotMark of [first, null, null]) await iso.ask(hotMark, true, more);
      expect([String(mark), startMarked, iso.calls, read]).toEqual([String(mark), startMarked, calls, reads]);
    }
  });
});
