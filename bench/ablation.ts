/**
 * Part: the hot-key tier's ablation (issue 36). The cluster SIMULATION's rows that the late mechanisms were added for,
 * run with every mechanism on, then with each one off in turn (src/protocol/mechanisms.ts, and the data centers' hot
 * marks), each variant a `bench/cluster.ts --rows ... --ablate NAME` process of its own (two at a time): what each
 * mechanism buys, goal by goal. All on and with late refunds off also run the concurrency row (bench/ablation_slots.ts):
 * what late refunds weigh shows on a concurrency key, not on a rate or window row. The report
 * (bench/ablation_report.ts) prints it in BENCHMARKS.md.
 */
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { MECHANISMS, type Mechanism } from "../src/protocol/mechanisms.ts";
import type { AblationData } from "./ablation_report.ts";
import type { SlotRow } from "./ablation_slots.ts";
import { type ClusterRow, clusterGoals } from "./cluster_rows.ts";
import { BENCH_DIR, log, ROOT, round, writeResult } from "./common.ts";

const PARTIAL = join(BENCH_DIR, "out", "ablation.partial.jsonl");

const RATE = ["hot-rate/1000/10000/steady", "growth-global/1000/10000/steady"];
const WINDOW = ["hot-window/1000/10000/steady", "hot-window/1000/10000/override-change"];
const FAN_OUT = ["hot-rate/1000/10000/steady", "hot-window/1000/10000/steady", "hot-rate/5000/5000/steady"];
/**
 * Slower rules, whose keys are not hot by construction (src/isolate/hot_marks.ts `hotByConstruction`): where hot marks
 * and the spread act from the first second. The shipped search-origin (200/s, `key: global`) steady and in a flash
 * crowd, and free-global (10/s per API key) at 1,000x its rate, each at 5,000 isolates (issue 36's first second).
 */
const SLOW = ["search-origin/5000/400/steady", "search-origin/5000/400/flash-crowd", "free-global/5000/10000/steady"];
/** Spare kept home acts on a slow rate rule below its rate: growth crosses it, a flash crowd jumps past it. */
const SPARE = ["search-origin/1000/400/growth", "search-origin/5000/400/flash-crowd"];
/** Equal first parts act on a fast rate rule's cold start: the rate rule at 2x, at 1,000 and 5,000 isolates. */
const FIRST = ["hot-rate/1000/10000/steady", "hot-rate/5000/5000/steady"];
/**
 * A renewing delegate's old share acts at every renewal of every rate share: its RATE rows, the fan-out's rate rows,
 * and the two where cutting it cost most in section 8 and 8c (2026-12-06, seed 0: hot-rate at 5,000 isolates and 10k
 * req/s -0.9 points, global-rate at 1,000 isolates -1.2).
 */
/**
 * Late answers act on a call in the network's tail on a key not known busy: the rules at 10 req/s, where the exact
 * writer refuses nothing (section 8's "identical decisions" rows), and the rate rule at 2x, where a tail also happens.
 */
const LOW = ["hot-rate/1000/10/steady", "hot-window/1000/10/steady", "hot-rate/1000/10000/steady"];
/**
 * Shed back acts where parts move between delegates every term: a slow rate rule growing through its rate and in a
 * flash crowd at 1,000 isolates, and the fast one's flash crowd and growth at 5,000 (section 8c's rows).
 */
const SHED = [
  "search-origin/1000/400/growth",
  "search-origin/1000/400/flash-crowd",
  "global-rate/5000/10000/flash-crowd",
  "global-rate/5000/10000/growth",
];
/**
 * A call sent again when unanswered acts where messages are lost or late: the rules at 10 req/s (decisions identical to
 * one call per request), the rate and window rules at 2x, the fast rule's growth (renewals late in a far region), and
 * every delegate restarting (section 8's under-admission after it).
 */
const RESEND = [
  ...LOW,
  "hot-window/1000/10000/steady",
  "global-rate/5000/10000/growth",
  "hot-rate/1000/10000/delegate-restart",
];
const OLD_SHARE = [...RATE, "hot-rate/5000/5000/steady", "hot-rate/5000/10000/steady", "global-rate/1000/10000/steady"];
/**
 * The rows each variant runs: every row with all on; with one mechanism off, the rows of what it was added for (a
 * rate mechanism: the rate rule at 2x and a 50/s rule at 200x; a window one: the window rule at 2x and an override
 * change; one of the fan-out: both at 2x and the rate rule at its limit with 5,000 isolates; the spread and hot marks
 * also the slower rules' rows). The machine's 2 cores are shared, so not every variant runs every row.
 */
