/**
 * `npm run test:nginx` (second part): NGINX's `limit_conn` against Sluice's concurrency rule, decision for decision.
 * 1. An nginx.conf with three locations (`limit_conn` 2, 1, and both zones on one location) proxying to an origin
 *    that holds every response open until this script lets it go, imported with `sluice import nginx`.
 * 2. A seeded schedule of events (SEED=n to choose; printed): open a request, let a held response finish, or have a
 *    client go away. Each event waits for its effect before the next starts: an open until NGINX answered 503 or the
 *    request reached the origin, a finish or an abort until NGINX logged the request (it frees the connection's slot
 *    in the same step, before it reads anything else). No decision depends on timing; a 5 ms pause after each event
 *    keeps the log's millisecond times in order.
 * 3. NGINX's access log goes through `sluice trace from nginx --conf` (start times, `$status`, `$request_time` as
 *    `duration_ms`) and the trace through `sluice simulate` with the imported rules: each request's slot is held over
 *    its duration. Sluice must answer every request as NGINX did. Exit status 0 when all agree.
 * Needs the `nginx` binary (Debian: apt-get install -y nginx).
 */
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type ClientRequest, createServer, request, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { mulberry32 } from "../src/cli/gen_streams.ts";
import {
  accessLogLines,
  freePort,
  LOOPBACK as HOST,
  nginxOrHowToInstall,
  nginxPreamble,
  replayedLog,
  runMain,
  sluice,
  startNginx,
  stopNginx,
} from "./nginx-run.ts";

/** Each location and the zones it counts in: `a` 2 at once, `b` 1, `ab` both (NGINX and Sluice count it in each). */
const LOCATIONS = ["/a/", "/b/", "/ab/"] as const;
const EVENTS = Number(process.env.EVENTS ?? 120);
/** How long an event may take to show its effect before the run fails (a hung NGINX, never a judged decision). */
const EVENT_DEADLINE_MS = 15_000;

function nginxConf(dir: string, port: number, originPort: number): string {
  const location = (path: string, limits: string) =>
    `    location ${path} { ${limits} proxy_pass http://${HOST}:${originPort}; proxy_buffering off; }`;
  return `${nginxPreamble(dir, '$remote_addr $msec $request_time $status "$request"')}
  keepalive_timeout 0;
  limit_conn_zone $binary_remote_addr zone=ca:1m;
  limit_conn_zone $binary_remote_addr zone=cb:1m;
  server {
    listen ${HOST}:${port};
${location("/a/", "limit_conn ca 2;")}
${location("/b/", "limit_conn cb 1;")}
${location("/ab/", "limit_conn ca 2; limit_conn cb 1;")}
    location = /up { return 204; }
  }
}
`;
}

/** The origin: every request is held open until `finish(path)`; `arrived(path)` resolves when it came in. */
class HeldOrigin {
  private readonly held = new Map<string, ServerResponse>();
  private readonly waiting = new Map<string, () => void>();
  private readonly server = createServer((req, res) => {
    const path = req.url ?? "/";
    this.held.set(path, res);
    this.waiting.get(path)?.();
  });

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, HOST, resolve));
    return (this.server.address() as { port: number }).port;
  }

  arrived(path: string): Promise<void> {
    if (this.held.has(path)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.set(path, resolve));
  }

  finish(path: string): void {
    this.held.get(path)?.end("done\n");
    this.held.delete(path);
  }

  close(): Promise<void> {
    for (const res of this.held.values()) res.destroy();
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

interface Open {
  readonly path: string;
  readonly req: ClientRequest;
  /** NGINX's answer as the client saw it: 503 refused, else admitted (the request reached the origin). */
  readonly status: Promise<number>;
}

function open(port: number, path: string): Open {
  let settle: (status: number) => void = () => {};
  const status = new Promise<number>((resolve) => {
    settle = resolve;
  });
  const req = request({ host: HOST, port, path, agent: false }, (res) => {
    res.resume();
    res.on("end", () => settle(res.statusCode ?? 0));
    res.on("error", () => settle(res.statusCode ?? 0));
  });
  req.on("error", () => settle(0));
  req.end();
  return { path, req, status };
}

async function within<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no effect within ${EVENT_DEADLINE_MS} ms`)), EVENT_DEADLINE_MS);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once NGINX's access log has a line for `path` (written as it frees the request, and its slots). */
async function logged(dir: string, path: string): Promise<void> {
  const needle = ` "GET ${path} HTTP/`;
  while (!accessLogLines(dir).some((l) => l.includes(needle))) await sleep(2);
}

