#!/usr/bin/env node
// `npm run bench [-- --quick] [-- --only decisions,memory,edge,coalesce,accuracy,simulator,compare,cluster]`: run the benchmarks in bench/,
// each in a process of its own, write bench/results/<name>.json and regenerate BENCHMARKS.md from them.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const onlyAt = args.indexOf("--only");
const all = ["decisions", "memory", "accuracy", "simulator", "compare", "edge", "coalesce", "cluster"];
const only = onlyAt >= 0 ? (args[onlyAt + 1] ?? "").split(",") : all;
const unknown = only.filter((name) => !all.includes(name));
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown part(s) ${unknown.join(", ")}; parts: ${all.join(", ")}\n`);
  process.exit(2);
}

const started = Date.now();
let failed = false;
for (const name of all.filter((n) => only.includes(n))) {
  const t = Date.now();
  process.stderr.write(`bench: ${name}${quick ? " (quick)" : ""}\n`);
  const run = spawnSync(
    process.execPath,
    ["--import", "tsx", join("bench", `${name}.ts`), ...(quick ? ["--quick"] : [])],
    {
      cwd: root,
      stdio: "inherit",
    },
  );
  if (run.status !== 0) {
    failed = true;
    process.stderr.write(`bench: ${name} failed (exit ${run.status})\n`);
  } else process.stderr.write(`bench: ${name} took ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
}
const report = spawnSync(
  process.execPath,
  ["--import", "tsx", join("bench", "report.ts"), ...(quick ? ["--quick"] : [])],
  {
    cwd: root,
    stdio: "inherit",
  },
);
process.stderr.write(`bench: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
process.exitCode = failed || report.status !== 0 ? 1 : 0;