export const ABLATION: readonly (readonly [Mechanism | "hotMarks" | null, readonly string[]])[] = [
  [null, [...new Set([...FAN_OUT, ...RATE, ...WINDOW, ...SLOW, ...SPARE, ...OLD_SHARE, ...LOW, ...SHED, ...RESEND])]],
  ["oldShareFor", OLD_SHARE],
  ["rttTerms", RATE],
  ["windowAhead", WINDOW],
  ["scarceWindowSplit", WINDOW],
  ["subleases", FAN_OUT],
  ["lateRefunds", FAN_OUT],
  ["spread", [...FAN_OUT, ...SLOW]],
  ["hotMarks", [...FAN_OUT, ...SLOW]],
  ["spareHome", SPARE],
  ["equalFirst", FIRST],
  ["lateAnswers", LOW],
  ["shedBack", SHED],
  ["resend", RESEND],
];
if (ABLATION.length !== MECHANISMS.length + 2) throw new Error("ablation: a mechanism has no rows");
const ALL_ON = new Set(ABLATION[0]![1]);
for (const [v, labels] of ABLATION.slice(1)) {
  const missing = labels.filter((l) => !ALL_ON.has(l));
  if (missing.length > 0) throw new Error(`ablation: ${v}'s rows ${missing.join(", ")} are not run with all on`);
}
const PARALLEL = 2;
/**
 * Each variant runs on these seeds (`SLUICE_SIM_SEED`: other arrivals of the same rows): one row moves by a few points
 * between seeds of the same code, so a verdict on one seed can say "goes" of a mechanism the mean of three keeps.
 */
export const ABLATION_SEEDS = [0, 1000, 2000] as const;

/** A bench script's stdout, run on one seed (`SLUICE_SIM_SEED`) with `args`. */
function runScript(args: readonly string[], seed: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, SLUICE_SIM_SEED: String(seed) };
    const child = spawn(process.execPath, ["--import", "tsx", ...args], {
      cwd: ROOT,
      env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`ablation: ${what} exited ${code}`))));
  });
}

/** One variant's rows on one seed, in the order asked. */
async function runVariant(variant: string | null, labels: readonly string[], seed: number): Promise<ClusterRow[]> {
  const args = ["bench/cluster.ts", "--rows", labels.join(",")];
  if (variant !== null) args.push("--ablate", variant);
  const out = await runScript(args, seed, variant ?? "all on");
  const byLabel = new Map<string, ClusterRow>();
  for (const line of out.split("\n")) {
    const space = line.indexOf(" ");
    if (space > 0 && line[space + 1] === "{") byLabel.set(line.slice(0, space), JSON.parse(line.slice(space + 1)));
  }
  const rows = labels.map((label) => byLabel.get(label));
  if (rows.some((r) => r === undefined)) throw new Error(`ablation: ${variant ?? "all on"}: rows missing`);
  return rows as ClusterRow[];
}

/**
 * The concurrency row (bench/ablation_slots.ts) on one seed: run all on and with late refunds off, the one mechanism
 * that acts on a concurrency key (it takes no share, lease or hot mark).
 */
async function runSlots(variant: "lateRefunds" | null, seed: number): Promise<SlotRow> {
  const args = ["bench/ablation_slots.ts", "--seed", String(seed), ...(variant === null ? [] : ["--ablate", variant])];
  const line = (await runScript(args, seed, `slots ${variant ?? "all on"}`))
    .split("\n")
    .find((l) => l.startsWith("slots {"));
  if (line === undefined) throw new Error(`ablation: slots ${variant ?? "all on"}: no row`);
  return JSON.parse(line.slice("slots ".length)) as SlotRow;
}

const started = Date.now();
type Variant = Mechanism | "hotMarks" | null;
const results: { variant: Variant; seed: number; rows: ClusterRow[] }[] = [];
const slots: { off: "lateRefunds" | null; seed: number; row: SlotRow }[] = [];
const queue = ABLATION_SEEDS.flatMap((seed) => ABLATION.map(([v, labels]) => ({ v, labels, seed })));
const order = ABLATION.map(([v]) => v);
async function worker(): Promise<void> {
  for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
    const { v, labels, seed } = job;
    if (v === null || v === "lateRefunds") {
      const row = await runSlots(v, seed);
      slots.push({ off: v, seed, row });
      appendFileSync(PARTIAL, `${JSON.stringify({ variant: v, seed, slots: row })}\n`);
    }
    const rows = await runVariant(v, labels, seed);
    results.push({ variant: v, seed, rows });
    // Each variant as it ends (a long run interrupted keeps what it finished).
    appendFileSync(PARTIAL, `${JSON.stringify({ variant: v, seed, rows })}\n`);
    log(`ablation: ${v ?? "all on"}, seed ${seed} done`);
  }
}
mkdirSync(dirname(PARTIAL), { recursive: true });
writeFileSync(PARTIAL, "");
await Promise.all(Array.from({ length: PARALLEL }, worker));
results.sort((a, b) => a.seed - b.seed || order.indexOf(a.variant) - order.indexOf(b.variant));
slots.sort((a, b) => a.seed - b.seed || (a.off === null ? -1 : 1) - (b.off === null ? -1 : 1));
const data: AblationData = {
  wallSeconds: round((Date.now() - started) / 1000, 0),
  variants: results.map((r) => ({ off: r.variant, seed: r.seed, rows: r.rows, goals: clusterGoals(r.rows) })),
  slots,
};
log(`ablation: wrote ${writeResult("ablation", "npm run bench -- --only ablation", data)}`);
