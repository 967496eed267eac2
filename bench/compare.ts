/**
 * `sluice compare` on a long trace, side by side with `sluice simulate` on the same rules: peak RSS and wall time.
 * The trace comes from `sluice gen` (timed too): Poisson arrivals, 1000 keys at 10/s each, 10M lines (1M with
 * --quick). Every command runs as a child process (start-up included) with its peak RSS read through
 * bench/maxrss.mjs; compare draws its SVG (`--svg`), which takes a first pass over the trace for the busiest key.
 * Runs are interleaved (simulate, compare, simulate, ...) so that a noisy machine hits both alike.
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BENCH_DIR, log, median, QUICK, ROOT, round, writeResult } from "./common.ts";

const LINES = QUICK ? 1_000_000 : 10_000_000;
const KEYS = 1000;
const RUNS = QUICK ? 1 : 2;
const RULES = `- id: gcra
  match: { identity: ip }
  algorithm: gcra
  rate: 10/s
  burst: 20
- id: counter
  match: { identity: ip }
  algorithm: sliding_counter
  limit: 500
  window: min
- id: window
  match: { identity: ip }
  algorithm: fixed_window
  limit: 500
  window: min
`;
const IDS = ["gcra", "counter", "window"];

interface Run {
  readonly seconds: number;
  readonly peakRssMb: number;
}

function run(dir: string, args: string[]): Run {
  const rssFile = join(dir, "rss");
  const out = openSync("/dev/null", "w");
  const start = process.hrtime.bigint();
  const child = spawnSync(process.execPath, ["--import", join(BENCH_DIR, "maxrss.mjs"), "bin/sluice.mjs", ...args], {
    cwd: ROOT,
    stdio: ["ignore", out, "pipe"],
    env: { ...process.env, SLUICE_MAXRSS_FILE: rssFile },
  });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (child.status !== 0) throw new Error(`sluice ${args.join(" ")}: exit ${child.status}: ${child.stderr}`);
  return { seconds, peakRssMb: Number(readFileSync(rssFile, "utf8")) / 2 ** 20 };
}

/** Lines after the header, read a chunk at a time (this process stays small: see bench/maxrss.mjs). */
function countLines(path: string): number {
  const fd = openSync(path, "r");
  const chunk = Buffer.alloc(1 << 20);
  let lines = -1;
  for (let n = readSync(fd, chunk); n > 0; n = readSync(fd, chunk)) {
    for (let i = chunk.indexOf(10); i >= 0 && i < n; i = chunk.indexOf(10, i + 1)) lines++;
  }
  closeSync(fd);
  return lines;
}

const summary = (runs: readonly Run[]) => ({
  seconds: round(median(runs.map((r) => r.seconds)), 2),
  peakRssMb: round(Math.max(...runs.map((r) => r.peakRssMb)), 1),
  runsS: runs.map((r) => round(r.seconds, 2)),
});

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-compare-"));
  try {
    const trace = join(dir, "trace.csv");
    const rules = join(dir, "rules.yaml");
    writeFileSync(rules, RULES);
    const seconds = Math.round(LINES / (KEYS * 10));
    const genArgs = ["gen", "--poisson", `10/s,0,${seconds}s`, "--keys", String(KEYS), "--key", "client"];
    genArgs.push("--seed", "7", "--max-lines", String(2 * LINES), "--out", trace);
    const gen = run(dir, genArgs);
    const lines = countLines(trace);
    log(`compare: gen ${lines} lines (${statSync(trace).size} bytes) in ${gen.seconds.toFixed(1)} s`);
    const simulate = (id: string) => ["simulate", "--rules", rules, "--rule", id, "--trace", trace];
    const compare = (ids: string[]) => [
      "compare",
      "--rules",
      rules,
      ...ids.flatMap((id) => ["--rule", id]),
      "--trace",
      trace,
      "--svg",
      join(dir, "out.svg"),
    ];
    const sim: Record<string, Run[]> = Object.fromEntries(IDS.map((id) => [id, []]));
    const one: Run[] = [];
    const all: Run[] = [];
    for (let r = 0; r < RUNS; r++) {
      for (const id of IDS) sim[id]!.push(run(dir, simulate(id)));
      one.push(run(dir, compare(["gcra"])));
      all.push(run(dir, compare(IDS)));
      log(
        `compare: run ${r + 1}/${RUNS}: simulate ${IDS.map((id) => sim[id]!.at(-1)!.seconds.toFixed(1)).join(" + ")} s; compare 1 rule ${one.at(-1)!.seconds.toFixed(1)} s, 3 rules ${all.at(-1)!.seconds.toFixed(1)} s`,
      );
    }
    const simSum = median(sim.gcra!.map((_, i) => IDS.reduce((s, id) => s + sim[id]![i]!.seconds, 0)));
    const svgBytes = statSync(join(dir, "out.svg")).size;
    writeResult("compare", `npm run bench -- --only compare${QUICK ? " --quick" : ""}`, {
      lines,
      keys: KEYS,
      runs: RUNS,
      gen: { seconds: round(gen.seconds, 2), peakRssMb: round(gen.peakRssMb, 1) },
      simulate: Object.fromEntries(IDS.map((id) => [id, summary(sim[id]!)])),
      compareOne: summary(one),
      compareAll: summary(all),
      ratioOne: round(median(one.map((r) => r.seconds)) / median(sim.gcra!.map((r) => r.seconds)), 2),
      ratioAll: round(median(all.map((r) => r.seconds)) / simSum, 2),
      simulateAllS: round(simSum, 2),
      svgBytes,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
