/**
 * Part: one hot key beyond one Durable Object, as a discrete-event SIMULATION (src/sim/cluster.ts runs the real
 * coalescer, key's object record operations, delegate steps and core over simulated time, network and service rates).
 * 200, 1,000 and 5,000 isolates in 9 regions (round trips 5-150 ms to the key's object, 10 ms to the region's delegate,
 * heavy-tailed, 0.1% of messages lost, hot marks per data center seen after 100 ms, 5% of requests from the next
 * region: src/sim/network.ts); every object 1 ms per call plus 0.007 ms per KB carried and written, overloaded beyond 100
 * queued. Rules sized so the load crosses them (token_bucket 5000/s burst 1000, fixed_window 50000 per 10 s) and two
 * shipped rules as they ship (growth-global, growth-daily, free-global). Loads 10, 1k, 5k (the limit), 10k (2x), 50k (10x) and
 * 200k req/s for 8 s (50k: 4 s, 200k: 2 s, to keep the bench near 10 minutes on 2 cores). Scenarios at 2x the limit,
 * 1,000 isolates (redeploy, churn and delegate restart also at 5,000): redeploy, override change, two versions 50/50
 * for 60 s, churn, the key's object restarting, every delegate restarting, half refunded, ±500 ms clock skew.
 * Every figure counts the whole run from the first request (cold start included; the first second also apart).
 */
import { ablate, MECHANISMS, type Mechanism } from "../src/protocol/mechanisms.ts";
import { SHARE_TERM_MS } from "../src/protocol/tunables.ts";
import type { Scenario } from "../src/sim/cluster.ts";
import { type ClusterRow, clusterGoals } from "./cluster_rows.ts";
import { clusterRow } from "./cluster_run.ts";
import { log, QUICK, round, writeResult } from "./common.ts";

const SIZES = QUICK ? [200, 1_000] : [200, 1_000, 5_000];
const LOADS = QUICK ? [10, 5_000, 10_000] : [10, 1_000, 5_000, 10_000, 50_000, 200_000];

/**
 * `--ablate NAME`: this process runs with one mechanism off (bench/ablation.ts): one of src/protocol/mechanisms.ts, or
 * `hotMarks` (the data centers' hot marks, src/isolate/hot_marks.ts).
 */
const ablateAt = process.argv.indexOf("--ablate");
const ablated = ablateAt >= 0 ? (process.argv[ablateAt + 1] ?? "") : null;
if (ablated !== null && ablated !== "hotMarks") {
  if (!(MECHANISMS as readonly string[]).includes(ablated)) {
    process.stderr.write(`cluster: --ablate ${ablated}: not one of hotMarks, ${MECHANISMS.join(", ")}\n`);
    process.exit(2);
  }
  ablate(ablated as Mechanism);
}

/** One row to run: rule, isolates, load, scenario. */
type Spec = readonly [string, number, number, Scenario];
const specs: Spec[] = [];
for (const isolates of SIZES) {
  for (const loadPerS of LOADS) {
    for (const ruleId of ["hot-rate", "hot-window"]) specs.push([ruleId, isolates, loadPerS, "steady"]);
  }
}
for (const loadPerS of QUICK ? [10, 10_000] : [10, 1_000, 10_000]) {
  for (const ruleId of ["growth-global", "growth-daily"]) specs.push([ruleId, 1_000, loadPerS, "steady"]);
}
/** The shipped free-global (10/s, burst 20) at 1,000x its rate: a rule whose rate cannot feed every delegate a share. */
specs.push(["free-global", 1_000, 10_000, "steady"], ["free-global", 5_000, 10_000, "steady"]);
const SCENARIOS: Scenario[] = [
  "redeploy",
  "override change",
  "two versions 50/50",
  "churn",
  "object restart",
  "delegate restart",
  "half refunded",
  "clock skew",
];
/** At 5,000 isolates, the scenarios about fan-out and restarts only (the bench's time). */
const AT_5000: Scenario[] = ["redeploy", "churn", "delegate restart"];
/**
 * `key: global` rules (one state for every caller: the hottest key there is, one (rule, key) to the tier like any
 * other): the shipped search-origin as it ships, and one sized like hot-rate, each at 2x its rate.
 */
for (const isolates of QUICK ? [200, 1_000] : [200, 1_000, 5_000]) {
  specs.push(["search-origin", isolates, 400, "steady"], ["global-rate", isolates, 10_000, "steady"]);
}
/** The rate rule steady over 60 s at 2x and at the limit: the 8 s rows' fixed costs against a longer run. */
if (!QUICK) {
  for (const [isolates, loadPerS] of [
    [1_000, 10_000],
    [5_000, 10_000],
    [5_000, 5_000],
  ] as const) {
    specs.push(["hot-rate", isolates, loadPerS, "long run"]);
  }
}
for (const isolates of QUICK ? [1_000] : [1_000, 5_000]) {
  for (const scenario of SCENARIOS) {
    if (isolates !== 1_000 && !AT_5000.includes(scenario)) continue;
    for (const ruleId of ["hot-rate", "hot-window"]) specs.push([ruleId, isolates, 10_000, scenario]);
  }
}

/**
 * `--rows hot-rate/5000/10000/steady,hot-window/1000/10000/delegate-restart`: only the rows whose
 * rule/isolates/load/scenario (spaces in a scenario written as `-`) starts with one of the comma-separated prefixes.
 */
const rowsAt = process.argv.indexOf("--rows");
const filters =
  rowsAt >= 0
    ? (process.argv[rowsAt + 1] ?? "")
        .split(",")
        .map((f) => f.trim().replace(/ /g, "-"))
        .filter((f) => f !== "")
    : [];
const specLabel = ([rule, isolates, load, scenario]: Spec) =>
  `${rule}/${isolates}/${load}/${scenario.replace(/ /g, "-")}`;
/** Rows run only when `--rows` names them (section 8a's slower rules and shed back: bench/ablation.ts), not in section 8's table. */
const ON_ASK: Spec[] = [
  ["search-origin", 5_000, 400, "flash crowd"],
  ["search-origin", 1_000, 400, "growth"],
  ["search-origin", 1_000, 400, "flash crowd"],
  ["global-rate", 5_000, 10_000, "flash crowd"],
  ["global-rate", 5_000, 10_000, "growth"],
];
const chosen =
  filters.length === 0 ? specs : [...specs, ...ON_ASK].filter((s) => filters.some((f) => specLabel(s).startsWith(f)));
if (rowsAt >= 0 && chosen.length === 0) {
  process.stderr.write(`cluster: no row matches --rows; rows:\n${specs.map(specLabel).join("\n")}\n`);
  process.exit(2);
}
const rows: ClusterRow[] = [];
for (const spec of chosen) {
  const r = await clusterRow(...spec, ablated);
  rows.push(r);
  if (filters.length > 0) process.stdout.write(`${specLabel(spec)} ${JSON.stringify(r)}\n`);
}

const command = `npm run bench -- --only cluster${QUICK ? " --quick" : ""}${
  filters.length > 0 ? ` --rows ${filters.join(",")}` : ""
}`;
const data = {
  sizes: SIZES,
  loads: LOADS,
  shareTermMs: SHARE_TERM_MS,
  runSeconds: round(
    rows.reduce((s, r) => s + r.runSeconds, 0),
    0,
  ),
  rows,
  goals: clusterGoals(rows),
};
// An ablation's rows are read from stdout by bench/ablation.ts; they are not this part's results.
if (ablated === null) log(`cluster: wrote ${writeResult("cluster", command, data)}`);
