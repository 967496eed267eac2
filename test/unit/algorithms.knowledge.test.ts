/**
 * What each algorithm tells the shells, pinned as exact tables: the rule-file fields it takes, the header window
 * (`w` of RateLimit-Policy), whether a denial changes the state, the blocked-cache bound for a smaller cost, the span
 * a report measures peaks over, the one-line description, and the chart's level. The worker, the charts and the
 * reports call these through src/algorithms/index.ts; the contract suite (algorithms.contract.test.ts) holds them to
 * their promises on random traces, and these tables say the values themselves, so that a wrong value cannot pass for
 * a merely safe one (an emptied bound is safe, but makes the blocked-key cache useless).
 */
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmParams,
  type AlgorithmState,
  algorithmFor,
  capacityLabel,
  chartWindowOf,
  decide,
  denialsCount,
  deniedUntilMs,
  describeParams,
  headerWindowMs,
  LEASE_ALGORITHMS,
  leasePolicy,
  leaseRefillOver,
  leaseTermMs,
  levelAt,
  levelName,
  packedPath,
  peakSpanMs,
  type Window,
  type Words,
} from "../../src/algorithms/index.ts";
import type { ParamReader } from "../../src/algorithms/types.ts";
import {
  fixedWindow,
  gcraP,
  leakyBucket,
  leakyQueue,
  rate as rateOf,
  slidingCounter,
  slidingLog,
  tokenBucket,
} from "../support/params.ts";

const DAY = 86_400_000;
/** Durations and rates written plainly, so the tables show which number went where. */
const WORDS: Words = { span: (ms) => `${ms}ms`, rate: (r) => `${r.amount}/${r.periodMs}ms` };

/** The state after admitting `requests` ([t, cost]) one after another from a fresh key. */
function stateAfter(params: AlgorithmParams, requests: readonly (readonly [number, number])[]): AlgorithmState {
  let state: AlgorithmState | null = null;
  for (const [t, cost] of requests) {
    const r = decide(params, state, cost, t);
    if (!r.ok || !r.decision.allowed) throw new Error(`request at ${t} was not admitted`);
    state = r.state;
  }
  if (state === null) throw new Error("no requests");
  return state;
}

describe("rule-file fields: what each algorithm takes, as docs/rules.md lists them", () => {
  const RATE = ["rate_per_s", "rate", "burst"];
  // [algorithm, keys, takes (for messages), capacity name (for messages)]
  const table: readonly (readonly [string, readonly string[], string, string])[] = [
    ["token_bucket", RATE, "rate_per_s or rate, and burst", "burst"],
    ["gcra", RATE, "rate_per_s or rate, and burst", "burst"],
    ["leaky_bucket", RATE, "rate_per_s or rate, and burst", "burst"],
    ["leaky_queue", [...RATE, "delay", "nodelay"], "rate_per_s or rate, burst, and delay or nodelay", "burst + 1"],
    ["fixed_window", ["limit", "window_s", "window"], "limit, and window_s or window", "limit"],
    ["sliding_log", ["limit", "window_s", "window"], "limit, and window_s or window", "limit"],
    [
      "sliding_counter",
      ["limit", "window_s", "window", "count_denied", "buckets"],
      "limit, window_s or window, count_denied, and buckets",
      "limit",
    ],
    ["concurrency", ["limit", "slot_ttl"], "limit, and optionally slot_ttl", "limit"],
  ];
  it("covers every algorithm in the table", () => {
    expect(table.map(([name]) => name).sort()).toEqual([...ALGORITHMS].sort());
  });
  it.each(table)("%s", (name, keys, takes, capacityName) => {
    const spec = algorithmFor({ algorithm: name as AlgorithmParams["algorithm"] }).params;
    expect(spec.keys).toEqual(keys);
    expect(spec.takes).toBe(takes);
    expect(spec.capacityName).toBe(capacityName);
  });
});

/**
 * A reader that hands out given values, the way src/rules does after checking the syntax: a field in `invalid` reads
 * as `undefined` (its error already reported), a field not given reads as its fallback.
 */
