#!/usr/bin/env node
// `npm run bench [-- --quick | --publish] [-- --only decisions,memory,replay_speed,gen_keys,edge,binding,coalesce,accuracy,simulator,compare,cluster,ablation,global_key,key_memory]`
// [-- --rows hot-rate/5000/10000/steady,...] (the cluster part: only rows whose rule/isolates/load/scenario starts so):
// run the benchmarks in bench/, each in a process of its own, and write their results and a report from them:
// by default to bench/out/ (results/<name>.json, BENCHMARKS.md; ignored by git); with --publish to the committed
// bench/results/<name>.json and BENCHMARKS.md (a full run only: --quick figures are never published).
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const publish = args.includes("--publish");
if (quick && publish) {
  process.stderr.write("bench: --quick figures are not published; run the full benchmark with --publish\n");
  process.exit(2);
}
const rowsAt = args.indexOf("--rows");
if (rowsAt >= 0 && publish) {
  process.stderr.write("bench: --rows runs part of the cluster table; it is never published\n");
  process.exit(2);
}
const flags = [
  ...(quick ? ["--quick"] : []),
  ...(publish ? ["--publish"] : []),
  ...(rowsAt >= 0 ? ["--rows", args[rowsAt + 1] ?? ""] : []),
];
const onlyAt = args.indexOf("--only");
const all = [
  "decisions",
  "memory",
  "accuracy",
  "simulator",
  "replay_speed",
  "gen_keys",
  "compare",
  "edge",
  "binding",
  "coalesce",
  "cluster",
  "ablation",
  "global_key",
  "key_memory",
];
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
  const run = spawnSync(process.execPath, ["--import", "tsx", join("bench", `${name}.ts`), ...flags], {
    cwd: root,
    stdio: "inherit",
  });
  if (run.status !== 0) {
    failed = true;
    process.stderr.write(`bench: ${name} failed (exit ${run.status})\n`);
  } else process.stderr.write(`bench: ${name} took ${((Date.now() - t) / 1000).toFixed(1)} s\n`);
}
const report = spawnSync(process.execPath, ["--import", "tsx", join("bench", "report.ts"), ...flags], {
  cwd: root,
  stdio: "inherit",
});
process.stderr.write(`bench: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
process.exitCode = failed || report.status !== 0 ? 1 : 0;
