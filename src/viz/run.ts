/**
 * The pure half of `sluice compare`: run several rules over one trace with the exact core (each rule alone, one
 * state per key, no clock), and sum up what each did. Data in, data out; the command and the SVG are shells.
 */
import { type AlgorithmState, decide } from "../algorithms/index.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { formatDurationUnit, formatSpan, formatTime, type TimeStyle } from "./time.ts";

/** One request of a trace: when, whose, and what it costs. */
export interface TraceLine {
  readonly tMs: number;
  readonly key: string;
  readonly cost: number;
}

/** What happened to one request: admitted at once, admitted after a wait (leaky_queue), denied, or impossible. */
export type Outcome = "allowed" | "delayed" | "denied" | "error";

export interface Judged {
  readonly tMs: number;
  readonly key: string;
  readonly cost: number;
  readonly outcome: Outcome;
  /** How long an admitted request waits (leaky_queue), ms; 0 otherwise. */
  readonly delayMs: number;
}

/** The state of the charted key right after one of its requests. */
export interface StatePoint {
  readonly tMs: number;
  readonly state: AlgorithmState | null;
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
  /** Admitted after a wait (leaky_queue only). */
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
  readonly judged: readonly Judged[];
  readonly stats: RuleStats;
  /** The charted key's state after each of its requests, in time order. */
  readonly track: readonly StatePoint[];
}

export interface Comparison {
  readonly lanes: readonly Lane[];
  readonly requests: number;
  readonly keys: number;
  /** The key whose state is charted: the busiest (first seen on a tie), unless chosen. `null` for an empty trace. */
  readonly stateKey: string | null;
  readonly firstMs: number | null;
  readonly lastMs: number | null;
}

/** A month window's peak is measured over 31 days, the longest month. */
const MONTH_SPAN_MS = 31 * 86_400_000;

/** The span a rule's "most admitted in any window of the rule's length" is measured over. */
export function peakSpanMs(rule: ResolvedRule): number {
  switch (rule.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
    case "leaky_queue":
      return rule.rate.periodMs;
    case "fixed_window":
      return rule.window.kind === "ms" ? rule.window.ms : MONTH_SPAN_MS;
    case "sliding_log":
    case "sliding_counter":
      return rule.windowMs;
    default: {
      const never: never = rule;
      return never;
    }
  }
}

/** A rule's algorithm and parameters in one short line, in rule-file terms: `token_bucket 10/s, burst 20`. */
export function describeRule(rule: ResolvedRule): string {
  switch (rule.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
      return `${rule.algorithm} ${rateText(rule.rate.amount, rule.rate.periodMs)}, burst ${rule.burst}`;
    case "leaky_queue": {
      const delay = rule.delay === rule.burst ? "nodelay" : `delay ${rule.delay}`;
      return `leaky_queue ${rateText(rule.rate.amount, rule.rate.periodMs)}, burst ${rule.burst}, ${delay}`;
    }
    case "fixed_window":
      return `fixed_window ${rule.limit} per ${rule.window.kind === "ms" ? formatSpan(rule.window.ms) : "month"}`;
    case "sliding_log":
      return `sliding_log ${rule.limit} per ${formatSpan(rule.windowMs)}`;
    case "sliding_counter":
      return `sliding_counter ${rule.limit} per ${formatSpan(rule.windowMs)}${rule.buckets > 1 ? `, ${rule.buckets} buckets` : ""}${rule.countDenied ? ", count_denied" : ""}`;
    default: {
      const never: never = rule;
      return never;
    }
  }
}

function rateText(amount: number, periodMs: number): string {
  return `${amount}/${formatDurationUnit(periodMs)}`;
}

/** The busiest key of a trace, first seen on a tie; `null` when the trace is empty. */
export function busiestKey(trace: readonly TraceLine[]): string | null {
  const counts = new Map<string, number>();
  for (const { key } of trace) counts.set(key, (counts.get(key) ?? 0) + 1);
  let best: string | null = null;
  let bestCount = 0;
  // A Map iterates in insertion order, so on a tie the key seen first wins.
  for (const [key, n] of counts) {
    if (n > bestCount) {
      best = key;
      bestCount = n;
    }
  }
  return best;
}

