/**
 * BENCHMARKS.md's ablation of the hot-key tier (bench/ablation.ts): each late mechanism off in turn, its rows against
 * the same rows with every mechanism on, and what the figures say of it (the verdict is computed, not written).
 */
import { GOALS, WORLD } from "./cluster_report.ts";
import { type ClusterGoal, type ClusterRow, clusterGoals } from "./cluster_rows.ts";

export interface AblationData {
  readonly wallSeconds: number;
  readonly variants: readonly {
    readonly off: string | null;
    /** `SLUICE_SIM_SEED` of the run (absent: 0, a run before seeds). */
    readonly seed?: number;
    readonly rows: readonly ClusterRow[];
    readonly goals: Record<string, ClusterGoal>;
  }[];
}

const labelOf = (r: ClusterRow) => `${r.rule}/${r.isolates}/${r.loadPerS}/${r.scenario.replace(/ /g, "-")}`;
const failedOf = (r: ClusterRow) => Object.values(r.failedOpen).reduce((a, b) => a + b, 0);
const overOf = (r: ClusterRow) => r.overWindow ?? r.overRateBound ?? 0;
/** Goals that tell a mechanism's worth (the 500 calls/s and latency goals are about the whole table's shape). */
const SAFETY = ["window", "rateBound"];

/**
 * What turning a mechanism off did, against all on over the same rows, on each seed (`runs`: all on and off, the same
 * rows in the same order): goals met on every seed with it and missed on one without, bounds broken on any seed, and
 * per row the mean over the seeds of the points of accuracy and of the key's object's calls after the first second.
 */
export function verdictOf(
  runs: readonly { readonly on: readonly ClusterRow[]; readonly off: readonly ClusterRow[] }[],
): string {
  const base = clusterGoals(runs.flatMap((r) => r.on));
  const without = clusterGoals(runs.flatMap((r) => r.off));
  const lost = Object.keys(base).filter((g) => base[g]!.met && without[g]?.met === false);
  const safety = lost.filter((g) => SAFETY.includes(g));
  const goals = lost.filter((g) => !SAFETY.includes(g));
  const meanOver = (f: (on: ClusterRow, off: ClusterRow) => number) =>
    runs[0]!.off.map((_, i) => runs.reduce((sum, r) => sum + f(r.on[i]!, r.off[i]!), 0) / runs.length);
  const worst = Math.min(...meanOver((on, off) => Math.abs(on.admittedVsExactPct) - Math.abs(off.admittedVsExactPct)));
  const keyDelta = Math.max(...meanOver((on, off) => off.keyBusiestAfterFirst - on.keyBusiestAfterFirst));
  const parts: string[] = [];
  if (safety.length > 0) parts.push(`guards a bound (${safety.join(", ")} broken without it)`);
  if (goals.length > 0) parts.push(`turns missed into met: ${goals.join(", ")}`);
  if (worst < -0.5) parts.push(`${(-worst).toFixed(2)} points closer to exact with it`);
  if (worst > 0.5) parts.push(`${worst.toFixed(2)} points further from exact with it`);
  if (keyDelta > 10) parts.push(`key's object ${Math.round(keyDelta)} more calls/s after the 1st s without it`);
  if (keyDelta < -10) parts.push(`key's object ${Math.round(-keyDelta)} fewer calls/s after the 1st s without it`);
  return parts.length === 0 ? "no goal, bound or 0.5 points depends on it here" : parts.join("; ");
}

