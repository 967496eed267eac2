// long-file: compare's streaming engine and the per-rule statistics that share its bins.
/**
 * `sluice compare`'s engine, streaming: requests go in one at a time (`ComparisonBuilder.add`), each rule decides
 * them alone with the exact core, and `finish` sums up. Memory is per-key state (a request count, and per rule the
 * algorithm state and the admitted requests within its peak span) plus a bounded picture: the marks and the charted key's
 * state are kept in time bins that start 1 ms wide (a short trace is drawn request for request) and double in width
 * whenever a lane holds too many, so a day of traffic draws a figure of the same size as a minute of it.
 */
import { type AlgorithmState, algorithmFor, capacityOf, levelAt } from "../algorithms/index.ts";
import type { ResolvedRule } from "../rules/types.ts";
import {
  type Comparison,
  type Lane,
  type LevelPoint,
  type MarkBin,
  type Peak,
  peakSpanMs,
  type RequestOutcome,
  type TraceLine,
  type TrackBin,
} from "./run.ts";

export interface BuildOptions {
  /** The key whose state is charted, or `null` to chart none. */
  readonly stateKey: string | null;
  /** Whether to keep what a figure needs (marks and the state track); `false` for the table alone. */
  readonly draw: boolean;
  /** Only requests within `[fromMs, toMs]` are kept for drawing (all of them count in the statistics). */
  readonly fromMs?: number;
  readonly toMs?: number;
}

/** Most mark bins (all outcomes) a lane keeps before its bins double in width. */
export const MAX_MARK_BINS = 4096;
/** Most state-track bins before they double in width. */
export const MAX_TRACK_BINS = 2048;
/** Release times kept per mark bin (the latest always among them): enough for the short lines the chart draws. */
const MAX_RELEASES = 64;
/** Level points kept per track bin before it is thinned to its first, lowest, highest and last. */
const MAX_POINTS = 16;
const OUTCOMES: readonly RequestOutcome[] = ["allowed", "delayed", "denied", "error"];
const [ALLOWED, DELAYED, DENIED, ERROR] = [0, 1, 2, 3] as const;

/** The admitted requests of one key within the last peak span, in time order, and their total cost. */
class SpanWindow {
  times: number[] = [];
  costs: number[] = [];
  head = 0;
  sum = 0;

  lastMs(): number {
    return this.times.length > this.head ? this.times[this.times.length - 1]! : Number.NEGATIVE_INFINITY;
  }

  /** Adds an admitted request and drops those a span or more before the latest one. */
  add(tMs: number, cost: number, spanMs: number): void {
    const { times, costs } = this;
    if (times.length === this.head || times[times.length - 1]! <= tMs) {
      times.push(tMs);
      costs.push(cost);
    } else {
      // A key whose clock steps back: insert in order (rare, so a linear scan is fine).
      let i = times.length;
      while (i > this.head && times[i - 1]! > tMs) i--;
      times.splice(i, 0, tMs);
      costs.splice(i, 0, cost);
    }
    this.sum += cost;
    const latest = times[times.length - 1]!;
    while (latest - times[this.head]! >= spanMs) this.sum -= costs[this.head++]!;
    if (this.head > 32 && this.head * 2 > times.length) {
      times.copyWithin(0, this.head);
      costs.copyWithin(0, this.head);
      times.length -= this.head;
      costs.length -= this.head;
      this.head = 0;
    }
  }
}

/** Mark bins of one lane: a bin per (time bin, outcome), doubling in width past `MAX_MARK_BINS`. */
class MarkBins {
  private widthMs = 1;
  private bins = new Map<number, (MarkBin | undefined)[]>();
  private size = 0;
  /** The last bin used: a trace in time order hits it again and again. */
  private lastIndex = Number.NaN;
  private lastSlot: (MarkBin | undefined)[] = [];

  add(tMs: number, o: number, releaseMs: number | null): void {
    const index = Math.floor(tMs / this.widthMs);
    let slot = this.lastSlot;
    if (index !== this.lastIndex) {
      const found = this.bins.get(index);
      slot = found ?? [];
      if (found === undefined) this.bins.set(index, slot);
      this.lastIndex = index;
      this.lastSlot = slot;
    }
    const outcome = OUTCOMES[o]!;
    let bin = slot[o];
    if (bin === undefined) {
      bin = { outcome, firstMs: tMs, count: 0, oneInstant: true, releasesMs: [] };
      slot[o] = bin;
      this.size++;
    }
    bin.count++;
    if (tMs !== bin.firstMs) bin.oneInstant = false;
    if (releaseMs !== null) addRelease(bin, releaseMs);
    if (this.size > MAX_MARK_BINS) this.widen();
  }

