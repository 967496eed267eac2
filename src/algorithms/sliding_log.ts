/**
 * Sliding window log.
 *
 * Promise: exact: in every span of `window` ms at most `limit` cost is admitted. An accepted request counts while
 * `now − t < window`. Denied requests are never written, so hammering does not push the retry time back.
 * State: the `(time, cost)` of each accepted request still inside the window (same-ms entries merged).
 * Pros: no edge burst for an attacker to exploit. Cons: memory grows with the limit (8–16 B per entry).
 * Pick it for small, security-critical limits such as login attempts per IP.
 */
import { slidingExact } from "./shared.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";

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
      return {
        decision: {
          allowed: true,
          remaining: limit - total - cost,
          resetAfterMs: windowMs,
          retryAfterMs: null,
          delayMs: 0,
        },
        state: { times, costs },
      };
    }
    // Wait until enough of the oldest entries have left for this cost to fit.
    const excess = total + cost - limit;
    let freed = 0;
    let k = first;
    while (freed < excess) freed += log.costs[k++]!;
    return {
      decision: {
        allowed: false,
        // never below 0: carried-over entries can exceed a lowered limit
        remaining: Math.max(0, limit - total),
        resetAfterMs: total === 0 ? 0 : log.times[n - 1]! + windowMs - now,
        retryAfterMs: log.times[k - 1]! + windowMs - now,
        delayMs: 0,
      },
      state: log,
    };
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
