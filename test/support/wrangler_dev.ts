/**
 * A real `wrangler dev` process for end-to-end and browser tests: started on a free port of 127.0.0.1, offline and
 * quiet, in its own process group (so stopping it by PID stops workerd too), with its state in `persistTo`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export const ROOT = join(import.meta.dirname, "..", "..");

/** wrangler's environment for offline runs: no Request.cf fetch, no telemetry, no update check. */
export const OFFLINE_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
};

export interface WranglerDev {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  /** Everything the process printed, for failure messages. */
  readonly output: string[];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** Start `wrangler dev` with `vars` (`--var NAME:VALUE`) and wait until it answers (60 s at most). */
export async function startWrangler(persistTo: string, vars: Record<string, string>): Promise<WranglerDev> {
  const port = await freePort();
  // The devtools inspector listens too (9229/9230 by default): another wrangler dev on the machine may hold those.
  let inspectorPort = await freePort();
  while (inspectorPort === port) inspectorPort = await freePort();
  const output: string[] = [];
  const varArgs = Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]);
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
      ...varArgs,
    ],
    {
      cwd: ROOT,
      detached: true, // its own process group, so stopping it stops workerd too
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...OFFLINE_ENV },
    },
  );
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited early:\n${output.join("")}`);
    try {
      const r = await fetch(`${base}/health-probe`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      return { child, base, output };
    } catch {
      await sleep(100); // not listening yet
    }
  }
  await stopWrangler({ child, base, output });
  throw new Error(`wrangler dev did not start within 60 s:\n${output.join("")}`);
}

/** Stop the process group this module started: SIGTERM, then SIGKILL after 10 s. */
export async function stopWrangler(server: WranglerDev): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  process.kill(-child.pid, "SIGTERM");
  const killed = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
  if (!killed) {
    process.kill(-child.pid, "SIGKILL");
    await exited;
  }
}
