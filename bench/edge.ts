/**
 * Part 3: what Sluice costs a forwarded request, against a bare forwarding Worker, through real `wrangler dev`s
 * (--log-level warn, each on a free port with its own free inspector port) in front of one real local origin (a Node
 * HTTP server in this process, counting what reaches it). Scenarios: the **bare** Worker (`fetch(origin + path)`,
 * nothing else), and Sluice with `UPSTREAM_URL` set to the same origin: no matching rule, one global rule (one client
 * IP: one hot key), one local rule, one blocked key flooding, and the rules that ask the key's object on every request
 * (count_when with every response counted, block_for, concurrency: take and release), each also against the plain
 * global rule. `--scenarios a,b` runs only those (and the bare Worker). The headline is the server's CPU per request: user +
 * system time of the wrangler dev process group (workerd, node, esbuild) over the measured run, divided by the
 * requests answered, and its difference from the bare Worker's, in ms; throughput and latency from autocannon are
 * shown beside it but move with whatever else the machine runs. Scenarios are interleaved round by round; medians.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { dirname, join } from "node:path";
import autocannon from "autocannon";
import { bareWorkerCopy } from "./bare_worker.ts";
import { log, median, QUICK, ROOT, round, writeResult } from "./common.ts";
import { bundleOf, type ProfileSummary, summarize } from "./edge_profile.ts";
import {
  dropBuildStep,
  freePort,
  groupCpuMs,
  killGroup,
  profileIsolate,
  projectCopy,
  startWrangler,
  waitUp,
  workerdCpuMs,
} from "./wrangler_dev.ts";

const ADMIN_TOKEN = "bench-admin-token";
const DURATION_S = QUICK ? 3 : 10;
/** Few connections: the figure is CPU per request, which a saturated server does not change, and the machine is shared. */
const CONNECTIONS = 10;
const RUNS = QUICK ? 1 : 3;
/**
 * Seconds of the group's CPU measured with no request in flight, before and after each measured run: an idle `wrangler dev`
 * burns 80-115 ms of CPU a second (its own timers and watchers), which a per-request figure would otherwise charge
 * to each request in inverse proportion to the scenario's throughput (a slower scenario's requests carrying more).
 */
const IDLE_S = QUICK ? 2 : 3;
/**
 * One more run of the bare Worker and the goals' scenarios (`--profile`: of every scenario) with the Worker isolate
 * sampled through the inspector, not counted in the figures: where its time goes, by part (the object's, the
 * isolate's) and source file (edge_profile.ts), goes into the results; the whole profile to
 * bench/out/edge-<scenario>.cpuprofile.
 */
const PROFILE = process.argv.includes("--profile");
/** Goals of issue 38, ms of server CPU per request over the bare Worker's. */
const GOALS_MS: Record<string, number> = { "no matching rule": 0.1, "one global rule": 0.3 };

const BARE = "bare forwarding Worker";
const SCENARIOS: Record<string, string | null> = {
  [BARE]: null,
  "no matching rule": `- id: never-matches\n  match: { route: "GET /never/matches", identity: ip }\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n`,
  "one global rule": `- id: bench-global\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n`,
  "one local rule": `- id: bench-local\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n  scope: local\n`,
  "blocked key flooding": `- id: bench-blocked\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1/min\n  burst: 1\n`,
  // Issue 34's rules, never refusing here: what each costs a request over the plain global rule above.
  "count_when rule": `- id: bench-count-when\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n  count_when: { status: 2xx }\n`,
  "block_for rule": `- id: bench-block-for\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n  block_for: 1min\n`,
  "concurrency rule": `- id: bench-concurrency\n  match: { identity: ip }\n  algorithm: concurrency\n  limit: 10000\n`,
};
const PLAIN = "one global rule";
/** `--scenarios a,b`: only these, with the bare Worker (and the plain rule, which the last three are compared with). */
const ONLY = process.argv
  .find((a) => a.startsWith("--scenarios="))
  ?.slice("--scenarios=".length)
  .split(",");
const CHOSEN = Object.keys(SCENARIOS).filter(
  (s) => ONLY === undefined || s === BARE || s === PLAIN || ONLY.includes(s),
);
type Scenario = keyof typeof SCENARIOS;

