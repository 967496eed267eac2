/**
 * Sliding window log.
 *
 * Promise: exact: in every span of `window` ms at most `limit` cost is admitted. An accepted request counts while
 * `now − t < window`. Denied requests are never written, so hammering does not push the retry time back.
 * State: the `(time, cost)` of each accepted request still inside the window (same-ms entries merged).
 * Pros: no edge burst for an attacker to exploit. Cons: memory grows with the limit (8–16 B per entry).
 * Pick it for small, security-critical limits such as login attempts per IP.
 */

import { admitInto, checkFromInto, decisionOf, decisionScratch, refuseInto } from "./scratch.ts";
import { slidingExact } from "./shared.ts";
import type { Algorithm, CheckOutcome, DecisionScratch, RowChange, RowKernel } from "./types.ts";

export interface SlidingLogParams {
  readonly algorithm: "sliding_log";
  /** The most cost in any span of `windowMs`. */
  readonly limit: number;
  readonly windowMs: number;
}

export interface SlidingLogState {
  /** Accept times, ms, oldest first, strictly increasing. */
  readonly times: readonly number[];
  /** Cost accepted at each of `times`. */
  readonly costs: readonly number[];
}

const EMPTY: SlidingLogState = { times: [], costs: [] };

/**
 * The widest log a row keeps: limits up to this get the row kernel (16 × limit + 24 bytes a key, whatever the key
 * holds); larger ones keep their entries as objects, which cost only what is in the log.
 */
export const MAX_ROW_LIMIT = 32;

/** The pure core's scratch (`check` copies its decision out before it returns). */
const scratch = decisionScratch();

function admitLogInto(d: DecisionScratch, limit: number, total: number, cost: number, windowMs: number): void {
  admitInto(d, limit - total - cost, windowMs, 0);
}

function denyLogInto(
  d: DecisionScratch,
  limit: number,
  total: number,
  lastMs: number,
  retryFromMs: number,
  params: { windowMs: number },
  now: number,
): void {
  // remaining never below 0: carried-over entries can exceed a lowered limit
  refuseInto(
    d,
    Math.max(0, limit - total),
    total === 0 ? 0 : lastMs + params.windowMs - now,
    retryFromMs + params.windowMs - now,
  );
}

/**
 * The row kernel (the in-isolate store's fast path): the log as a ring of at most `limit` entries in one row,
 * `head, n, total`, then `limit` entries of `time, cost` side by side (one cache line holds an entry whole; `total`: the ring's costs summed, so a decision sums nothing). An admitted request keeps at most `limit` cost in the window, each entry
 * at least 1, so the ring never overflows; entries that left the window are dropped by moving `head`, and a denial
 * leaves the row as it was (as `check` leaves its state).
 */
function logKernel(params: { limit: number; windowMs: number }): RowKernel<SlidingLogState> | null {
  if (params.limit > MAX_ROW_LIMIT) return null;
  const into: RowKernel<SlidingLogState>["into"] = (row, at, fresh, cost, nowMs, d, out) =>
    checkRow(params, row, at, fresh, cost, nowMs, d, out);
  return {
    width: 3 + 2 * params.limit,
    check: checkFromInto(into),
    into,
    refund: (row, at, cost, admittedAtMs) => refundRow(params.limit, row, at, cost, admittedAtMs),
    // `freshAtMs`: the newest entry's time plus the window (the newest entry is at ring position head + n − 1).
    freshAtMs(row, at) {
      const n = row[at + 1]! | 0;
      return n === 0 ? 0 : row[at + 3 + 2 * (((row[at]! | 0) + n - 1) % params.limit)]! + params.windowMs;
    },
    read(row, at) {
      const { limit } = params;
      const head = row[at]!;
      const n = row[at + 1]!;
      const times: number[] = [];
      const costs: number[] = [];
      for (let i = 0; i < n; i++) {
        times.push(row[at + 3 + 2 * ((head + i) % limit)]!);
        costs.push(row[at + 4 + 2 * ((head + i) % limit)]!);
      }
      return { times, costs };
    },
  };
}

/**
 * `check` on a ring row: entry i of the log is at ring position (head + i) % limit, its time at
 * `at + 3 + 2 × position` and its cost just after it. (No closure for the position: bundlers that keep names wrap every closure
 * made per call, which costs more than the decision.)
 */
function checkRow(
  params: { limit: number; windowMs: number },
  row: Float64Array,
  at: number,
  fresh: boolean,
  cost: number,
  nowMs: number,
  d: DecisionScratch,
  out: RowChange,
): void {
  const { limit, windowMs } = params;
  const T = at + 3;
  const C = at + 4;
  // Small integers kept in a Float64Array: read as int32, so the ring's `%` is an integer one (a double's `%` cost
  // keyed sliding_log 1.5-1.9x keyed gcra at one key).
  const head = fresh ? 0 : row[at]! | 0;
  const n = fresh ? 0 : row[at + 1]! | 0;
  let total = fresh ? 0 : row[at + 2]!;
  const lastMs = n > 0 ? row[T + 2 * ((head + n - 1) % limit)]! : 0;
  // Clock rule: never judge at a time earlier than the newest entry.
  const now = n > 0 ? Math.max(nowMs, lastMs) : nowMs;
  let first = 0;
  while (first < n && now - row[T + 2 * ((head + first) % limit)]! >= windowMs) {
    total -= row[C + 2 * ((head + first) % limit)]!;
    first++;
  }
  if (total + cost <= limit) {
    const h = (head + first) % limit;
    let m = n - first;
    const last = (h + m - 1) % limit;
    if (m > 0 && row[T + 2 * last] === now) row[C + 2 * last]! += cost;
    else {
      row[T + 2 * ((h + m) % limit)] = now;
      row[C + 2 * ((h + m) % limit)] = cost;
      m++;
    }
    row[at] = h;
    row[at + 1] = m;
    row[at + 2] = total + cost;
    out.changed = true;
    admitLogInto(d, limit, total, cost, windowMs);
    return;
  }
  // Wait until enough of the oldest entries have left for this cost to fit.
  const excess = total + cost - limit;
  let freed = 0;
  let k = first;
  while (freed < excess) freed += row[C + 2 * ((head + k++) % limit)]!;
  out.changed = false;
  denyLogInto(d, limit, total, lastMs, row[T + 2 * ((head + k - 1) % limit)]!, params, now);
}