function reader(fields: Readonly<Record<string, unknown>>, invalid: readonly string[] = []) {
  const errors: string[] = [];
  const given = (key: string) => key in fields || invalid.includes(key);
  const value = (key: string) => (invalid.includes(key) ? undefined : fields[key]);
  const r: ParamReader = {
    rate: () => value("rate") as ReturnType<ParamReader["rate"]>,
    window: () => value("window") as Window | undefined,
    int: (key, options = {}) => (given(key) ? (value(key) as number | undefined) : options.fallback),
    bool: (key, fallback) => (given(key) ? (value(key) as boolean | undefined) : fallback),
    duration: (key, fallbackMs) => (given(key) ? (value(key) as number | undefined) : fallbackMs),
    has: (key) => key in fields,
    error: (key, message) => errors.push(`${key}: ${message}`),
  };
  return { r, errors };
}

describe("params.read: the resolved parameters, or null when a field was invalid", () => {
  const R = rateOf(10, 1000);
  const W: Window = { kind: "ms", ms: 60_000 };
  const MONTH: Window = { kind: "month" };
  type Row = readonly [
    string,
    string,
    Readonly<Record<string, unknown>>,
    readonly string[],
    unknown,
    readonly string[],
  ];
  // [name, algorithm, fields, invalid fields, expected, errors the algorithm itself reports]
  const table: readonly Row[] = [
    ...(["token_bucket", "gcra", "leaky_bucket"] as const).flatMap((a): Row[] => [
      [`${a}`, a, { rate: R, burst: 20 }, [], { algorithm: a, rate: R, burst: 20 }, []],
      [`${a}, rate invalid`, a, { rate: R, burst: 20 }, ["rate"], null, []],
      [`${a}, burst invalid`, a, { rate: R, burst: 20 }, ["burst"], null, []],
    ]),
    [
      "token_bucket: burst × rate period past 2^50",
      "token_bucket",
      { rate: rateOf(1, 2 ** 40), burst: 1025 },
      [],
      null,
      [
        `burst: burst × rate period is too large for exact arithmetic (max 2^50); use a shorter period or a smaller burst (1025 × ${2 ** 40} ms)`,
      ],
    ],
    [
      "token_bucket: exactly 2^50",
      "token_bucket",
      { rate: rateOf(1, 2 ** 40), burst: 1024 },
      [],
      { algorithm: "token_bucket", rate: rateOf(1, 2 ** 40), burst: 1024 },
      [],
    ],
    [
      "leaky_queue: its capacity, burst + 1, past 2^50",
      "leaky_queue",
      { rate: rateOf(1, 2 ** 40), burst: 1024 },
      [],
      null,
      [
        `burst: (burst + 1) × rate period is too large for exact arithmetic (max 2^50); use a shorter period or a smaller burst (1025 × ${2 ** 40} ms)`,
      ],
    ],
    [
      "leaky_queue, delay",
      "leaky_queue",
      { rate: R, burst: 20, delay: 5 },
      [],
      { algorithm: "leaky_queue", rate: R, burst: 20, delay: 5 },
      [],
    ],
    [
      "leaky_queue, no delay given: 0",
      "leaky_queue",
      { rate: R, burst: 20 },
      [],
      { algorithm: "leaky_queue", rate: R, burst: 20, delay: 0 },
      [],
    ],
    [
      "leaky_queue, nodelay: the burst",
      "leaky_queue",
      { rate: R, burst: 20, nodelay: true },
      [],
      { algorithm: "leaky_queue", rate: R, burst: 20, delay: 20 },
      [],
    ],
    [
      "leaky_queue, nodelay false: 0",
      "leaky_queue",
      { rate: R, burst: 20, nodelay: false },
      [],
      { algorithm: "leaky_queue", rate: R, burst: 20, delay: 0 },
      [],
    ],
    [
      "leaky_queue, delay = burst",
      "leaky_queue",
      { rate: R, burst: 20, delay: 20 },
      [],
      { algorithm: "leaky_queue", rate: R, burst: 20, delay: 20 },
      [],
    ],
    [
      "leaky_queue, delay above burst",
      "leaky_queue",
      { rate: R, burst: 20, delay: 21 },
      [],
      null,
      ["delay: must be at most burst (20), got 21"],
    ],
    [
      "leaky_queue, delay and nodelay",
      "leaky_queue",
      { rate: R, burst: 20, delay: 1, nodelay: true },
      [],
      null,
      ["nodelay: give delay or nodelay, not both"],
    ],
    ["leaky_queue, delay invalid", "leaky_queue", { rate: R, burst: 20, delay: 1 }, ["delay"], null, []],
    ["leaky_queue, nodelay invalid", "leaky_queue", { rate: R, burst: 20, nodelay: true }, ["nodelay"], null, []],
    ["leaky_queue, rate invalid", "leaky_queue", { rate: R, burst: 20 }, ["rate"], null, []],
    [
      "fixed_window",
      "fixed_window",
      { limit: 10, window: W },
      [],
      { algorithm: "fixed_window", limit: 10, window: W },
      [],
    ],
    [
      "fixed_window, month",
      "fixed_window",
      { limit: 10, window: MONTH },
      [],
      { algorithm: "fixed_window", limit: 10, window: MONTH },
      [],
    ],
    ["fixed_window, limit invalid", "fixed_window", { limit: 10, window: W }, ["limit"], null, []],
    ["fixed_window, window invalid", "fixed_window", { limit: 10, window: W }, ["window"], null, []],
    [
      "sliding_log",
      "sliding_log",
      { limit: 10, window: W },
      [],
      { algorithm: "sliding_log", limit: 10, windowMs: 60_000 },
      [],
    ],
    ["sliding_log, limit invalid", "sliding_log", { limit: 10, window: W }, ["limit"], null, []],
    ["sliding_log, window invalid", "sliding_log", { limit: 10, window: W }, ["window"], null, []],
    ["sliding_log, a month", "sliding_log", { limit: 10, window: MONTH }, [], null, []],
    [
      "sliding_log: limit × window past 2^50",
      "sliding_log",
      { limit: 2 ** 20 + 1, window: { kind: "ms", ms: 2 ** 30 } },
      [],
      null,
      [
        `limit: limit × window is too large for exact arithmetic (max 2^50); use a shorter window or a smaller limit (${2 ** 20 + 1} × ${2 ** 30} ms)`,
      ],
    ],
    [
      "sliding_log: exactly 2^50",
      "sliding_log",
      { limit: 2 ** 20, window: { kind: "ms", ms: 2 ** 30 } },
      [],
      { algorithm: "sliding_log", limit: 2 ** 20, windowMs: 2 ** 30 },
      [],
    ],
    [
      "sliding_counter, defaults",
      "sliding_counter",
      { limit: 10, window: W },
      [],
      { algorithm: "sliding_counter", limit: 10, windowMs: 60_000, countDenied: false, buckets: 1 },
      [],
    ],
    [
      "sliding_counter, all given",
      "sliding_counter",
      { limit: 10, window: W, count_denied: true, buckets: 6 },
      [],
      { algorithm: "sliding_counter", limit: 10, windowMs: 60_000, countDenied: true, buckets: 6 },
      [],
    ],
    ["sliding_counter, limit invalid", "sliding_counter", { limit: 10, window: W }, ["limit"], null, []],
    ["sliding_counter, window invalid", "sliding_counter", { limit: 10, window: W }, ["window"], null, []],
    ["sliding_counter, a month", "sliding_counter", { limit: 10, window: MONTH }, [], null, []],
    [
      "sliding_counter, count_denied invalid",
      "sliding_counter",
      { limit: 10, window: W, count_denied: true },
      ["count_denied"],
      null,
      [],
    ],
    [
      "sliding_counter, buckets invalid",
      "sliding_counter",
      { limit: 10, window: W, buckets: 2 },
      ["buckets"],
      null,
      [],
    ],
    [
      "sliding_counter, 10000 buckets (the most)",
      "sliding_counter",
      { limit: 10, window: { kind: "ms", ms: 10_000 }, buckets: 10_000 },
      [],
      { algorithm: "sliding_counter", limit: 10, windowMs: 10_000, countDenied: false, buckets: 10_000 },
      [],
    ],
    [
      "sliding_counter, 10001 buckets",
      "sliding_counter",
      { limit: 10, window: { kind: "ms", ms: 100_010 }, buckets: 10_001 },
      [],
      null,
      ["buckets: must be at most 10000 (the state keeps buckets + 1 counts per key), got 10001"],
    ],
    [
      "sliding_counter, buckets that do not divide the window",
      "sliding_counter",
      { limit: 10, window: W, buckets: 7 },
      [],
      null,
      [
        "buckets: the window (60000 ms) must be a whole multiple of buckets, got 7; try 6 or 8 (or a window in ms divisible by 7)",
      ],
    ],
    [
      "sliding_counter, no divisor above up to twice the buckets",
      "sliding_counter",
      { limit: 10, window: { kind: "ms", ms: 7 }, buckets: 2 },
      [],
      null,
      [
        "buckets: the window (7 ms) must be a whole multiple of buckets, got 2; try 1 (or a window in ms divisible by 2)",
      ],
    ],
    [
      "sliding_counter, a divisor above, at twice the buckets",
      "sliding_counter",
      { limit: 10, window: { kind: "ms", ms: 10 }, buckets: 4 },
      [],
      null,
      [
        "buckets: the window (10 ms) must be a whole multiple of buckets, got 4; try 2 or 5 (or a window in ms divisible by 4)",
      ],
    ],
    [
      "sliding_counter, the window itself is the divisor above",
      "sliding_counter",
      { limit: 10, window: { kind: "ms", ms: 6 }, buckets: 4 },
      [],
      null,
      [
        "buckets: the window (6 ms) must be a whole multiple of buckets, got 4; try 3 or 6 (or a window in ms divisible by 4)",
      ],
    ],
  ];
  it.each(table)("%s", (_name, algorithm, fields, invalid, expected, errors) => {
    const { r, errors: reported } = reader(fields, invalid);
    const spec = algorithmFor({ algorithm: algorithm as AlgorithmParams["algorithm"] }).params;
    expect(spec.read(r)).toEqual(expected);
    expect(reported).toEqual(errors);
  });
});