  private widen(): void {
    this.widthMs *= 2;
    const old = this.bins;
    this.bins = new Map();
    this.size = 0;
    this.lastIndex = Number.NaN;
    for (const [index, slot] of old) {
      const target = this.bins.get(Math.floor(index / 2)) ?? [];
      this.bins.set(Math.floor(index / 2), target);
      slot.forEach((bin, o) => {
        if (bin === undefined) return;
        const into = target[o];
        if (into === undefined) {
          target[o] = bin;
          this.size++;
          return;
        }
        const merged: MarkBin = {
          outcome: bin.outcome,
          firstMs: Math.min(into.firstMs, bin.firstMs),
          count: into.count + bin.count,
          oneInstant: into.oneInstant && bin.oneInstant && into.firstMs === bin.firstMs,
          releasesMs: into.releasesMs,
        };
        for (const r of bin.releasesMs) addRelease(merged, r);
        target[o] = merged;
      });
    }
    if (this.size > MAX_MARK_BINS) this.widen();
  }

  list(): MarkBin[] {
    const out: MarkBin[] = [];
    for (const slot of this.bins.values()) for (const bin of slot) if (bin !== undefined) out.push(bin);
    return out.sort((a, b) => a.firstMs - b.firstMs);
  }
}

function addRelease(bin: MarkBin, releaseMs: number): void {
  const r = bin.releasesMs;
  if (r.length < MAX_RELEASES) r.push(releaseMs);
  else if (releaseMs > r[r.length - 1]!) r[r.length - 1] = releaseMs;
}

/** The charted key's levels, in time bins doubling in width past `MAX_TRACK_BINS`. */
class TrackBins {
  private widthMs = 1;
  private bins = new Map<number, TrackBin>();

  add(tMs: number, before: number, after: number, state: AlgorithmState | null): void {
    const index = Math.floor(tMs / this.widthMs);
    let bin = this.bins.get(index);
    if (bin === undefined) {
      bin = { firstMs: tMs, lastMs: tMs, points: [], endState: state };
      this.bins.set(index, bin);
    }
    const p = bin.points;
    const last = p[p.length - 1];
    // Requests at one instant make one vertical step: the level before the first and after the last.
    if (last !== undefined && last.tMs === tMs && p.length >= 2 && p[p.length - 2]!.tMs === tMs) {
      p[p.length - 1] = { tMs, level: after };
    } else {
      p.push({ tMs, level: before }, { tMs, level: after });
    }
    if (p.length > MAX_POINTS) bin.points = thin(p);
    if (tMs >= bin.lastMs) {
      bin.lastMs = tMs;
      bin.endState = state;
    }
    if (this.bins.size > MAX_TRACK_BINS) this.widen();
  }

  private widen(): void {
    this.widthMs *= 2;
    const old = [...this.bins].sort((a, b) => a[0] - b[0]);
    this.bins = new Map();
    for (const [index, bin] of old) {
      const into = this.bins.get(Math.floor(index / 2));
      if (into === undefined) {
        this.bins.set(Math.floor(index / 2), bin);
        continue;
      }
      into.points = thin([...into.points, ...bin.points]);
      if (bin.lastMs >= into.lastMs) {
        into.lastMs = bin.lastMs;
        into.endState = bin.endState;
      }
    }
    if (this.bins.size > MAX_TRACK_BINS) this.widen();
  }

  list(): TrackBin[] {
    return [...this.bins.values()].sort((a, b) => a.firstMs - b.firstMs);
  }
}

/** The first, lowest, highest and last points, in their order: the same picture at any width below a pixel. */
function thin(points: readonly LevelPoint[]): LevelPoint[] {
  let lo = 0;
  let hi = 0;
  points.forEach((p, i) => {
    if (p.level < points[lo]!.level) lo = i;
    if (p.level > points[hi]!.level) hi = i;
  });
  return [...new Set([0, lo, hi, points.length - 1])].sort((a, b) => a - b).map((i) => points[i]!);
}

/** What the comparison keeps per key: its request count, and per rule its state and peak span. */
interface KeyRecord {
  count: number;
  readonly states: (AlgorithmState | null)[];
  readonly windows: (SpanWindow | null)[];
}

/** One rule over the trace. */
class LaneBuilder {
  private readonly check: ReturnType<typeof algorithmFor>["check"];
  private readonly capacity: number;
  private readonly spanMs: number;
  private requests = 0;
  private admitted = 0;
  private denied = 0;
  private delayed = 0;
  private errors = 0;
  private peak: Peak | null = null;
  private firstDenial: { tMs: number; key: string } | null = null;
  private readonly marks = new MarkBins();
  private readonly track = new TrackBins();

  constructor(
    readonly rule: ResolvedRule,
    /** This lane's place in each key's record. */
    private readonly index: number,
    private readonly options: BuildOptions,
  ) {
    const algorithm = algorithmFor(rule);
    this.check = algorithm.check.bind(algorithm);
    this.capacity = capacityOf(rule);
    this.spanMs = peakSpanMs(rule);
  }

