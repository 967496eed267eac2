/**
 * Part: one hot key beyond one Durable Object, as a DISCRETE-EVENT SIMULATION (this machine cannot run 200 isolates
 * across regions). It runs the real code: the isolate's coalescer and leases (src/isolate/coalesce.ts), the object's
 * batch, lease and idempotency logic (store.ts `callRecord`) and the pure core, over simulated time (src/sim):
 *
 * - 200 isolates in 5 regions, round trips 5-150 ms to the object (one way = half), uneven load across isolates
 *   (isolate i gets a share proportional to 1/(i + 10), about 21x between the busiest and the quietest);
 * - one object serving 1 call per ms (at most ~1,000 calls/s) that rejects a call as `overloaded` when 100 calls are
 *   already waiting;
 * - one key at 10, 1k, 3k, 5k (the rate rule's limit), 10k and 50k req/s, Poisson arrivals, for 10 s (after 1 s of warm-up);
 * - two rules, each with `lease: { ttl: 1s, above: 10/s }`: token_bucket 5000/s burst 1000 and fixed_window 300000/min.
 *
 * Reported per load and rule: object calls/s, overloaded calls (and, apart, those of the cold start in the warm-up), admitted vs an exact single writer (the pure core
 * deciding every arrival at its arrival time), the largest over-admission (window: over `limit` in any window by
 * decision time; rate: over `burst + rate × t` and over the lease bound `burst + rate × (t + ttl)` for spans t of
 * 0.1, 1 and 5 s), and the latency the limiter adds (from arrival to answer) at p50 and p99. At 10 req/s the run is
 * repeated without coalescing or leases (one call per request) to check that nothing changes at low traffic.
 */
import { decide } from "../src/algorithms/index.ts";
import { mulberry32 } from "../src/cli/gen.ts";
import { type Asked, type CoalesceCounters, Coalescer } from "../src/isolate/coalesce.ts";
import { newStats } from "../src/isolate/metrics.ts";
import { compileRules } from "../src/request/match.ts";
import type { LeaseSettings, ResolvedRule } from "../src/rules/types.ts";
import { parseRules } from "../src/rules/yaml.ts";
import { EventClock } from "../src/sim/event_clock.ts";
import { SimObject } from "../src/sim/object.ts";
import { log, QUICK, round, writeResult } from "./common.ts";

const ISOLATES = 200;
const REGION_RTT_MS = [5, 30, 60, 100, 150];
const WARMUP_MS = 1_000;
const DURATION_MS = QUICK ? 3_000 : 10_000;
const LOADS = QUICK ? [10, 1_000, 10_000] : [10, 1_000, 3_000, 5_000, 10_000, 50_000];
/** 55 s into a minute: the fixed window turns over during each run, at the start of second 5. */
const T0 = Date.UTC(2030, 0, 1, 0, 0, 55);

const RULES = parseRules(
  `
- id: hot-rate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 5000/s
  burst: 1000
  lease: { ttl: 1s, above: 10/s }
- id: hot-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 300000
  window: min
  lease: { ttl: 1s, above: 10/s }
`,
  "bench/cluster.ts",
);
if (RULES.errors.length > 0) throw new Error(RULES.errors.join("\n"));
const COMPILED = compileRules(RULES.rules);

interface Admission {
  readonly atMs: number;
}