describe("headerWindowMs: the span `q` describes in RateLimit-Policy", () => {
  const FEB_2026 = Date.UTC(2026, 1, 10, 12);
  // [name, params, now, expected ms]
  const table: readonly (readonly [string, AlgorithmParams, number, number])[] = [
    ["token_bucket 10/s burst 20: 20 tokens refill in 2 s", tokenBucket(10, 1000, 20), 0, 2000],
    ["gcra 7/3s burst 2: 2 × 3000/7 ms, rounded up", gcraP(7, 3000, 2), 0, 858],
    ["leaky_bucket 7/3s burst 3: 3 × 3000/7 ms, rounded up", leakyBucket(7, 3000, 3), 0, 1286],
    ["leaky_queue 10/s burst 20: its capacity, 21, drains in 2.1 s", leakyQueue(10, 1000, 20, 5), 0, 2100],
    ["fixed_window 60 s", fixedWindow(100, 60_000), FEB_2026, 60_000],
    ["fixed_window month, in February 2026: 28 days", fixedWindow(100, "month"), FEB_2026, 28 * DAY],
    ["fixed_window month, in February 2024: 29 days", fixedWindow(100, "month"), Date.UTC(2024, 1, 29, 23), 29 * DAY],
    [
      "fixed_window month, on 31 December: to 1 January",
      fixedWindow(100, "month"),
      Date.UTC(2026, 11, 31, 23),
      31 * DAY,
    ],
    ["fixed_window month, before 1970 (a negative index)", fixedWindow(100, "month"), Date.UTC(1969, 1, 1), 28 * DAY],
    ["sliding_log 60 s", slidingLog(5, 60_000), 0, 60_000],
    ["sliding_counter 60 s in 4 buckets", slidingCounter(100, 60_000, false, 4), 0, 60_000],
  ];
  it.each(table)("%s", (_name, params, now, expected) => {
    expect(headerWindowMs(params, now)).toBe(expected);
  });
});

