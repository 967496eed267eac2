/**
 * Sliding window counter, with `buckets: k` sub-windows.
 *
 * Promise: approximately `limit` per sliding window, with constant state. The window W is split into k epoch-aligned
 * sub-windows of w = W/k ms. At `now` in sub-window s, e = now − s·w into it, the estimate of the last W is
 * `c_s + c_(s−1) + … + c_(s−k+1) + c_(s−k) × (w − e)/w`: the last k sub-windows count whole and only the one before
 * is weighted by how much of it still overlaps the sliding window. Computed as an exact rational (scaled by w).
 * k = 1 is the classic two-counter estimate `prev × (W − e)/W + curr`. With `count_denied` denied requests count too
 * (Cloudflare's variant: a client that keeps hammering stays blocked).
 * State: the sub-window index and k + 1 counts. Pros: constant state, no boundary doubling. Cons: approximate: it
 * assumes the weighted sub-window's traffic was spread evenly, so traffic packed at its end lets up to `limit / k`
 * more through (about 16% on the boundary burst with k = 1, none with k >= 2). Pick it for general per-IP limits at
 * scale; raise k where the over-admission matters more than k + 1 numbers per key.
 */
import { floorDiv, MAX_SCALED } from "./arith.ts";
import { admitInto, checkFromInto, decisionOf, decisionScratch, refuseInto } from "./scratch.ts";
import { slidingExact } from "./shared.ts";
import type { Algorithm, CheckOutcome, DecisionScratch, Own, ParamReader, RowKernel } from "./types.ts";

/** The pure core's scratch (`check` copies its decision out before it returns). */
const scratch = decisionScratch();

export interface SlidingCounterParams {
  readonly algorithm: "sliding_counter";
  /** About the most cost per sliding window. */
  readonly limit: number;
  readonly windowMs: number;
  /** Count denied requests too (Cloudflare's variant). Default false. */
  readonly countDenied: boolean;
  /**
   * Sub-windows per window, k >= 1 (`windowMs` is a whole multiple of it). Default 1: the two-counter estimate.
   * With k >= 2 the last k sub-windows count whole and only the one before is weighted.
   */
  readonly buckets: number;
}
type Params = Own<SlidingCounterParams>;

export interface SlidingCounterState {
  /** Index of the current sub-window, `floor(t / (windowMs / buckets))` (with one bucket: the window). */
  readonly window: number;
  /** c_(s−k): the sub-window before the last k, weighted (with one bucket: the previous window). */
  readonly prev: number;
  /** c_(s−k+1) … c_(s−1), oldest first: k − 1 counts, present only when k >= 2. */
  readonly mid?: readonly number[];
  /** c_s: the current sub-window. */
  readonly curr: number;
}

/** At most this many sub-windows: a sliding counter keeps buckets + 1 counts per key. */
export const MAX_BUCKETS = 10_000;

/** `buckets` (default 1), at most `MAX_BUCKETS`. */
function readBuckets(r: ParamReader): number | undefined {
  const k = r.int("buckets", { fallback: 1 });
  if (k === undefined || k <= MAX_BUCKETS) return k;
  r.error("buckets", `must be at most ${MAX_BUCKETS} (the state keeps buckets + 1 counts per key), got ${k}`);
  return undefined;
}

/** The window must split into `buckets` sub-windows of whole ms; say which bucket counts nearby would. */
function bucketsDivide(r: ParamReader, windowMs: number, buckets: number): boolean {
  if (windowMs % buckets === 0) return true;
  let below = buckets - 1;
  while (windowMs % below !== 0) below--;
  let above = buckets + 1;
  while (above <= Math.min(windowMs, 2 * buckets) && windowMs % above !== 0) above++;
  const hint = above <= Math.min(windowMs, 2 * buckets) ? `${below} or ${above}` : `${below}`;
  r.error(
    "buckets",
    `the window (${windowMs} ms) must be a whole multiple of buckets, got ${buckets}; try ${hint} (or a window in ms divisible by ${buckets})`,
  );
  return false;
}

/** The sub-window length, ms (validation makes `windowMs` a whole multiple of `buckets`). */
export function subWindowMs(params: Pick<Params, "windowMs" | "buckets">): number {
  return params.windowMs / params.buckets;
}

