/**
 * Part 3: edge overhead through a real `wrangler dev` (--log-level warn): passthrough (no rule matches), one global
 * rule (all 50 connections on one key: a hot key, coalesced), one local rule, and one blocked key flooding. Requests/s, p50 and p99 from autocannon, each as a ratio to
 * passthrough; object calls per request from the admin counters (`GET /_sluice/stats`), or "n/a" while there is none.
 *
 * The working tree is never touched: each scenario runs in a temp copy of the project with its rules compiled in
 * (bench/wrangler_dev.ts), on a free 127.0.0.1 port, killed as a process group when the scenario ends.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { log, median, QUICK, round, writeResult } from "./common.ts";
import { dropBuildStep, freePort, groupCpuMs, killGroup, projectCopy, startWrangler, waitUp } from "./wrangler_dev.ts";

const ADMIN_TOKEN = "bench-admin-token";
const DURATION_S = QUICK ? 3 : 10;
const CONNECTIONS = 50;
const RUNS = QUICK ? 1 : 3;

const SCENARIOS = {
  passthrough: `- id: never-matches\n  match: { route: "GET /never/matches", identity: ip }\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n`,
  "one global rule": `- id: bench-global\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n`,
  "one local rule": `- id: bench-local\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n  scope: local\n`,
  "blocked key flooding": `- id: bench-blocked\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1/min\n  burst: 1\n`,
} as const;
type Scenario = keyof typeof SCENARIOS;

async function stats(base: string): Promise<Record<string, unknown> | null> {
  const response = await fetch(`${base}/_sluice/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!response.ok) return null;
  try {
    return (await response.json()) as Record<string, unknown>;
  } catch {
    return null; // not the admin API (yet): the echo origin answered
  }
}

/** Object calls so far, from whatever counter the admin API names for them; null when it is not there. */
function objectCalls(s: Record<string, unknown> | null): number | null {
  if (s === null) return null;
  for (const name of ["objectCalls", "object_calls", "durableObjectCalls", "do_calls"]) {
    const v = s[name];
    if (typeof v === "number") return v;
  }
  return null;
}

interface Figures {
  readonly requestsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly objectCallsPerRequest: number | null;
  /** CPU of wrangler dev's process group (workerd, node, esbuild) per request of the measured run, ms. */
  readonly serverCpuMsPerRequest: number;
}

async function runScenario(scenario: Scenario): Promise<Figures> {
  const dir = projectCopy("sluice-bench-edge-", { "bench.yaml": SCENARIOS[scenario] });
  dropBuildStep(dir); // compiled already: no rebuild and reload by wrangler dev in the middle of a measurement
  const port = await freePort();
  const child = startWrangler(dir, port, [
    "--log-level",
    "warn",
    "--persist-to",
    join(dir, ".state"),
    "--var",
    `ADMIN_TOKEN:${ADMIN_TOKEN}`,
  ]);
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitUp(`${base}/v1/ping`, child, 60_000);
    const headers = { "cf-connecting-ip": "203.0.113.7" };
    await autocannon({ url: `${base}/v1/ping`, connections: 10, duration: 1, headers }); // warm-up
    const before = objectCalls(await stats(base));
    const cpuBeforeMs = groupCpuMs(child.pid!);
    const result = await autocannon({
      url: `${base}/v1/ping`,
      connections: CONNECTIONS,
      duration: DURATION_S,
      headers,
    });
    const cpuMs = groupCpuMs(child.pid!) - cpuBeforeMs;
    const after = objectCalls(await stats(base));
    return {
      requestsPerS: result.requests.average,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      non2xx: result.non2xx,
      serverCpuMsPerRequest: cpuMs / Math.max(1, result.requests.total),
      objectCallsPerRequest:
        before === null || after === null || result.requests.total === 0
          ? null
          : (after - before) / result.requests.total,
    };
  } finally {
    if (child.pid !== undefined) await killGroup(child.pid, child);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const runs = new Map<Scenario, Figures[]>();
  for (let r = 0; r < RUNS; r++) {
    for (const scenario of Object.keys(SCENARIOS) as Scenario[]) {
      const figures = await runScenario(scenario);
      runs.set(scenario, [...(runs.get(scenario) ?? []), figures]);
      log(
        `edge ${scenario}: ${Math.round(figures.requestsPerS)} req/s, p50 ${figures.p50Ms} ms, p99 ${figures.p99Ms} ms, server CPU ${figures.serverCpuMsPerRequest.toFixed(3)} ms/request, ${figures.objectCallsPerRequest?.toFixed(4)} calls/request`,
      );
    }
  }
  const med = (s: Scenario, f: (x: Figures) => number) => median((runs.get(s) ?? []).map(f));
  const pass = { rps: med("passthrough", (x) => x.requestsPerS), p50: med("passthrough", (x) => x.p50Ms) };
  const p99Pass = med("passthrough", (x) => x.p99Ms);
  const cpuPass = med("passthrough", (x) => x.serverCpuMsPerRequest);
  const rows = (Object.keys(SCENARIOS) as Scenario[]).map((scenario) => {
    const calls = (runs.get(scenario) ?? []).map((x) => x.objectCallsPerRequest);
    const rps = med(scenario, (x) => x.requestsPerS);
    const p50 = med(scenario, (x) => x.p50Ms);
    const p99 = med(scenario, (x) => x.p99Ms);
    const cpu = med(scenario, (x) => x.serverCpuMsPerRequest);
    return {
      scenario,
      requestsPerS: Math.round(rps),
      p50Ms: p50,
      p99Ms: p99,
      throughputRatio: round(rps / pass.rps, 2),
      p50Ratio: round(p50 / Math.max(pass.p50, 1e-9), 2),
      p99Ratio: round(p99 / Math.max(p99Pass, 1e-9), 2),
      non2xx: med(scenario, (x) => x.non2xx),
      serverCpuMsPerRequest: round(cpu, 3),
      // What a server limited by its CPU would keep of passthrough's throughput: passthrough's CPU per request / this.
      cpuThroughputRatio: round(cpuPass / cpu, 2),
      objectCallsPerRequest: calls.every((c) => c !== null) ? round(median(calls as number[]), 4) : "n/a",
    };
  });
  writeResult("edge", `node --import tsx bench/edge.ts${QUICK ? " --quick" : ""}`, {
    connections: CONNECTIONS,
    durationS: DURATION_S,
    runs: RUNS,
    rows,
  });
}

await main();
