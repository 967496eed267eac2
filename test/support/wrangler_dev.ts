/**
 * A real `wrangler dev` process for end-to-end and browser tests: started on a free port of 127.0.0.1, offline and
 * quiet, in its own process group (so stopping it by PID stops workerd too), with its state in `persistTo`.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "../../scripts/free-port.mjs";

export const ROOT = join(import.meta.dirname, "..", "..");

/**
 * `fetch(url, init)` with its body read as text, given up after `ms` by a timer of its own, not only by the fetch's
 * signal: a CI run saw a start-up probe with `AbortSignal.timeout(1000)` stay pending for over 30 s while wrangler dev
 * started (the hook's 120 s ran out before the loop's own 90 s deadline could say what the server printed). A lost
 * answer here is an error the caller's loop can count and retry, never a wait without end.
 */
export async function fetchWithin(
  url: string,
  ms: number,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; text: string }> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`${url}: no answer within ${ms} ms`));
    }, ms);
  });
  const answer = (async () => {
    const r = await fetch(url, { ...init, signal: controller.signal });
    return { status: r.status, headers: r.headers, text: await r.text() };
  })();
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** wrangler's environment for offline runs: no Request.cf fetch, no telemetry, no update check. */
export const OFFLINE_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
};

/**
 * Every process group this module started and has not stopped yet. `stopStarted()` stops them (a test file's
 * `afterAll`), and the process's exit kills what is left: a `wrangler dev` whose test timed out while it started
 * was once found still running (3.3 GB, a core) after a whole `npm test`.
 */
const started = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of started) if (child.pid !== undefined) signalGroup(child.pid, "SIGKILL");
});

/** Stop every `wrangler dev` this module started that is still running. */
export async function stopStarted(): Promise<void> {
  for (const child of [...started]) await stopWrangler({ child, base: "", output: [] });
}

/** A free port on 127.0.0.1 outside the ephemeral range (scripts/free-port.mjs says why). */
export { freePort };

export interface WranglerDev {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  /** Everything the process printed, for failure messages. */
  readonly output: string[];
}

/** The shipped example rules, from the tests' copy (rules/ is the user's to edit): file name -> YAML. */
export function shippedRules(): Record<string, string> {
  return { "shiplane.yaml": readFileSync(join(ROOT, "test", "fixtures", "shipped", "shiplane.yaml"), "utf8") };
}

/** A temp copy of the project whose rules/ holds `rules` (file name -> YAML), compiled; node_modules linked. */
export function projectCopy(prefix: string, rules: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const name of ["src", "bin", "scripts", "wrangler.toml", "package.json", "tsconfig.json"])
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

/**
 * Start `wrangler dev` in `cwd` (the project, or a `projectCopy`) with `vars` (`--var NAME:VALUE`; `ECHO_ORIGIN` is
 * `true` unless `vars` says otherwise) and wait until it
 * answers (60 s at most).
 */
export async function startWrangler(
  persistTo: string,
  vars: Record<string, string>,
  cwd: string = ROOT,
  /** More arguments for wrangler dev, e.g. `-c` configurations (the first is the Worker on the port). */
  extraArgs: readonly string[] = [],
): Promise<WranglerDev> {
  // A free port can be taken by another process between `freePort` and wrangler's own bind: try another, twice.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startWranglerOnce(persistTo, vars, cwd, extraArgs);
    } catch (error) {
      if (attempt === 3 || !String(error).includes("Address already in use")) throw error;
    }
  }
}

async function startWranglerOnce(
  persistTo: string,
  vars: Record<string, string>,
  cwd: string,
  extraArgs: readonly string[],
): Promise<WranglerDev> {
  const port = await freePort();
  // The devtools inspector listens too (9229/9230 by default): another wrangler dev on the machine may hold those.
  const inspectorPort = await freePort([port]);
  const output: string[] = [];
  // The echo origin answers admitted requests (a Sluice with no origin set answers 500, settings.ts `Origin`).
  const varArgs = Object.entries({ ECHO_ORIGIN: "true", ...vars }).flatMap(([name, value]) => [
    "--var",
    `${name}:${value}`,
  ]);
  // An env file of the test's own (empty) instead of the project's `.dev.vars`: a developer's local admin token or
  // KEY_HASH_SECRET must not change what a test sees. (wrangler reads `.dev.vars` only when no env file is given.)
  const envFile = join(mkdtempSync(join(tmpdir(), "sluice-env-")), "empty.env");
  writeFileSync(envFile, "");
  const child = spawn(
    "npx",
    [
      "wrangler",
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(inspectorPort),
      "--persist-to",
      persistTo,
      "--log-level",
      "warn",
      "--env-file",
      envFile,
      ...varArgs,
      ...extraArgs,
    ],
    {
      cwd,
      detached: true, // its own process group, so stopping it stops workerd too
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...OFFLINE_ENV },
    },
  );
  started.add(child);
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited early:\n${output.join("")}`);
    try {
      await fetchWithin(`${base}/health-probe`, 1000);
      return { child, base, output };
    } catch {
      await sleep(100); // not listening yet
    }
  }
  await stopWrangler({ child, base, output });
  throw new Error(`wrangler dev did not start within 60 s:\n${output.join("")}`);
}

/**
 * Stop the process group this module started: SIGTERM, then SIGKILL after 10 s; then SIGKILL whatever of the group
 * outlived wrangler. workerd can: an orphaned workerd of the binding test was found spinning a core after a full run.
 */
export async function stopWrangler(server: WranglerDev): Promise<void> {
  const { child } = server;
  if (child.pid === undefined) return;
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    signalGroup(child.pid, "SIGTERM");
    const killed = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
    if (!killed) {
      signalGroup(child.pid, "SIGKILL");
      await exited;
    }
    await sleep(200);
  }
  signalGroup(child.pid, "SIGKILL");
  started.delete(child);
}

/** Send `sig` to the process group `pgid`; `false` when the group is gone (ESRCH). */
function signalGroup(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false;
  }
}