interface Live {
  readonly path: string;
  /** What NGINX answered when the request was sent: admitted (it reached the origin) or refused (503). */
  readonly admitted: boolean;
}

// long: the schedule's one loop, each kind of event and the wait for its effect side by side
async function runSchedule(port: number, origin: HeldOrigin, dir: string, seed: number): Promise<Live[]> {
  const next = mulberry32(seed);
  const inFlight: Open[] = [];
  const live: Live[] = [];
  const counts = { open: 0, finish: 0, abort: 0 };
  for (let i = 0; i < EVENTS; i++) {
    const roll = next();
    if (inFlight.length === 0 || (roll < 0.55 && inFlight.length < 6)) {
      const path = `${LOCATIONS[Math.floor(next() * LOCATIONS.length)]}r${i}`;
      const o = open(port, path);
      const first = await within(`open ${path}`, Promise.race([o.status, origin.arrived(path).then(() => 200)]));
      if (first === 200) inFlight.push(o);
      else if (first !== 503) throw new Error(`${path}: NGINX answered ${first}`);
      live.push({ path, admitted: first === 200 });
      counts.open++;
    } else {
      const o = inFlight.splice(Math.floor(next() * inFlight.length), 1)[0]!;
      if (roll < 0.9) {
        origin.finish(o.path);
        await within(`finish ${o.path}`, o.status);
        counts.finish++;
      } else {
        o.req.destroy();
        counts.abort++;
      }
      await within(`log ${o.path}`, logged(dir, o.path));
    }
    await sleep(5);
  }
  for (const o of inFlight) {
    origin.finish(o.path);
    await within(`finish ${o.path}`, o.status);
    await within(`log ${o.path}`, logged(dir, o.path));
  }
  console.log(`${counts.open} requests opened, ${counts.finish} finished, ${counts.abort} abandoned by the client`);
  return live;
}

interface SluiceAnswer {
  readonly path: string;
  readonly verdict: string;
}

/** Every request's three answers side by side: NGINX live, NGINX's log, Sluice's replay of the log. */
function judge(live: readonly Live[], log: readonly string[], replayed: readonly SluiceAnswer[]): number {
  const logged = new Map<string, number>();
  for (const line of log) {
    const m = /^\S+ \S+ \S+ (\d{3}) "GET (\S+) HTTP/.exec(line);
    if (m !== null) logged.set(m[2]!, Number(m[1]));
  }
  const bySluice = new Map(replayed.map((a) => [a.path, a.verdict !== "denied"]));
  const failures: string[] = [];
  for (const l of live) {
    const status = logged.get(l.path);
    const nginx = status !== undefined && status !== 503;
    if (status === undefined || nginx !== l.admitted) failures.push(`${l.path}: NGINX's log says ${status}`);
    const s = bySluice.get(l.path);
    if (s !== l.admitted) {
      failures.push(`${l.path}: NGINX ${l.admitted ? "admitted" : "refused"} it, Sluice ${s ? "admitted" : "refused"}`);
    }
  }
  const refused = live.filter((l) => !l.admitted).length;
  if (refused === 0 || refused === live.length) failures.push("the schedule never both admitted and refused");
  console.log(`${live.length} requests: ${live.length - refused} admitted and ${refused} refused by NGINX`);
  for (const f of failures) console.log(`FAIL ${f}`);
  if (failures.length === 0) console.log("Sluice's concurrency rules decided every request as NGINX's limit_conn did");
  return failures.length === 0 ? 0 : 1;
}

// long: the steps of the run, top to bottom, each printing what it found
async function main(): Promise<number> {
  const binary = nginxOrHowToInstall();
  if (binary === null) return 1;
  const seed = Number(process.env.SEED ?? Date.now() % 1_000_000);
  console.log(`limit_conn differential, SEED=${seed} (rerun with it to repeat the schedule)`);
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-conn-"));
  mkdirSync(join(dir, "tmp"));
  const origin = new HeldOrigin();
  let nginx: ChildProcess | null = null;
  try {
    const port = await freePort();
    const conf = join(dir, "nginx.conf");
    writeFileSync(conf, nginxConf(dir, port, await origin.listen()));
    const rules = join(dir, "rules.yaml");
    sluice(["import", "nginx", conf, "--out", rules]);
    nginx = await startNginx(binary, dir, conf, port, { path: "/up", status: 204 });
    const live = await runSchedule(port, origin, dir, seed);
    await stopNginx(nginx);
    nginx = null;
    const replayed = replayedLog<SluiceAnswer>(dir, conf, rules);
    return judge(live, accessLogLines(dir), replayed);
  } finally {
    if (nginx !== null) nginx.kill("SIGKILL");
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

runMain(main);
