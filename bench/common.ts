/** Shared helpers for the benchmarks: machine facts, medians, result files. Timings live here, never in tests. */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
export const ROOT = dirname(BENCH_DIR);

/**
 * `--publish`: refresh the committed figures (bench/results/*.json, BENCHMARKS.md, the docs/ figure). Without it a
 * run writes the same files under bench/out/ (ignored by git), so trying the benchmarks leaves the tree clean and the
 * published figures alone.
 */
export const PUBLISH = process.argv.includes("--publish");
/** Where the report and figures go: the repository root when publishing, bench/out/ otherwise. */
export const OUT_DIR = PUBLISH ? ROOT : join(BENCH_DIR, "out");
export const RESULTS_DIR = PUBLISH ? join(BENCH_DIR, "results") : join(OUT_DIR, "results");

export interface Machine {
  readonly cores: number;
  readonly cpu: string;
  readonly node: string;
  readonly platform: string;
}

export function machine(): Machine {
  const list = cpus();
  return { cores: list.length, cpu: list[0]?.model ?? "unknown", node: process.version, platform: process.platform };
}

export const QUICK = process.argv.includes("--quick");
if (QUICK && PUBLISH) {
  process.stderr.write("bench: --quick figures are not published; run the full benchmark with --publish\n");
  process.exit(2);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/**
 * The commit the figures were measured on: `git rev-parse --short HEAD`, with `+dirty` when src/ or bench/ (but for
 * bench/results/ and bench/NOTES.md) differ from it (figures of uncommitted code say so); "unknown" outside a git
 * checkout.
 */
export function commit(): string {
  const head = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" });
  if (head.status !== 0) return "unknown";
  // Not bench/results: a publishing run rewrites them as it goes. Not bench/NOTES.md: the hand-written prose the
  // report appends. Neither is what is measured.
  const paths = ["src", "bench", ":(exclude)bench/results", ":(exclude)bench/NOTES.md"];
  const dirty = spawnSync("git", ["status", "--porcelain", "--", ...paths], { cwd: ROOT, encoding: "utf8" });
  return `${head.stdout.trim()}${dirty.stdout.trim() === "" ? "" : "+dirty"}`;
}

/** Write `<results>/<name>.json` (bench/results/ when publishing, bench/out/results/ otherwise) with the machine and the exact command next to the figures. */
export function writeResult(name: string, command: string, data: unknown): string {
  const path = join(RESULTS_DIR, `${name}.json`);
  mkdirSync(dirname(path), { recursive: true });
  const body = {
    name,
    command,
    quick: QUICK,
    machine: machine(),
    commit: commit(),
    loadAverage: loadavg().map((x) => round(x, 2)),
    date: new Date().toISOString(),
    data,
  };
  writeFileSync(path, `${JSON.stringify(body, null, 2)}\n`);
  return path;
}

export function log(message: string): void {
  process.stderr.write(`${message}\n`);
}
