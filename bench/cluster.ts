/**
 * Part: one hot key beyond one Durable Object, as a DISCRETE-EVENT SIMULATION (this machine cannot run thousands of
 * isolates across regions). It runs the real code: the isolate's coalescer, leases and last-known decisions
 * (src/isolate/coalesce.ts), the object's batch, lease, version and idempotency logic (src/protocol/store.ts
 * `callRecord`) and the pure core, over simulated time (src/sim):
 *
 * - 200, 1,000 and 5,000 isolates in 9 regions, round trips 5-150 ms by region, each one-way delay jittered per call
 *   (±25%), uneven load across isolates (isolate i gets a share proportional to 1/(i + 10));
 * - one object: 1 ms per call plus 0.007 ms per KB of the call and of the record it stores (so a large record costs
 *   on every call), `overloaded` when 100 calls already wait (Cloudflare's soft limit is about 1,000 calls/s);
 * - two rules as the shipped global rules are, WITHOUT `lease:` (hot-key handling is automatic while the object is
 *   busy), sized so that the load crosses them: token_bucket 5000/s burst 1000, and fixed_window 50000 per 10 s
 *   (5000/s); runs start 5 s into a window, so every run crosses a window's end;
 * - loads of 10, 1k, 5k (the limit), 10k (2x) and 50k (10x) req/s on one key, Poisson arrivals; every figure counts
 *   the whole run from the first request (the cold start included), and the first second is also reported apart;
 * - scenarios at 1,000 isolates and 2x the limit: a redeploy (every isolate restarts, rules version bumps), an override
 *   change mid-term (limit 0.9x, version bump, reaching isolates over 1 s), two rule versions serving 50/50 for the
 *   whole run, isolate churn (a tenth replaced every second), the key's object restarting (100 ms of resets), half the
 *   admissions refunded by another rule, and ±500 ms clock skew.
 *
 * Reported per run: object calls/s (whole run; the busiest second; the first second), overloaded calls (and those
 * after the first second), requests a failing call left to `on_error: open` (admitted uncounted) split by cause,
 * admitted vs an exact single writer (the pure core deciding every arrival at its arrival time under the newest rule
 * version), over-admission (window: beyond the limit in any window; rate: beyond burst + rate x (t + ttl + 2 ttl for a
 * reused share) over spans of 0.1, 1 and 5 s), and the latency the limiter adds (arrival to answer) at p50 and p99.
 */

import type { AlgorithmState } from "../src/algorithms/index.ts";
import { carryOver, decide } from "../src/algorithms/index.ts";
import { mulberry32 } from "../src/cli/gen.ts";
import { type Asked, type CoalesceCounters, Coalescer } from "../src/isolate/coalesce.ts";
import { newStats } from "../src/isolate/metrics.ts";
import type { LimiterRule } from "../src/protocol/store.ts";
import { compileRules } from "../src/request/match.ts";
import { parseRules } from "../src/rules/yaml.ts";
import { EventClock } from "../src/sim/event_clock.ts";
import { SimObject } from "../src/sim/object.ts";
import { log, QUICK, round, writeResult } from "./common.ts";

const REGION_RTT_MS = [5, 20, 35, 50, 70, 90, 110, 130, 150];
const DURATION_MS = QUICK ? 4_000 : 8_000;
const SIZES = QUICK ? [200, 1_000] : [200, 1_000, 5_000];
const LOADS = QUICK ? [10, 5_000, 10_000] : [10, 1_000, 5_000, 10_000, 50_000];
const TIMEOUT_MS = 250;
/** 5 s into a 10 s window: the window rule turns over during each run. */
const T0 = Date.UTC(2030, 0, 1, 0, 0, 5);
const AUTO_TTL_MS = 1_000;

const RULES = parseRules(
  `
- id: hot-rate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 5000/s
  burst: 1000
- id: hot-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 50000
  window: 10s
`,
  "bench/cluster.ts",
);
if (RULES.errors.length > 0) throw new Error(RULES.errors.join("\n"));
const COMPILED = compileRules(RULES.rules);
/** The same rules at 0.9x (an override change, a second rule version). */
const LOWERED = parseRules(
  `
- id: hot-rate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 4500/s
  burst: 900
- id: hot-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 45000
  window: 10s
`,
  "bench/cluster.ts",
);
const COMPILED_LOWERED = compileRules(LOWERED.rules);

type Scenario =
  | "steady"
  | "redeploy"
  | "override change"
  | "two versions 50/50"
  | "churn"
  | "object restart"
  | "half refunded"
  | "clock skew";