describe("peakSpanMs: the span a report measures the most admitted over", () => {
  // [name, params, expected ms]
  const table: readonly (readonly [string, AlgorithmParams, number])[] = [
    // the rate's period as written (10/s is 1 per 100 ms reduced; the span is still 1 s)
    ["token_bucket 10/s", tokenBucket(10, 1000, 20), 1000],
    ["gcra 7/3s", gcraP(7, 3000, 20), 3000],
    ["leaky_bucket 10/s", leakyBucket(10, 1000, 20), 1000],
    ["leaky_queue 10/s", leakyQueue(10, 1000, 20), 1000],
    ["fixed_window 60 s", fixedWindow(100, 60_000), 60_000],
    ["fixed_window month: the longest month", fixedWindow(100, "month"), 31 * DAY],
    ["sliding_log 60 s", slidingLog(5, 60_000), 60_000],
    ["sliding_counter 60 s", slidingCounter(100, 60_000, false, 4), 60_000],
  ];
  it.each(table)("%s", (_name, params, expected) => {
    expect(peakSpanMs(params)).toBe(expected);
  });
});

describe("describe: the rule in one line, in rule-file terms", () => {
  const table: readonly (readonly [AlgorithmParams, string])[] = [
    [tokenBucket(10, 1000, 20), "token_bucket 10/1000ms, burst 20"],
    [gcraP(7, 3000, 5), "gcra 7/3000ms, burst 5"],
    [leakyBucket(10, 1000, 20), "leaky_bucket 10/1000ms, burst 20"],
    [leakyQueue(10, 1000, 20), "leaky_queue 10/1000ms, burst 20, delay 0"],
    [leakyQueue(10, 1000, 20, 5), "leaky_queue 10/1000ms, burst 20, delay 5"],
    [leakyQueue(10, 1000, 20, 20), "leaky_queue 10/1000ms, burst 20, nodelay"],
    [fixedWindow(100, 60_000), "fixed_window 100 per 60000ms"],
    [fixedWindow(100, "month"), "fixed_window 100 per month"],
    [slidingLog(5, 60_000), "sliding_log 5 per 60000ms"],
    [slidingCounter(100, 60_000), "sliding_counter 100 per 60000ms"],
    [slidingCounter(100, 60_000, true), "sliding_counter 100 per 60000ms, count_denied"],
    [slidingCounter(100, 60_000, false, 4), "sliding_counter 100 per 60000ms, 4 buckets"],
    [slidingCounter(100, 60_000, true, 6), "sliding_counter 100 per 60000ms, 6 buckets, count_denied"],
  ];
  it.each(table)("%j", (params, expected) => {
    expect(describeParams(params, WORDS)).toBe(expected);
  });
});

