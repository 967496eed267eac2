/**
 * The core's edges as named tables with an explicit `now`: the exact-division helpers, the cost guard of `decide`,
 * `refund` for every algorithm (including refunds into sliding_counter's previous window and partial sliding_log
 * refunds) and `freshAtMs` for every algorithm. These pin what the properties in algorithms.props.test.ts only
 * bound; `npm run test:mutation` (docs/testing.md) checks that no change to src/algorithms goes unnoticed.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ceilDiv, floorDiv, floorMod, gcd } from "../../src/algorithms/arith.ts";
import { type AlgorithmState, capacityOf, decide, freshAtMs, refund } from "../../src/algorithms/index.ts";
import { estimateAt } from "../../src/algorithms/sliding_counter.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import {
  fixedWindow,
  gcraP,
  leakyBucket,
  leakyQueue,
  slidingCounter,
  slidingLog,
  tokenBucket,
} from "../support/params.ts";
import { runs } from "../support/runs.ts";

const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 2^53 - 1

/** floor(n / d) and n mod d from BigInt, the oracle for the helpers. */
function exactFloor(n: number, d: number): { q: number; r: number } {
  const bn = BigInt(n);
  const bd = BigInt(d);
  let q = bn / bd; // truncates toward 0
  if (bn % bd !== 0n && bn < 0n) q -= 1n;
  return { q: Number(q), r: Number(bn - q * bd) };
}

describe("exact division helpers", () => {
  // [n, d, floor(n / d), ceil(n / d), n mod d]
  const table: readonly (readonly [number, number, number, number, number])[] = [
    [7, 2, 3, 4, 1],
    [-7, 2, -4, -3, 1],
    [6, 3, 2, 2, 0],
    [-6, 3, -2, -2, 0],
    [-1, 3, -1, 0, 2],
    [1, 3, 0, 1, 1],
    [0, 5, 0, 0, 0],
    [-7, 3, -3, -2, 2],
    [5, 1, 5, 5, 0],
    // the float quotient is nearest-rounded; near 2^53 it must still floor exactly
    [MAX_SAFE, 5, 1801439850948198, 1801439850948199, 1],
    [-MAX_SAFE, 5, -1801439850948199, -1801439850948198, 4],
    [MAX_SAFE, 2, 4503599627370495, 4503599627370496, 1],
    [MAX_SAFE - 1, 3, 3002399751580330, 3002399751580330, 0],
    [-MAX_SAFE, MAX_SAFE - 1, -2, -1, MAX_SAFE - 2],
  ];
  it.each(table)("floorDiv, ceilDiv, floorMod of %d by %d", (n, d, floor, ceil, mod) => {
    expect(floorDiv(n, d)).toBe(floor);
    expect(ceilDiv(n, d)).toBe(ceil);
    expect(floorMod(n, d)).toBe(mod); // toBe: never -0
    expect({ q: floor, r: mod }).toEqual(exactFloor(n, d));
  });

  it("ceilDiv of 0 is +0, not -0", () => {
    expect(Object.is(ceilDiv(0, 7), 0)).toBe(true);
    expect(Object.is(floorMod(-14, 7), 0)).toBe(true);
  });

  it("agree with BigInt on random safe integers, most of them near ±2^53", () => {
    const nArb = fc.oneof(
      fc.integer({ min: -1000, max: 1000 }),
      fc.integer({ min: MAX_SAFE - 1_000_000, max: MAX_SAFE }),
      fc.integer({ min: -MAX_SAFE, max: -MAX_SAFE + 1_000_000 }),
      fc.maxSafeInteger(),
      fc.maxSafeNat().map((n) => 0 - n), // 0 - n: never -0
    );
    const dArb = fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: MAX_SAFE }));
    fc.assert(
      fc.property(nArb, dArb, (n, d) => {
        const { q, r } = exactFloor(n, d);
        expect(floorDiv(n, d)).toBe(q);
        expect(floorMod(n, d)).toBe(r);
        expect(ceilDiv(n, d)).toBe(r === 0 ? q : q + 1);
      }),
      { numRuns: runs(1000) },
    );
  });

  it.each([
    [12, 18, 6],
    [18, 12, 6],
    [-4, 6, 2],
    [4, -6, 2],
    [0, 5, 5],
    [7, 0, 7],
    [1000, 7, 1],
    [86_400_000, 3000, 3000],
  ])("gcd(%d, %d) = %d", (a, b, g) => {
    expect(gcd(a, b)).toBe(g);
  });
});

