/**
 * `sluice compare`'s statistics, streaming: requests go in one at a time, the replay engine (engine.ts) decides them,
 * and `finish` sums up. Memory is per-(rule, key) state (the engine's, and each rule's peak window, peak.ts) plus a
 * bounded picture: the marks and the charted key's state are kept in time bins that start 1 ms wide (a short trace
 * is drawn request for request) and double in width whenever a lane holds too many, so a day of traffic draws a
 * figure of the same size as a minute of it.
 */
import { type AlgorithmState, levelAt } from "../algorithms/index.ts";
import type { ResolvedRule } from "../rules/types.ts";
import type { ChunkSpill } from "./admission_queue.ts";
import { Replayer, type ReplayOptions, type RuleAnswer, type Verdict } from "./engine.ts";
import type { Outcome } from "./outcomes.ts";
import { PeakWindows } from "./peak.ts";
import type { RequestLine } from "./request_trace.ts";
import {
  type Comparison,
  type Lane,
  type LevelPoint,
  type MarkBin,
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
  /** Where the peak windows' admissions go beyond a few megabytes per rule (the CLI gives a temporary file). */
  readonly spill?: ChunkSpill | null;
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

/** One rule over the trace: its answers counted, its peak, and what a figure needs. */
class LaneBuilder {
  private readonly spanMs: number;
  private readonly windows: PeakWindows;
  private requests = 0;
  private admitted = 0;
  private denied = 0;
  private delayed = 0;
  private errors = 0;
  private firstDenial: { tMs: number; key: string } | null = null;
  private readonly marks = new MarkBins();
  private readonly track = new TrackBins();

  constructor(
    readonly rule: ResolvedRule,
    private readonly options: BuildOptions,
  ) {
    this.spanMs = peakSpanMs(rule);
    this.windows = new PeakWindows(this.spanMs, options.spill ?? null);
  }

  /** One answer of this rule (`key` is the answer's key by name). */
  add(tMs: number, key: string, answer: RuleAnswer): void {
    this.requests++;
    const d = answer.decision;
    let outcome: number = ERROR;
    if (d === null) {
      this.errors++;
    } else if (!d.allowed) {
      outcome = DENIED;
      this.denied++;
      if (this.firstDenial === null || tMs < this.firstDenial.tMs) this.firstDenial = { tMs, key };
    } else {
      this.admitted++;
      outcome = d.delayMs > 0 ? DELAYED : ALLOWED;
      if (d.delayMs > 0) this.delayed++;
      if (!answer.refunded) this.windows.add(answer.key, key, tMs, answer.cost);
    }
    const { draw, fromMs, toMs, stateKey } = this.options;
    if (!draw) return;
    if ((fromMs === undefined || tMs >= fromMs) && (toMs === undefined || tMs <= toMs)) {
      this.marks.add(tMs, outcome, outcome === DELAYED ? tMs + d!.delayMs : null);
    }
    if (key === stateKey) {
      this.track.add(tMs, levelAt(this.rule, answer.before, tMs), levelAt(this.rule, answer.after, tMs), answer.after);
    }
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
        peak: this.windows.finish(),
        firstDenial: this.firstDenial,
      },
      marks: this.marks.list(),
      track: this.track.list(),
    };
  }
}

/**
 * Several rules over one trace, one request at a time, decided by the replay engine (engine.ts): a `t_ms,key,cost`
 * line by each rule alone (`add`), a request trace's line through the gateway's steps (`request`). Memory: the
 * engine's per-(rule, key) states, and each rule's peak windows (peak.ts); nothing per request.
 */
export class ComparisonBuilder {
  private readonly lanes: LaneBuilder[];
  private readonly replayer: Replayer;
  private requests = 0;
  private firstMs: number | null = null;
  private lastMs: number | null = null;
  private readonly verdicts = new Map<Verdict["kind"] | "delayed", number>();
  /**
   * A request trace's keys that some rule counted, one bit per key number: the engine's key numbering also holds the
   * callers it reports by (an address under a composite key's tuple), which are not keys of any rule.
   */
  private ruleKeys = new Uint8Array(1024);
  private ruleKeyCount = 0;

  constructor(
    rules: readonly ResolvedRule[],
    private readonly options: BuildOptions,
    replayOptions?: ReplayOptions,
  ) {
    this.lanes = rules.map((rule) => new LaneBuilder(rule, options));
    this.replayer = new Replayer(rules, replayOptions);
    if (options.draw) this.replayer.watch(options.stateKey);
  }

  add(tMs: number, key: string, cost: number, outcome: Outcome | null = null): void {
    this.seen(tMs);
    const answers = this.replayer.keyed(tMs, key, cost, outcome);
    for (let i = 0; i < this.lanes.length; i++) this.lanes[i]!.add(tMs, key, answers[i]!);
  }

  /** One request of a request trace, replayed through the whole rule set. */
  request(line: RequestLine): void {
    this.seen(line.tMs);
    const { verdict, answers } = this.replayer.request(line);
    const kind = verdict.kind === "admit" && verdict.delayMs > 0 ? "delayed" : verdict.kind;
    this.verdicts.set(kind, (this.verdicts.get(kind) ?? 0) + 1);
    const { keys } = this.replayer;
    for (const a of answers) {
      this.countKey(a.key);
      this.lanes[a.rule]!.add(line.tMs, keys.name(a.key), a);
    }
  }

  private countKey(key: number): void {
    const byte = key >>> 3;
    if (byte >= this.ruleKeys.length) {
      const grown = new Uint8Array(Math.max(byte + 1, this.ruleKeys.length * 2));
      grown.set(this.ruleKeys);
      this.ruleKeys = grown;
    }
    const bit = 1 << (key & 7);
    if ((this.ruleKeys[byte]! & bit) !== 0) return;
    this.ruleKeys[byte]! |= bit;
    this.ruleKeyCount++;
  }

  private seen(tMs: number): void {
    this.requests++;
    if (this.firstMs === null || tMs < this.firstMs) this.firstMs = tMs;
    if (this.lastMs === null || tMs > this.lastMs) this.lastMs = tMs;
  }

  /** Whether `key` came in the trace. */
  hasKey(key: string): boolean {
    return this.replayer.keys.find(key) >= 0;
  }

  finish(): Comparison {
    return {
      lanes: this.lanes.map((l) => l.finish()),
      requests: this.requests,
      keys: this.verdicts.size === 0 ? this.replayer.keys.size : this.ruleKeyCount,
      stateKey: this.options.stateKey,
      firstMs: this.firstMs,
      lastMs: this.lastMs,
      verdicts: this.verdicts.size === 0 ? null : Object.fromEntries(this.verdicts),
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