interface RunResult {
  readonly rule: string;
  readonly loadPerS: number;
  readonly mode: "coalesced+lease" | "one call per request";
  readonly requests: number;
  readonly objectCallsPerS: number;
  readonly overloaded: number;
  /** Overloaded calls in the warm-up second: the cold start, when 200 isolates first meet the key at once. */
  readonly overloadedInWarmup: number;
  readonly failed: number;
  readonly admitted: number;
  readonly exactAdmitted: number;
  readonly admittedVsExactPct: number;
  readonly leaseAnswersPct: number;
  readonly overWindow: number | null;
  readonly overRate: Record<string, number> | null;
  readonly overLeaseBound: Record<string, number> | null;
  readonly addedLatencyP50Ms: number;
  readonly addedLatencyP99Ms: number;
  readonly decisionsIdenticalToPlain?: boolean;
  readonly latencyIdenticalToPlain?: boolean;
  readonly plainLatencyP50Ms?: number;
  readonly plainLatencyP99Ms?: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function run(ruleId: string, loadPerS: number, plain: boolean) {
  const compiled = COMPILED.find((c) => c.rule.id === ruleId)!;
  const rule: ResolvedRule = compiled.rule;
  const lease: LeaseSettings | null = plain ? null : rule.lease;
  const clock = new EventClock(T0);
  const random = mulberry32(loadPerS * 7 + ruleId.length);
  const object = new SimObject(clock, { serviceMs: 1, maxBacklog: 100 });
  const weights = Array.from({ length: ISOLATES }, (_, i) => 1 / (i + 10));
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let acc = 0;
  for (const w of weights) {
    acc += w / total;
    cumulative.push(acc);
  }
  const isolates = Array.from({ length: ISOLATES }, (_, i) => {
    const base = REGION_RTT_MS[i % REGION_RTT_MS.length]!;
    const rttMs = Math.max(5, Math.min(150, base + Math.floor((random() - 0.5) * 10)));
    const counters: CoalesceCounters = newStats();
    let n = 0;
    const coalescer = new Coalescer({ clock: clock.clock, sleep: clock.sleep, counters, newId: () => `i${i}-${n++}` });
    return { coalescer, counters, transport: object.transportFrom(() => rttMs / 2), rttMs };
  });

  // Poisson arrivals over warm-up + duration, each to an isolate by weight.
  const arrivals: { atMs: number; isolate: number }[] = [];
  let t = T0;
  const end = T0 + WARMUP_MS + DURATION_MS;
  for (;;) {
    t += -Math.log(1 - random()) * (1000 / loadPerS);
    if (t >= end) break;
    const u = random();
    let lo = 0;
    let hi = ISOLATES - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    arrivals.push({ atMs: Math.floor(t), isolate: lo });
  }

  const measuredFrom = T0 + WARMUP_MS;
  const admissions: Admission[] = [];
  const latencies: number[] = [];
  const verdicts: string[] = [];
  let failed = 0;
  let fromLease = 0;
  let requests = 0;
  let plainKeys = 0;
  const pending: Promise<void>[] = [];
  let callsAtStart = 0;
  let overloadedAtStart = 0;
  for (const a of arrivals) {
    if (a.atMs >= measuredFrom && callsAtStart === 0) {
      await clock.runUntil(measuredFrom - 1);
      callsAtStart = object.counters.calls;
      overloadedAtStart = object.counters.overloaded;
    }
    await clock.runUntil(a.atMs);
    const iso = isolates[a.isolate]!;
    const measured = a.atMs >= measuredFrom;
    const asked: Promise<Asked> = plain
      ? (async () => {
          // One call per request, no coalescing: a fresh coalescer key per request.
          return iso.coalescer.ask({
            transport: iso.transport,
            name: `plain-${plainKeys++}`,
            rule: { id: rule.id, params: compiled.params },
            cost: 1,
            timeoutMs: 250,
            lease: null,
          });
        })()
      : iso.coalescer.ask({
          transport: iso.transport,
          name: `${rule.id}:hot`,
          rule: { id: rule.id, params: compiled.params },
          cost: 1,
          timeoutMs: 250,
          lease,
        });
    if (measured) requests++;
    pending.push(
      asked.then((answer) => {
        if (!measured) return;
        const now = clock.nowMs();
        latencies.push(now - a.atMs);
        if (answer.kind === "failed") {
          failed++;
          admissions.push({ atMs: now }); // on_error: open
          verdicts.push("f");
          return;
        }
        if (answer.source === "lease") fromLease++;
        const r = answer.result;
        const allowed = r.ok && r.decision.allowed;
        verdicts.push(allowed ? "1" : "0");
        if (allowed) admissions.push({ atMs: answer.source === "lease" ? now : r.atMs });
      }),
    );
  }
  await clock.runUntil(end + 5_000);
  await Promise.all(pending);
  const calls = object.counters.calls - callsAtStart;
  const overloaded = object.counters.overloaded - overloadedAtStart;

  // The exact single writer: the pure core on the same arrivals, each decided at its arrival time.
  let state = null as Parameters<typeof decide>[1];
  let exactAdmitted = 0;
  for (const a of arrivals) {
    const out = decide(compiled.params, state, 1, a.atMs);
    if (!out.ok) continue;
    state = out.state;
    if (a.atMs >= measuredFrom && out.decision.allowed) exactAdmitted++;
  }

  const times = admissions.map((x) => x.atMs).sort((x, y) => x - y);
  let overWindow: number | null = null;
  let overRate: Record<string, number> | null = null;
  let overLeaseBound: Record<string, number> | null = null;
  const params = compiled.params;
  if (params.algorithm === "fixed_window") {
    const perWindow = new Map<number, number>();
    for (const at of times) perWindow.set(Math.floor(at / 60_000), (perWindow.get(Math.floor(at / 60_000)) ?? 0) + 1);
    overWindow = Math.max(0, ...[...perWindow.values()].map((c) => c - params.limit));
  } else if (params.algorithm === "token_bucket") {
    overRate = {};
    overLeaseBound = {};
    const ratePerMs = params.rate.tokens / params.rate.perMs;
    const ttl = rule.lease?.ttlMs ?? 0;
    for (const spanMs of [100, 1_000, 5_000]) {
      let worst = Number.NEGATIVE_INFINITY;
      let j = 0;
      for (let i = 0; i < times.length; i++) {
        while (times[i]! - times[j]! >= spanMs) j++;
        worst = Math.max(worst, i - j + 1 - (params.burst + ratePerMs * spanMs));
      }
      overRate[`${spanMs / 1000}s`] = Math.max(0, Math.ceil(worst));
      overLeaseBound[`${spanMs / 1000}s`] = Math.max(0, Math.ceil(worst - ratePerMs * ttl));
    }
  }
  latencies.sort((x, y) => x - y);
  const result: RunResult = {
    rule: rule.id,
    loadPerS,
    mode: plain ? "one call per request" : "coalesced+lease",
    requests,
    objectCallsPerS: round(calls / (DURATION_MS / 1000), 1),
    overloaded,
    overloadedInWarmup: overloadedAtStart,
    failed,
    admitted: admissions.length,
    exactAdmitted,
    admittedVsExactPct: round((100 * (admissions.length - exactAdmitted)) / Math.max(1, exactAdmitted), 2),
    leaseAnswersPct: round((100 * fromLease) / Math.max(1, requests), 1),
    overWindow,
    overRate,
    overLeaseBound,
    addedLatencyP50Ms: percentile(latencies, 50),
    addedLatencyP99Ms: percentile(latencies, 99),
  };
  return { result, verdicts, latencies };
}

const rows: RunResult[] = [];
for (const loadPerS of LOADS) {
  for (const ruleId of ["hot-rate", "hot-window"]) {
    const started = Date.now();
    const { result, verdicts, latencies } = await run(ruleId, loadPerS, false);
    if (loadPerS <= 10) {
      const plain = await run(ruleId, loadPerS, true);
      rows.push({
        ...result,
        decisionsIdenticalToPlain: verdicts.join("") === plain.verdicts.join(""),
        latencyIdenticalToPlain: latencies.join(",") === plain.latencies.join(","),
        plainLatencyP50Ms: percentile(plain.latencies, 50),
        plainLatencyP99Ms: percentile(plain.latencies, 99),
      });
    } else rows.push(result);
    log(`cluster: ${ruleId} at ${loadPerS}/s in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

const at10k = rows.filter((r) => r.loadPerS === 10_000);
const low = rows.filter((r) => r.loadPerS === 10);
const goals = {
  "object calls <= 500/s at 10k req/s": at10k.map((r) => `${r.rule}: ${r.objectCallsPerS}/s`).join(", "),
  callsMet: at10k.every((r) => r.objectCallsPerS <= 500),
  "none overloaded at 10k req/s": at10k.map((r) => `${r.rule}: ${r.overloaded}`).join(", "),
  overloadMet: at10k.every((r) => r.overloaded === 0),
  "overloaded in the warm-up (cold start), all loads": rows
    .map((r) => `${r.rule}@${r.loadPerS}/s: ${r.overloadedInWarmup}`)
    .join(", "),
  "object calls/s at every load (bounded whatever the load)": rows
    .map((r) => `${r.rule}@${r.loadPerS}/s: ${r.objectCallsPerS}`)
    .join(", "),
  boundedMet: rows.every((r) => r.objectCallsPerS <= 1000 && r.overloaded === 0),
  "admitted within 1% of the exact single writer at 10k req/s": at10k
    .map((r) => `${r.rule}: ${r.admittedVsExactPct}%`)
    .join(", "),
  accuracyMet: at10k.every((r) => Math.abs(r.admittedVsExactPct) <= 1),
  "0 over-admission for window rules (all loads)": rows
    .filter((r) => r.overWindow !== null)
    .map((r) => `${r.loadPerS}/s: ${r.overWindow}`)
    .join(", "),
  windowMet: rows.every((r) => r.overWindow === null || r.overWindow === 0),
  "rate rules within burst + rate x (t + ttl) (all loads)": rows
    .filter((r) => r.overLeaseBound !== null)
    .map((r) => `${r.loadPerS}/s: ${Math.max(...Object.values(r.overLeaseBound!))}`)
    .join(", "),
  rateMet: rows.every((r) => r.overLeaseBound === null || Object.values(r.overLeaseBound).every((v) => v === 0)),
  "no change at <= 10 req/s per key": low
    .map(
      (r) =>
        `${r.rule}: decisions ${r.decisionsIdenticalToPlain ? "identical" : "differ"}; latency p50/p99 ${r.addedLatencyP50Ms}/${r.addedLatencyP99Ms} ms vs ${r.plainLatencyP50Ms}/${r.plainLatencyP99Ms} ms with one call per request${r.latencyIdenticalToPlain ? " (identical)" : ""}`,
    )
    .join("; "),
  lowMet: low.every(
    (r) =>
      r.decisionsIdenticalToPlain === true &&
      r.addedLatencyP50Ms === r.plainLatencyP50Ms &&
      r.addedLatencyP99Ms === r.plainLatencyP99Ms,
  ),
};
const command = `npm run bench -- --only cluster${QUICK ? " --quick" : ""}`;
log(`cluster: wrote ${writeResult("cluster", command, { isolates: ISOLATES, durationMs: DURATION_MS, rows, goals })}`);