  add(tMs: number, key: string, cost: number, record: KeyRecord): void {
    this.requests++;
    const before = record.states[this.index] ?? null;
    let after = before;
    let outcome: number = ERROR;
    let delayMs = 0;
    if (cost > this.capacity) {
      this.errors++;
    } else {
      // `decide` without its wrapper: the cost is a checked integer in [1, capacity] here.
      const { decision: d, state } = this.check(this.rule, before, cost, tMs);
      after = state;
      record.states[this.index] = state;
      if (!d.allowed) {
        outcome = DENIED;
        this.denied++;
        if (this.firstDenial === null || tMs < this.firstDenial.tMs) this.firstDenial = { tMs, key };
      } else {
        this.admitted++;
        delayMs = d.delayMs;
        outcome = delayMs > 0 ? DELAYED : ALLOWED;
        if (delayMs > 0) this.delayed++;
        this.addAdmitted(tMs, key, cost, record);
      }
    }
    const { draw, fromMs, toMs, stateKey } = this.options;
    if (!draw) return;
    if ((fromMs === undefined || tMs >= fromMs) && (toMs === undefined || tMs <= toMs)) {
      this.marks.add(tMs, outcome, outcome === DELAYED ? tMs + delayMs : null);
    }
    if (key === stateKey) {
      this.track.add(tMs, levelAt(this.rule, before, tMs), levelAt(this.rule, after, tMs), after);
    }
  }

  private addAdmitted(tMs: number, key: string, cost: number, record: KeyRecord): void {
    let w = record.windows[this.index];
    if (w === undefined || w === null) {
      w = new SpanWindow();
      record.windows[this.index] = w;
    }
    w.add(tMs, cost, this.spanMs);
    // Strictly more: on a tie, the span reached first in the trace stays.
    if (this.peak === null || w.sum > this.peak.cost) this.peak = { cost: w.sum, key, startMs: w.times[w.head]! };
  }

  finish(): Lane {
    return {
      rule: this.rule,
      stats: {
        requests: this.requests,
        admitted: this.admitted,
        denied: this.denied,
        delayed: this.delayed,
        errors: this.errors,
        spanMs: this.spanMs,
        peak: this.peak,
        firstDenial: this.firstDenial,
      },
      marks: this.marks.list(),
      track: this.track.list(),
    };
  }
}

/**
 * Several rules over one trace, each alone, one request at a time. Memory: a record per distinct key (about 200
 * bytes plus each rule's state and the admitted requests of its last peak span), nothing per request.
 */
export class ComparisonBuilder {
  private readonly lanes: LaneBuilder[];
  private readonly keys = new Map<string, KeyRecord>();
  private requests = 0;
  private firstMs: number | null = null;
  private lastMs: number | null = null;

  constructor(
    rules: readonly ResolvedRule[],
    private readonly options: BuildOptions,
  ) {
    this.lanes = rules.map((rule, i) => new LaneBuilder(rule, i, options));
  }

  add(tMs: number, key: string, cost: number): void {
    this.requests++;
    let record = this.keys.get(key);
    if (record === undefined) {
      record = { count: 0, states: this.lanes.map(() => null), windows: this.lanes.map(() => null) };
      this.keys.set(key, record);
    }
    record.count++;
    if (this.firstMs === null || tMs < this.firstMs) this.firstMs = tMs;
    if (this.lastMs === null || tMs > this.lastMs) this.lastMs = tMs;
    for (const lane of this.lanes) lane.add(tMs, key, cost, record);
  }

  /** Whether `key` came in the trace. */
  hasKey(key: string): boolean {
    return this.keys.has(key);
  }

  finish(): Comparison {
    return {
      lanes: this.lanes.map((l) => l.finish()),
      requests: this.requests,
      keys: this.keys.size,
      stateKey: this.options.stateKey,
      firstMs: this.firstMs,
      lastMs: this.lastMs,
    };
  }
}

/** Counts requests per key, to find the busiest. */
export class KeyCounter {
  readonly counts = new Map<string, number>();

  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** The busiest key, first seen on a tie; `null` when there was none. */
  busiest(): string | null {
    let best: string | null = null;
    let bestCount = 0;
    // A Map iterates in insertion order, so on a tie the key seen first wins.
    for (const [key, n] of this.counts) {
      if (n > bestCount) {
        best = key;
        bestCount = n;
      }
    }
    return best;
  }
}

/** The busiest key of a trace, first seen on a tie; `null` when the trace is empty. */
export function busiestKey(trace: Iterable<TraceLine>): string | null {
  const counter = new KeyCounter();
  for (const { key } of trace) counter.add(key);
  return counter.busiest();
}

/** Every rule over an in-memory trace, each alone (tests and small traces); the command streams instead. */
export function compareRules(
  rules: readonly ResolvedRule[],
  trace: readonly TraceLine[],
  stateKey: string | null = busiestKey(trace),
): Comparison {
  const builder = new ComparisonBuilder(rules, { stateKey, draw: true });
  for (const { tMs, key, cost } of trace) builder.add(tMs, key, cost);
  return builder.finish();
}
