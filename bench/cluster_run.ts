/**
 * One row of the cluster SIMULATION (src/sim/cluster.ts) over the rules below: the run, the exact single writer on the
 * same arrivals, for a scenario with an event the same run without it, and the row's figures (cluster_rows.ts).
 * bench/cluster.ts (section 8) and bench/global_key.ts (section 8c) run their rows through it.
 */

import type { LimiterRule } from "../src/protocol/store.ts";
import { compileRules } from "../src/request/match.ts";
import { parseRules } from "../src/rules/yaml.ts";
import { type ClusterRun, exactAdmissions, type Scenario, simulateCluster } from "../src/sim/cluster.ts";
import { ledgerLines, withExact } from "../src/sim/rate_ledger.ts";
import { type ClusterRow, type LowDecisions, lowDecisionsOf, rowOf, underAfterPct } from "./cluster_rows.ts";
import { log, PUBLISH, QUICK } from "./common.ts";

/** `SLUICE_SIM_SEED` (see `clusterRow`): 0 unless set. */
const SEED_OFFSET = Number(process.env.SLUICE_SIM_SEED ?? 0);
if (!Number.isSafeInteger(SEED_OFFSET) || (SEED_OFFSET !== 0 && PUBLISH)) {
  throw new Error("SLUICE_SIM_SEED: an integer, and never in a published run");
}

/**
 * `--ledger`'s bins (src/sim/rate_ledger.ts): `LEDGER_BIN_MS=500 LEDGER_BINS=16` in the environment shows a whole 8 s
 * run; unset, the first 2 s per 100 ms.
 */
const LEDGER_BINS =
  process.env.LEDGER_BIN_MS === undefined && process.env.LEDGER_BINS === undefined
    ? undefined
    : { ms: Number(process.env.LEDGER_BIN_MS ?? 100), count: Number(process.env.LEDGER_BINS ?? 20) };
if (LEDGER_BINS !== undefined && !(LEDGER_BINS.ms >= 1 && Number.isSafeInteger(LEDGER_BINS.count))) {
  throw new Error("LEDGER_BIN_MS, LEDGER_BINS: a positive number of ms and a whole number of bins");
}

/** 5 s into a 10 s window: the window rule turns over during each run. */
export const T0 = Date.UTC(2030, 0, 1, 0, 0, 5);
/** Simulated seconds per run: 8 s (a window's end and 3 s past it), fewer at the highest loads to keep the bench short. */
const durationOf = (loadPerS: number, scenario: Scenario) =>
  scenario === "two versions 50/50" || scenario === "long run"
    ? QUICK
      ? 10_000
      : 60_000
    : loadPerS >= 200_000
      ? 2_000
      : loadPerS >= 50_000 || QUICK
        ? 4_000
        : 8_000;

export const YAML = `
- id: hot-rate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 5000/s
  burst: 1000
- id: hot-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 50000
  window: 10s
- id: growth-global
  match: { identity: api_key }
  algorithm: gcra
  rate: 50/s
  burst: 100
- id: growth-daily
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 500000
  window: d
- id: free-global
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 10
  burst: 20
- id: search-origin
  match: { route: "GET /v1/search/**" }
  key: global
  algorithm: gcra
  rate: 200/s
  burst: 200
- id: global-rate
  match: {}
  key: global
  algorithm: gcra
  rate: 5000/s
  burst: 1000
`;
const LOWERED_YAML = `
- id: hot-rate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 4500/s
  burst: 900
- id: hot-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 45000
  window: 10s
`;

function rulesOf(yaml: string): Map<string, LimiterRule> {
  const parsed = parseRules(yaml, "bench/cluster.ts");
  if (parsed.errors.length > 0) throw new Error(parsed.errors.join("\n"));
  return new Map(compileRules(parsed.rules).map((c) => [c.rule.id, { id: c.rule.id, params: c.params }]));
}
export const RULES = rulesOf(YAML);
const LOWERED = rulesOf(LOWERED_YAML);

/**
 * One row of the cluster simulation: `ruleId` (one of `YAML`'s rules) on one key, `isolates`, Poisson load, a
 * scenario. `ablated`: `hotMarks` runs without the data centers' hot marks (the protocol's mechanisms are switched
 * off by the caller, src/protocol/mechanisms.ts `ablate`). `SLUICE_SIM_SEED=n` in the environment adds n to every
 * row's seed: other arrivals of the same rows, to tell a change's effect from the chaos of one seed (a change that
 * moves a call's bytes moves every later event; a row moves by a few points either way with any change). Never in a
 * published run.
 */
// long: one run, its exact writer, its calm twin and its row, in the order each needs the last
export async function clusterRow(
  ruleId: string,
  isolates: number,
  loadPerS: number,
  scenario: Scenario,
  ablated: string | null = null,
): Promise<ClusterRow> {
  const started = Date.now();
  const rule = { ...RULES.get(ruleId)!, version: 1 };
  const lowered = { ...(LOWERED.get(ruleId) ?? rule), version: 2 };
  const run: ClusterRun = {
    rule,
    lowered,
    isolates,
    loadPerS,
    durationMs: durationOf(loadPerS, scenario),
    scenario,
    t0Ms: T0,
    tier: true,
    ...(ablated === "hotMarks" ? { noMarks: true } : {}),
    ...(LEDGER_BINS === undefined ? {} : { ledgerBins: LEDGER_BINS }),
    seed: loadPerS * 7 + ruleId.length + isolates + scenario.length * 31 + SEED_OFFSET,
  };
  const out = await simulateCluster(run);
  const exact = exactAdmissions(run, out.arrivals, out.newestFromMs);
  let low: LowDecisions | undefined;
  if (loadPerS <= 10) {
    const plain = await simulateCluster({ ...run, plain: true });
    low = lowDecisionsOf(out.verdicts, plain.verdicts);
  }
  // The same run without its event (same seed: the same arrivals), over the same 2 s after the event's time.
  let underWithoutEventPct: number | undefined;
  if (out.eventAtMs !== null) {
    const calm: ClusterRun = { ...run, scenario: "steady" };
    const quiet = await simulateCluster(calm);
    const times = [...quiet.admissions].sort((a, b) => a - b);
    underWithoutEventPct = underAfterPct(
      calm,
      exactAdmissions(calm, quiet.arrivals, quiet.newestFromMs),
      times,
      out.eventAtMs,
    );
  }
  if (process.argv.includes("--ledger") && out.ledger !== null) {
    const l = withExact(out.ledger, exact, run.t0Ms, run.t0Ms + run.durationMs);
    process.stderr.write(`${ledgerLines(l).join("\n")}\n`);
  }
  const r = {
    ...rowOf(run, out, exact, low, (Date.now() - started) / 1000),
    ...(underWithoutEventPct === undefined ? {} : { underWithoutEventPct }),
  };
  log(`cluster: ${ruleId} ${scenario} ${isolates} isolates at ${loadPerS}/s in ${r.runSeconds} s`);
  return r;
}