/** The bare Worker: forwards the request's path and query to the origin, nothing else. */
const BARE_WORKER = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    return fetch(env.ORIGIN + url.pathname + url.search, { method: request.method, headers: request.headers });
  },
};
`;
const bareToml = (origin: string) =>
  `name = "bare-forward"\nmain = "index.js"\ncompatibility_date = "2026-04-20"\n[vars]\nORIGIN = "${origin}"\n`;

/** The origin: answers every request with a small JSON body, and counts them. */
function startOrigin(): Promise<{ server: Server; base: string; hits: () => number }> {
  let hits = 0;
  const server = createServer((request, response) => {
    hits++;
    request.resume();
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end('{"ok":true}');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      resolve({ server, base: `http://127.0.0.1:${port}`, hits: () => hits });
    }),
  );
}

async function stats(base: string): Promise<Record<string, unknown> | null> {
  const response = await fetch(`${base}/_sluice/stats`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) return null;
  try {
    return (await response.json()) as Record<string, unknown>;
  } catch {
    return null; // not the admin API: the origin answered
  }
}

/** Object calls so far, from the admin counters; null when there are none (the bare Worker). */
function objectCalls(s: Record<string, unknown> | null): number | null {
  const v = s?.object_calls;
  return typeof v === "number" ? v : null;
}

interface Figures {
  readonly requestsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  /** Requests that reached the origin, per request answered. */
  readonly originPerRequest: number;
  readonly objectCallsPerRequest: number | null;
  /** CPU of wrangler dev's process group (workerd, node, esbuild) per request of the measured run, ms. */
  readonly serverCpuMsPerRequest: number;
  /** The same less what the group burnt idle over as long (its idle rate measured just before), ms. */
  readonly netCpuMsPerRequest: number;
  /** workerd's part of `serverCpuMsPerRequest` (the runtime: the Worker, the object, their I/O), ms. */
  readonly workerdCpuMsPerRequest: number;
}

/** The group's CPU per ms of wall time with no request in flight, after a second's pause (the last answers). */
async function idleRate(pgid: number): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const fromMs = groupCpuMs(pgid);
  const at = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  return (groupCpuMs(pgid) - fromMs) / (performance.now() - at);
}

/** A scenario's run at most (start-up, warm-up, idle readings, load), ms: past it, wrangler dev hung. */
const SCENARIO_BUDGET_MS = 180_000;

/**
 * `runScenario`, run again (once) when it fails or outlives `SCENARIO_BUDGET_MS`: under load a `wrangler dev` now and
 * then reloads its runtime at start-up and never answers (its group is stopped by the failed run's `finally`).
 */
