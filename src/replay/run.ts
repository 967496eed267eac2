/**
 * The pure half of `sluice compare`: run several rules over one trace with the exact core (each rule alone, one
 * state per key, no clock), and sum up what each did. Data in, data out; the command and the SVG are shells.
 */
import { type AlgorithmState, describeParams, peakSpanMs as peakSpanOf } from "../algorithms/index.ts";
import { formatDurationUnit } from "../rules/duration.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { formatSpan, formatTime, type TimeStyle } from "./time.ts";

/** One request of a trace: when, whose, and what it costs. */
export interface TraceLine {
  readonly tMs: number;
  readonly key: string;
  readonly cost: number;
}

/** What happened to one request: admitted at once, admitted after a wait (a shaping rule), denied, or impossible. */
export type RequestOutcome = "allowed" | "delayed" | "denied" | "error";

/**
 * Requests of one outcome within one time bin of a lane, for drawing. Bins start 1 ms wide (one per instant, so a
 * short trace is drawn request for request) and double in width whenever a lane has too many, which keeps a long
 * trace's figure (and memory) bounded while every bin stays far narrower than a pixel.
 */
export interface MarkBin {
  readonly outcome: RequestOutcome;
  /** Time of the first request in the bin. */
  readonly firstMs: number;
  count: number;
  /** Whether every request of the bin came at `firstMs` (a burst at one instant is labelled "×N"). */
  oneInstant: boolean;
  /** When delayed requests are released (shaping rules), ms: every one for 1 ms bins, at most a few (the latest kept). */
  releasesMs: number[];
}

/** A level of the charted key's state at an instant, as the chart draws it (see `level.ts`). */
export interface LevelPoint {
  readonly tMs: number;
  readonly level: number;
}

/**
 * The charted key's state within one time bin: its level just before and just after its requests (for a 1 ms bin,
 * exactly those two; for a wider one, the first, lowest, highest and last of them), and its state after the bin's
 * last request, from which the chart draws the level until the next bin.
 */
export interface TrackBin {
  readonly firstMs: number;
  lastMs: number;
  points: LevelPoint[];
  endState: AlgorithmState | null;
}

export interface Peak {
  /** Most cost admitted for one key within any span of `spanMs` (a half-open span `[start, start + spanMs)`). */
  readonly cost: number;
  readonly key: string;
  /** Time of the first admitted request inside that span. */
  readonly startMs: number;
}

export interface RuleStats {
  readonly requests: number;
  /** Admitted requests, delayed ones included. */
  readonly admitted: number;
  readonly denied: number;
  /** Admitted after a wait (shaping rules only). */
  readonly delayed: number;
  /** Impossible requests (cost above the rule's capacity). */
  readonly errors: number;
  /** The span the peak is measured over: the window for window rules, the rate's period for rate rules. */
  readonly spanMs: number;
  readonly peak: Peak | null;
  readonly firstDenial: { readonly tMs: number; readonly key: string } | null;
}

export interface Lane {
  readonly rule: ResolvedRule;
  readonly stats: RuleStats;
  /** What to draw for the requests, in time order. */
  readonly marks: readonly MarkBin[];
  /** The charted key's state, in time order. */
  readonly track: readonly TrackBin[];
}

export interface Comparison {
  readonly lanes: readonly Lane[];
  readonly requests: number;
  readonly keys: number;
  /** The key whose state is charted (the busiest, unless chosen); `null` when none is charted. */
  readonly stateKey: string | null;
  readonly firstMs: number | null;
  readonly lastMs: number | null;
  /**
   * For a request trace, what the gateway answered, by kind (`admit`, `delayed`, `deny`, `unauthorized`,
   * `too_costly`, `bad_request`); `null` for a `t_ms,key,cost` trace (each rule ran alone).
   */
  readonly verdicts?: Readonly<Record<string, number>> | null;
}

/** The span a rule's "most admitted in any window of the rule's length" is measured over (the algorithm says). */
export function peakSpanMs(rule: ResolvedRule): number {
  return peakSpanOf(rule);
}