const ALL: readonly (readonly [string, AlgorithmParams])[] = [
  ["token_bucket", tokenBucket(10, 1000, 20)],
  ["gcra", gcraP(10, 1000, 20)],
  ["leaky_bucket", leakyBucket(10, 1000, 20)],
  ["leaky_queue", leakyQueue(10, 1000, 20)],
  ["fixed_window", fixedWindow(20, 60_000)],
  ["sliding_log", slidingLog(20, 60_000)],
  ["sliding_counter", slidingCounter(20, 60_000)],
  ["sliding_counter, 4 buckets", slidingCounter(20, 60_000, false, 4)],
];

describe("decide: the cost guard", () => {
  const invalid = [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53];
  it.each(ALL)("%s: a cost that is not a positive safe integer is invalid_cost", (_name, params) => {
    for (const cost of invalid) expect(decide(params, null, cost, 1_000)).toEqual({ ok: false, error: "invalid_cost" });
  });
  it.each(ALL)("%s: capacity is admitted on a fresh key, capacity + 1 is cost_exceeds_capacity", (_name, params) => {
    const capacity = capacityOf(params);
    const full = decide(params, null, capacity, 1_000);
    expect(full).toMatchObject({ ok: true, decision: { allowed: true, remaining: 0 } });
    expect(decide(params, null, capacity + 1, 1_000)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
    // also against a state: the error never depends on (or touches) what is stored
    if (!full.ok) return;
    expect(decide(params, full.state, capacity + 1, 1_000)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
  });
});

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

describe("refund", () => {
  // [name, params, state, cost, admittedAtMs, expected state]
  const table: readonly (readonly [string, AlgorithmParams, AlgorithmState, number, number, AlgorithmState])[] = [
    [
      "token_bucket: tokens back",
      tokenBucket(10, 1000, 20),
      { tokensScaled: 500, lastMs: 7 },
      3,
      7,
      { tokensScaled: 800, lastMs: 7 },
    ],
    [
      "token_bucket: capped at the burst",
      tokenBucket(10, 1000, 20),
      { tokensScaled: 1900, lastMs: 7 },
      3,
      7,
      { tokensScaled: 2000, lastMs: 7 },
    ],
    [
      "leaky_bucket: the level drops",
      leakyBucket(10, 1000, 20),
      { levelScaled: 1500, lastMs: 7 },
      3,
      7,
      { levelScaled: 1200, lastMs: 7 },
    ],
    [
      "leaky_bucket: not below 0",
      leakyBucket(10, 1000, 20),
      { levelScaled: 100, lastMs: 7 },
      3,
      7,
      { levelScaled: 0, lastMs: 7 },
    ],
    // 7/3s: T = 3000/7 ms, kept as whole ms plus sevenths
    [
      "gcra: TAT back by cost × T, borrowing a whole ms",
      gcraP(7, 3000, 7),
      { tatMs: 5000, tatFrac: 2 },
      1,
      0,
      {
        tatMs: 4571,
        tatFrac: 5,
      },
    ],
    ["gcra: TAT back by 2 × T", gcraP(7, 3000, 7), { tatMs: 5000, tatFrac: 0 }, 2, 0, { tatMs: 4142, tatFrac: 6 }],
    [
      "leaky_queue: the queue slot is freed",
      leakyQueue(7, 3000, 7),
      { tatMs: 5000, tatFrac: 2 },
      1,
      0,
      {
        tatMs: 4571,
        tatFrac: 5,
      },
    ],
    [
      "fixed_window: the count of the admission's window drops",
      fixedWindow(20, 1000),
      { window: 5, count: 7 },
      3,
      5999,
      { window: 5, count: 4 },
    ],
    ["fixed_window: not below 0", fixedWindow(20, 1000), { window: 5, count: 2 }, 3, 5000, { window: 5, count: 0 }],
    [
      "fixed_window: an admission of an earlier window is not refunded",
      fixedWindow(20, 1000),
      { window: 5, count: 7 },
      3,
      4999,
      { window: 5, count: 7 },
    ],
    [
      "fixed_window month: the admission's month",
      fixedWindow(20, "month"),
      { window: 54 * 12 + 1, count: 7 }, // February 2024
      2,
      Date.UTC(2024, 1, 29, 23),
      { window: 54 * 12 + 1, count: 5 },
    ],
    [
      "fixed_window month: January's admission is not refunded from February",
      fixedWindow(20, "month"),
      { window: 54 * 12 + 1, count: 7 },
      2,
      Date.UTC(2024, 0, 31, 23),
      { window: 54 * 12 + 1, count: 7 },
    ],
    [
      "sliding_counter: the current window drops",
      slidingCounter(20, 1000),
      { window: 6, prev: 5, curr: 4 },
      3,
      6000,
      { window: 6, prev: 5, curr: 1 },
    ],
    [
      "sliding_counter: the current window, not below 0",
      slidingCounter(20, 1000),
      { window: 6, prev: 5, curr: 2 },
      3,
      6999,
      { window: 6, prev: 5, curr: 0 },
    ],
    [
      "sliding_counter: an admission of the previous window is refunded from prev",
      slidingCounter(20, 1000),
      { window: 6, prev: 5, curr: 4 },
      3,
      5999,
      { window: 6, prev: 2, curr: 4 },
    ],
    [
      "sliding_counter: the previous window, not below 0",
      slidingCounter(20, 1000),
      { window: 6, prev: 2, curr: 4 },
      3,
      5000,
      { window: 6, prev: 0, curr: 4 },
    ],
    [
      "sliding_counter: an admission two windows back counts nowhere any more",
      slidingCounter(20, 1000),
      { window: 6, prev: 5, curr: 4 },
      3,
      4999,
      { window: 6, prev: 5, curr: 4 },
    ],
    [
      "sliding_counter, 3 buckets: the sub-window of the admission, among the whole ones",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [2, 3], curr: 4 },
      2,
      9500,
      { window: 10, prev: 1, mid: [2, 1], curr: 4 },
    ],
    [
      "sliding_counter, 3 buckets: the current sub-window",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [2, 3], curr: 4 },
      3,
      10_999,
      { window: 10, prev: 1, mid: [2, 3], curr: 1 },
    ],
    [
      "sliding_counter, 3 buckets: the weighted sub-window, not below 0",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [2, 3], curr: 4 },
      2,
      7000,
      { window: 10, prev: 0, mid: [2, 3], curr: 4 },
    ],
    [
      "sliding_counter, 3 buckets: an admission before the weighted sub-window counts nowhere",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [2, 3], curr: 4 },
      1,
      6999,
      { window: 10, prev: 1, mid: [2, 3], curr: 4 },
    ],
    [
      "sliding_log: a partial refund of a merged entry",
      slidingLog(20, 1000),
      { times: [100, 200, 300], costs: [1, 5, 2] },
      3,
      200,
      { times: [100, 200, 300], costs: [1, 2, 2] },
    ],
    [
      "sliding_log: a full refund removes the entry",
      slidingLog(20, 1000),
      { times: [100, 200, 300], costs: [1, 5, 2] },
      5,
      200,
      { times: [100, 300], costs: [1, 2] },
    ],
    [
      "sliding_log: more than the entry holds removes it too",
      slidingLog(20, 1000),
      { times: [100, 200, 300], costs: [1, 5, 2] },
      4,
      300,
      { times: [100, 200], costs: [1, 5] },
    ],
    [
      "sliding_log: the oldest entry can be refunded too",
      slidingLog(20, 1000),
      { times: [100, 200, 300], costs: [1, 5, 2] },
      1,
      100,
      { times: [200, 300], costs: [5, 2] },
    ],
    [
      "sliding_log: no entry at that time, nothing to give back",
      slidingLog(20, 1000),
      { times: [100, 200, 300], costs: [1, 5, 2] },
      1,
      250,
      { times: [100, 200, 300], costs: [1, 5, 2] },
    ],
  ];
  it.each(table)("%s", (_name, params, state, cost, admittedAtMs, expected) => {
    const before = structuredClone(state);
    expect(refund(params, state, cost, admittedAtMs)).toEqual(expected);
    expect(state).toEqual(before); // states are values: the refunded one is new
  });

  it("sliding_counter: a request refunded after the window moved on is taken out of prev", () => {
    const p = slidingCounter(10, 1000);
    // 4 in window 5, then 3 in window 6: prev 4, curr 3. The request of cost 2 admitted at 5900 is refunded at 6100.
    const s = stateAfter(p, [
      [5100, 2],
      [5900, 2],
      [6050, 3],
    ]);
    expect(s).toEqual({ window: 6, prev: 4, curr: 3 });
    const r = refund(p, s, 2, 5900);
    expect(r).toEqual({ window: 6, prev: 2, curr: 3 });
    // 400 ms into window 6 the estimate is 2 × 0.6 + 3 = 4.2 rather than 5.4: room for 5, not 4
    const after = decide(p, r, 1, 6400);
    expect(after).toMatchObject({ ok: true, decision: { allowed: true, remaining: 4 } });
    const without = decide(p, s, 1, 6400);
    expect(without).toMatchObject({ ok: true, decision: { allowed: true, remaining: 3 } });
  });

  it("sliding_log: a partial refund keeps the rest of the entry counting until it leaves", () => {
    const p = slidingLog(5, 1000);
    const s = stateAfter(p, [
      [100, 1],
      [200, 3],
    ]);
    const r = refund(p, s, 2, 200);
    expect(r).toEqual({ times: [100, 200], costs: [1, 1] });
    // 2 counted: a cost-3 request fits at 300, a cost-4 one waits until the entry at 100 leaves
    expect(decide(p, r, 3, 300)).toMatchObject({ ok: true, decision: { allowed: true, remaining: 0 } });
    expect(decide(p, r, 4, 300)).toMatchObject({ ok: true, decision: { allowed: false, retryAfterMs: 800 } });
  });
});

