/**
 * BENCHMARKS.md's ablation of the hot-key tier (bench/ablation.ts): each late mechanism off in turn, its rows against
 * the same rows with every mechanism on, and what the figures say of it (the verdict is computed, not written).
 */
import { SLOT_RUN, type SlotRow, slotGoals } from "./ablation_slots.ts";
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
  /** The concurrency row (bench/ablation_slots.ts), all on and with late refunds off; absent: a run before it. */
  readonly slots?: readonly { readonly off: string | null; readonly seed: number; readonly row: SlotRow }[];
}

/** The concurrency row's goals, as the report states them. */
const SLOT_GOALS: readonly (readonly [string, string])[] = [
  [
    "lateSlotsBack",
    "concurrency: every slot a late answer took for a request refused here is given back (none left to `slot_ttl`)",
  ],
  ["concurrencyLimit", "concurrency: never more than `limit` requests at the origin at once"],
];

const labelOf = (r: ClusterRow) => `${r.rule}/${r.isolates}/${r.loadPerS}/${r.scenario.replace(/ /g, "-")}`;
const failedOf = (r: ClusterRow) => Object.values(r.failedOpen).reduce((a, b) => a + b, 0);
const overOf = (r: ClusterRow) => r.overWindow ?? r.overRateBound ?? 0;
/** Goals that tell a mechanism's worth (the 500 calls/s and latency goals are about the whole table's shape). */
const SAFETY = ["window", "rateBound", "concurrencyLimit"];

/**
 * What turning a mechanism off did, against all on over the same rows, on each seed (`runs`: all on and off, the same
 * rows in the same order): goals met on every seed with it and missed on one without, bounds broken on any seed, and
 * per row the mean over the seeds of the points of accuracy and of the key's object's calls after the first second.
 * `slots`: the concurrency row on each seed, all on and off (late refunds only), weighed the same way.
 */
export function verdictOf(
  runs: readonly { readonly on: readonly ClusterRow[]; readonly off: readonly ClusterRow[] }[],
  slots: readonly { readonly on: SlotRow; readonly off: SlotRow }[] = [],
): string {
  const slotGoalsOf = (rows: readonly SlotRow[]) => (rows.length === 0 ? {} : slotGoals(rows));
  const base = { ...clusterGoals(runs.flatMap((r) => r.on)), ...slotGoalsOf(slots.map((s) => s.on)) };
  const without = { ...clusterGoals(runs.flatMap((r) => r.off)), ...slotGoalsOf(slots.map((s) => s.off)) };
  const lost = Object.keys(base).filter((g) => base[g]!.met && without[g]?.met === false);
  const safety = lost.filter((g) => SAFETY.includes(g));
  const goals = lost.filter((g) => !SAFETY.includes(g));
  const meanOver = (f: (on: ClusterRow, off: ClusterRow) => number) =>
    runs[0]!.off.map((_, i) => runs.reduce((sum, r) => sum + f(r.on[i]!, r.off[i]!), 0) / runs.length);
  const worst = Math.min(...meanOver((on, off) => Math.abs(on.admittedVsExactPct) - Math.abs(off.admittedVsExactPct)));
  const keyDelta = Math.max(...meanOver((on, off) => off.keyBusiestAfterFirst - on.keyBusiestAfterFirst));
  const slotPoints = slots.reduce(
    (n, s) => n + Math.abs(s.on.admittedVsExactPct) - Math.abs(s.off.admittedVsExactPct),
    0,
  );
  const slotWorst = slots.length === 0 ? 0 : slotPoints / slots.length;
  const parts: string[] = [];
  if (safety.length > 0) parts.push(`guards a bound (${safety.join(", ")} broken without it)`);
  if (goals.length > 0) parts.push(`turns missed into met: ${goals.join(", ")}`);
  if (worst < -0.5) parts.push(`${(-worst).toFixed(2)} points closer to exact with it`);
  if (worst > 0.5) parts.push(`${worst.toFixed(2)} points further from exact with it`);
  if (slotWorst < -0.5) parts.push(`${(-slotWorst).toFixed(2)} points closer to exact with it on the concurrency row`);
  if (slotWorst > 0.5) parts.push(`${slotWorst.toFixed(2)} points further from exact with it on the concurrency row`);
  if (keyDelta > 10) parts.push(`key's object ${Math.round(keyDelta)} more calls/s after the 1st s without it`);
  if (keyDelta < -10) parts.push(`key's object ${Math.round(-keyDelta)} fewer calls/s after the 1st s without it`);
  return parts.length === 0 ? "no goal, bound or 0.5 points depends on it here" : parts.join("; ");
}

/**
 * The rule for a cut applied to a verdict: a mechanism stays if it turns a missed goal into a met one, guards a bound,
 * or is worth more than 0.5 points of accuracy or 10 calls/s at the key's object on a row; otherwise it goes.
 */