interface Row {
  readonly rule: string;
  readonly scenario: Scenario;
  readonly isolates: number;
  readonly loadPerS: number;
  readonly requests: number;
  readonly objectCallsPerS: number;
  readonly busiestSecondCalls: number;
  readonly firstSecondCalls: number;
  readonly overloaded: number;
  readonly overloadedAfterFirstSecond: number;
  /** Requests a failing call left to `on_error` (admitted uncounted: `open`, the default), by failure. */
  readonly failedOpen: Record<string, number>;
  readonly failedOpenBusy: number;
  readonly lastKnown: number;
  readonly admitted: number;
  readonly exactAdmitted: number;
  readonly admittedVsExactPct: number;
  readonly fromLeasePct: number;
  readonly overWindow: number | null;
  readonly overRateBound: number | null;
  readonly addedLatencyP50Ms: number;
  readonly addedLatencyP99Ms: number;
  readonly objectKbPerCall: number;
  readonly decisionsIdenticalToPlain?: boolean;
  readonly runSeconds: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function run(ruleId: string, isolateCount: number, loadPerS: number, scenario: Scenario, plain = false) {
  const started = Date.now();
  const compiled = COMPILED.find((c) => c.rule.id === ruleId)!;
  const base: LimiterRule = { id: ruleId, params: compiled.params, version: 1 };
  const lowered: LimiterRule = {
    id: ruleId,
    params: COMPILED_LOWERED.find((c) => c.rule.id === ruleId)!.params,
    version: 2,
  };
  const clock = new EventClock(T0);
  const random = mulberry32(loadPerS * 7 + ruleId.length + isolateCount + scenario.length * 31);
  const object = new SimObject(clock, { serviceMs: 1, maxBacklog: 100, perKbMs: 0.007 });
  const weights = Array.from({ length: isolateCount }, (_, i) => 1 / (i + 10));
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let acc = 0;
  for (const w of weights) {
    acc += w / total;
    cumulative.push(acc);
  }
  let ids = 0;
  const makeIsolate = (i: number) => {
    const rttMs = REGION_RTT_MS[i % REGION_RTT_MS.length]!;
    const skewMs = scenario === "clock skew" ? Math.floor((random() - 0.5) * 1000) : 0;
    const counters: CoalesceCounters = newStats();
    const coalescer = new Coalescer({
      clock: () => clock.nowMs() + skewMs,
      sleep: clock.sleep,
      counters,
      newId: () => `c${ids++}`,
    });
    const oneWay = () => Math.max(1, Math.round((rttMs / 2) * (0.75 + 0.5 * random())));
    // Half the isolates on the lowered rule for the whole run; or all of them switching over [4 s, 5 s).
    const switchAtMs =
      scenario === "two versions 50/50"
        ? i % 2 === 0
          ? T0
          : Number.POSITIVE_INFINITY
        : scenario === "override change"
          ? T0 + DURATION_MS / 2 + Math.floor(random() * 1000)
          : Number.POSITIVE_INFINITY;
    return { coalescer, counters, transport: object.transportFrom(oneWay), switchAtMs };
  };
  let isolates = Array.from({ length: isolateCount }, (_, i) => makeIsolate(i));
  const counted: CoalesceCounters[] = isolates.map((x) => x.counters);

  const arrivals: { atMs: number; isolate: number }[] = [];
  let t = T0;
  const end = T0 + DURATION_MS;
  for (;;) {
    t += -Math.log(1 - random()) * (1000 / loadPerS);
    if (t >= end) break;
    const u = random();
    let lo = 0;
    let hi = isolateCount - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    arrivals.push({ atMs: Math.floor(t), isolate: lo });
  }

  let overloadedInFirstSecond = 0;
  clock.after(1000, () => {
    overloadedInFirstSecond = object.counters.overloaded;
  });
  // Scenario events.
  const midMs = T0 + DURATION_MS / 2;
  if (scenario === "redeploy") {
    clock.after(midMs - T0, () => {
      isolates = isolates.map((_, i) => makeIsolate(i));
      counted.push(...isolates.map((x) => x.counters));
    });
  }
  if (scenario === "churn") {
    for (let s = 1; s * 1000 < DURATION_MS; s++) {
      clock.after(s * 1000, () => {
        for (let i = 0; i < isolateCount; i++) {
          if (random() < 0.1) {
            isolates[i] = makeIsolate(i);
            counted.push(isolates[i]!.counters);
          }
        }
      });
    }
  }
  if (scenario === "object restart") clock.after(midMs - T0, () => object.restart(100));
  const versionAt = (iso: { switchAtMs: number }, atMs: number) =>
    scenario === "redeploy" && atMs >= midMs ? { ...base, version: 2 } : atMs >= iso.switchAtMs ? lowered : base;

  const admissions: number[] = [];
  const latencies: number[] = [];
  const verdicts: string[] = [];
  const failedOpen: Record<string, number> = {};
  let fromLease = 0;
  let refundNext = false;
  const pending: Promise<void>[] = [];
  const newestFrom = Math.min(...isolates.map((x) => x.switchAtMs));
  for (const a of arrivals) {
    await clock.runUntil(a.atMs);
    const iso = isolates[a.isolate]!;
    const rule = versionAt(iso, a.atMs);
    const asked: Promise<Asked> = iso.coalescer.ask({
      transport: iso.transport,
      name: plain ? `plain-${ids++}` : `${ruleId}:hot`,
      rule,
      cost: 1,
      timeoutMs: TIMEOUT_MS,
      lease: null,
    });
    pending.push(
      asked.then((answer) => {
        const now = clock.nowMs();
        latencies.push(now - a.atMs);
        if (answer.kind === "failed") {
          failedOpen[answer.failure] = (failedOpen[answer.failure] ?? 0) + 1;
          admissions.push(now); // on_error: open
          verdicts.push("f");
          return;
        }
        if (answer.source === "lease") fromLease++;
        const r = answer.result;
        const allowed = r.ok && r.decision.allowed;
        verdicts.push(allowed ? "1" : "0");
        if (!allowed) return;
        if (scenario === "half refunded") {
          refundNext = !refundNext;
          if (refundNext) {
            void answer.refund();
            return;
          }
        }
        admissions.push(answer.source === "lease" ? now : r.atMs);
      }),
    );
  }
  await clock.runUntil(end + 5_000);
  await Promise.all(pending);

  // The exact single writer: the pure core on the same arrivals, each decided at its arrival time, under the newest
  // rule version in effect (the lowered rule from the first isolate that switched; a refunded admission given back).
  let state: AlgorithmState | null = null;
  let exactAdmitted = 0;
  let params = base.params;
  let refundExact = false;
  for (const a of arrivals) {
    const newest = a.atMs >= newestFrom ? lowered.params : base.params;
    if (newest !== params) {
      state = state === null ? null : carryOver(params, newest, state, a.atMs);
      params = newest;
    }
    const out = decide(params, state, 1, a.atMs);
    if (!out.ok) continue;
    if (out.decision.allowed && scenario === "half refunded") {
      refundExact = !refundExact;
      if (refundExact) continue; // given back: as if never charged
    }
    state = out.state;
    if (out.decision.allowed) exactAdmitted++;
  }

  const times = admissions.sort((x, y) => x - y);
  let overWindow: number | null = null;
  let overRateBound: number | null = null;
  if (params.algorithm === "fixed_window" || base.params.algorithm === "fixed_window") {
    const limitOf = (at: number) => ((at >= newestFrom ? lowered.params : base.params) as { limit: number }).limit;
    const perWindow = new Map<number, { n: number; limit: number }>();
    for (const at of times) {
      const w = Math.floor(at / 10_000);
      const e = perWindow.get(w) ?? { n: 0, limit: limitOf(at) };
      e.n++;
      e.limit = Math.max(e.limit, limitOf(at)); // a window that straddles the change: the larger limit
      perWindow.set(w, e);
    }
    overWindow = Math.max(0, ...[...perWindow.values()].map((e) => e.n - e.limit));
  } else if (base.params.algorithm === "token_bucket") {
    const p = base.params;
    const ratePerMs = p.rate.tokens / p.rate.perMs;
    // The lease bound with the automatic ttl, plus one reused share per isolate (at most burst + rate x 2 ttl).
    let worst = 0;
    for (const spanMs of [100, 1_000, 5_000]) {
      const bound = p.burst + ratePerMs * (spanMs + AUTO_TTL_MS);
      let j = 0;
      for (let i = 0; i < times.length; i++) {
        while (times[i]! - times[j]! >= spanMs) j++;
        worst = Math.max(worst, i - j + 1 - bound);
      }
    }
    overRateBound = Math.max(0, Math.ceil(worst));
  }
  latencies.sort((x, y) => x - y);
  const seconds = new Map<number, number>();
  for (const at of object.appliedAtMs)
    seconds.set(Math.floor((at - T0) / 1000), (seconds.get(Math.floor((at - T0) / 1000)) ?? 0) + 1);
  const lastKnown = counted.reduce((n, c) => n + (c.last_known_answers ?? 0), 0);
  const row: Row = {
    rule: ruleId,
    scenario,
    isolates: isolateCount,
    loadPerS,
    requests: arrivals.length,
    objectCallsPerS: round(object.counters.calls / (DURATION_MS / 1000), 1),
    busiestSecondCalls: Math.max(0, ...seconds.values()),
    firstSecondCalls: seconds.get(0) ?? 0,
    overloaded: object.counters.overloaded,
    overloadedAfterFirstSecond: object.counters.overloaded - overloadedInFirstSecond,
    failedOpen,
    failedOpenBusy: failedOpen.overloaded ?? 0,
    lastKnown,
    admitted: admissions.length,
    exactAdmitted,
    admittedVsExactPct: round((100 * (admissions.length - exactAdmitted)) / Math.max(1, exactAdmitted), 2),
    fromLeasePct: round((100 * fromLease) / Math.max(1, arrivals.length), 1),
    overWindow,
    overRateBound,
    addedLatencyP50Ms: round(percentile(latencies, 50), 1),
    addedLatencyP99Ms: round(percentile(latencies, 99), 1),
    objectKbPerCall: round(object.counters.bytes / 1024 / Math.max(1, object.counters.calls), 2),
    runSeconds: round((Date.now() - started) / 1000, 1),
  };
  return { row, verdicts };
}

const rows: Row[] = [];
for (const isolateCount of SIZES) {
  for (const loadPerS of LOADS) {
    for (const ruleId of ["hot-rate", "hot-window"]) {
      const { row, verdicts } = await run(ruleId, isolateCount, loadPerS, "steady");
      if (loadPerS <= 10) {
        const plain = await run(ruleId, isolateCount, loadPerS, "steady", true);
        rows.push({ ...row, decisionsIdenticalToPlain: verdicts.join("") === plain.verdicts.join("") });
      } else rows.push(row);
      log(`cluster: ${ruleId} ${isolateCount} isolates at ${loadPerS}/s in ${row.runSeconds} s`);
    }
  }
}
const SCENARIOS: Scenario[] = [
  "redeploy",
  "override change",
  "two versions 50/50",
  "churn",
  "object restart",
  "half refunded",
  "clock skew",
];
for (const scenario of SCENARIOS) {
  for (const ruleId of ["hot-rate", "hot-window"]) {
    const { row } = await run(ruleId, 1_000, 10_000, scenario);
    rows.push(row);
    log(`cluster: ${ruleId} ${scenario} in ${row.runSeconds} s`);
  }
}

const steady = rows.filter((r) => r.scenario === "steady");
const list = (rs: readonly Row[], f: (r: Row) => unknown) =>
  rs
    .map((r) => `${r.rule}/${r.isolates}/${r.loadPerS}/s${r.scenario === "steady" ? "" : ` ${r.scenario}`}: ${f(r)}`)
    .join(", ");
const goals = {
  objectCalls: { met: rows.every((r) => r.busiestSecondCalls <= 100), detail: list(rows, (r) => r.busiestSecondCalls) },
  overloaded: {
    met: rows.every((r) => r.overloadedAfterFirstSecond === 0),
    detail: list(rows, (r) => r.overloadedAfterFirstSecond),
  },
  failOpenBusy: { met: rows.every((r) => r.failedOpenBusy === 0), detail: list(rows, (r) => r.failedOpenBusy) },
  window: {
    met: rows.every((r) => r.overWindow === null || r.overWindow === 0),
    detail: list(
      rows.filter((r) => r.overWindow !== null),
      (r) => r.overWindow,
    ),
  },
  rateBound: {
    met: rows.every((r) => r.overRateBound === null || r.overRateBound === 0),
    detail: list(
      rows.filter((r) => r.overRateBound !== null),
      (r) => r.overRateBound,
    ),
  },
  rateAccuracy: {
    met: steady
      .filter((r) => r.rule === "hot-rate" && r.loadPerS >= 5_000)
      .every((r) => Math.abs(r.admittedVsExactPct) <= (r.loadPerS >= 10_000 ? 1 : 3)),
    detail: list(
      steady.filter((r) => r.rule === "hot-rate" && r.loadPerS >= 5_000),
      (r) => `${r.admittedVsExactPct}%`,
    ),
  },
  low: {
    met: steady.filter((r) => r.loadPerS <= 10).every((r) => r.decisionsIdenticalToPlain === true),
    detail: list(
      steady.filter((r) => r.loadPerS <= 10),
      (r) => (r.decisionsIdenticalToPlain ? "identical" : "differ"),
    ),
  },
};
const command = `npm run bench -- --only cluster${QUICK ? " --quick" : ""}`;
log(`cluster: wrote ${writeResult("cluster", command, { sizes: SIZES, durationMs: DURATION_MS, rows, goals })}`);