/** `refund` on a ring row: the entry at `admittedAtMs` loses `cost`, and leaves the ring (later ones move up) at 0. */
function refundRow(limit: number, row: Float64Array, at: number, cost: number, admittedAtMs: number): void {
  const T = at + 3;
  const C = at + 4;
  const head = row[at]!;
  const n = row[at + 1]!;
  let i = n - 1;
  while (i >= 0 && row[T + 2 * ((head + i) % limit)] !== admittedAtMs) i--;
  if (i < 0) return;
  const held = row[C + 2 * ((head + i) % limit)]!;
  const left = held - cost;
  if (left > 0) {
    row[C + 2 * ((head + i) % limit)] = left;
    row[at + 2] = row[at + 2]! - cost;
    return;
  }
  row[at + 2] = row[at + 2]! - held;
  for (let j = i; j < n - 1; j++) {
    row[T + 2 * ((head + j) % limit)] = row[T + 2 * ((head + j + 1) % limit)]!;
    row[C + 2 * ((head + j) % limit)] = row[C + 2 * ((head + j + 1) % limit)]!;
  }
  row[at + 1] = n - 1;
}

export const slidingLog: Algorithm<SlidingLogParams, SlidingLogState> = {
  params: {
    keys: ["limit", "window_s", "window"],
    takes: "limit, and window_s or window",
    capacityName: "limit",
    read(r) {
      const limit = r.int("limit");
      const window = r.window(false);
      if (limit === undefined || window?.kind !== "ms" || !slidingExact(r, limit, window.ms)) return null;
      return { algorithm: "sliding_log", limit, windowMs: window.ms };
    },
  },
  project: ({ algorithm, limit, windowMs }) => ({ algorithm, limit, windowMs }),
  capacity: (params) => params.limit,
  check(params, state, cost, nowMs): CheckOutcome<SlidingLogState> {
    const { limit, windowMs } = params;
    const log = state ?? EMPTY;
    const n = log.times.length;
    // Clock rule: never judge at a time earlier than the newest entry.
    const now = n > 0 ? Math.max(nowMs, log.times[n - 1]!) : nowMs;
    let first = 0;
    while (first < n && now - log.times[first]! >= windowMs) first++;
    let total = 0;
    for (let i = first; i < n; i++) total += log.costs[i]!;

    if (total + cost <= limit) {
      const times = log.times.slice(first);
      const costs = log.costs.slice(first);
      if (times.length > 0 && times[times.length - 1] === now) costs[costs.length - 1]! += cost;
      else {
        times.push(now);
        costs.push(cost);
      }
      admitLogInto(scratch, limit, total, cost, windowMs);
      return { decision: decisionOf(scratch), state: { times, costs } };
    }
    // Wait until enough of the oldest entries have left for this cost to fit.
    const excess = total + cost - limit;
    let freed = 0;
    let k = first;
    while (freed < excess) freed += log.costs[k++]!;
    denyLogInto(scratch, limit, total, log.times[n - 1]!, log.times[k - 1]!, params, now);
    return { decision: decisionOf(scratch), state: log };
  },

  refund(_params, state, cost, admittedAtMs) {
    const i = state.times.lastIndexOf(admittedAtMs);
    if (i < 0) return state;
    const times = state.times.slice();
    const costs = state.costs.slice();
    const left = costs[i]! - cost;
    if (left > 0) costs[i] = left;
    else {
      times.splice(i, 1);
      costs.splice(i, 1);
    }
    return { times, costs };
  },

  freshAtMs(params, state) {
    const n = state.times.length;
    return n === 0 ? 0 : state.times[n - 1]! + params.windowMs;
  },

  // The accepted entries are kept and judged by the new window and limit.
  carryOver: (_prev, _next, state) => state,

  headerWindowMs: (params) => params.windowMs,
  peakSpanMs: (params) => params.windowMs,
  describe: (params, words) => `sliding_log ${params.limit} per ${words.span(params.windowMs)}`,
  denialsCount: () => false,
  // How fast a smaller cost fits depends on the log's shape: nothing is certain.
  smallerDeniedUntilMs: () => null,

  rows: { compile: logKernel },
  lease: { kind: "none", why: "a unit charged early would leave the sliding window before its request does" },

  level: {
    name: "in log",
    label: (params) => `limit ${params.limit}`,
    at(params, state, tMs) {
      if (state === null) return 0;
      let total = 0;
      state.times.forEach((t, i) => {
        if (t <= tMs && tMs - t < params.windowMs) total += state.costs[i]!;
      });
      return total;
    },
  },
};