/** The k + 1 counts c_(s−k) … c_s of `state`, seen from sub-window `index >= state.window`. */
function countsAt(state: SlidingCounterState | null, index: number, k: number): number[] {
  const out = new Array<number>(k + 1).fill(0);
  if (state === null) return out;
  const shift = index - state.window;
  if (shift > k) return out;
  // the count at position i of the stored state moves to position i − shift (or has left the window)
  if (shift === 0) out[0] = state.prev;
  for (let i = Math.max(1, shift); i < k; i++) out[i - shift] = state.mid?.[i - 1] ?? 0;
  out[k - shift] = state.curr;
  return out;
}

function stateOf(index: number, counts: readonly number[], k: number): SlidingCounterState {
  return k === 1
    ? { window: index, prev: counts[0]!, curr: counts[1]! }
    : { window: index, prev: counts[0]!, mid: counts.slice(1, k), curr: counts[k]! };
}

/** c_(s−k+1) + … + c_s: the counts that weigh whole. */
function wholeSum(counts: Counts): number {
  let sum = 0;
  for (let i = 1; i < counts.length; i++) sum += counts[i]!;
  return sum;
}

export const slidingCounter: Algorithm<SlidingCounterParams, SlidingCounterState> = {
  params: {
    keys: ["limit", "window_s", "window", "count_denied", "buckets"],
    takes: "limit, window_s or window, count_denied, and buckets",
    capacityName: "limit",
    read(r) {
      const limit = r.int("limit");
      const window = r.window(false);
      const countDenied = r.bool("count_denied", false);
      const buckets = readBuckets(r);
      if (limit === undefined || window?.kind !== "ms" || countDenied === undefined || buckets === undefined)
        return null;
      if (!slidingExact(r, limit, window.ms) || !bucketsDivide(r, window.ms, buckets)) return null;
      return { algorithm: "sliding_counter", limit, windowMs: window.ms, countDenied, buckets };
    },
  },
  project: ({ algorithm, limit, windowMs, countDenied, buckets }) => ({
    algorithm,
    limit,
    windowMs,
    countDenied,
    buckets,
  }),
  capacity: (params) => params.limit,
  check(params, state, cost, nowMs): CheckOutcome<SlidingCounterState> {
    const w = subWindowMs(params);
    let index = floorDiv(nowMs, w);
    let now = nowMs;
    if (state !== null && state.window > index) {
      index = state.window; // clock rule: a sub-window never reopens
      now = index * w;
    }
    const counts = countsAt(state, index, params.buckets);
    decideCounts(params, w, counts, index, now, cost, scratch);
    const decision = decisionOf(scratch);
    const changed = decision.allowed || params.countDenied;
    const next = changed ? stateOf(index, counts, params.buckets) : (state as SlidingCounterState);
    return { decision, state: next };
  },

  refund(params, state, cost, admittedAtMs) {
    const k = params.buckets;
    const i = k - (state.window - floorDiv(admittedAtMs, subWindowMs(params)));
    if (i < 0 || i > k) return state;
    const counts = countsAt(state, state.window, k);
    counts[i] = Math.max(0, counts[i]! - cost);
    return stateOf(state.window, counts, k);
  },

  freshAtMs(params, state) {
    const k = params.buckets;
    const newest = Math.max(0, newestCounted(countsAt(state, state.window, k)));
    return (state.window + newest + 1) * subWindowMs(params);
  },

  // The counts are kept when the window is unchanged (a lower limit then simply denies), discarded when the window
  // changed (old counts belong to other windows); a change of `buckets` alone moves each count to the new
  // sub-window holding the latest moment its old one allows (see `rebucket`).
  carryOver(prev, next, state, nowMs) {
    if (prev.windowMs !== next.windowMs) return null;
    // Records made before `buckets` existed have none: they were made with one.
    const from = { windowMs: prev.windowMs, buckets: prev.buckets ?? 1 };
    return from.buckets === next.buckets ? state : rebucket(from, next, state, nowMs);
  },

  headerWindowMs: (params) => params.windowMs,
  peakSpanMs: (params) => params.windowMs,
  describe: (params, words) =>
    `sliding_counter ${params.limit} per ${words.span(params.windowMs)}` +
    `${params.buckets > 1 ? `, ${params.buckets} buckets` : ""}${params.countDenied ? ", count_denied" : ""}`,
  // With count_denied a denial is counted: a remembered denial must not stand in for the next request.
  denialsCount: (params) => params.countDenied,
  // How fast a smaller cost fits depends on how the counts are spread: nothing is certain.
  smallerDeniedUntilMs: () => null,

  // (window, prev, mid × (k − 1), curr): k + 2 fields.
  fields: {
    count: (params) => params.buckets + 2,
    read(params, get) {
      const k = params.buckets;
      const head = { window: get(0), prev: get(1) };
      if (k === 1) return { ...head, curr: get(2) };
      return { ...head, mid: Array.from({ length: k - 1 }, (_, i) => get(2 + i)), curr: get(k + 1) };
    },
    write(params, state, set) {
      const k = params.buckets;
      set(0, state.window);
      set(1, state.prev);
      for (let i = 0; i < k - 1; i++) set(2 + i, state.mid?.[i] ?? 0);
      set(k + 1, state.curr);
    },
  },
  rows: { compile: counterKernel },
  lease: { kind: "none", why: "a unit charged early would leave the sliding window before its request does" },

  level: {
    name: "estimate",
    label: (params) => `limit ${params.limit}`,
    at: (params, state, tMs) => estimateAt(params, state, tMs),
    window: (params) => ({ kind: "ms", ms: params.windowMs }),
  },
};