/** A rule's algorithm and parameters in one short line, in rule-file terms: `token_bucket 10/s, burst 20`. */
export function describeRule(rule: ResolvedRule): string {
  return describeParams(rule, { span: formatSpan, rate: (r) => rateText(r.amount, r.periodMs) });
}

function rateText(amount: number, periodMs: number): string {
  return `${amount}/${formatDurationUnit(periodMs)}`;
}

/** The comparison as a plain-text report: a short header saying how to read it, then one row per rule. */
export function formatComparison(c: Comparison, traceName: string, style: TimeStyle): string {
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const range =
    c.firstMs === null || c.lastMs === null
      ? ""
      : `, ${formatTime(c.firstMs, style)} to ${formatTime(c.lastMs, style)}`;
  const manyKeys = c.keys > 1;
  const anyErrors = c.lanes.some((l) => l.stats.errors > 0);
  const how = howToRead(c, manyKeys);
  const header = [
    `trace ${traceName}: ${plural(c.requests, "request")}, ${plural(c.keys, "key")}${range}`,
    ...how,
    "in any span of the rule's length: its window, or its rate's period for rate algorithms.",
    "",
  ];
  const rows: string[][] = [
    ["rule", "algorithm", "admitted", "denied", "delayed", ...(anyErrors ? ["errors"] : []), "peak", "first denial"],
  ];
  for (const { rule, stats } of c.lanes) {
    const peak =
      stats.peak === null
        ? "0"
        : `${stats.peak.cost} in ${formatSpan(stats.spanMs)}${manyKeys ? ` (key ${stats.peak.key})` : ""}`;
    const denial =
      stats.firstDenial === null
        ? "-"
        : `${formatTime(stats.firstDenial.tMs, style)}${manyKeys ? ` (key ${stats.firstDenial.key})` : ""}`;
    rows.push([
      rule.id,
      describeRule(rule),
      String(stats.admitted),
      String(stats.denied),
      String(stats.delayed),
      ...(anyErrors ? [String(stats.errors)] : []),
      peak,
      denial,
    ]);
  }
  const numeric = new Set([2, 3, 4, ...(anyErrors ? [5] : [])]);
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  const table = rows.map((r) =>
    r
      .map((cell, col) => (numeric.has(col) ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
      .join("  ")
      .trimEnd(),
  );
  return `${[...header, ...table].join("\n")}\n`;
}

const VERDICT_WORDS: readonly (readonly [string, string])[] = [
  ["admit", "admitted"],
  ["delayed", "admitted after a wait"],
  ["deny", "denied"],
  ["forbidden", "refused by a deny rule"],
  ["unauthorized", "refused 401 (unverified: reject)"],
  ["too_costly", "refused 400 (cost above a rule's capacity)"],
  ["bad_request", "refused 400 (unreadable path)"],
];

/** `90 admitted, 10 denied`: the gateway's answers by kind, in a fixed order. */
function gatewayLine(verdicts: Readonly<Record<string, number>>): string {
  return VERDICT_WORDS.filter(([k]) => (verdicts[k] ?? 0) > 0)
    .map(([k, words]) => `${verdicts[k]} ${words}`)
    .join(", ");
}

/** The lines that say how to read the table: each rule alone, or the gateway's answers to a request trace. */
function howToRead(c: Comparison, manyKeys: boolean): string[] {
  return c.verdicts === null || c.verdicts === undefined
    ? [
        "Each rule runs alone over the whole trace, as `sluice simulate` runs it (no composition; shadow rules are judged",
        'as if enforcing). "admitted" includes delayed requests (shaping rules). "peak" is the most cost admitted' +
          (manyKeys ? " for one key" : ""),
      ]
    : [
        `The gateway's answers: ${gatewayLine(c.verdicts)}.`,
        "Every request went through the whole rule set as the gateway runs it (routes, callers, plans, costs,",
        "composition). Each row counts the requests its rule applied to, as the rule answered them (a shadow rule's",
        'denials are would-be denials); "admitted" includes delayed requests. "peak" is the most cost admitted and kept',
        `(not given back because another rule denied)${manyKeys ? " for one key" : ""}`,
      ];
}
