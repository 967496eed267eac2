/**
 * Part: a `key: global` rule across 200, 1,000 and 5,000 isolates, as the cluster SIMULATION of section 8 runs one hot
 * key (bench/cluster_run.ts over src/sim), for the scenarios a global budget meets: steady load, a flash crowd (5% of
 * the load, then all of it at a quarter of the run, on a key no isolate knows is hot), growth (0 to all of it over the
 * run) and churn (a tenth of the isolates replaced each second). Two rules written `key: global` and resolved by the
 * real parser: Shiplane's shipped search-origin (gcra 200/s, burst 200) and global-rate (gcra 5000/s, burst 1000),
 * each at twice its rate. Writes results/global_key.json; BENCHMARKS.md section 8c is generated from it
 * (bench/global_key_report.ts).
 */
import type { Scenario } from "../src/sim/cluster.ts";
import type { ClusterRow } from "./cluster_rows.ts";
import { clusterRow } from "./cluster_run.ts";
import { log, QUICK, round, writeResult } from "./common.ts";

const SIZES = QUICK ? [200, 1_000] : [200, 1_000, 5_000];
const SCENARIOS: Scenario[] = ["steady", "flash crowd", "growth", "churn"];
const LOADS: Record<string, number> = { "search-origin": 400, "global-rate": 10_000 };

const rows: ClusterRow[] = [];
for (const scenario of SCENARIOS) {
  for (const isolates of SIZES) {
    for (const [rule, loadPerS] of Object.entries(LOADS))
      rows.push(await clusterRow(rule, isolates, loadPerS, scenario));
  }
}
const command = `npm run bench -- --only global_key${QUICK ? " --quick" : ""}`;
const runSeconds = round(
  rows.reduce((s, r) => s + r.runSeconds, 0),
  0,
);
log(
  `global_key: wrote ${writeResult("global_key", command, { sizes: SIZES, scenarios: SCENARIOS, runSeconds, rows })}`,
);