describe("freshAtMs: the first ms from which a state is as good as none", () => {
  // [name, params, state, freshAtMs]
  const table: readonly (readonly [string, AlgorithmParams, AlgorithmState, number])[] = [
    ["token_bucket: full already", tokenBucket(10, 1000, 20), { tokensScaled: 2000, lastMs: 5000 }, 5000],
    ["token_bucket: 3.5 tokens short", tokenBucket(10, 1000, 20), { tokensScaled: 1650, lastMs: 5000 }, 5350],
    ["token_bucket: rounded up (7/3s)", tokenBucket(7, 3000, 7), { tokensScaled: 3000 * 6, lastMs: 5000 }, 5429],
    ["leaky_bucket: empty already", leakyBucket(10, 1000, 20), { levelScaled: 0, lastMs: 5000 }, 5000],
    ["leaky_bucket: level 3.5", leakyBucket(10, 1000, 20), { levelScaled: 350, lastMs: 5000 }, 5350],
    ["leaky_bucket: rounded up (7/3s)", leakyBucket(7, 3000, 7), { levelScaled: 3000, lastMs: 5000 }, 5429],
    ["gcra: TAT on a whole ms", gcraP(7, 3000, 7), { tatMs: 5000, tatFrac: 0 }, 5000],
    ["gcra: TAT between two ms", gcraP(7, 3000, 7), { tatMs: 5000, tatFrac: 6 }, 5001],
    ["leaky_queue: TAT on a whole ms", leakyQueue(7, 3000, 7), { tatMs: 5000, tatFrac: 0 }, 5000],
    ["leaky_queue: TAT between two ms", leakyQueue(7, 3000, 7), { tatMs: 5000, tatFrac: 1 }, 5001],
    ["fixed_window: the end of its window", fixedWindow(20, 1000), { window: 5, count: 3 }, 6000],
    [
      "fixed_window month: the 1st of the next month",
      fixedWindow(20, "month"),
      { window: 54 * 12 + 1, count: 3 },
      Date.UTC(2024, 2, 1),
    ],
    [
      "fixed_window month: December runs to January",
      fixedWindow(20, "month"),
      { window: 54 * 12 + 11, count: 3 },
      Date.UTC(2025, 0, 1),
    ],
    ["sliding_log: no entries", slidingLog(5, 1000), { times: [], costs: [] }, 0],
    ["sliding_log: when the newest entry leaves", slidingLog(5, 1000), { times: [100, 700], costs: [1, 2] }, 1700],
    [
      "sliding_counter: only prev counts: the end of this window",
      slidingCounter(20, 1000),
      { window: 5, prev: 4, curr: 0 },
      6000,
    ],
    [
      "sliding_counter: curr counts: the end of the next window",
      slidingCounter(20, 1000),
      { window: 5, prev: 4, curr: 1 },
      7000,
    ],
    [
      "sliding_counter, 3 buckets: newest count in the weighted sub-window",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [0, 0], curr: 0 },
      11_000,
    ],
    [
      "sliding_counter, 3 buckets: newest count in a whole sub-window",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 1, mid: [2, 0], curr: 0 },
      12_000,
    ],
    [
      "sliding_counter, 3 buckets: newest count in the current sub-window",
      slidingCounter(20, 3000, false, 3),
      { window: 10, prev: 0, mid: [0, 0], curr: 1 },
      14_000,
    ],
  ];
  it.each(table)("%s", (_name, params, state, expected) => {
    expect(freshAtMs(params, state)).toBe(expected);
  });

  it.each(ALL)("%s: after a real trace, fresh at freshAtMs and not 1 ms before", (_name, params) => {
    const s = stateAfter(params, [
      [10_000, 1],
      [10_250, 2],
    ]);
    const at = freshAtMs(params, s);
    // as good as fresh: a request of cost 1 leaves what it leaves on a fresh key
    const remaining = (state: AlgorithmState | null, t: number) => {
      const r = decide(params, state, 1, t);
      return r.ok ? r.decision.remaining : null;
    };
    expect(remaining(s, at)).toBe(remaining(null, at));
    expect(remaining(s, at - 1)).toBeLessThan(remaining(null, at - 1) ?? 0);
  });
});

