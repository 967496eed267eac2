/**
 * `npm run bench -- --only coalesce`: object calls per request for one hot key in a real `wrangler dev`, with the
 * isolate's coalescing (src/isolate/coalesce.ts): N concurrent requests on one key, N = 1, 8 and 64, several rounds each
 * (a fresh client address per round: a fresh key). Calls come from the isolate's own counters (`GET /_sluice/stats`,
 * where a batch is one call), so this is a count, not a timing; the wall time of a round is reported beside it.
 *
 * Two rules, one scenario each, so both paths are seen: `limited` (gcra 1/h, burst 10: exactly 10 admitted, the rest
 * denied by the object, and then by the blocked-key cache) and `open` (a burst far above what is sent: all admitted,
 * every request decided by the object). The admitted count is held to the rule's exact answer in every round.
 *
 * A temp copy of the project with the rules compiled in (bench/wrangler_dev.ts), on a free 127.0.0.1 port, its
 * process group stopped by id at the end. Client addresses from 198.51.100.0/24 (documentation range).
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { log, median, QUICK, round, writeResult } from "./common.ts";
import { dropBuildStep, freePort, killGroup, projectCopy, startWrangler, waitUp } from "./wrangler_dev.ts";

const ADMIN_TOKEN = "bench-admin-token";
const LIMIT = 10;
const RULES = `- id: limited
  match: { route: "GET /limited", identity: ip }
  algorithm: gcra
  rate: 1/h
  burst: ${LIMIT}
- id: open
  match: { route: "GET /open", identity: ip }
  algorithm: gcra
  rate: 1000000/s
  burst: 1000000
`;
const CONCURRENCY = [1, 8, 64] as const;
const ROUNDS = QUICK ? 3 : 10;

interface Round {
  readonly requests: number;
  readonly calls: number;
  readonly batched: number;
  readonly cacheAnswers: number;
  readonly admitted: number;
  readonly wallMs: number;
}

async function stats(base: string): Promise<Record<string, number>> {
  const response = await fetch(`${base}/_sluice/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!response.ok) throw new Error(`/_sluice/stats answered ${response.status}`);
  return (await response.json()) as Record<string, number>;
}

let addresses = 0;
/** A fresh client address (a fresh key) in 198.51.100.0/24, then 203.0.113.0/24. */
function freshAddress(): string {
  addresses += 1;
  if (addresses > 500) throw new Error("out of documentation addresses");
  return addresses <= 250 ? `198.51.100.${addresses}` : `203.0.113.${addresses - 250}`;
}

async function oneRound(base: string, path: string, concurrency: number): Promise<Round> {
  const ip = freshAddress();
  const before = await stats(base);
  const started = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const response = await fetch(`${base}${path}`, { headers: { "CF-Connecting-IP": ip } });
      await response.arrayBuffer();
      return response.status;
    }),
  );
  const wallMs = performance.now() - started;
  const after = await stats(base);
  const d = (name: string) => after[name]! - before[name]!;
  const unexpected = statuses.filter((s) => s !== 200 && s !== 429);
  if (unexpected.length > 0) throw new Error(`unexpected statuses: ${unexpected.join(",")}`);
  return {
    requests: d("requests"),
    calls: d("object_calls"),
    batched: d("batched_requests"),
    cacheAnswers: d("cache_answers"),
    admitted: statuses.filter((s) => s === 200).length,
    wallMs,
  };
}

async function main(): Promise<void> {
  const dir = projectCopy("sluice-bench-coalesce-", { "bench.yaml": RULES });
  dropBuildStep(dir);
  const port = await freePort();
  const child = startWrangler(dir, port, [
    "--log-level",
    "warn",
    "--persist-to",
    join(dir, ".state"),
    "--var",
    `ADMIN_TOKEN:${ADMIN_TOKEN}`,
    "--var",
    "LIMITER_TIMEOUT_MS:10000",
  ]);
  const base = `http://127.0.0.1:${port}`;
  const rows = [];
  try {
    await waitUp(`${base}/warm-up`, child, 60_000);
    await oneRound(base, "/open", 8); // the first call to an object pays its start-up
    for (const [scenario, path] of [
      ["limited", "/limited"],
      ["open", "/open"],
    ] as const) {
      for (const concurrency of CONCURRENCY) {
        const rounds: Round[] = [];
        for (let r = 0; r < ROUNDS; r++) rounds.push(await oneRound(base, path, concurrency));
        const expected = scenario === "limited" ? Math.min(concurrency, LIMIT) : concurrency;
        const exact = rounds.every((x) => x.admitted === expected);
        const perRequest = rounds.map((x) => x.calls / x.requests);
        const row = {
          scenario,
          concurrency,
          rounds: ROUNDS,
          callsPerRequestMedian: round(median(perRequest), 3),
          callsPerRequestMax: round(Math.max(...perRequest), 3),
          callsPerRound: rounds.map((x) => x.calls),
          batchedShare: round(median(rounds.map((x) => x.batched / x.requests)), 3),
          cacheAnswersPerRound: median(rounds.map((x) => x.cacheAnswers)),
          admittedPerRound: median(rounds.map((x) => x.admitted)),
          expectedAdmitted: expected,
          admittedExact: exact,
          wallMsMedian: round(median(rounds.map((x) => x.wallMs)), 1),
        };
        rows.push(row);
        log(
          `coalesce ${scenario} x${concurrency}: ${row.callsPerRequestMedian} calls/request (max ${row.callsPerRequestMax}), admitted ${row.admittedPerRound}/${expected}${exact ? "" : " NOT EXACT"}`,
        );
      }
    }
  } finally {
    if (child.pid !== undefined) await killGroup(child.pid, child);
    rmSync(dir, { recursive: true, force: true });
  }
  writeResult("coalesce", `npm run bench -- --only coalesce${QUICK ? " --quick" : ""}`, {
    limit: LIMIT,
    rows,
  });
  if (rows.some((r) => !r.admittedExact)) process.exitCode = 1;
}

await main();
