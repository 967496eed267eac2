/**
 * Part 3b: the service binding through a real `wrangler dev` running two Workers (two configurations): a consumer
 * Worker on the port and Sluice beside it. The consumer answers every request itself ("no limiter"), or first calls
 * `env.SLUICE.limit({ key, rule })` through the binding, on one global rule or one local rule (all requests on one
 * key: a hot key, coalesced). Scenarios run interleaved, `RUNS` rounds, medians reported: requests/s, p50 and p99
 * with 50 connections (as a ratio to "no limiter"), and the binding hop's own latency, p50 and p99 with 1 connection
 * (the scenario's minus "no limiter"'s, so queueing at 50 connections does not hide it).
 *
 * The working tree is never touched: a temp copy of the project with the bench rules compiled in (bench/wrangler_dev.ts)
 * and the consumer written next to it, on a free 127.0.0.1 port, killed as a process group after each scenario.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { log, median, QUICK, round, writeResult } from "./common.ts";
import { dropBuildStep, freePort, killGroup, projectCopy, startWrangler, waitUp } from "./wrangler_dev.ts";

const DURATION_S = QUICK ? 3 : 10;
const HOP_DURATION_S = QUICK ? 2 : 5;
const CONNECTIONS = 50;
const RUNS = QUICK ? 1 : 3;

const RULES = [
  "- id: bench-global\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n",
  "- id: bench-local\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1000000/s\n  burst: 1000000\n  scope: local\n",
].join("");

/** The consumer: answers at once, or after asking Sluice through the binding (its `RULE` var names the rule). */
const CONSUMER = `export default {
  async fetch(request, env) {
    if (env.RULE === "") return new Response("ok");
    const key = request.headers.get("cf-connecting-ip") ?? "none";
    const { success } = await env.SLUICE.limit({ key, rule: env.RULE });
    return success ? new Response("ok") : new Response("limited", { status: 429 });
  },
};
`;
const CONSUMER_TOML = `name = "bench-consumer"
main = "consumer.mjs"
compatibility_date = "2026-04-20"

[vars]
RULE = ""

[[services]]
binding = "SLUICE"
service = "sluice"
entrypoint = "RateLimiter"
`;

const SCENARIOS = {
  "no limiter": "",
  "limit, one global rule": "bench-global",
  "limit, one local rule": "bench-local",
};
type Scenario = keyof typeof SCENARIOS;

interface Figures {
  readonly requestsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  /** With one connection: the request's own latency, no queueing. */
  readonly singleP50Ms: number;
  readonly singleP99Ms: number;
}

async function runScenario(scenario: Scenario): Promise<Figures> {
  const dir = projectCopy("sluice-bench-binding-", { "bench.yaml": RULES });
  dropBuildStep(dir);
  // Sluice's limiter calls get a generous budget: a hot key on a shared machine must not turn into fail-opens.
  const toml = join(dir, "wrangler.toml");
  writeFileSync(toml, readFileSync(toml, "utf8").replace('LIMITER_TIMEOUT_MS = ""', 'LIMITER_TIMEOUT_MS = "10000"'));
  writeFileSync(join(dir, "consumer.mjs"), CONSUMER);
  writeFileSync(join(dir, "consumer.toml"), CONSUMER_TOML);
  const port = await freePort();
  const child = startWrangler(dir, port, [
    "-c",
    "consumer.toml",
    "-c",
    "wrangler.toml",
    "--log-level",
    "warn",
    "--persist-to",
    join(dir, ".state"),
    "--var",
    `RULE:${SCENARIOS[scenario]}`,
  ]);
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitUp(`${base}/v1/ping`, child, 60_000);
    const url = `${base}/v1/ping`;
    const headers = { "cf-connecting-ip": "203.0.113.7" };
    await autocannon({ url, connections: 10, duration: 1, headers }); // warm-up
    const loaded = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, headers });
    const single = await autocannon({ url, connections: 1, duration: HOP_DURATION_S, headers });
    return {
      requestsPerS: loaded.requests.average,
      p50Ms: loaded.latency.p50,
      p99Ms: loaded.latency.p99,
      non2xx: loaded.non2xx + single.non2xx,
      singleP50Ms: single.latency.p50,
      singleP99Ms: single.latency.p99,
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
      const f = await runScenario(scenario);
      runs.set(scenario, [...(runs.get(scenario) ?? []), f]);
      log(
        `binding ${scenario}: ${Math.round(f.requestsPerS)} req/s, p50 ${f.p50Ms} ms, p99 ${f.p99Ms} ms; one connection p50 ${f.singleP50Ms} ms, p99 ${f.singleP99Ms} ms; non-2xx ${f.non2xx}`,
      );
    }
  }
  const med = (s: Scenario, f: (x: Figures) => number) => median((runs.get(s) ?? []).map(f));
  const none = {
    rps: med("no limiter", (x) => x.requestsPerS),
    p50: med("no limiter", (x) => x.p50Ms),
    p99: med("no limiter", (x) => x.p99Ms),
    singleP50: med("no limiter", (x) => x.singleP50Ms),
    singleP99: med("no limiter", (x) => x.singleP99Ms),
  };
  const rows = (Object.keys(SCENARIOS) as Scenario[]).map((scenario) => {
    const rps = med(scenario, (x) => x.requestsPerS);
    const p50 = med(scenario, (x) => x.p50Ms);
    const p99 = med(scenario, (x) => x.p99Ms);
    return {
      scenario,
      requestsPerS: Math.round(rps),
      p50Ms: p50,
      p99Ms: p99,
      throughputRatio: round(rps / none.rps, 2),
      p50Ratio: round(p50 / Math.max(none.p50, 1e-9), 2),
      p99Ratio: round(p99 / Math.max(none.p99, 1e-9), 2),
      non2xx: med(scenario, (x) => x.non2xx),
      hopP50Ms: round(med(scenario, (x) => x.singleP50Ms) - none.singleP50, 2),
      hopP99Ms: round(med(scenario, (x) => x.singleP99Ms) - none.singleP99, 2),
    };
  });
  writeResult("binding", `node --import tsx bench/binding.ts${QUICK ? " --quick" : ""}`, {
    connections: CONNECTIONS,
    durationS: DURATION_S,
    hopDurationS: HOP_DURATION_S,
    runs: RUNS,
    rows,
  });
}

await main();