describe("decisions from a given state", () => {
  const ok = (remaining: number, resetAfterMs: number, delayMs = 0) => ({
    allowed: true,
    remaining,
    resetAfterMs,
    retryAfterMs: null,
    delayMs,
  });
  const no = (remaining: number, resetAfterMs: number, retryAfterMs: number) => ({
    allowed: false,
    remaining,
    resetAfterMs,
    retryAfterMs,
    delayMs: 0,
  });
  const SC_CAP = Math.floor(2 ** 50 / 86_400_000); // where a count_denied counter stops growing, for a 1 d window
  // [name, params, state, cost, now, decision, state after]
  const table: readonly (readonly [string, AlgorithmParams, AlgorithmState, number, number, object, AlgorithmState])[] =
    [
      [
        "sliding_counter: retry inside this window, when enough of prev has slid out",
        slidingCounter(10, 1000),
        { window: 5, prev: 8, curr: 4 },
        2,
        5250,
        no(0, 1750, 250),
        { window: 5, prev: 8, curr: 4 },
      ],
      [
        "sliding_counter: retry in the next window, once enough of curr has slid out",
        slidingCounter(10, 1000),
        { window: 5, prev: 8, curr: 8 },
        4,
        5250,
        no(0, 1750, 1000),
        { window: 5, prev: 8, curr: 8 },
      ],
      [
        "sliding_counter: only prev counts, and the request needs all of it gone: the window's end",
        slidingCounter(5, 1000),
        { window: 4, prev: 0, curr: 5 },
        5,
        5500,
        no(2, 500, 500),
        { window: 4, prev: 0, curr: 5 },
      ],
      [
        "sliding_counter: count_denied counts the denial and describes the state with it",
        slidingCounter(10, 1000, true),
        { window: 5, prev: 8, curr: 4 },
        2,
        5250,
        no(0, 1750, 500),
        { window: 5, prev: 8, curr: 6 },
      ],
      [
        "sliding_counter: count_denied stops counting where scaled sums stay exact",
        slidingCounter(10, 86_400_000, true),
        { window: 5, prev: 0, curr: SC_CAP - 2 },
        5,
        5 * 86_400_000,
        // next window: curr × (w − e') / w <= 10 − 5 from e' = w − floor(5w / curr) = w − 33
        no(0, 2 * 86_400_000, 2 * 86_400_000 - 33),
        { window: 5, prev: 0, curr: SC_CAP },
      ],
      [
        "sliding_counter, 2 buckets: count_denied keeps the sum of the whole counts where scaled sums stay exact",
        slidingCounter(10, 2 * 86_400_000, true, 2),
        { window: 5, prev: 0, mid: [100], curr: SC_CAP - 102 },
        5,
        5 * 86_400_000,
        no(0, 3 * 86_400_000, 3 * 86_400_000 - 33),
        { window: 5, prev: 0, mid: [100], curr: SC_CAP - 100 },
      ],
      [
        "sliding_counter: a state two windows old counts nothing",
        slidingCounter(10, 1000),
        { window: 3, prev: 9, curr: 9 },
        10,
        5999,
        ok(0, 1001),
        { window: 5, prev: 0, curr: 10 },
      ],
      [
        "fixed_window: denied with the count of this window; retry at its end",
        fixedWindow(10, 1000),
        { window: 5, count: 9 },
        2,
        5300,
        no(1, 700, 700),
        { window: 5, count: 9 },
      ],
      [
        "fixed_window: a state of an earlier window counts nothing",
        fixedWindow(10, 1000),
        { window: 4, count: 10 },
        10,
        5300,
        ok(0, 700),
        { window: 5, count: 10 },
      ],
      [
        "sliding_log: the oldest entries that must leave for the cost to fit",
        slidingLog(6, 1000),
        { times: [100, 200, 300], costs: [1, 2, 3] },
        3,
        900,
        no(0, 400, 300),
        { times: [100, 200, 300], costs: [1, 2, 3] },
      ],
      [
        "sliding_log: entries that have left are dropped; same-ms admissions merge",
        slidingLog(6, 1000),
        { times: [100, 200, 1150], costs: [1, 2, 3] },
        1,
        1150,
        ok(0, 1000),
        { times: [200, 1150], costs: [2, 4] },
      ],
      [
        "gcra: denied while TAT is burst × T ahead; retry when one T has passed (7/3s)",
        gcraP(7, 3000, 7),
        { tatMs: 4000, tatFrac: 0 },
        1,
        1000,
        no(0, 3000, 429),
        { tatMs: 4000, tatFrac: 0 },
      ],
      [
        "leaky_queue: delay counts from the delay-th queued request",
        leakyQueue(10, 1000, 5, 2),
        { tatMs: 1300, tatFrac: 0 },
        1,
        1000,
        ok(2, 400, 100),
        { tatMs: 1400, tatFrac: 0 },
      ],
    ];
  it.each(table)("%s", (_name, params, state, cost, now, decision, after) => {
    const r = decide(params, state, cost, now);
    expect(r).toEqual({ ok: true, decision, state: after });
  });
});

