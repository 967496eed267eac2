/**
 * `compare`'s replay speed, this tree against another commit, side by side in one run:
 *
 *   node --import tsx bench/replay_speed.ts [--vs COMMIT] [--lines N] [--keys K] [--runs R]   (npm run bench -- --only replay_speed)
 *
 * The other commit's source comes from `git archive` into a temp dir (node_modules linked). One trace (`t_ms,key,cost`,
 * N lines over an hour, keys uniformly random among K, seeded) is replayed through each tree's `ComparisonBuilder`
 * over that tree's shipped rules (rules/), as `sluice compare` without `--svg` does, each run a child process of its
 * own, the trees alternating; the figure is the replay's CPU time (user + system, the trace already in memory as
 * typed arrays), so start-up and parsing are left out. Lines per second and the ratio of the medians go to
 * bench/out/results/replay_speed.json.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { log, median, QUICK, ROOT, round, writeResult } from "./common.ts";

const { values } = parseArgs({
  options: {
    // The tree before the row kernels: issue 38's "today".
    vs: { type: "string", default: "cc12101" },
    lines: { type: "string", default: QUICK ? "200000" : "1000000" },
    keys: { type: "string", default: "1000" },
    runs: { type: "string", default: QUICK ? "1" : "3" },
    child: { type: "string" },
    trace: { type: "string" },
    // Read by common.ts (npm run bench passes them on).
    quick: { type: "boolean" },
    publish: { type: "boolean" },
  },
});

/** In a child: replay `trace` through `root`'s builder over `root`'s rules; print `seconds lines rules`. */
async function child(root: string, trace: string): Promise<void> {
  // Loaded by path (either tree's), typed here by what is used.
  const { loadRules } = (await import(join(root, "src/rules/load.ts"))) as {
    loadRules: (paths: string[]) => { rules: unknown[] };
  };
  const { ComparisonBuilder } = (await import(join(root, "src/replay/accumulate.ts"))) as {
    ComparisonBuilder: new (
      rules: unknown[],
      options: { stateKey: null; draw: false },
    ) => { add(tMs: number, key: string, cost: number): void; finish(): unknown };
  };
  const rules = loadRules([join(root, "rules/")]).rules;
  // The trace in typed arrays and one string per key: `sluice compare` reads its trace a chunk at a time and never
  // holds it as objects, and a million small arrays kept alive would be marked by every full collection of the
  // replay (in either tree), which is the harness's cost, not the replay's.
  const lines = readFileSync(trace, "utf8").split("\n");
  const n = lines.length - (lines.at(-1) === "" ? 1 : 0);
  const times = new Float64Array(n);
  const costs = new Float64Array(n);
  const keyOf = new Uint32Array(n);
  const names: string[] = [];
  const numbers = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const [t, key, cost] = lines[i]!.split(",") as [string, string, string];
    times[i] = Number(t);
    costs[i] = Number(cost);
    let k = numbers.get(key);
    if (k === undefined) {
      k = names.push(key) - 1;
      numbers.set(key, k);
    }
    keyOf[i] = k;
  }
  lines.length = 0;
  const builder = new ComparisonBuilder(rules, { stateKey: null, draw: false });
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) builder.add(times[i]!, names[keyOf[i]!]!, costs[i]!);
  builder.finish();
  const used = process.cpuUsage(start);
  process.stdout.write(`${(used.user + used.system) / 1e6} ${n} ${rules.length}\n`);
}

function writeTrace(path: string, lines: number, keys: number): void {
  let seed = 24;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const out: string[] = [];
  for (let i = 0; i < lines; i++) out.push(`${Math.floor((i * 3_600_000) / lines)},k${Math.floor(random() * keys)},1`);
  writeFileSync(path, `${out.join("\n")}\n`);
}

function runOnce(root: string, trace: string): { seconds: number; lines: number; rules: number } {
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench/replay_speed.ts"), "--child", root, "--trace", trace],
    {
      cwd: ROOT,
      encoding: "utf8",
      maxBuffer: 1 << 20,
    },
  );
  if (r.status !== 0) throw new Error(`replay_speed: ${root}: exit ${r.status}\n${r.stderr}`);
  const [seconds, lines, rules] = r.stdout.trim().split(" ").map(Number) as [number, number, number];
  return { seconds, lines, rules };
}

async function main(): Promise<void> {
  if (values.child !== undefined) return child(values.child, values.trace!);
  const dir = mkdtempSync(join(tmpdir(), "sluice-replay-speed-"));
  try {
    const vs = execFileSync("git", ["rev-parse", "--short", values.vs], { cwd: ROOT, encoding: "utf8" }).trim();
    const old = join(dir, "old");
    execFileSync("sh", ["-c", `mkdir -p "${old}" && git archive ${vs} | tar -x -C "${old}"`], { cwd: ROOT });
    symlinkSync(join(ROOT, "node_modules"), join(old, "node_modules"), "dir");
    const trace = join(dir, "trace.csv");
    writeTrace(trace, Number(values.lines), Number(values.keys));
    const runs: Record<"old" | "new", number[]> = { old: [], new: [] };
    let rules = { old: 0, new: 0 };
    for (let i = 0; i < Number(values.runs); i++) {
      for (const [name, root] of [
        ["old", old],
        ["new", ROOT],
      ] as const) {
        const r = runOnce(root, trace);
        runs[name].push(r.seconds);
        rules = { ...rules, [name]: r.rules };
        log(
          `replay_speed: run ${i + 1} ${name}: ${r.seconds.toFixed(2)} s CPU, ${Math.round(r.lines / r.seconds)} lines/s`,
        );
      }
    }
    const lines = Number(values.lines);
    const perS = (s: number[]) => Math.round(lines / median(s));
    const data = {
      vs,
      lines,
      keys: Number(values.keys),
      rules,
      oldSeconds: runs.old.map((s) => round(s, 2)),
      newSeconds: runs.new.map((s) => round(s, 2)),
      oldLinesPerS: perS(runs.old),
      newLinesPerS: perS(runs.new),
      speedup: round(median(runs.old) / median(runs.new), 2),
    };
    const given = process.argv.slice(2);
    const argv = [...(given.includes("--vs") ? [] : ["--vs", vs]), ...given].join(" ");
    writeResult("replay_speed", `node --import tsx bench/replay_speed.ts ${argv}`, data);
    process.stdout.write(`${JSON.stringify(data)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
