/**
 * The cluster simulation's figures per run, and issue 18's goals over them (bench/cluster.ts; the report prints them in
 * BENCHMARKS.md section 8).
 */
import { capacityOf } from "../src/algorithms/index.ts";
import { RATE_BOUND_MS } from "../src/protocol/tunables.ts";
import { type ClusterOutcome, type ClusterRun, DELEGATE_RTT_MS, type Scenario } from "../src/sim/cluster.ts";
import type { FirstSecondCalls } from "../src/sim/first_second.ts";
import { type LedgerTotals, ledgerTotals, withExact } from "../src/sim/rate_ledger.ts";
import { round } from "./common.ts";

export interface ClusterRow {
  readonly rule: string;
  readonly algorithm: string;
  readonly scenario: Scenario;
  readonly isolates: number;
  readonly loadPerS: number;
  readonly durationS: number;
  readonly requests: number;
  /** The key's object: calls of every kind per second over the run, its busiest second, its first second. */
  readonly keyCallsPerS: number;
  readonly keyBusiestSecond: number;
  readonly keyFirstSecond: number;
  /** The key's object's busiest second after the first (the cold start apart; the goal counts it too). */
  readonly keyBusiestAfterFirst: number;
  /**
   * The key's object's first-second calls by kind (src/sim/first_second.ts): isolates' first calls made while their
   * region had no hot mark (the cold start's floor), their later direct calls, batches passed through, share asks and
   * refunds.
   */
  readonly keyFirstSecondBy: FirstSecondCalls;
  /** Of the key's object's calls: delegates' share asks, and refunds in a call of their own. */
  readonly keyShareAsks: number;
  readonly keyRefundCalls: number;
  /** The busiest delegate's busiest second (the first second included, and after it), and all delegates' calls. */
  readonly delegateBusiestSecond: number;
  readonly delegateBusiestAfterFirst: number;
  readonly delegateCalls: number;
  /** Overloaded calls on any object, and those after the first second. */
  readonly overloaded: number;
  readonly overloadedAfterFirstSecond: number;
  /** Requests a failing call left to `on_error` (admitted uncounted: `open`, the default), by failure. */
  readonly failedOpen: Record<string, number>;
  /** All of them, whatever the failure's label: every request admitted uncounted is a failure to open. */
  readonly failedOpenAll: number;
  readonly lastKnown: number;
  readonly admitted: number;
  readonly exactAdmitted: number;
  readonly admittedVsExactPct: number;
  /** The first second (the cold start) apart: admitted vs exact in it. */
  readonly firstSecondAdmitted: number;
  readonly firstSecondExact: number;
  /** Whether the load reached the rule's limit (the exact writer denied some): only then is a row evidence. */
  readonly reachesLimit: boolean;
  readonly fromLeasePct: number;
  readonly overWindow: number | null;
  readonly overRateBound: number | null;
  /** After the scenario's event: what the exact writer admitted and this did not, in the next 2 s, % of a window. */
  readonly underAfterEventPct: number | null;
  /**
   * The same 2 s of the same run (same seed, same arrivals) without its event: what they lose anyway (a rate rule's
   * steady under-admission, a window's end 1 s after the event), for `underAfterEventPct` to be read against.
   */
  readonly underWithoutEventPct?: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  readonly keyKbPerCall: number;
  /** 10 req/s rows: the tier's decisions against one call per request's, same arrivals (`lowDecisions`). */
  readonly lowDecisions?: LowDecisions;
  /** Rate rules: where the budget went, whole run, tokens (src/sim/rate_ledger.ts; a simulation's bookkeeping). */
  readonly ledger?: LedgerTotals;
  readonly runSeconds: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The most of `times` in any whole second from `fromMs` on (earlier times not counted). */
function busiestFrom(times: readonly number[], fromMs: number): number {
  const seconds = new Map<number, number>();
  for (const at of times) {
    if (at < fromMs) continue;
    const s = Math.floor((at - fromMs) / 1000);
    seconds.set(s, (seconds.get(s) ?? 0) + 1);
  }
  return Math.max(0, ...seconds.values());
}

const within = (times: readonly number[], from: number, to: number) => times.filter((t) => t >= from && t < to).length;

/** Window rules: the most admitted beyond the limit in any window (the larger limit for a window across a change). */
function overWindow(run: ClusterRun, times: readonly number[], newestFromMs: number): number | null {
  const p = run.rule.params;
  if (p.algorithm !== "fixed_window" || p.window.kind !== "ms") return null;
  const windowMs = p.window.ms;
  const limitOf = (at: number) =>
    (at >= newestFromMs ? (run.lowered.params as { limit: number }) : (p as { limit: number })).limit;
  const perWindow = new Map<number, { n: number; limit: number }>();
  for (const at of times) {
    const w = Math.floor(at / windowMs);
    const e = perWindow.get(w) ?? { n: 0, limit: limitOf(at) };
    e.n++;
    e.limit = Math.max(e.limit, limitOf(at));
    perWindow.set(w, e);
  }
  return Math.max(0, ...[...perWindow.values()].map((e) => e.n - e.limit));
}

/**
 * Rate rules: the most admitted beyond the stated bound, `burst + rate × (t + RATE_BOUND_MS)`, over spans t of 0.1, 1, 5
 * and 10 s (over 10 s: at most 5% beyond the exact single writer; docs/production.md, "The bound, in a line").
 */
function overRateBound(run: ClusterRun, sorted: readonly number[]): number | null {
  const p = run.rule.params;
  if (p.algorithm !== "token_bucket" && p.algorithm !== "gcra") return null;
  const ratePerMs = p.rate.tokens / p.rate.perMs;
  let worst = 0;
  for (const spanMs of [100, 1_000, 5_000, 10_000]) {
    const bound = p.burst + ratePerMs * (spanMs + RATE_BOUND_MS);
    let j = 0;
    for (let i = 0; i < sorted.length; i++) {
      while (sorted[i]! - sorted[j]! >= spanMs) j++;
      worst = Math.max(worst, i - j + 1 - bound);
    }
  }
  return Math.max(0, Math.ceil(worst));
}

/**
 * What the exact writer admitted and `admissions` did not in the 2 s from `atMs`, in % of a window's worth of the
 * rule: its limit for a window rule, 10 s of its rate for a rate rule (both 50,000 here).
 */
export function underAfterPct(
  run: ClusterRun,
  exact: readonly number[],
  admissions: readonly number[],
  atMs: number,
): number {
  const p = run.rule.params;
  const windowUnits = "rate" in p ? (p.rate.tokens * 10_000) / p.rate.perMs : capacityOf(p);
  return round((100 * (within(exact, atMs, atMs + 2000) - within(admissions, atMs, atMs + 2000))) / windowUnits, 2);
}

/**
 * At 10 req/s, the tier's decisions against one call per request on the same arrivals: how many differ, and how many
 * each refused (the exact writer refuses none of these rows': a refusal is a failed or late call, each run drawing its
 * own delays and losses on its own links).
 */
export interface LowDecisions {
  readonly differ: number;
  readonly of: number;
  readonly refusedTier: number;
  readonly refusedPlain: number;
}

/** The two runs' verdict strings (cluster.ts `verdicts`: `1` admitted, `0` refused, `f` failed open) compared. */
export function lowDecisionsOf(tier: string, plain: string): LowDecisions {
  let differ = 0;
  for (let i = 0; i < Math.max(tier.length, plain.length); i++) if (tier[i] !== plain[i]) differ++;
  const refused = (v: string) => v.split("").filter((c) => c === "0").length;
  return { differ, of: tier.length, refusedTier: refused(tier), refusedPlain: refused(plain) };
}

export function rowOf(
  run: ClusterRun,
  out: ClusterOutcome,
  exact: readonly number[],
  low: LowDecisions | undefined,
  runSeconds: number,
): ClusterRow {
  const t0 = run.t0Ms;
  const seconds = run.durationMs / 1000;
  const times = [...out.admissions].sort((a, b) => a - b);
  const latencies = [...out.latencies].sort((a, b) => a - b);
  const key = out.key.counters;
  const delegateOverloaded = out.delegates.reduce((n, d) => n + d.server.counters.overloaded, 0);
  const overloaded = key.overloaded + delegateOverloaded;
  const under = out.eventAtMs === null ? null : underAfterPct(run, exact, times, out.eventAtMs);
  return {
    rule: run.rule.id,
    algorithm: run.rule.params.algorithm,
    scenario: run.scenario,
    isolates: run.isolates,
    loadPerS: run.loadPerS,
    durationS: seconds,
    requests: out.arrivals.length,
    keyCallsPerS: round(key.calls / seconds, 1),
    keyBusiestSecond: out.key.server.busiestSecond(t0),
    keyFirstSecond: out.key.server.callsInSecond(t0),
    keyBusiestAfterFirst: busiestFrom(out.key.appliedAtMs, t0 + 1000),
    keyFirstSecondBy: out.keyFirstSecondBy,
    keyShareAsks: key.shares,
    keyRefundCalls: key.refunds,
    delegateBusiestSecond: Math.max(0, ...out.delegates.map((d) => d.server.busiestSecond(t0))),
    delegateBusiestAfterFirst: Math.max(0, ...out.delegates.map((d) => busiestFrom(d.server.appliedAtMs, t0 + 1000))),
    delegateCalls: out.delegates.reduce((n, d) => n + d.server.counters.calls, 0),
    overloaded,
    overloadedAfterFirstSecond: overloaded - out.overloadedFirstSecond,
    failedOpen: out.failedOpen,
    failedOpenAll: Object.values(out.failedOpen).reduce((a, b) => a + b, 0),
    lastKnown: out.lastKnown,
    admitted: times.length,
    exactAdmitted: exact.length,
    admittedVsExactPct: round((100 * (times.length - exact.length)) / Math.max(1, exact.length), 2),
    firstSecondAdmitted: within(times, t0, t0 + 1000),
    firstSecondExact: within(exact, t0, t0 + 1000),
    reachesLimit: exact.length < out.arrivals.length,
    fromLeasePct: round((100 * out.fromLease) / Math.max(1, out.arrivals.length), 1),
    overWindow: overWindow(run, times, out.newestFromMs),
    overRateBound: overRateBound(run, times),
    underAfterEventPct: under,
    latencyP50Ms: round(percentile(latencies, 50), 1),
    latencyP99Ms: round(percentile(latencies, 99), 1),
    keyKbPerCall: round(key.bytes / 1024 / Math.max(1, key.calls), 2),
    ...(low === undefined ? {} : { lowDecisions: low }),
    ...(out.ledger === null ? {} : { ledger: ledgerTotals(withExact(out.ledger, exact, t0, t0 + run.durationMs)) }),
    runSeconds: round(runSeconds, 1),
  };
}

export interface ClusterGoal {
  readonly met: boolean;
  /** The rows that miss it (rule/isolates/load/scenario: figure), or every row's figure when few. */
  readonly misses: string;
}

const label = (r: ClusterRow) =>
  `${r.rule}/${r.isolates}/${r.loadPerS}/s${r.scenario === "steady" ? "" : ` ${r.scenario}`}`;

/** A goal over the rows it applies to; `undefined` when none does (the reports say "not run", never a vacuous "met"). */
function goal(
  rows: readonly ClusterRow[],
  ok: (r: ClusterRow) => boolean,
  figure: (r: ClusterRow) => unknown,
): ClusterGoal | undefined {
  if (rows.length === 0) return undefined;
  const missed = rows.filter((r) => !ok(r));
  return { met: missed.length === 0, misses: missed.map((r) => `${label(r)}: ${figure(r)}`).join(", ") };
}

/** Issue 18's goals, over every row they apply to. */
export function clusterGoals(rows: readonly ClusterRow[]): Record<string, ClusterGoal> {
  return Object.fromEntries(
    Object.entries(goalsOver(rows)).filter((e): e is [string, ClusterGoal] => e[1] !== undefined),
  );
}

function goalsOver(rows: readonly ClusterRow[]): Record<string, ClusterGoal | undefined> {
  const rate = rows.filter((r) => r.overRateBound !== null);
  // At its limit (5,000/s) or above, whether or not the exact writer refused anything: at the limit it admits
  // (nearly) every request, so what the tier refuses there is under-admission a client sees, not noise.
  const accuracy = rows.filter(
    (r) => (r.scenario === "steady" || r.scenario === "long run") && r.rule === "hot-rate" && r.loadPerS >= 5_000,
  );
  const events = rows.filter((r) => r.underAfterEventPct !== null && r.scenario !== "object restart");
  return {
    keyCalls: goal(
      rows,
      (r) => r.keyBusiestSecond <= 100,
      (r) => r.keyBusiestSecond,
    ),
    firstSecond: goal(
      rows.filter((r) => r.isolates >= 5_000),
      (r) => r.keyFirstSecond <= 200,
      (r) => r.keyFirstSecond,
    ),
    keyCallsAfterFirst: goal(
      rows,
      (r) => r.keyBusiestAfterFirst <= 100,
      (r) => r.keyBusiestAfterFirst,
    ),
    anyObjectCalls: goal(
      rows,
      (r) => Math.max(r.keyBusiestSecond, r.delegateBusiestSecond) <= 500,
      (r) => Math.max(r.keyBusiestSecond, r.delegateBusiestSecond),
    ),
    overloaded: goal(
      rows,
      (r) => r.overloadedAfterFirstSecond === 0,
      (r) => r.overloadedAfterFirstSecond,
    ),
    failOpen: goal(
      rows,
      (r) => r.failedOpenAll === 0,
      (r) => r.failedOpenAll,
    ),
    window: goal(
      rows.filter((r) => r.overWindow !== null),
      (r) => r.overWindow === 0,
      (r) => r.overWindow,
    ),
    rateBound: goal(
      rate,
      (r) => r.overRateBound === 0,
      (r) => r.overRateBound,
    ),
    rateAccuracy: goal(
      accuracy,
      (r) => Math.abs(r.admittedVsExactPct) <= (r.loadPerS >= 10_000 ? 1 : 3),
      (r) => `${r.admittedVsExactPct}%`,
    ),
    underAfterEvent: goal(
      events,
      (r) => (r.underAfterEventPct ?? 0) <= 1,
      (r) =>
        `${r.underAfterEventPct}%${r.underWithoutEventPct === undefined ? "" : ` (without the event ${r.underWithoutEventPct}%)`}`,
    ),
    low: goal(
      rows.filter((r) => r.lowDecisions !== undefined),
      (r) => r.lowDecisions?.differ === 0,
      ({ lowDecisions: d }) =>
        `${d?.differ} of ${d?.of} differ (refused: the tier ${d?.refusedTier}, one call per request ${d?.refusedPlain})`,
    ),
    latency: goal(
      rows.filter((r) => r.loadPerS >= 5_000 && r.scenario === "steady"),
      (r) => r.latencyP50Ms <= DELEGATE_RTT_MS,
      (r) => `p50 ${r.latencyP50Ms} ms`,
    ),
  };
}
