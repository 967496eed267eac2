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
    readonly rows: readonly ClusterRow[];
    readonly goals: Record<string, ClusterGoal>;
  }[];
}

const labelOf = (r: ClusterRow) => `${r.rule}/${r.isolates}/${r.loadPerS}/${r.scenario.replace(/ /g, "-")}`;
const failedOf = (r: ClusterRow) => Object.values(r.failedOpen).reduce((a, b) => a + b, 0);
const overOf = (r: ClusterRow) => r.overWindow ?? r.overRateBound ?? 0;
/** Goals that tell a mechanism's worth (the 500 calls/s and latency goals are about the whole table's shape). */
const SAFETY = ["window", "rateBound"];

/** What turning `off` off did, against all on over the same rows: goals lost, bounds broken, points of accuracy. */
export function verdictOf(on: readonly ClusterRow[], off: readonly ClusterRow[]): string {
  const base = clusterGoals(on);
  const without = clusterGoals(off);
  const lost = Object.keys(base).filter((g) => base[g]!.met && without[g]?.met === false);
  const safety = lost.filter((g) => SAFETY.includes(g));
  const goals = lost.filter((g) => !SAFETY.includes(g));
  const worst = Math.min(...off.map((r, i) => Math.abs(on[i]!.admittedVsExactPct) - Math.abs(r.admittedVsExactPct)));
  const keyDelta = Math.max(...off.map((r, i) => r.keyBusiestAfterFirst - on[i]!.keyBusiestAfterFirst));
  const parts: string[] = [];
  if (safety.length > 0) parts.push(`guards a bound (${safety.join(", ")} broken without it)`);
  if (goals.length > 0) parts.push(`turns missed into met: ${goals.join(", ")}`);
  if (worst < -0.5) parts.push(`${(-worst).toFixed(2)} points closer to exact with it`);
  if (worst > 0.5) parts.push(`${worst.toFixed(2)} points further from exact with it`);
  if (keyDelta > 10) parts.push(`key's object ${keyDelta} more calls/s after the 1st s without it`);
  if (keyDelta < -10) parts.push(`key's object ${-keyDelta} fewer calls/s after the 1st s without it`);
  return parts.length === 0 ? "no goal, bound or 0.5 points depends on it here" : parts.join("; ");
}

export function ablationSection(d: AblationData): string[] {
  const all = d.variants.find((v) => v.off === null);
  if (all === undefined)
    return ["No all-on run in bench/results/ablation.json: rerun `npm run bench -- --only ablation`.", ""];
  const onOf = new Map(all.rows.map((r) => [labelOf(r), r]));
  const cells = (r: ClusterRow) =>
    `${r.keyFirstSecond} | ${r.keyBusiestAfterFirst} | ${r.delegateBusiestSecond} | ${r.keyShareAsks} | ${failedOf(r)} | ${r.lastKnown} | ${overOf(r)} | ${r.admittedVsExactPct}% | ${r.latencyP50Ms} / ${r.latencyP99Ms} |`;
  const lines = [
    `bench/ablation.ts: the cluster SIMULATION of section 8, in its world (${WORLD}) Each row run with every mechanism on, then with one off (src/protocol/mechanisms.ts \`ablate\`, or the data centers' hot marks), each variant on the rows its mechanism was added for. Same seeds: the same arrivals with and without. ${d.wallSeconds} s of wall time, two variants at a time, on a machine shared with other work (the figures are simulated time: the load does not change them). "failed open" counts every request admitted uncounted, whatever its failure's label; "over": window rows, most admitted beyond the limit in any window; rate rows, beyond burst + rate x (t + one share term). The verdict is computed from the figures (bench/ablation_report.ts \`verdictOf\`): a goal of section 8 met with the mechanism and missed without, a bound broken without it, more than 0.5 points of accuracy, more than 10 calls/s at the key's object.`,
    "",
    "| off | row | key 1st s | key busiest after 1st s | delegate busiest s | share asks | failed open | last known | over | diff vs exact | p50 / p99 ms |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...all.rows.map((r) => `| (all on) | ${labelOf(r)} | ${cells(r)}`),
    ...d.variants
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
    "What each mechanism buys (computed against all on, over its rows):",
    "",
    "The issue's rule for a cut: a mechanism stays if it turns a missed goal into a met one, guards a bound, or is worth more than 0.5 points of accuracy on a row; otherwise it goes. Applied to the verdicts:",
    "",
    "| mechanism | verdict | by the rule |",
    "|---|---|---|",
    ...d.variants
      .filter((v) => v.off !== null)
      .map((v) => {
        const on = v.rows.map((r) => onOf.get(labelOf(r)));
        if (on.some((r) => r === undefined)) return `| ${v.off} | (rows not run with all on) | |`;
        const verdict = verdictOf(on as ClusterRow[], v.rows);
        const keep = /guards a bound|turns missed into met|closer to exact with it/.test(verdict);
        return `| ${v.off} | ${verdict} | ${keep ? "stays" : "goes"} |`;
      }),
    "",
  ];
  return lines;
}
