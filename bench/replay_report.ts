/**
 * BENCHMARKS.md sections 5b and 5c from bench/results/replay_speed.json (bench/replay_speed.ts: `compare`'s replay
 * against the tree before issue 38's row kernels, side by side) and gen_keys.json (bench/gen_keys.ts: `sluice gen`
 * with 20 keys and with 1,000,000, side by side, against the tree before its streams were per pattern).
 */
export interface ReplaySpeedData {
  readonly vs: string;
  readonly lines: number;
  readonly keys: number;
  readonly rules: { readonly old: number; readonly new: number };
  readonly oldSeconds: readonly number[];
  readonly newSeconds: readonly number[];
  readonly oldLinesPerS: number;
  readonly newLinesPerS: number;
  readonly speedup: number;
}

export function replaySpeedSection(d: ReplaySpeedData, commit: string): string[] {
  return [
    `One trace of ${d.lines.toLocaleString("en-US")} lines over an hour, ${d.keys.toLocaleString("en-US")} keys, replayed through \`ComparisonBuilder\` over each tree's shipped rules (${d.rules.new} here, ${d.rules.old} at ${d.vs}) as \`sluice compare\` without \`--svg\` does, each run its own process, the two trees alternating; CPU of the replay alone (the trace already in memory). Issue 38's goal: at least 3x ${d.vs}'s lines/s.`,
    "",
    "| tree | CPU s (runs) | lines/s (median) |",
    "|---|---:|---:|",
    `| ${d.vs} (a state object per decision, layout closures) | ${d.oldSeconds.join(", ")} | ${d.oldLinesPerS.toLocaleString("en-US")} |`,
    `| ${commit} | ${d.newSeconds.join(", ")} | ${d.newLinesPerS.toLocaleString("en-US")} |`,
    `| ratio | | **${d.speedup}x** (goal 3x: ${d.speedup >= 3 ? "met" : "**missed**"}) |`,
    "",
  ];
}

interface GenAt {
  readonly cpuS: number;
  readonly runsS: readonly number[];
  readonly peakRssMb: number;
  readonly nsPerLine: number;
}

export interface GenKeysData {
  readonly lines: number;
  readonly keys: readonly number[];
  readonly runs: number;
  readonly trees: readonly {
    readonly tree: string;
    readonly startupS: number;
    readonly few: GenAt;
    readonly many: GenAt;
    readonly perLineRatio: number;
  }[];
}

export function genKeysSection(d: GenKeysData, commit: string): string[] {
  const [few, many] = d.keys.map((k) => k.toLocaleString("en-US"));
  return [
    `\`sluice gen --poisson\` writing ${d.lines.toLocaleString("en-US")} lines (an hour; each key at lines / keys an hour) to /dev/null, with ${few} keys and with ${many}, each run a process of its own under \`/usr/bin/time\` (CPU = user + system; start-up, \`gen --burst 1@0\`, measured apart and taken off for the CPU per line), trees and key counts alternating, medians of ${d.runs} run(s). Issue 38's goal: flat in CPU per line and in memory as keys grow.`,
    "",
    `| tree | start-up CPU s | CPU s, ${few} keys (runs) | CPU s, ${many} keys (runs) | ns per line, ${few} / ${many} keys | ${many} / ${few} keys, per line | peak RSS, ${few} / ${many} keys |`,
    "|---|---:|---:|---:|---:|---:|---:|",
    ...d.trees.map(
      (t) =>
        `| ${t.tree === "this" ? commit : t.tree} | ${t.startupS} | ${t.few.cpuS} (${t.few.runsS.join(", ")}) | ${t.many.cpuS} (${t.many.runsS.join(", ")}) | ${t.few.nsPerLine} / ${t.many.nsPerLine} | ${t.perLineRatio}x | ${t.few.peakRssMb} / ${t.many.peakRssMb} MB |`,
    ),
    "",
    "The CPU per line is the difference of two noisy figures (a run less the start-up, about 1.5 s of it): on a loaded machine read the total CPU and the peak RSS first.",
    "",
  ];
}
