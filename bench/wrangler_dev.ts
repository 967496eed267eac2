/**
 * A real `wrangler dev` for the benchmarks and the soak, never touching the working tree: the project (src, bin,
 * wrangler.toml, package.json) is copied to a temp dir with node_modules linked, the given rules are written to its
 * rules/ and compiled there, and wrangler dev runs there on a free 127.0.0.1 port, offline, in its own process group
 * (wrangler, esbuild and workerd together), stopped by signalling that group: the process it started, by id.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./common.ts";

/** Offline and quiet: no Request.cf fetch, no telemetry, no update check. */
export const WRANGLER_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
} as const;

export const WRANGLER_BIN = join(ROOT, "node_modules", ".bin", "wrangler");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A temp copy of the project whose rules/ holds `rules` (file name -> YAML), compiled. */
export function projectCopy(prefix: string, rules: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const name of ["src", "bin", "wrangler.toml", "package.json", "tsconfig.json"])
    cpSync(join(ROOT, name), join(dir, name), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  mkdirSync(join(dir, "rules"));
  for (const [file, yaml] of Object.entries(rules)) writeFileSync(join(dir, "rules", file), yaml);
  const compiled = spawnSync(process.execPath, ["bin/sluice.mjs", "compile"], { cwd: dir, encoding: "utf8" });
  if (compiled.status !== 0) throw new Error(`compile: ${compiled.stderr}`);
  return dir;
}

/**
 * Drop the `[build]` table of the copy's wrangler.toml (its rules are compiled already). Without this, wrangler dev
 * re-runs the build command as soon as its watcher of rules/ is ready and reloads the Worker a few seconds after
 * start-up, answering requests in flight with its own "worker restarted mid-request" 503: an artefact of wrangler dev.
 */
export function dropBuildStep(dir: string): void {
  const toml = join(dir, "wrangler.toml");
  writeFileSync(toml, readFileSync(toml, "utf8").replace(/\[build\]\n(?:[a-z_]+ = .*\n)+/, ""));
  if (readFileSync(toml, "utf8").includes("[build]")) throw new Error(`could not drop [build] from ${toml}`);
}

/** RSS of the processes in group `pgid` (wrangler dev's: node, esbuild, workerd), from /proc, kB. */
export function groupRss(pgid: number): { workerdKb: number; totalKb: number } {
  let workerdKb = 0;
  let totalKb = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue; // fields: state, ppid, pgrp, ...
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${entry}/status`, "utf8"));
      const kb = rss === null ? 0 : Number(rss[1]);
      totalKb += kb;
      if (comm.startsWith("workerd")) workerdKb += kb;
    } catch {
      // the process ended between readdir and read
    }
  }
  return { workerdKb, totalKb };
}

/** Start `wrangler dev` in `dir` on `port` with extra arguments; its own process group, whose id is its pid. */
export function startWrangler(
  dir: string,
  port: number,
  extra: readonly string[],
  stdio: "ignore" | "pipe" = "ignore",
  env: Record<string, string> = {},
): ChildProcess {
  return spawn(WRANGLER_BIN, ["dev", "--ip", "127.0.0.1", "--port", String(port), ...extra], {
    cwd: dir,
    detached: true,
    stdio: ["ignore", stdio, stdio],
    env: { ...process.env, ...WRANGLER_ENV, ...env },
  });
}

export async function waitUp(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with ${child.exitCode}`);
    try {
      await (await fetch(url, { signal: AbortSignal.timeout(2_000) })).arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100)); // not listening yet
    }
  }
  throw new Error(`wrangler dev did not answer on ${url} within ${timeoutMs} ms`);
}

/** Send `sig` to the process group `pgid`; `false` when the group is gone. */
export function signalGroup(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: the group is gone
  }
}

/** SIGTERM wrangler's process group, then SIGKILL it if it is still there after 3 s (wrangler may ignore TERM). */
export async function killGroup(pgid: number, child: ChildProcess): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3_000))]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  signalGroup(pgid, "SIGKILL"); // whatever of the group is left (workerd)
}
