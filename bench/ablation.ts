/**
 * Part: the hot-key tier's ablation (issue 36). The cluster SIMULATION's rows that the late mechanisms were added for,
 * run with every mechanism on, then with each one off in turn (src/protocol/mechanisms.ts, and the data centers' hot
 * marks), each variant a `bench/cluster.ts --rows ... --ablate NAME` process of its own (two at a time): what each
 * mechanism buys, goal by goal. The report (bench/ablation_report.ts) prints it in BENCHMARKS.md.
 */
import { spawn } from "node:child_process";
import { MECHANISMS } from "../src/protocol/mechanisms.ts";
import { type ClusterRow, clusterGoals } from "./cluster_rows.ts";
import { log, ROOT, round, writeResult } from "./common.ts";

/** The rows: rate and window at 2x, the rate rule at its limit with 5,000 isolates, a 50/s rule at 200x, a change. */
export const ABLATION_ROWS = [
  "hot-rate/1000/10000/steady",
  "hot-window/1000/10000/steady",
  "hot-rate/5000/5000/steady",
  "growth-global/1000/10000/steady",
  "hot-window/1000/10000/override-change",
] as const;
const VARIANTS: readonly (string | null)[] = [null, ...MECHANISMS, "hotMarks"];
const PARALLEL = 2;

/** One variant's rows, in `ABLATION_ROWS` order. */
function runVariant(variant: string | null): Promise<ClusterRow[]> {
  const args = ["--import", "tsx", "bench/cluster.ts", "--rows", ABLATION_ROWS.join(",")];
  if (variant !== null) args.push("--ablate", variant);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`ablation: ${variant ?? "all on"} exited ${code}`));
      const byLabel = new Map<string, ClusterRow>();
      for (const line of out.split("\n")) {
        const space = line.indexOf(" ");
        if (space > 0 && line[space + 1] === "{") byLabel.set(line.slice(0, space), JSON.parse(line.slice(space + 1)));
      }
      const rows = ABLATION_ROWS.map((label) => byLabel.get(label));
      if (rows.some((r) => r === undefined)) return reject(new Error(`ablation: ${variant ?? "all on"}: rows missing`));
      resolve(rows as ClusterRow[]);
    });
  });
}

const started = Date.now();
const results: { variant: string | null; rows: ClusterRow[] }[] = [];
const queue = [...VARIANTS];
async function worker(): Promise<void> {
  for (let v = queue.shift(); v !== undefined; v = queue.shift()) {
    const rows = await runVariant(v);
    results.push({ variant: v, rows });
    log(`ablation: ${v ?? "all on"} done`);
  }
}
await Promise.all(Array.from({ length: PARALLEL }, worker));
results.sort((a, b) => VARIANTS.indexOf(a.variant) - VARIANTS.indexOf(b.variant));
const data = {
  rows: ABLATION_ROWS,
  wallSeconds: round((Date.now() - started) / 1000, 0),
  variants: results.map((r) => ({ off: r.variant, rows: r.rows, goals: clusterGoals(r.rows) })),
};
log(`ablation: wrote ${writeResult("ablation", "npm run bench -- --only ablation", data)}`);
