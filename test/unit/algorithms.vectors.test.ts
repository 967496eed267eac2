/** The worked examples (docs/rules.md "Decisions", README, docs/examples/) as named tables with an explicit `now`. */
import { describe, expect, it } from "vitest";
import { type AlgorithmState, type Decision, decide } from "../../src/algorithms/index.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, gcraP, leakyQueue, slidingCounter, slidingLog, tokenBucket } from "../support/params.ts";

/** Run `requests` ([t, cost]) through one key; return the decisions. */
function run(
  params: AlgorithmParams,
  requests: readonly (readonly [number, number?])[],
  start: AlgorithmState | null = null,
) {
  let state = start;
  const out: Decision[] = [];
  for (const [t, cost] of requests) {
    const r = decide(params, state, cost ?? 1, t);
    if (!r.ok) throw new Error(r.error);
    state = r.state;
    out.push(r.decision);
  }
  return out;
}
const times = (t: number, n: number) => Array.from({ length: n }, () => [t] as const);
const allowedCount = (ds: Decision[]) => ds.filter((d) => d.allowed).length;

describe("vector 1: token_bucket 10/s burst 20, the Free-plan burst", () => {
  const tb = tokenBucket(10, 1000, 20);
  const ds = run(tb, [...times(0, 25), ...times(500, 8), [2500]]);
  it("25 at t=0: 20 allowed, 5 denied with retry_after 100", () => {
    expect(allowedCount(ds.slice(0, 25))).toBe(20);
    expect(ds.slice(0, 20).every((d) => d.allowed)).toBe(true);
    for (const d of ds.slice(20, 25))
      expect(d).toEqual({ allowed: false, remaining: 0, resetAfterMs: 2000, retryAfterMs: 100, delayMs: 0 });
  });
  it("first decision matches the simulator's example line in the README", () => {
    expect(ds[0]).toEqual({ allowed: true, remaining: 19, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 });
  });
  it("8 at t=500: 5 allowed, 3 denied", () => {
    expect(ds.slice(25, 33).map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false]);
  });
  it("1 at t=2500: allowed, remaining 19", () => {
    expect(ds[33]).toMatchObject({ allowed: true, remaining: 19 });
  });
});

describe("vector 2: gcra 10/s burst 20", () => {
  const ds = run(gcraP(10, 1000, 20), times(0, 21));
  it("#1..#20 allowed, #21 denied with retry_after 100", () => {
    expect(ds.slice(0, 20).every((d) => d.allowed)).toBe(true);
    expect(ds[20]).toEqual({ allowed: false, remaining: 0, resetAfterMs: 2000, retryAfterMs: 100, delayMs: 0 });
  });
});

describe("vector 3: sliding_counter 100 per 60 s, prev 80, curr 30, 20 s in", () => {
  it("allowed with remaining 15", () => {
    const start: AlgorithmState = { window: 10, prev: 80, curr: 30 };
    const [d] = run(slidingCounter(100, 60_000), [[10 * 60_000 + 20_000]], start);
    expect(d).toMatchObject({ allowed: true, remaining: 15, retryAfterMs: null });
  });
});

describe("vector 4: 100 per minute, 10/s from 12:00:50 to 12:01:10", () => {
  const noon = Date.UTC(2026, 10, 30, 12, 0, 0);
  const trace = Array.from({ length: 200 }, (_, i) => [noon + 50_000 + i * 100] as const);
  const admitted = (p: AlgorithmParams) => allowedCount(run(p, trace));
  it.each([
    ["fixed_window", fixedWindow(100, 60_000), 200],
    ["sliding_log", slidingLog(100, 60_000), 100],
    // 100 admitted before 12:01; then prev=100 and the estimate 100·(60−e)/60 + curr lets one more in for every 0.6 s
    ["sliding_counter", slidingCounter(100, 60_000), 116],
    // with k >= 2 sub-windows the 10 s of 12:00:50 count whole until 12:01:50, so nothing more fits before 12:01:10
    ["sliding_counter buckets 2", slidingCounter(100, 60_000, false, 2), 100],
    ["sliding_counter buckets 4", slidingCounter(100, 60_000, false, 4), 100],
    ["sliding_counter buckets 6", slidingCounter(100, 60_000, false, 6), 100],
    ["sliding_counter buckets 60", slidingCounter(100, 60_000, false, 60), 100],
    // starts full at 100, refills 100/min = 1 per 600 ms: 100 + 33 over the 20 s
    ["token_bucket 100/min burst 100", tokenBucket(100, 60_000, 100), 133],
  ] as const)("%s admits %i", (_name, params, expected) => {
    expect(admitted(params)).toBe(expected);
  });
});