describe("denialsCount: whether a denial changes the state (only sliding_counter with count_denied)", () => {
  const table: readonly (readonly [AlgorithmParams, boolean])[] = [
    [tokenBucket(10, 1000, 2), false],
    [gcraP(10, 1000, 2), false],
    [leakyBucket(10, 1000, 2), false],
    [leakyQueue(10, 1000, 1), false],
    [fixedWindow(2, 60_000), false],
    [fixedWindow(2, "month"), false],
    [slidingLog(2, 60_000), false],
    [slidingCounter(2, 60_000), false],
    [slidingCounter(2, 60_000, false, 4), false],
    [slidingCounter(2, 60_000, true), true],
    [slidingCounter(2, 60_000, true, 4), true],
  ];
  it.each(table)("%j: %s", (params, counts) => {
    expect(denialsCount(params)).toBe(counts);
    // and it is so: a full key denies, and the denial keeps the very state, or changes it
    const full = stateAfter(params, [[1000, 2]]);
    const denied = decide(params, full, 1, 1000);
    expect(denied).toMatchObject({ ok: true, decision: { allowed: false } });
    if (denied.ok) expect(denied.state !== full).toBe(counts);
  });
});

describe("deniedUntilMs: until when a smaller cost is certainly denied too (the blocked-key cache)", () => {
  // A denial of cost 5 at t = 1000 that had 2 left and is retried at 10000.
  const denied = { cost: 5, remaining: 2, untilMs: 10_000 };
  // [name, params, cost, expected]
  const table: readonly (readonly [string, AlgorithmParams, number, number | null])[] = [
    ["any algorithm: the same cost waits for the denial's retry time", slidingLog(10, 60_000), 5, 10_000],
    ["any algorithm: a larger cost waits at least as long", slidingCounter(10, 60_000), 7, 10_000],
    // the buckets: c fits (5 − c) / rate sooner, and is denied for sure while it exceeds what was left
    ["token_bucket 10/s: cost 3 fits 200 ms sooner", tokenBucket(10, 1000, 10), 3, 9800],
    ["gcra 7/3s: cost 3 fits 2 × 3000/7 ms sooner, rounded up", gcraP(7, 3000, 10), 3, 10_000 - 858],
    ["leaky_bucket 10/s: cost 4 fits 100 ms sooner", leakyBucket(10, 1000, 10), 4, 9900],
    ["token_bucket: cost 2 is not more than was left: nothing certain", tokenBucket(10, 1000, 10), 2, null],
    ["gcra: cost 1 is not more than was left: nothing certain", gcraP(10, 1000, 10), 1, null],
    // the queue's wait does not depend on the cost
    ["leaky_queue: every cost waits for the queue", leakyQueue(10, 1000, 10), 1, 10_000],
    // the window ends at the same time for every cost
    ["fixed_window: cost 3 > 2 left waits for the window's end", fixedWindow(10, 60_000), 3, 10_000],
    ["fixed_window: cost 2 fits what was left: nothing certain", fixedWindow(10, 60_000), 2, null],
    ["fixed_window month: cost 4 > 2 left waits for the month's end", fixedWindow(10, "month"), 4, 10_000],
    // how fast a smaller cost fits depends on the shape of the log or the counts
    ["sliding_log: nothing certain", slidingLog(10, 60_000), 4, null],
    ["sliding_counter: nothing certain", slidingCounter(10, 60_000, false, 4), 4, null],
  ];
  it.each(table)("%s", (_name, params, cost, expected) => {
    expect(deniedUntilMs(params, denied, cost)).toBe(expected);
  });
});

