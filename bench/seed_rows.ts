/**
 * Rows of the cluster SIMULATION (bench/cluster_run.ts) over several seeds, by hand: what a change to the hot-key tier
 * does to the rows it is for, judged on the mean of seeds rather than the published seed alone. Not part of
 * `npm run bench`.
 *
 *   SEEDS="0 1000 2000" PAR=2 node --import tsx bench/seed_rows.ts hot-rate/1000/10000/steady c16
 *
 * A row is RULE/ISOLATES/LOAD/SCENARIO, with `-` for the scenario's spaces (`global-rate/5000/10000/flash-crowd`);
 * `c16` is section 8c's 16 rows at 1,000 and 5,000 isolates. Each (row, seed) runs in a child process of its own
 * (`SLUICE_SIM_SEED` is read once per process), `PAR` at a time (default 2). Printed per row: the mean over the
 * seeds of the admitted against the exact single writer after the first second and over the whole run, and the
 * most over the seeds of the key's object's calls in the first second and in its busiest second after it, a
 * delegate's busiest second, for a scenario with an event (a redeploy, a restart) the mean "under after" (what the
 * exact writer admitted and the row did not in the 2 s after it, in % of a window; in brackets the same 2 s without
 * the event: cluster_rows.ts `underAfterPct`), and the safety figures (over the bound or a window, failed open,
 * overloaded after the first second). `--one RULE ISOLATES LOAD SCENARIO` prints one row's JSON (the child's side;
 * `--ledger` works there).
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Scenario } from "../src/sim/cluster.ts";
import type { ClusterRow } from "./cluster_rows.ts";
import { clusterRow } from "./cluster_run.ts";
import { afterFirstSecondPct } from "./global_key_report.ts";

const SCENARIOS: readonly Scenario[] = [
  "steady",
  "long run",
  "redeploy",
  "override change",
  "two versions 50/50",
  "churn",
  "flash crowd",
  "growth",
  "object restart",
  "delegate restart",
  "half refunded",
  "clock skew",
];

interface Spec {
  readonly rule: string;
  readonly isolates: number;
  readonly load: number;
  readonly scenario: Scenario;
  readonly text: string;
}

function specOf(text: string): Spec {
  const [rule, isolates, load, scenario, ...rest] = text.split("/");
  const sc = (scenario ?? "").replace(/-/g, " ") as Scenario;
  if (rest.length > 0 || !rule || !(Number(isolates) > 0) || !(Number(load) > 0) || !SCENARIOS.includes(sc)) {
    throw new Error(`${text}: expected RULE/ISOLATES/LOAD/SCENARIO, scenario one of ${SCENARIOS.join(", ")}`);
  }
  return { rule, isolates: Number(isolates), load: Number(load), scenario: sc, text };
}

function c16(): string[] {
  const out: string[] = [];
  for (const sc of ["steady", "flash-crowd", "growth", "churn"])
    for (const iso of [1000, 5000])
      for (const [rule, load] of [
        ["search-origin", 400],
        ["global-rate", 10000],
      ] as const)
        out.push(`${rule}/${iso}/${load}/${sc}`);
  return out;
}

function runChild(spec: Spec, seed: string): Promise<ClusterRow> {
  const args = ["--import", "tsx", fileURLToPath(import.meta.url), "--one", spec.rule, String(spec.isolates)];
  args.push(String(spec.load), spec.scenario);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, SLUICE_SIM_SEED: seed },
      stdio: ["ignore", "pipe", "ignore"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`${spec.text}, seed ${seed}: exit ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1)!) as ClusterRow);
    });
  });
}

const argv = process.argv.slice(2);
if (argv[0] === "--one") {
  const spec = specOf(argv.slice(1, 5).join("/").replace(/ /g, "-"));
  console.log(JSON.stringify(await clusterRow(spec.rule, spec.isolates, spec.load, spec.scenario)));
} else {
  const specs = argv.flatMap((a) => (a === "c16" ? c16() : [a])).map(specOf);
  if (specs.length === 0) throw new Error("usage: SEEDS=... PAR=... seed_rows.ts RULE/ISOLATES/LOAD/SCENARIO... | c16");
  const seeds = (process.env.SEEDS ?? "0").trim().split(/\s+/);
  const par = Math.max(1, Number(process.env.PAR ?? 2));
  const jobs = specs.flatMap((spec) => seeds.map((seed) => ({ spec, seed })));
  const rows = new Map<string, ClusterRow[]>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      const row = await runChild(job.spec, job.seed);
      rows.set(job.spec.text, [...(rows.get(job.spec.text) ?? []), row]);
    }
  };
  await Promise.all(Array.from({ length: par }, worker));
  let sum = 0;
  for (const spec of specs) {
    const rs = rows.get(spec.text) ?? [];
    const mean = (f: (r: ClusterRow) => number) => rs.reduce((a, r) => a + f(r), 0) / rs.length;
    const most = (f: (r: ClusterRow) => number) => Math.max(...rs.map(f));
    const after = mean(afterFirstSecondPct);
    sum += after;
    const cells = [
      spec.text.padEnd(38),
      `after1s ${after.toFixed(2).padStart(7)}`,
      `whole ${mean((r) => r.admittedVsExactPct)
        .toFixed(2)
        .padStart(7)}`,
      `key1st ${most((r) => r.keyFirstSecond)}`,
      `keyAfter ${most((r) => r.keyBusiestAfterFirst)}`,
      `delegate ${most((r) => r.delegateBusiestSecond)}`,
      ...(rs.some((r) => r.underAfterEventPct !== null)
        ? [
            `under ${mean((r) => r.underAfterEventPct ?? 0).toFixed(2)} (${mean((r) => r.underWithoutEventPct ?? 0).toFixed(2)})`,
          ]
        : []),
      `over ${most((r) => r.overRateBound ?? 0)}/${most((r) => r.overWindow ?? 0)}`,
      `failedOpen ${most((r) => r.failedOpenAll)}`,
      `overloaded ${most((r) => r.overloadedAfterFirstSecond)}`,
    ];
    console.log(cells.join("  "));
  }
  console.log(`mean after1s over ${specs.length} rows, ${seeds.length} seed(s): ${(sum / specs.length).toFixed(2)}`);
}
