/**
 * `sluice gen` as keys grow: the same number of lines from 20 keys and from 1,000,000, side by side in one run,
 * optionally against another commit's tree (`git archive`, node_modules linked):
 *
 *   node --import tsx bench/gen_keys.ts [--lines N] [--vs COMMIT, default af3470e; "" for none] [--runs R]
 *
 * Each run is `sluice gen --poisson` (lines / keys an hour for each key, over an hour) to /dev/null in a child process
 * under /usr/bin/time: its CPU (user + system) and peak RSS; the trees and key counts alternate. Start-up is measured
 * apart (`gen --burst 1@0`, one line) and taken off for the CPU per line.
 * Writes bench/out/results/gen_keys.json (bench/results/ with --publish).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { log, median, QUICK, ROOT, round, writeResult } from "./common.ts";

const { values } = parseArgs({
  options: {
    // The tree before gen's streams were per pattern (npm run bench compares with it).
    vs: { type: "string", default: "af3470e" },
    lines: { type: "string", default: QUICK ? "200000" : "3000000" },
    runs: { type: "string", default: QUICK ? "1" : "3" },
    // Read by common.ts (npm run bench passes them on).
    quick: { type: "boolean" },
    publish: { type: "boolean" },
  },
});

const KEYS = [20, 1_000_000];

interface Run {
  readonly cpuS: number;
  readonly peakRssMb: number;
}

/** `lines / keys` an hour as a rule-file rate, reduced (`1/5h`, `50000/h`). */
function perKeyRate(lines: number, keys: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(lines, keys);
  return keys / g === 1 ? `${lines / g}/h` : `${lines / g}/${keys / g}h`;
}

function runGen(root: string, dir: string, keys: number, lines: number): Run {
  const args =
    keys === 0
      ? ["gen", "--burst", "1@0"]
      : [
          "gen",
          "--poisson",
          `${perKeyRate(lines, keys)},0,h`,
          "--keys",
          String(keys),
          "--max-lines",
          String(2 * lines + keys),
        ];
  const timeFile = join(dir, "time");
  const child = spawnSync(
    "/usr/bin/time",
    ["-o", timeFile, "-f", "%U %S %M", process.execPath, join(root, "bin/sluice.mjs"), ...args],
    { cwd: root, stdio: ["ignore", openSync("/dev/null", "w"), "pipe"], encoding: "utf8" },
  );
  if (child.status !== 0)
    throw new Error(`gen_keys: ${root}: sluice ${args.join(" ")}: exit ${child.status}\n${child.stderr}`);
  const [user, system, rssKb] = readFileSync(timeFile, "utf8").trim().split("\n").at(-1)!.split(" ").map(Number);
  return { cpuS: user! + system!, peakRssMb: rssKb! / 1024 };
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), "sluice-gen-keys-"));
  try {
    const trees: [string, string][] = [["this", ROOT]];
    if (values.vs !== "") {
      const vs = execFileSync("git", ["rev-parse", "--short", values.vs], { cwd: ROOT, encoding: "utf8" }).trim();
      const old = join(dir, "old");
      execFileSync("sh", ["-c", `mkdir -p "${old}" && git archive ${vs} | tar -x -C "${old}"`], { cwd: ROOT });
      symlinkSync(join(ROOT, "node_modules"), join(old, "node_modules"), "dir");
      trees.unshift([vs, old]);
    }
    const lines = Number(values.lines);
    const runs = new Map<string, Run[]>();
    for (let i = 0; i < Number(values.runs); i++) {
      for (const [name, root] of trees) {
        for (const keys of [0, ...KEYS]) {
          const r = runGen(root, dir, keys, lines);
          const id = `${name} ${keys}`;
          runs.set(id, [...(runs.get(id) ?? []), r]);
          log(
            `gen_keys: run ${i + 1} ${id} keys${keys === 0 ? " (start-up)" : ""}: ${r.cpuS.toFixed(2)} s CPU, ${r.peakRssMb.toFixed(0)} MB peak RSS`,
          );
        }
      }
    }
    const rows = trees.map(([name]) => {
      const at = (keys: number) => {
        const list = runs.get(`${name} ${keys}`)!;
        return {
          cpuS: round(median(list.map((r) => r.cpuS)), 2),
          runsS: list.map((r) => round(r.cpuS, 2)),
          peakRssMb: round(Math.max(...list.map((r) => r.peakRssMb)), 1),
        };
      };
      const startup = at(0).cpuS;
      const perLine = (cpuS: number) => round(((cpuS - startup) / lines) * 1e9, 0);
      const few = { ...at(KEYS[0]!), nsPerLine: 0 };
      const many = { ...at(KEYS[1]!), nsPerLine: 0 };
      few.nsPerLine = perLine(few.cpuS);
      many.nsPerLine = perLine(many.cpuS);
      return { tree: name, startupS: startup, few, many, perLineRatio: round(many.nsPerLine / few.nsPerLine, 2) };
    });
    const data = { lines, keys: KEYS, runs: Number(values.runs), trees: rows };
    const given = process.argv.slice(2);
    const argv = [...(given.includes("--vs") ? [] : ["--vs", values.vs]), ...given].join(" ");
    writeResult("gen_keys", `node --import tsx bench/gen_keys.ts ${argv}`, data);
    process.stdout.write(`${JSON.stringify(data)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