describe("sliding_counter estimateAt (the level a chart draws)", () => {
  const one = slidingCounter(10, 1000);
  const three = slidingCounter(10, 3000, false, 3);
  type Counter = Extract<AlgorithmParams, { algorithm: "sliding_counter" }>;
  // [name, params, state, t, estimate]
  const table: readonly (readonly [string, AlgorithmParams, Parameters<typeof estimateAt>[1], number, number])[] = [
    ["a fresh key", one, null, 5000, 0],
    ["one bucket, at the start of the window: prev weighs whole", one, { window: 5, prev: 4, curr: 2 }, 5000, 6],
    ["one bucket, a quarter in", one, { window: 5, prev: 4, curr: 2 }, 5250, 5],
    ["one bucket, the next window: curr becomes prev", one, { window: 5, prev: 4, curr: 2 }, 6500, 1],
    ["one bucket, two windows on: nothing", one, { window: 5, prev: 4, curr: 2 }, 7000, 0],
    ["before the state's window: read at its start (the clock rule)", one, { window: 5, prev: 4, curr: 2 }, 4200, 6],
    ["3 buckets, half into the sub-window", three, { window: 10, prev: 2, mid: [3, 4], curr: 5 }, 10_500, 13],
    ["3 buckets, one sub-window on", three, { window: 10, prev: 2, mid: [3, 4], curr: 5 }, 11_500, 10.5],
  ];
  it.each(table)("%s", (_name, params, state, t, expected) => {
    expect(estimateAt(params as Counter, state, t)).toBe(expected);
  });
});