export function keeps(verdict: string): boolean {
  return /guards a bound|turns missed into met|closer to exact with it|more calls\/s after the 1st s without it/.test(
    verdict,
  );
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
    ...slotLines(d, seeds[0]!),
    "Section 8's goals over the all-on rows of this world (computed):",
    "",
    ...GOALS.map(([key, text]) => {
      const g = clusterGoals(all.rows)[key];
      return `- ${text}: ${g === undefined ? "**not run** (no row of this table applies)" : g.met ? "**met**" : `**not met**: ${g.misses}`}`;
    }),
    ...slotGoalLines(d, seeds),
    "",
    `What each mechanism buys (computed against all on, over its rows, on ${seeds.length === 1 ? "one seed" : `${seeds.length} seeds: goals met on every seed, points and calls as the mean over the seeds`}):`,
    "",
    "The issue's rule for a cut: a mechanism stays if it turns a missed goal into a met one, guards a bound, or is worth more than 0.5 points of accuracy or 10 calls/s at the key's object on a row; otherwise it goes. Applied to the verdicts:",
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
        const verdict = verdictOf(runs as { on: ClusterRow[]; off: ClusterRow[] }[], slotPairs(d, v.off!, seeds));
        const keep = keeps(verdict);
        return `| ${v.off} | ${verdict} | ${keep ? "stays" : "goes"} |`;
      }),
    "",
  ];
  return lines;
}

/** The concurrency row on each seed, all on against `off`; none unless both ran on every seed. */
function slotPairs(d: AblationData, off: string, seeds: readonly number[]) {
  const rowOf = (o: string | null, seed: number) => d.slots?.find((x) => x.off === o && x.seed === seed)?.row;
  const pairs = seeds.map((seed) => ({ on: rowOf(null, seed), off: rowOf(off, seed) }));
  return pairs.every((p) => p.on !== undefined && p.off !== undefined)
    ? (pairs as { on: SlotRow; off: SlotRow }[])
    : [];
}

/** The concurrency row's table, seed `seed`'s runs (nothing for a run before it). */
function slotLines(d: AblationData, seed: number): string[] {
  const rows = (d.slots ?? []).filter((x) => x.seed === seed);
  if (rows.length === 0) return [];
  const { limit, slotTtlMs, isolates, loadPerS, durationMs } = SLOT_RUN;
  return [
    `The concurrency row (bench/ablation_slots.ts), for the one mechanism that acts on a concurrency key (it takes no share, lease or hot mark): late refunds. One \`algorithm: concurrency\` key, limit ${limit}, \`slot_ttl\` ${slotTtlMs / 1000} s (longer than the run: a slot not given back stays held), ${isolates.toLocaleString("en-US")} isolates in the same 9 regions and network, ${loadPerS} req/s for ${durationMs / 1000} s, each admitted request at the origin for a lognormal time (median 200 ms, 1% at 1 s or more), then releasing its slot. Every request goes through its isolate's real coalescer (250 ms budget, last known refusals, and \`lateRefunds\`, which releases a late slot by its id) to the key's object's real record operations; section 8e's model (src/sim/slots.ts) gives late slots back by hand instead. "exact": the single writer deciding each arrival at its arrival time, each admitted request held as long (Sluice holds a slot a round trip longer, from the take's arrival at the object to the release's, so it admits less even with every slot given back). "late slots": slots the key's object took for requests their isolate had already refused (the answer came after the budget), whose late answer reached the isolate; "kept": of them, never given back; "held at the end": slots still held at the object after every request ended, and of them those whose release was sent and never applied (lost on the way, or refused as overloaded) or whose take's answer was lost (no isolate knew of it).`,
    "",
    "| off | row | requests | admitted | exact | diff vs exact | last known | late slots | kept | held at the end (lost) | most in flight (over the limit) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...rows.map(
      ({ off, row: r }) =>
        `| ${off ?? "(all on)"} | ${r.label} | ${r.requests} | ${r.admitted} | ${r.exactAdmitted} | ${r.admittedVsExactPct}% | ${r.lastKnown} | ${r.lateSlots} | ${r.lateKept} | ${r.heldAtEnd} (${r.heldLost}) | ${r.maxInFlight} (${r.overLimit}) |`,
    ),
    "",
  ];
}

/** The concurrency row's goals over its all-on runs, every seed. */
function slotGoalLines(d: AblationData, seeds: readonly number[]): string[] {
  const on = (d.slots ?? []).filter((x) => x.off === null && seeds.includes(x.seed)).map((x) => x.row);
  if (on.length === 0) return [];
  const goals = slotGoals(on);
  return SLOT_GOALS.map(([key, text]) => {
    const g = goals[key]!;
    return `- ${text} (${on.length} seed(s)): ${g.met ? "**met**" : `**not met**: ${g.misses}`}`;
  });
}
