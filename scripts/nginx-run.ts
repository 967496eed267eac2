/**
 * What both NGINX differentials (nginx-differential.ts, nginx-conn-differential.ts) do alike: find the `nginx` binary
 * (or say how to install it), pick a free loopback port, write the top of a configuration that runs unprivileged in
 * one folder, start NGINX there and wait until it answers, stop it so it flushes its access log, read that log, and
 * run the `sluice` CLI.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "./free-port.mjs";

export { freePort };

/** The loopback address NGINX listens on and clients send from. */
export const LOOPBACK = "127.0.0.1";

/** The `nginx` binary, or `null` after printing how to install it. */
export function nginxOrHowToInstall(): string | null {
  for (const candidate of ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]) {
    if (existsSync(candidate)) return candidate;
  }
  const found = spawnSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" }).stdout.trim();
  if (found !== "") return found;
  process.stderr.write(
    "test:nginx: nginx not found. Install it and rerun:\n  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y nginx\n  macOS (Homebrew): brew install nginx\n",
  );
  return null;
}

/**
 * The configuration's top and the start of its `http` block: one worker in the foreground, its pid, error log, access
 * log (in `format`, named `timed`) and temporary files in `dir` (`dir/tmp` must exist), as root only when run as root.
 */
export function nginxPreamble(dir: string, format: string): string {
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `${user}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 512; }
http {
  log_format timed '${format}';
  access_log ${dir}/access.log timed;
  client_body_temp_path ${dir}/tmp;
  proxy_temp_path ${dir}/tmp;
  fastcgi_temp_path ${dir}/tmp;
  uwsgi_temp_path ${dir}/tmp;
  scgi_temp_path ${dir}/tmp;`;
}

/** A GET's status (`0` when the connection failed). */
export function statusOf(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: LOOPBACK, port, path, agent: false, headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.end();
  });
}

/** NGINX started on `conf` in `dir`, once `ready` (a path) answers `status`. */
export async function startNginx(
  binary: string,
  dir: string,
  conf: string,
  port: number,
  ready: { path: string; status: number },
): Promise<ChildProcess> {
  const nginx = spawn(binary, ["-p", dir, "-c", conf, "-e", join(dir, "error.log")], { stdio: "ignore" });
  for (let i = 0; i < 200; i++) {
    if (nginx.exitCode !== null) throw new Error(`nginx exited (${nginx.exitCode})`);
    if ((await statusOf(port, ready.path)) === ready.status) return nginx;
    await sleep(25);
  }
  nginx.kill("SIGKILL");
  throw new Error("nginx did not start listening");
}

/** NGINX stopped gracefully (SIGQUIT): it finishes its requests and its access log is complete. */
export async function stopNginx(nginx: ChildProcess): Promise<void> {
  if (nginx.exitCode !== null) return;
  const exited = new Promise((r) => nginx.once("exit", r));
  nginx.kill("SIGQUIT");
  await exited;
}

/** The access log's lines (`dir/access.log`), none when it is not there yet. */
export function accessLogLines(dir: string): string[] {
  const log = join(dir, "access.log");
  return existsSync(log)
    ? readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l !== "")
    : [];
}

/** `sluice ARGS` run from the repository; its output, or an error with its standard error. */
export function sluice(args: string[]): { stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["bin/sluice.mjs", ...args], { encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`sluice ${args.join(" ")} exited ${r.status}:\n${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** NGINX's access log in `dir` as a request trace (`trace from nginx --conf`), replayed on `rules` by `simulate`. */
export function replayedLog<T>(dir: string, conf: string, rules: string): T[] {
  const trace = join(dir, "trace.csv");
  writeFileSync(trace, sluice(["trace", "from", "nginx", join(dir, "access.log"), "--conf", conf]).stdout);
  return sluice(["simulate", "--rules", rules, "--trace", trace])
    .stdout.trim()
    .split("\n")
    .map((l) => JSON.parse(l) as T);
}

/** Run a differential's `main`: its exit status, or 1 with the error printed. */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