describe("sliding_counter with buckets: k", () => {
  it("k = 1 is the two-counter rule: the same state shape and the same decision as vector 3", () => {
    const start: AlgorithmState = { window: 10, prev: 80, curr: 30 };
    const [d] = run(slidingCounter(100, 60_000, false, 1), [[10 * 60_000 + 20_000]], start);
    expect(d).toMatchObject({ allowed: true, remaining: 15 });
  });
  it("k = 3 over 60 s: the estimate sums the last 3 sub-windows of 20 s and weighs the one before", () => {
    // sub-windows of 20 s: c_27 = 40 (weighted), c_28 = 10, c_29 = 20, c_30 = 5; now 5 s into sub-window 30
    const start: AlgorithmState = { window: 30, prev: 40, mid: [10, 20], curr: 5 };
    const now = 30 * 20_000 + 5_000;
    // estimate = 10 + 20 + 5 + 40 × 15/20 = 65; one more makes 66, remaining floor(100 − 66) = 34
    const [d] = run(slidingCounter(100, 60_000, false, 3), [[now]], start);
    expect(d).toEqual({ allowed: true, remaining: 34, resetAfterMs: 75_000, retryAfterMs: null, delayMs: 0 });
  });
  it("retry_after: the wait until enough sub-windows have left, and reset_after: (m + k + 1) × w − now", () => {
    const p = slidingCounter(10, 4000, false, 4); // sub-windows of 1 s
    const ds = run(p, [...times(0, 4), ...times(1000, 3), ...times(2500, 3), [2500], [3999], [4000], [5000]]);
    expect(ds.slice(0, 10).every((d) => d.allowed)).toBe(true);
    // at 2500 the estimate is 10: the 4 of sub-window 0 weigh whole until 4000, then fade over 4000..5000
    expect(ds[10]).toEqual({ allowed: false, remaining: 0, resetAfterMs: 4500, retryAfterMs: 1750, delayMs: 0 });
    expect(ds[11]).toMatchObject({ allowed: false, retryAfterMs: 251 });
    expect(ds[12]).toMatchObject({ allowed: false, retryAfterMs: 250 });
    // at 5000: c_1 = 3 is weighted in full (e = 0), plus c_2 = 3, plus this one: 7, remaining 3, reset (5 + 5) × 1000
    expect(ds[13]).toEqual({ allowed: true, remaining: 3, resetAfterMs: 5000, retryAfterMs: null, delayMs: 0 });
  });
});

describe("vector 5: sliding_log 5 per 60 s, login per IP", () => {
  const log = slidingLog(5, 60_000);
  it("the 6th attempt inside 60 s is denied, and denied attempts never extend the lock", () => {
    const ds = run(log, [[0], [1000], [2000], [3000], [4000], [5000], [30_000], [59_999], [60_000]]);
    expect(ds.slice(0, 5).every((d) => d.allowed)).toBe(true);
    expect(ds[5]).toEqual({ allowed: false, remaining: 0, resetAfterMs: 59_000, retryAfterMs: 55_000, delayMs: 0 });
    expect(ds[6]).toMatchObject({ allowed: false, retryAfterMs: 30_000 });
    expect(ds[7]).toMatchObject({ allowed: false, retryAfterMs: 1 });
    // the first attempt (t=0) has left at exactly t=60000, whatever was hammered in between
    expect(ds[8]).toMatchObject({ allowed: true, remaining: 0 });
  });
});