describe("the chart's level: its name, the capacity line's label, and the level at a time", () => {
  // [params, name, label]
  const names: readonly (readonly [AlgorithmParams, string, string])[] = [
    [tokenBucket(10, 1000, 20), "tokens", "burst 20"],
    [gcraP(10, 1000, 21), "tokens", "burst 21"],
    [leakyBucket(10, 1000, 22), "bucket level", "burst 22"],
    [leakyQueue(10, 1000, 23), "queued", "burst 23"],
    [fixedWindow(24, 60_000), "window count", "limit 24"],
    [slidingLog(25, 60_000), "in log", "limit 25"],
    [slidingCounter(26, 60_000), "estimate", "limit 26"],
  ];
  it.each(names)("%j: %s, %s", (params, name, label) => {
    expect(levelName(params)).toBe(name);
    expect(capacityLabel(params)).toBe(label);
  });

  // [params, the window whose boundaries a chart marks]
  const windows: readonly (readonly [AlgorithmParams, Window | null])[] = [
    [fixedWindow(10, 1000), { kind: "ms", ms: 1000 }],
    [fixedWindow(10, "month"), { kind: "month" }],
    [slidingCounter(10, 60_000, false, 4), { kind: "ms", ms: 60_000 }],
    [tokenBucket(10, 1000, 20), null],
    [gcraP(10, 1000, 20), null],
    [leakyBucket(10, 1000, 20), null],
    [leakyQueue(10, 1000, 20), null],
    [slidingLog(10, 60_000), null],
  ];
  it.each(windows)("chartWindowOf %j: %j", (params, window) => {
    expect(chartWindowOf(params)).toEqual(window);
  });

  // [name, params, requests admitted before ([t, cost]), [t, level] read after them]
  const levels: readonly (readonly [
    string,
    AlgorithmParams,
    readonly (readonly [number, number])[],
    readonly (readonly [number, number])[],
  ])[] = [
    // tokens left: 20 − 5, refilling 1 per 100 ms; a time before the last request reads as that request's time
    [
      "token_bucket 10/s burst 20",
      tokenBucket(10, 1000, 20),
      [[1000, 5]],
      [
        [900, 15],
        [1000, 15],
        [1200, 17],
        [1500, 20],
        [9000, 20],
      ],
    ],
    [
      "token_bucket 7/3s burst 2: a fraction",
      tokenBucket(7, 3000, 2),
      [[0, 1]],
      [
        [0, 1],
        [300, 1.7],
      ],
    ],
    [
      "gcra 10/s burst 20",
      gcraP(10, 1000, 20),
      [[1000, 5]],
      [
        [1000, 15],
        [1200, 17],
        [1500, 20],
        [9000, 20],
      ],
    ],
    [
      "gcra 7/3s burst 2: a fraction",
      gcraP(7, 3000, 2),
      [[0, 1]],
      [
        [0, 1],
        [300, 1.7],
      ],
    ],
    // the level poured in: 5, draining 1 per 100 ms
    [
      "leaky_bucket 10/s burst 20",
      leakyBucket(10, 1000, 20),
      [[1000, 5]],
      [
        [900, 5],
        [1000, 5],
        [1200, 3],
        [1500, 0],
        [9000, 0],
      ],
    ],
    [
      "leaky_bucket 7/3s burst 2: a fraction",
      leakyBucket(7, 3000, 2),
      [[0, 1]],
      [
        [0, 1],
        [300, 0.3],
      ],
    ],
    // requests still queued: 5 at once, leaving 1 per 100 ms
    [
      "leaky_queue 10/s burst 20",
      leakyQueue(10, 1000, 20),
      [[1000, 5]],
      [
        [1000, 5],
        [1200, 3],
        [1500, 0],
        [9000, 0],
      ],
    ],
    [
      "leaky_queue 7/3s burst 2: a fraction",
      leakyQueue(7, 3000, 2),
      [[0, 1]],
      [
        [0, 1],
        [300, 0.3],
      ],
    ],
    // the count of the window the time falls in
    [
      "fixed_window 10 per 1 s",
      fixedWindow(10, 1000),
      [
        [1000, 2],
        [1500, 3],
      ],
      [
        [1999, 5],
        [2000, 0],
        [999, 0],
      ],
    ],
    [
      "fixed_window 10 per month",
      fixedWindow(10, "month"),
      [[Date.UTC(2026, 1, 3), 4]],
      [
        [Date.UTC(2026, 1, 28), 4],
        [Date.UTC(2026, 2, 1), 0],
      ],
    ],
    // the cost of the entries inside (t − window, t]
    [
      "sliding_log 10 per 1 s",
      slidingLog(10, 1000),
      [
        [1000, 2],
        [1500, 1],
      ],
      [
        [999, 0],
        [1000, 2],
        [1499, 2],
        [1500, 3],
        [1999, 3],
        [2000, 1],
        [2500, 0],
      ],
    ],
    // the estimate: prev weighed by what is left of the window, plus curr
    [
      "sliding_counter 10 per 1 s",
      slidingCounter(10, 1000),
      [[1500, 4]],
      [
        [1500, 4],
        [2000, 4],
        [2250, 3],
        [3000, 0],
      ],
    ],
  ];
  it.each(levels)("%s", (_name, params, requests, reads) => {
    expect(levelAt(params, null, 0)).toBe(
      params.algorithm === "token_bucket" || params.algorithm === "gcra" ? (params as { burst: number }).burst : 0,
    );
    const state = stateAfter(params, requests);
    for (const [t, level] of reads) expect([t, levelAt(params, state, t)]).toEqual([t, expect.closeTo(level, 9)]);
  });
});