/**
 * Counts c_(s−k) … c_s: always a plain array (the pure core's, or a kernel's scratch made once per rule), never a
 * typed array: a function that has seen both kinds of array is polymorphic, and the keyed store ran 2x keyed gcra.
 */
type Counts = number[];

/**
 * The one copy of the decision: `counts` seen from sub-window `index`, `now` in it (after the clock rule). Adds
 * `cost` to c_s when admitted or counted (`count_denied`); the caller keeps `counts` as the next state then.
 */
function decideCounts(
  params: Params,
  w: number,
  counts: Counts,
  index: number,
  now: number,
  cost: number,
  d: DecisionScratch,
): void {
  const { limit: n, buckets: k } = params;
  const e = now - index * w;
  const capacity = n * w;
  const weighted = counts[0]! * (w - e);
  const whole = wholeSum(counts);
  const allowed = weighted + (whole + cost) * w <= capacity;
  const changed = allowed || params.countDenied;
  if (changed) {
    // With count_denied a hammering client grows c_s without bound; keep the whole counts' sum at most
    // MAX_SCALED / w, so every scaled sum stays exact (an admitted request keeps it below the limit anyway).
    const room = floorDiv(MAX_SCALED, w) - (whole - counts[k]!);
    counts[k] = Math.min(counts[k]! + cost, room);
  }
  const wholeAfter = changed ? wholeSum(counts) : whole;
  const estimate = weighted + wholeAfter * w;
  const remaining = Math.max(0, floorDiv(capacity - estimate, w));
  const resetAfterMs = resetAfter(counts, index, w, now);
  if (allowed) admitInto(d, remaining, resetAfterMs, 0);
  else refuseInto(d, remaining, resetAfterMs, retryAfter(n, w, cost, counts, e));
}

/**
 * The row kernel (the in-isolate store's fast path): a row of k + 2 fields, `window, c_(s−k) … c_s` (the `fields`
 * layout), decided in place through `decideCounts` on a scratch of k + 1 counts made once per rule.
 */
function counterKernel(params: Params): RowKernel<SlidingCounterState> {
  const k = params.buckets;
  const w = subWindowMs(params);
  const counts = new Array<number>(k + 1).fill(0);
  const into: RowKernel<SlidingCounterState>["into"] = (row, at, fresh, cost, nowMs, d, out) => {
    let index = floorDiv(nowMs, w);
    let now = nowMs;
    const stored = fresh ? index : row[at]!;
    if (stored > index) {
      index = stored; // clock rule: a sub-window never reopens
      now = index * w;
    }
    // countsAt on the row: position i of the stored counts moves to i − shift (or has left the window).
    const shift = fresh ? k + 1 : index - stored;
    for (let i = 0; i <= k; i++) counts[i] = i + shift <= k ? row[at + 1 + i + shift]! : 0;
    decideCounts(params, w, counts, index, now, cost, d);
    out.changed = d.allowed || params.countDenied;
    if (out.changed) {
      row[at] = index;
      for (let i = 0; i <= k; i++) row[at + 1 + i] = counts[i]!;
    }
  };
  return {
    width: k + 2,
    check: checkFromInto(into),
    into,
    refund(row, at, cost, admittedAtMs) {
      const i = k - (row[at]! - floorDiv(admittedAtMs, w));
      if (i >= 0 && i <= k) row[at + 1 + i] = Math.max(0, row[at + 1 + i]! - cost);
    },
    read(row, at) {
      return stateOf(row[at]!, Array.from(row.subarray(at + 1, at + k + 2)), k);
    },
  };
}