describe("vector 6: leaky_queue 10/s burst 20, the NGINX limit_req table", () => {
  it("default: #1 now, #2..#21 delayed 100..2000 ms, #22..#25 denied", () => {
    const ds = run(leakyQueue(10, 1000, 20), times(0, 25));
    expect(ds.slice(0, 21).map((d) => d.delayMs)).toEqual(Array.from({ length: 21 }, (_, i) => i * 100));
    expect(ds.slice(0, 21).every((d) => d.allowed)).toBe(true);
    expect(ds.slice(21).map((d) => d.allowed)).toEqual([false, false, false, false]);
    expect(ds[21]).toMatchObject({ retryAfterMs: 100, remaining: 0 });
  });
  it("nodelay (delay = burst): #1..#21 go at once, #22..#25 denied", () => {
    const ds = run(leakyQueue(10, 1000, 20, 20), times(0, 25));
    expect(ds.slice(0, 21).every((d) => d.allowed && d.delayMs === 0)).toBe(true);
    expect(ds.slice(21).every((d) => !d.allowed)).toBe(true);
  });
  it("a fresh key has remaining burst + 1 before its first request", () => {
    const [d] = run(leakyQueue(10, 1000, 20), [[0]]);
    expect(d?.remaining).toBe(20);
  });
});

describe("vector 6b: leaky_queue 10/s burst 0, NGINX's default `limit_req zone=one;`", () => {
  // capacity 1: one request per 100 ms interval, nothing queued, so nothing is ever delayed
  const rows: readonly (readonly [string, number, readonly (readonly [number])[], readonly Decision[]])[] = [
    [
      "3 at once: #1 now, #2 and #3 denied with retry_after 100",
      0,
      times(0, 3),
      [
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 100, retryAfterMs: 100, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 100, retryAfterMs: 100, delayMs: 0 },
      ],
    ],
    [
      "one every 50 ms: every other one passes, 1 ms early fails",
      0,
      [[0], [50], [99], [100], [150], [200]],
      [
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 50, retryAfterMs: 50, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 1, retryAfterMs: 1, delayMs: 0 },
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 50, retryAfterMs: 50, delayMs: 0 },
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
      ],
    ],
    [
      "nodelay changes nothing (delay = burst = 0)",
      0,
      times(0, 2),
      [
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
        { allowed: false, remaining: 0, resetAfterMs: 100, retryAfterMs: 100, delayMs: 0 },
      ],
    ],
    [
      "after an idle interval the key is fresh again: remaining 1 before, 0 after",
      0,
      [[0], [1000]],
      [
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
        { allowed: true, remaining: 0, resetAfterMs: 100, retryAfterMs: null, delayMs: 0 },
      ],
    ],
  ];
  it.each(rows)("%s", (_name, delay, requests, expected) => {
    expect(run(leakyQueue(10, 1000, 0, delay), requests)).toEqual(expected);
  });
  it("capacity 1: cost 1 on a fresh key is admitted, cost 2 is an error", () => {
    expect(decide(leakyQueue(10, 1000, 0), null, 1, 0).ok).toBe(true);
    expect(decide(leakyQueue(10, 1000, 0), null, 2, 0)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
  });
  it("7/3s burst 0: the interval is 3000/7 ms after each admission, kept exact (0, 429, 858, 1287)", () => {
    const ds = run(leakyQueue(7, 3000, 0), [[0], [428], [429], [857], [858], [1286], [1287]]);
    expect(ds.map((d) => d.allowed)).toEqual([true, false, true, false, true, false, true]);
    expect(ds[1]?.retryAfterMs).toBe(1);
  });
});

describe("fixed_window calendar months", () => {
  const month = fixedWindow(3, "month");
  it("resets at 00:00 UTC on the 1st, and retry_after points there", () => {
    const jan31 = Date.UTC(2026, 0, 31, 23, 59, 59, 999);
    const ds = run(month, [[jan31], [jan31], [jan31], [jan31], [Date.UTC(2026, 1, 1)]]);
    expect(ds[3]).toMatchObject({ allowed: false, retryAfterMs: 1, resetAfterMs: 1 });
    expect(ds[4]).toMatchObject({ allowed: true, remaining: 2, resetAfterMs: 28 * 86_400_000 });
  });
});

describe("cost above capacity", () => {
  it.each([
    ["token_bucket", tokenBucket(10, 1000, 20), 21],
    ["leaky_queue (capacity burst + 1)", leakyQueue(10, 1000, 20), 22],
    ["sliding_log", slidingLog(5, 60_000), 6],
  ] as const)("%s: an error, not a decision", (_n, params, cost) => {
    expect(decide(params, null, cost, 0)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
  });
  it("leaky_queue admits cost burst + 1 on a fresh key", () => {
    expect(decide(leakyQueue(10, 1000, 20), null, 21, 0).ok).toBe(true);
  });
});