describe("leases: whether isolates may hold a slice of a key's budget, and what the algorithm then promises", () => {
  it("the buckets promise a rate, fixed_window a window; the others take none, and say why", () => {
    expect(LEASE_ALGORITHMS).toEqual(["token_bucket", "gcra", "leaky_bucket", "fixed_window"]);
    const kinds = Object.fromEntries(ALGORITHMS.map((name) => [name, leasePolicy(name).kind]));
    expect(kinds).toEqual({
      token_bucket: "rate",
      gcra: "rate",
      leaky_bucket: "rate",
      leaky_queue: "none",
      fixed_window: "window",
      sliding_log: "none",
      sliding_counter: "none",
      concurrency: "none",
    });
    const why = (name: AlgorithmParams["algorithm"]) => {
      const lease = leasePolicy(name);
      return lease.kind === "none" ? lease.why : null;
    };
    expect(why("leaky_queue")).toBe("each request's place in the queue is decided when it arrives");
    expect(why("sliding_log")).toBe("a unit charged early would leave the sliding window before its request does");
    expect(why("sliding_counter")).toBe("a unit charged early would leave the sliding window before its request does");
  });

  // [name, params, charged at, ttl, expected term]
  const terms: readonly (readonly [string, AlgorithmParams, number, number, number])[] = [
    ["token_bucket: the ttl", tokenBucket(10, 1000, 20), 1999, 500, 500],
    ["gcra: the ttl", gcraP(10, 1000, 20), 1999, 500, 500],
    ["leaky_bucket: the ttl", leakyBucket(10, 1000, 20), 1999, 500, 500],
    ["fixed_window: the ttl, inside the window", fixedWindow(10, 1000), 1200, 500, 500],
    ["fixed_window: cut at the window's end", fixedWindow(10, 1000), 1700, 500, 300],
    ["fixed_window: 1 ms before the end", fixedWindow(10, 1000), 1999, 500, 1],
    ["fixed_window: at a window's start", fixedWindow(10, 1000), 2000, 1500, 1000],
    ["fixed_window month: cut at 1 March", fixedWindow(10, "month"), Date.UTC(2026, 1, 28, 23, 59, 59), 5000, 1000],
    ["leaky_queue: none", leakyQueue(10, 1000, 20), 1200, 500, 0],
    ["sliding_log: none", slidingLog(10, 1000), 1200, 500, 0],
    ["sliding_counter: none", slidingCounter(10, 1000), 1200, 500, 0],
  ];
  it.each(terms)("leaseTermMs, %s", (_name, params, atMs, ttlMs, expected) => {
    expect(leaseTermMs(params, atMs, ttlMs)).toBe(expected);
  });

  it("fixed_window: the window limit, and the window a time falls in", () => {
    const lease = leasePolicy("fixed_window");
    if (lease.kind !== "window") throw new Error("fixed_window leases by window");
    expect(lease.limit(fixedWindow(17, 1000))).toBe(17);
    expect(lease.windowOf(fixedWindow(17, 1000), 1999)).toBe(1);
    expect(lease.windowOf(fixedWindow(17, 1000), 2000)).toBe(2);
    expect(lease.windowOf(fixedWindow(17, "month"), Date.UTC(1970, 2, 5))).toBe(2);
  });

  // [params, count, span, ttl, within burst + rate × (span + ttl)]
  const bounds: readonly (readonly [AlgorithmParams, number, number, number, boolean])[] = [
    // 10/s burst 20: 20 at once, 1 more per 100 ms of span or ttl
    [tokenBucket(10, 1000, 20), 20, 0, 0, true],
    [tokenBucket(10, 1000, 20), 21, 0, 0, false],
    [gcraP(10, 1000, 20), 25, 300, 200, true],
    [gcraP(10, 1000, 20), 26, 300, 200, false],
    [leakyBucket(10, 1000, 20), 22, 200, 0, true],
    [leakyBucket(10, 1000, 20), 22, 0, 199, false],
    // 7/3s burst 2: 2 + 7 × 1000/3000 = 4.33
    [tokenBucket(7, 3000, 2), 4, 500, 500, true],
    [tokenBucket(7, 3000, 2), 5, 500, 500, false],
  ];
  it.each(bounds)("withinBound %j: %d in %d ms with ttl %d: %s", (params, count, spanMs, ttlMs, within) => {
    const lease = leasePolicy(params.algorithm);
    if (lease.kind !== "rate") throw new Error("a bucket leases by rate");
    expect(lease.withinBound(params, count, spanMs, ttlMs)).toBe(within);
  });

  // [params, span, whole units regained; null for a window, whose remaining units go first come]
  const refills: readonly (readonly [AlgorithmParams, number, number | null])[] = [
    [tokenBucket(10, 1000, 20), 250, 2],
    [gcraP(7, 3000, 2), 1000, 2],
    [leakyBucket(7, 3000, 2), 3000, 7],
    [fixedWindow(10, 1000), 5000, null],
    [leakyQueue(10, 1000, 20), 5000, null],
    [slidingLog(10, 1000), 5000, null],
  ];
  it.each(refills)("leaseRefillOver %j over %d ms: %s", (params, spanMs, expected) => {
    expect(leaseRefillOver(params, spanMs)).toBe(expected);
  });
});

describe("the packed one-number path: the buckets and the queue have one, the windows do not", () => {
  it.each(ALGORITHMS.map((name) => [name] as const))("%s", (name) => {
    const has = ["token_bucket", "gcra", "leaky_bucket", "leaky_queue"].includes(name);
    expect(packedPath({ algorithm: name } as AlgorithmParams) !== undefined).toBe(has);
  });
});
