/**
 * Part 5: simulator throughput. A million-line trace (10k keys) through `sluice simulate` (gcra 10/s burst 20),
 * against bench/parse_print.ts, which reads the same CSV streaming and prints the same JSON shape without deciding.
 * Both run as child processes with stdout to /dev/null, so both include Node and tsx start-up (~0.3 s).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BENCH_DIR, log, median, QUICK, ROOT, round, writeResult } from "./common.ts";

const LINES = 1_000_000;
const KEYS = 10_000;
const RUNS = QUICK ? 3 : 5;

function makeTrace(path: string): void {
  const parts: string[] = ["t_ms,key,cost\n"];
  let t = 1_700_000_000_000;
  let seed = 42;
  for (let i = 0; i < LINES; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    t += seed % 3;
    parts.push(`${t},client-${seed % KEYS},${1 + (seed % 2)}\n`);
  }
  writeFileSync(path, parts.join(""));
}

function timeRun(args: string[]): number {
  const out = openSync("/dev/null", "w");
  const start = process.hrtime.bigint();
  const child = spawnSync(process.execPath, args, { cwd: ROOT, stdio: ["ignore", out, "pipe"] });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (child.status !== 0) throw new Error(`${args.join(" ")}: ${child.stderr}`);
  return seconds;
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-sim-"));
  try {
    const trace = join(dir, "trace.csv");
    const rules = join(dir, "bench.yaml");
    makeTrace(trace);
    writeFileSync(rules, "- id: bench\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 10/s\n  burst: 20\n");
    const simulate = ["bin/sluice.mjs", "simulate", "--rules", rules, "--rule", "bench", "--trace", trace];
    const baseline = ["--import", "tsx", join(BENCH_DIR, "parse_print.ts"), trace];
    const sim: number[] = [];
    const base: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      sim.push(timeRun(simulate));
      base.push(timeRun(baseline));
      log(
        `simulator: run ${r + 1}/${RUNS}: simulate ${sim.at(-1)?.toFixed(2)} s, baseline ${base.at(-1)?.toFixed(2)} s`,
      );
    }
    const simS = median(sim);
    const baseS = median(base);
    writeResult("simulator", `node --import tsx bench/simulator.ts${QUICK ? " --quick" : ""}`, {
      lines: LINES,
      keys: KEYS,
      runs: RUNS,
      simulateS: round(simS, 3),
      baselineS: round(baseS, 3),
      simulateLinesPerS: Math.round(LINES / simS),
      baselineLinesPerS: Math.round(LINES / baseS),
      ratio: round(simS / baseS, 2),
      simulateRunsS: sim.map((v) => round(v, 3)),
      baselineRunsS: base.map((v) => round(v, 3)),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