export function ablationSection(d: AblationData): string[] {
  const seedOf = (v: AblationData["variants"][number]) => v.seed ?? 0;
  const seeds = [...new Set(d.variants.map(seedOf))].sort((a, b) => a - b);
  const first = d.variants.filter((v) => seedOf(v) === seeds[0]);
  const all = first.find((v) => v.off === null);
  const allOn = new Map(d.variants.filter((v) => v.off === null).map((v) => [seedOf(v), v]));
  if (all === undefined || seeds.some((s) => !allOn.has(s)))
    return ["No all-on run in bench/results/ablation.json: rerun `npm run bench -- --only ablation`.", ""];
  const cells = (r: ClusterRow) =>
    `${r.keyFirstSecond} | ${r.keyBusiestAfterFirst} | ${r.delegateBusiestSecond} | ${r.keyShareAsks} | ${failedOf(r)} | ${r.lastKnown} | ${overOf(r)} | ${r.admittedVsExactPct}% | ${r.latencyP50Ms} / ${r.latencyP99Ms} |`;
  const lines = [
    `bench/ablation.ts: the cluster SIMULATION of section 8, in its world (${WORLD}) Each row run with every mechanism on, then with one off (src/protocol/mechanisms.ts \`ablate\`, or the data centers' hot marks), each variant on the rows its mechanism was added for. Same seeds: the same arrivals with and without; every variant on ${seeds.length} seed(s) (\`SLUICE_SIM_SEED\` ${seeds.join(", ")}): the table shows seed ${seeds[0]}'s rows, the verdicts are over all of them (a row moves by a few points between seeds). ${d.wallSeconds} s of wall time, two variants at a time, on a machine shared with other work (the figures are simulated time: the load does not change them). "failed open" counts every request admitted uncounted, whatever its failure's label; "over": window rows, most admitted beyond the limit in any window; rate rows, beyond burst + rate x (t + one share term). The verdict is computed from the figures (bench/ablation_report.ts \`verdictOf\`): a goal of section 8 met with the mechanism and missed without, a bound broken without it, more than 0.5 points of accuracy, more than 10 calls/s at the key's object.`,
    "",
    "| off | row | key 1st s | key busiest after 1st s | delegate busiest s | share asks | failed open | last known | over | diff vs exact | p50 / p99 ms |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...all.rows.map((r) => `| (all on) | ${labelOf(r)} | ${cells(r)}`),
    ...first
      .filter((v) => v.off !== null)
      .flatMap((v) => v.rows.map((r) => `| ${v.off} | ${labelOf(r)} | ${cells(r)}`)),
    "",
    "Section 8's goals over the all-on rows of this world (computed):",
    "",
    ...GOALS.map(([key, text]) => {
      const g = all.goals[key];
      return `- ${text}: ${g === undefined ? "**not run**" : g.met ? "**met**" : `**not met**: ${g.misses}`}`;
    }),
    "",
    `What each mechanism buys (computed against all on, over its rows, on ${seeds.length === 1 ? "one seed" : `${seeds.length} seeds: goals met on every seed, points and calls as the mean over the seeds`}):`,
    "",
    "The issue's rule for a cut: a mechanism stays if it turns a missed goal into a met one, guards a bound, or is worth more than 0.5 points of accuracy on a row; otherwise it goes. Applied to the verdicts:",
    "",
    "| mechanism | verdict | by the rule |",
    "|---|---|---|",
    ...first
      .filter((v) => v.off !== null)
      .map((v) => {
        const runs = seeds.map((seed) => {
          const onOf = new Map(allOn.get(seed)!.rows.map((r) => [labelOf(r), r]));
          const off = d.variants.find((w) => w.off === v.off && seedOf(w) === seed)?.rows ?? [];
          return { on: off.map((r) => onOf.get(labelOf(r))), off };
        });
        const incomplete = runs.some((r) => r.off.length !== v.rows.length || r.on.some((o) => o === undefined));
        if (incomplete) return `| ${v.off} | (rows not run with all on on every seed) | |`;
        const verdict = verdictOf(runs as { on: ClusterRow[]; off: ClusterRow[] }[]);
        const keep = /guards a bound|turns missed into met|closer to exact with it/.test(verdict);
        return `| ${v.off} | ${verdict} | ${keep ? "stays" : "goes"} |`;
      }),
    "",
  ];
  return lines;
}