/**
 * The estimate at `tMs` with no request in between, for a chart's state line (0 for a fresh key). Exact up to the
 * one final division; a time before the state's sub-window is read as that sub-window's start (the clock rule).
 */
export function estimateAt(params: Params, state: SlidingCounterState | null, tMs: number): number {
  if (state === null) return 0;
  const w = subWindowMs(params);
  const index = Math.max(floorDiv(tMs, w), state.window);
  const counts = countsAt(state, index, params.buckets);
  const e = Math.max(0, tMs - index * w);
  return (counts[0]! * (w - e) + wholeSum(counts) * w) / w;
}

/**
 * The state under another number of buckets (same window), at `nowMs`: each count is moved to the new sub-window
 * that holds the latest moment its old sub-window allows (never after now). That is the state the new rule would
 * hold had every counted request come as late as the old state permits, the stingiest reading of it, so a change
 * of k never hands a client a fresh allowance. Counts are capped where scaled sums stay exact.
 */
export function rebucket(
  from: Pick<Params, "windowMs" | "buckets">,
  to: Pick<Params, "windowMs" | "buckets">,
  state: SlidingCounterState,
  nowMs: number,
): SlidingCounterState {
  const w = subWindowMs(from);
  const wTo = subWindowMs(to);
  const k = from.buckets;
  const kTo = to.buckets;
  const now = Math.max(nowMs, state.window * w);
  const index = floorDiv(now, wTo);
  const old = countsAt(state, state.window, k);
  const counts = new Array<number>(kTo + 1).fill(0);
  for (let i = 0; i <= k; i++) {
    const latestMs = Math.min(now, (state.window - k + i + 1) * w - 1);
    const at = floorDiv(latestMs, wTo) - (index - kTo);
    if (at >= 0 && old[i]! > 0) counts[at] = counts[at]! + old[i]!;
  }
  let room = floorDiv(MAX_SCALED, wTo);
  counts[0] = Math.min(counts[0]!, room);
  for (let i = kTo; i >= 1; i--) {
    counts[i] = Math.min(counts[i]!, room);
    room -= counts[i]!;
  }
  return stateOf(index, counts, kTo);
}

/** Index in `counts` of the newest non-zero count, or -1. */
function newestCounted(counts: Counts): number {
  for (let i = counts.length - 1; i >= 0; i--) if (counts[i]! > 0) return i;
  return -1;
}

/** Until the estimate is 0: `(m + k + 1) × w − now` for the newest sub-window m with a count (0 if none). */
function resetAfter(counts: Counts, index: number, w: number, now: number): number {
  const i = newestCounted(counts);
  // counts[i] is sub-window m = index − k + i, so (m + k + 1) × w = (index + i + 1) × w
  return i < 0 ? 0 : (index + i + 1) * w - now;
}

/**
 * Smallest d >= 1 such that a request of `cost` at now + d is admitted, with no requests in between. The estimate
 * only falls as time passes: in sub-window s + j (j = 0 from e, later ones from their start) counts[j] is weighted
 * and counts[j+1..k] weigh whole, so solve `counts[j] × (w − e') + whole × w <= (n − cost) × w` for the first e'
 * in each in turn. By sub-window s + k + 1 every count has left and any cost <= limit fits.
 */
function retryAfter(n: number, w: number, cost: number, counts: Counts, e: number): number {
  const k = counts.length - 1;
  const budget = (n - cost) * w;
  let whole = wholeSum(counts);
  for (let j = 0; ; j++) {
    if (j > 0) whole -= j <= k ? counts[j]! : 0;
    const weighted = j <= k ? counts[j]! : 0;
    const slack = budget - whole * w;
    if (slack >= 0) {
      const from = j === 0 ? e + 1 : 0;
      // weighted × (w − e') <= slack  ⇔  e' >= w − floor(slack / weighted)
      const fit = weighted === 0 ? from : Math.max(from, w - floorDiv(slack, weighted));
      if (fit < w) return j * w + fit - e;
    }
  }
}