/** Run every rule over the trace, each alone, and sum up. `stateKey` picks the charted key (default: busiest). */
export function compareRules(
  rules: readonly ResolvedRule[],
  trace: readonly TraceLine[],
  stateKey: string | null = busiestKey(trace),
): Comparison {
  let firstMs: number | null = null;
  let lastMs: number | null = null;
  const keys = new Set<string>();
  for (const { tMs, key } of trace) {
    keys.add(key);
    if (firstMs === null || tMs < firstMs) firstMs = tMs;
    if (lastMs === null || tMs > lastMs) lastMs = tMs;
  }
  const lanes = rules.map((rule) => runLane(rule, trace, stateKey));
  return { lanes, requests: trace.length, keys: keys.size, stateKey, firstMs, lastMs };
}

function runLane(rule: ResolvedRule, trace: readonly TraceLine[], stateKey: string | null): Lane {
  const states = new Map<string, AlgorithmState>();
  const judged: Judged[] = [];
  const track: StatePoint[] = [];
  let admitted = 0;
  let denied = 0;
  let delayed = 0;
  let errors = 0;
  let firstDenial: RuleStats["firstDenial"] = null;
  for (const { tMs, key, cost } of trace) {
    const result = decide(rule, states.get(key) ?? null, cost, tMs);
    let outcome: Outcome;
    let delayMs = 0;
    if (!result.ok) {
      outcome = "error";
      errors++;
    } else {
      states.set(key, result.state);
      const d = result.decision;
      if (!d.allowed) {
        outcome = "denied";
        denied++;
        if (firstDenial === null || tMs < firstDenial.tMs) firstDenial = { tMs, key };
      } else {
        admitted++;
        delayMs = d.delayMs;
        outcome = delayMs > 0 ? "delayed" : "allowed";
        if (delayMs > 0) delayed++;
      }
    }
    judged.push({ tMs, key, cost, outcome, delayMs });
    if (key === stateKey) track.push({ tMs, state: states.get(key) ?? null });
  }
  // Stable sort: a trace whose clock steps back for a key still charts left to right.
  track.sort((a, b) => a.tMs - b.tMs);
  const spanMs = peakSpanMs(rule);
  const stats: RuleStats = {
    requests: judged.length,
    admitted,
    denied,
    delayed,
    errors,
    spanMs,
    peak: peakOf(judged, spanMs),
    firstDenial,
  };
  return { rule, judged, stats, track };
}

/** Most cost admitted for one key in any half-open span of `spanMs`; on a tie, the earliest span of the first key. */
export function peakOf(judged: readonly Judged[], spanMs: number): Peak | null {
  const byKey = new Map<string, { t: number[]; cost: number[] }>();
  for (const j of judged) {
    if (j.outcome !== "allowed" && j.outcome !== "delayed") continue;
    let list = byKey.get(j.key);
    if (list === undefined) {
      list = { t: [], cost: [] };
      byKey.set(j.key, list);
    }
    list.t.push(j.tMs);
    list.cost.push(j.cost);
  }
  let best: Peak | null = null;
  for (const [key, list] of byKey) {
    const order = list.t.map((_, i) => i).sort((a, b) => list.t[a]! - list.t[b]!);
    let start = 0;
    let sum = 0;
    for (const i of order) {
      sum += list.cost[i]!;
      while (list.t[i]! - list.t[order[start]!]! >= spanMs) {
        sum -= list.cost[order[start]!]!;
        start++;
      }
      if (best === null || sum > best.cost) best = { cost: sum, key, startMs: list.t[order[start]!]! };
    }
  }
  return best;
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
  const header = [
    `trace ${traceName}: ${plural(c.requests, "request")}, ${plural(c.keys, "key")}${range}`,
    "Each rule runs alone over the whole trace, as `sluice simulate` runs it (no composition; shadow rules are judged",
    'as if enforcing). "admitted" includes delayed requests (leaky_queue). "peak" is the most cost admitted' +
      (manyKeys ? " for one key" : ""),
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