async function runScenarioRetried(
  scenario: Scenario,
  origin: Awaited<ReturnType<typeof startOrigin>>,
  profile = false,
): Promise<Figures & { profile?: ProfileSummary }> {
  for (let attempt = 1; ; attempt++) {
    const hung = new AbortController();
    const timer = setTimeout(() => hung.abort(), SCENARIO_BUDGET_MS);
    try {
      return await runScenario(scenario, origin, profile, hung.signal);
    } catch (error) {
      if (attempt >= 2) throw error;
      log(`edge ${scenario}: run failed (${String(error)}); once more`);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Resolves when `signal` aborts: raced against each step, so a hung `wrangler dev` ends the run. */
const aborted = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => {
    if (signal.aborted) reject(new Error("scenario over its budget"));
    signal.addEventListener("abort", () => reject(new Error("scenario over its budget")));
  });

// long: one run, start to stop, with its readings in order
async function runScenario(
  scenario: Scenario,
  origin: Awaited<ReturnType<typeof startOrigin>>,
  profile: boolean,
  hung: AbortSignal,
): Promise<Figures & { profile?: ProfileSummary }> {
  const rules = SCENARIOS[scenario] ?? null;
  const dir =
    rules === null
      ? bareWorkerCopy("sluice-bench-edge-bare-", BARE_WORKER, bareToml(origin.base))
      : projectCopy("sluice-bench-edge-", { "bench.yaml": rules });
  if (rules !== null) dropBuildStep(dir); // compiled already: no rebuild and reload in the middle of a measurement
  const port = await freePort();
  let inspectorPort = await freePort();
  while (inspectorPort === port) inspectorPort = await freePort();
  const sluiceVars = ["--var", `ADMIN_TOKEN:${ADMIN_TOKEN}`, "--var", `UPSTREAM_URL:${origin.base}`];
  const child = startWrangler(dir, port, [
    "--log-level",
    "warn",
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    join(dir, ".state"),
    ...(rules === null ? [] : sluiceVars),
  ]);
  const base = `http://127.0.0.1:${port}`;
  const work = (async (): Promise<Figures & { profile?: ProfileSummary; raw?: unknown }> => {
    await waitUp(`${base}/v1/ping`, child, 60_000);
    const headers = { "cf-connecting-ip": "203.0.113.7" };
    await autocannon({ url: `${base}/v1/ping`, connections: CONNECTIONS, duration: 1, headers }); // warm-up
    const idleBefore = await idleRate(child.pid!);
    const before = rules === null ? null : objectCalls(await stats(base));
    const hitsBefore = origin.hits();
    const cpuBeforeMs = groupCpuMs(child.pid!);
    const workerdBeforeMs = workerdCpuMs(child.pid!);
    const loadAt = performance.now();
    const load = () => autocannon({ url: `${base}/v1/ping`, connections: CONNECTIONS, duration: DURATION_S, headers });
    let measured: Awaited<ReturnType<typeof load>> | null = null;
    const sampled = profile
      ? await profileIsolate(inspectorPort, async () => {
          measured = await load();
        })
      : undefined;
    const result = measured ?? (await load());
    const cpuMs = groupCpuMs(child.pid!) - cpuBeforeMs;
    const workerdMs = workerdCpuMs(child.pid!) - workerdBeforeMs;
    const loadMs = performance.now() - loadAt;
    // The lower of the idle rates before and after: each may carry some of the runs' tail (lingering connections).
    const idleMs = Math.min(idleBefore, await idleRate(child.pid!)) * loadMs;
    const bundle = sampled === undefined || sampled === null ? null : bundleOf(dir);
    const hits = origin.hits() - hitsBefore;
    const after = rules === null ? null : objectCalls(await stats(base));
    const total = Math.max(1, result.requests.total);
    return {
      requestsPerS: result.requests.average,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      non2xx: result.non2xx,
      originPerRequest: hits / total,
      serverCpuMsPerRequest: cpuMs / total,
      netCpuMsPerRequest: (cpuMs - idleMs) / total,
      workerdCpuMsPerRequest: workerdMs / total,
      objectCallsPerRequest: before === null || after === null ? null : (after - before) / total,
      ...(sampled === undefined || sampled === null ? {} : { profile: summarize(sampled, bundle), raw: sampled }),
    };
  })();
  work.catch(() => undefined); // a run over its budget ends when its group is stopped below, failing; already given up
  try {
    return await Promise.race([work, aborted(hung)]);
  } finally {
    if (child.pid !== undefined) await killGroup(child.pid, child);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The scenarios profiled: with `--profile` every one chosen, else the goals' (and the bare Worker, for scale). */
const PROFILED = CHOSEN.filter((s) => PROFILE || s === BARE || GOALS_MS[s] !== undefined);

async function profiles(origin: Awaited<ReturnType<typeof startOrigin>>): Promise<Record<string, ProfileSummary>> {
  const out: Record<string, ProfileSummary> = {};
  for (const scenario of PROFILED) {
    const { profile, raw } = (await runScenarioRetried(scenario, origin, true)) as {
      profile?: ProfileSummary;
      raw?: unknown;
    };
    if (profile === undefined) continue;
    // bench/out even when publishing (OUT_DIR is then the checkout, for BENCHMARKS.md)
    const file = join(ROOT, "bench", "out", `edge-${scenario.replace(/\W+/g, "-")}.cpuprofile`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(raw));
    out[scenario] = profile;
    const { parts, files } = profile;
    log(
      `edge: profile of ${scenario} in ${file}: ${profile.busySamples} busy samples; object ${parts.object}%, isolate ${parts.isolate}%, native ${parts.program}%, GC ${parts.gc}%\n${files.map((x) => `  ${x.share}% ${x.part} ${x.file}`).join("\n")}`,
    );
  }
  return out;
}

// long: the medians and ratios of every scenario's row, side by side with the bare Worker's
function rowsOf(runs: ReadonlyMap<Scenario, Figures[]>) {
  const med = (s: Scenario, f: (x: Figures) => number) => median((runs.get(s) ?? []).map(f));
  const net = (x: Figures) => x.netCpuMsPerRequest;
  const [cpuBare, netBare, workerdBare] = [
    med(BARE, (x) => x.serverCpuMsPerRequest),
    med(BARE, net),
    med(BARE, (x) => x.workerdCpuMsPerRequest),
  ];
  const rpsBare = med(BARE, (x) => x.requestsPerS);
  const netPlain = med(PLAIN, net);
  return CHOSEN.map((scenario) => {
    const cpu = med(scenario, (x) => x.serverCpuMsPerRequest);
    const netCpu = med(scenario, net);
    const workerd = med(scenario, (x) => x.workerdCpuMsPerRequest);
    const calls = (runs.get(scenario) ?? []).map((x) => x.objectCallsPerRequest);
    const goal = GOALS_MS[scenario];
    return {
      scenario,
      serverCpuMsPerRequest: round(cpu, 3),
      cpuOverBareMs: round(cpu - cpuBare, 3),
      cpuRatioToBare: round(cpu / cpuBare, 2),
      netCpuMsPerRequest: round(netCpu, 3),
      netOverBareMs: round(netCpu - netBare, 3),
      netRatioToBare: round(netCpu / netBare, 2),
      netOverPlainRuleMs: round(netCpu - netPlain, 3),
      netRatioToPlainRule: round(netCpu / netPlain, 2),
      workerdCpuMsPerRequest: round(workerd, 3),
      workerdOverBareMs: round(workerd - workerdBare, 3),
      goalOverBareMs: goal ?? null,
      meetsGoal: goal === undefined ? null : netCpu - netBare <= goal,
      requestsPerS: Math.round(med(scenario, (x) => x.requestsPerS)),
      throughputRatioToBare: round(med(scenario, (x) => x.requestsPerS) / rpsBare, 2),
      p50Ms: med(scenario, (x) => x.p50Ms),
      p99Ms: med(scenario, (x) => x.p99Ms),
      non2xx: med(scenario, (x) => x.non2xx),
      originPerRequest: round(
        med(scenario, (x) => x.originPerRequest),
        3,
      ),
      objectCallsPerRequest: calls.every((c) => c !== null) ? round(median(calls as number[]), 4) : "n/a",
      cpuMsPerRequestRuns: (runs.get(scenario) ?? []).map((x) => round(x.serverCpuMsPerRequest, 3)),
      netCpuMsPerRequestRuns: (runs.get(scenario) ?? []).map((x) => round(x.netCpuMsPerRequest, 3)),
    };
  });
}

async function main(): Promise<void> {
  const origin = await startOrigin();
  const runs = new Map<Scenario, Figures[]>();
  let profiled: Record<string, ProfileSummary> = {};
  try {
    for (let r = 0; r < RUNS; r++) {
      for (const scenario of CHOSEN) {
        const figures = await runScenarioRetried(scenario, origin);
        runs.set(scenario, [...(runs.get(scenario) ?? []), figures]);
        log(
          `edge ${scenario}: ${Math.round(figures.requestsPerS)} req/s, p50 ${figures.p50Ms} ms, server CPU ${figures.serverCpuMsPerRequest.toFixed(3)} ms/request (net of idle ${figures.netCpuMsPerRequest.toFixed(3)}, workerd ${figures.workerdCpuMsPerRequest.toFixed(3)}), origin ${figures.originPerRequest.toFixed(2)}/request`,
        );
      }
    }
    profiled = await profiles(origin);
  } finally {
    origin.server.close();
  }
  const rows = rowsOf(runs);
  for (const r of rows)
    log(
      `edge: ${r.scenario}: ${r.netCpuMsPerRequest} ms CPU/request net of idle, ${r.netOverBareMs >= 0 ? "+" : ""}${r.netOverBareMs} ms over bare (${r.netRatioToBare}x; gross ${r.serverCpuMsPerRequest}, ${r.cpuRatioToBare}x)${r.meetsGoal === null ? "" : r.meetsGoal ? " goal met" : ` goal +${r.goalOverBareMs} ms MISSED`}`,
    );
  const flags = `${QUICK ? " --quick" : ""}${PROFILE ? " --profile" : ""}${ONLY === undefined ? "" : ` --scenarios=${ONLY.join(",")}`}`;
  writeResult("edge", `node --import tsx bench/edge.ts${flags}`, {
    connections: CONNECTIONS,
    durationS: DURATION_S,
    idleS: IDLE_S,
    runs: RUNS,
    rows,
    profiles: profiled,
  });
}

await main();
