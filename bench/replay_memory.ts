/**
 * What `sluice compare` and `sluice plan` hold per (rule, key): a day of traffic (`--lines` requests over 24 h,
 * uniformly random among `--keys` keys, in time order) replayed over every rule in `--rules`, each as its own process,
 * its peak RSS read from /proc (bench/maxrss.mjs) and its wall time; then the same with 20 keys, whose difference is
 * the per-(rule, key) cost. The traces are written once to bench/out/. Progress goes to a terminal only.
 *
 *   node --import tsx bench/replay_memory.ts [--keys 1000000] [--lines 10000000] [--rules rules/]
 */
import { execFileSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadRules } from "../src/rules/load.ts";
import { seeded } from "../test/support/random.ts";

const { values } = parseArgs({
  options: {
    keys: { type: "string", default: "1000000" },
    lines: { type: "string", default: "10000000" },
    rules: { type: "string", default: "rules/" },
  },
});
const keys = Number(values.keys);
const lines = Number(values.lines);
const DAY_MS = 86_400_000;

async function writeTrace(path: string, keyCount: number): Promise<void> {
  if (existsSync(path)) return;
  const random = seeded(24);
  const out = createWriteStream(path);
  let chunk = "";
  for (let i = 0; i < lines; i++) {
    const t = Math.floor((i * DAY_MS) / lines);
    chunk += `${t},k${Math.floor(random() * keyCount)},1\n`;
    if (chunk.length > 1 << 16) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
      chunk = "";
    }
  }
  out.write(chunk);
  await new Promise<void>((r) => out.end(() => r()));
}

/** Peak RSS (bytes) and wall time (s) of one sluice command. */
function measure(args: string[]): { rss: number; seconds: number } {
  const dir = mkdtempSync(join(tmpdir(), "sluice-rss-"));
  const file = join(dir, "rss");
  const start = performance.now();
  execFileSync(process.execPath, ["--import", "./bench/maxrss.mjs", "bin/sluice.mjs", ...args], {
    env: { ...process.env, SLUICE_MAXRSS_FILE: file },
    stdio: ["ignore", "ignore", "inherit"],
    maxBuffer: 1 << 26,
  });
  const seconds = (performance.now() - start) / 1000;
  const rss = Number(readFileSync(file, "utf8"));
  rmSync(dir, { recursive: true, force: true });
  return { rss, seconds };
}

async function main(): Promise<void> {
  mkdirSync("bench/out", { recursive: true });
  const rules = loadRules([values.rules]).rules;
  const big = `bench/out/day-${keys}-keys-${lines}-lines.csv`;
  const small = `bench/out/day-20-keys-${lines}-lines.csv`;
  await writeTrace(big, keys);
  await writeTrace(small, 20);
  // plan: the rules without their route and plan limits (a t_ms,key trace replays only rules that apply to every
  // request), before and after every burst is halved, so every rule is replayed under both sets.
  const dir = mkdtempSync(join(tmpdir(), "sluice-plan-"));
  const unlimited = readFileSync(join(values.rules, "shiplane.yaml"), "utf8")
    .replace(/(?:plan: (?:\[[^\]]*\]|[\w-]+)|route: "[^"]*"), /g, "")
    .replace(/cost_by_route: .*\n/g, "");
  const before = join(dir, "before.yaml");
  const after = join(dir, "after.yaml");
  writeFileSync(before, unlimited);
  writeFileSync(
    after,
    unlimited.replace(/burst: (\d+)/g, (_, b: string) => `burst: ${Math.max(1, Math.floor(Number(b) / 2))}`),
  );
  const rows: string[] = [];
  for (const [name, args] of [
    ["compare", (trace: string) => ["compare", "--rules", values.rules, "--trace", trace]],
    ["plan", (trace: string) => ["plan", "--from", before, "--to", after, "--trace", trace]],
  ] as const) {
    const b = measure(args(big));
    const s = measure(args(small));
    const perPair = (b.rss - s.rss) / (keys * rules.length);
    rows.push(
      `| ${name} | ${rules.length} | ${keys.toLocaleString("en-US")} | ${lines.toLocaleString("en-US")} | ${(b.rss / 2 ** 20).toFixed(0)} MB | ${b.seconds.toFixed(1)} s | ${(s.rss / 2 ** 20).toFixed(0)} MB | ${perPair.toFixed(0)} B |`,
    );
  }
  rmSync(dir, { recursive: true, force: true });
  console.log("| command | rules | keys | lines | peak RSS | time | peak RSS, 20 keys | per (rule, key) |");
  console.log("| ------- | ----: | ---: | ----: | -------: | ---: | ----------------: | --------------: |");
  for (const r of rows) console.log(r);
}

await main();
