/**
 * Fixed window.
 *
 * Promise: at most `limit` cost per epoch-aligned window (a `1d` window resets at 00:00 UTC; `month` follows UTC
 * calendar months, like a billing period). State: the window's index and its count; one increment per request.
 * Pros: the cheapest state; "resets at 00:00 UTC" is easy to explain and matches invoices. Cons: a client can spend a
 * full allowance on each side of a boundary (2× in a short span), and denied clients all return at the boundary.
 * Pick it for daily and monthly quotas.
 */
import type { Window } from "./params.ts";
import { admitInto, checkFromInto, decisionOf, decisionScratch, refuseInto } from "./scratch.ts";
import type { Algorithm, CheckOutcome, DecisionScratch, Own, RowKernel } from "./types.ts";
import { windowIndex, windowStartMs } from "./windows.ts";

export interface FixedWindowParams {
  readonly algorithm: "fixed_window";
  /** The most cost per window. */
  readonly limit: number;
  readonly window: Window;
}

export interface FixedWindowState {
  /** Index of the window `count` belongs to. */
  readonly window: number;
  /** Cost admitted in that window. */
  readonly count: number;
}

/**
 * The one copy of the decision, on the state's two numbers (`state` null: a fresh key), written into `d`; when
 * admitted, the next state is written into `next` (the pure core makes it a new state, the row kernel writes it into
 * its row).
 */
function decideWindow(
  params: Own<FixedWindowParams>,
  state: FixedWindowState | null,
  cost: number,
  nowMs: number,
  next: { window: number; count: number },
  d: DecisionScratch,
): void {
  let index = windowIndex(params.window, nowMs);
  let now = nowMs;
  // Clock rule: a window that has been seen never reopens for an earlier clock.
  if (state !== null && state.window > index) {
    index = state.window;
    now = windowStartMs(params.window, index);
  }
  const count = state !== null && state.window === index ? state.count : 0;
  const untilEndMs = windowStartMs(params.window, index + 1) - now;
  if (count + cost <= params.limit) {
    next.window = index;
    next.count = count + cost;
    admitInto(d, params.limit - next.count, untilEndMs, 0);
    return;
  }
  // remaining never below 0: a carried-over count can exceed a lowered limit
  refuseInto(d, Math.max(0, params.limit - count), count === 0 ? 0 : untilEndMs, untilEndMs);
}

/** The pure core's scratch (`check` copies its decision out before it returns). */
const scratch = decisionScratch();

/** The row kernel (the in-isolate store's fast path): `window, count` in place, through `decideWindow`. */
function windowKernel(params: Own<FixedWindowParams>): RowKernel<FixedWindowState> {
  // Scratch made once per rule: the stored state as `decideWindow` reads it, and the next one it writes.
  const stored = { window: 0, count: 0 };
  const next = { window: 0, count: 0 };
  const into: RowKernel<FixedWindowState>["into"] = (row, at, fresh, cost, nowMs, d, out) => {
    if (!fresh) {
      stored.window = row[at]!;
      stored.count = row[at + 1]!;
    }
    decideWindow(params, fresh ? null : stored, cost, nowMs, next, d);
    out.changed = d.allowed;
    if (d.allowed) {
      row[at] = next.window;
      row[at + 1] = next.count;
    }
  };
  return {
    width: 2,
    check: checkFromInto(into),
    into,
    refund(row, at, cost, admittedAtMs) {
      if (row[at] === windowIndex(params.window, admittedAtMs)) row[at + 1] = Math.max(0, row[at + 1]! - cost);
    },
    read: (row, at) => ({ window: row[at]!, count: row[at + 1]! }),
  };
}

export const fixedWindow: Algorithm<FixedWindowParams, FixedWindowState> = {
  params: {
    keys: ["limit", "window_s", "window"],
    takes: "limit, and window_s or window",
    capacityName: "limit",
    read(r) {
      const limit = r.int("limit");
      const window = r.window(true);
      // A fixed window only counts, so its limit is bounded by 2^50 alone (a 2,000,000/month quota is fine).
      return limit === undefined || window === undefined ? null : { algorithm: "fixed_window", limit, window };
    },
  },
  project: ({ algorithm, limit, window }) => ({ algorithm, limit, window }),
  capacity: (params) => params.limit,
  check(params, state, cost, nowMs): CheckOutcome<FixedWindowState> {
    const next = { window: 0, count: 0 };
    decideWindow(params, state, cost, nowMs, next, scratch);
    return { decision: decisionOf(scratch), state: scratch.allowed ? next : (state as FixedWindowState) };
  },

  refund(params, state, cost, admittedAtMs) {
    if (state.window !== windowIndex(params.window, admittedAtMs)) return state;
    return { window: state.window, count: Math.max(0, state.count - cost) };
  },

  freshAtMs(params, state) {
    return windowStartMs(params.window, state.window + 1);
  },

  // The count is kept when the window is unchanged (a lower limit then simply denies), discarded when the window
  // changed (old counts belong to other windows).
  carryOver(prev, next, state) {
    const same =
      prev.window.kind === next.window.kind &&
      (prev.window.kind === "month" || (next.window.kind === "ms" && prev.window.ms === next.window.ms));
    return same ? state : null;
  },

  // The length of the window `nowMs` is in: `window` ms, or this calendar month's length.
  headerWindowMs(params, nowMs) {
    const i = windowIndex(params.window, nowMs);
    return windowStartMs(params.window, i + 1) - windowStartMs(params.window, i);
  },
  // A month window's peak is measured over 31 days, the longest month.
  peakSpanMs: (params) => (params.window.kind === "ms" ? params.window.ms : 31 * 86_400_000),
  describe: (params, words) =>
    `fixed_window ${params.limit} per ${params.window.kind === "ms" ? words.span(params.window.ms) : "month"}`,
  fields: {
    count: () => 2,
    read: (_params, get) => ({ window: get(0), count: get(1) }),
    write(_params, state, set) {
      set(0, state.window);
      set(1, state.count);
    },
  },
  rows: { compile: windowKernel },
  denialsCount: () => false,
  // Until the window ends, any cost above what was left is denied too.
  smallerDeniedUntilMs: (_params, denied, cost) => (cost > denied.remaining ? denied.untilMs : null),

  // A lease is used only in the window it was charged in: no window admits more than `limit`, leases or not.
  lease: {
    kind: "window",
    limit: (params) => params.limit,
    windowOf: (params, atMs) => windowIndex(params.window, atMs),
    termMs(params, atMs, ttlMs) {
      const endMs = windowStartMs(params.window, windowIndex(params.window, atMs) + 1);
      return Math.max(0, Math.min(ttlMs, endMs - atMs));
    },
  },

  level: {
    name: "window count",
    label: (params) => `limit ${params.limit}`,
    at(params, state, tMs) {
      if (state === null) return 0;
      return windowIndex(params.window, tMs) === state.window ? state.count : 0;
    },
    window: (params) => params.window,
  },
};
