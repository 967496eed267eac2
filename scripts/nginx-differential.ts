/**
 * `npm run test:nginx`: Sluice against a real NGINX, decision for decision.
 * 1. An nginx.conf with one location per case (burst 0, a queue with delays, nodelay, delay=N, two limits on one
 *    location, r/m rates where NGINX's integer arithmetic differs) is imported with `sluice import nginx`.
 * 2. NGINX starts on a free loopback port from that configuration and gets a fixed schedule of requests.
 * 3. Its access log goes through `sluice trace from nginx --conf` and the trace through `sluice simulate`.
 * 4. Before looking at NGINX's answers, a model of NGINX's arithmetic (src/migrate/nginx_rate.ts), on NGINX's own
 *    clock (the log's times, corrected for the slew against the send times), predicts where NGINX and Sluice differ.
 *    NGINX must answer as the model says, and Sluice as NGINX does except exactly where a difference was predicted.
 *    Requests whose predicted answer would change within `MARGIN_MS` (plus `SLEW_MARGIN` of the time since the key's
 *    last admission) are reported, not judged. Delays must agree within `DELAY_TOLERANCE_MS`.
 * Needs the `nginx` binary (Debian: apt-get install -y nginx). Exit status 0 when everything agrees.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NginxLimit, NginxZone, nginxRequest, nginxStoredRate } from "../src/migrate/nginx_rate.ts";

const DELAY_TOLERANCE_MS = 100;
/**
 * How far a request's time on NGINX's clock may be from the one the model uses: two truncations to the ms, plus what
 * the measured slew may miss (0.2% of the time since the key's last admission) on a loaded machine.
 */
const MARGIN_MS = 2;
const SLEW_MARGIN = 0.002;
const CLIENT = "127.0.0.1";

interface Zone {
  readonly name: string;
  readonly amount: number;
  readonly unit: "s" | "m";
}
interface Case {
  readonly path: string;
  readonly limits: readonly { zone: string; burst: number; delay: number | "nodelay" }[];
  /** Offsets from the case's start, ms. */
  readonly schedule: readonly number[];
}

const ZONES: readonly Zone[] = [
  { name: "b0", amount: 10, unit: "s" },
  { name: "queue", amount: 5, unit: "s" },
  { name: "nd", amount: 5, unit: "s" },
  { name: "dl", amount: 5, unit: "s" },
  { name: "twoa", amount: 10, unit: "s" },
  { name: "twob", amount: 2, unit: "s" },
  { name: "rm7", amount: 7, unit: "m" },
  { name: "rm4", amount: 4, unit: "m" },
  { name: "rm3", amount: 3, unit: "m" },
];

const burstAt = (at: number, n: number, gap = 0) => Array.from({ length: n }, (_, i) => at + i * gap);

const CASES: readonly Case[] = [
  // burst 0: one request per 100 ms; requests 50 ms apart alternate.
  {
    path: "/b0/",
    limits: [{ zone: "b0", burst: 0, delay: 0 }],
    schedule: [...burstAt(0, 3), ...burstAt(150, 8, 60), 1000, 1040, 1160],
  },
  // A queue of 5 at 5/s: 8 at once, 6 admitted with delays 0..1000 ms, 2 denied; more once it drains.
  {
    path: "/queue/",
    limits: [{ zone: "queue", burst: 5, delay: 0 }],
    schedule: [...burstAt(0, 8), 1530, 1550, 2400, 2420],
  },
  {
    path: "/nd/",
    limits: [{ zone: "nd", burst: 5, delay: "nodelay" }],
    schedule: [...burstAt(0, 8), 250, 450, 460, 1700],
  },
  { path: "/dl/", limits: [{ zone: "dl", burst: 6, delay: 3 }], schedule: [...burstAt(0, 9), 700, 710, 2500] },
  {
    path: "/two/",
    limits: [
      { zone: "twoa", burst: 2, delay: "nodelay" },
      { zone: "twob", burst: 4, delay: "nodelay" },
    ],
    schedule: [...burstAt(0, 7), 330, 520, 1250, 1260, 1270],
  },
  // 7r/m: NGINX admits every 8,621 ms, Sluice every 8,571.4 ms. Requests at 8,596 and 8,650 ms are where they part.
  { path: "/rm7/", limits: [{ zone: "rm7", burst: 0, delay: 0 }], schedule: [0, 8596, 8650, 17330, 25900, 25975] },
  // 4r/m: NGINX every 15,152 ms (66 per 1000 s), Sluice every 15,000 ms.
  { path: "/rm4/", limits: [{ zone: "rm4", burst: 0, delay: 0 }], schedule: [0, 15076, 15200] },
  // 3r/m with a burst: admissions less than 20 ms apart leak nothing in NGINX.
  {
    path: "/rm3/",
    limits: [{ zone: "rm3", burst: 3, delay: "nodelay" }],
    schedule: [0, 19, 38, 57, 20028, 20100, 40200],
  },
];

function nginxBinary(): string | null {
  for (const candidate of ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]) {
    if (existsSync(candidate)) return candidate;
  }
  try {
    return execFileSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, CLIENT, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function limitText(l: Case["limits"][number]): string {
  const delay = l.delay === "nodelay" ? " nodelay" : l.delay > 0 ? ` delay=${l.delay}` : "";
  return `limit_req zone=${l.zone}${l.burst > 0 ? ` burst=${l.burst}` : ""}${delay};`;
}

function nginxConf(dir: string, port: number): string {
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  const zones = ZONES.map((z) => `  limit_req_zone $binary_remote_addr zone=${z.name}:1m rate=${z.amount}r/${z.unit};`);
  const locations = CASES.map(
    (c) =>
      `    location ${c.path} {\n      ${c.limits.map(limitText).join("\n      ")}\n      try_files /ok.txt =404;\n    }`,
  );
  return `${user}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 512; }
http {
  log_format timed '$remote_addr $msec $request_time $status "$request"';
  access_log ${dir}/access.log timed;
  client_body_temp_path ${dir}/tmp;
  proxy_temp_path ${dir}/tmp;
  fastcgi_temp_path ${dir}/tmp;
  uwsgi_temp_path ${dir}/tmp;
  scgi_temp_path ${dir}/tmp;
  default_type text/plain;
${zones.join("\n")}
  server {
    listen ${CLIENT}:${port};
    root ${dir}/www;
${locations.join("\n")}
    location / { try_files /ok.txt =404; }
  }
}
`;
}

function sluice(args: string[]): string {
  return execFileSync(process.execPath, ["bin/sluice.mjs", ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 1 << 26,
  });
}

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: CLIENT, port, path, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * The schedule sent: every case from its own start (so one case's burst does not delay another's), each instant's
 * requests fired together. A timer wakes 15 ms early and the last stretch is waited out exactly, so a request leaves
 * within about a millisecond of its time. Resolves when every answer is in.
 */
async function sendSchedule(port: number, sentAt: Map<string, number>): Promise<number> {
  const byTime = new Map<number, string[]>();
  let n = 0;
  CASES.forEach((c, i) => {
    for (const at of c.schedule) {
      const t = i * 37 + at;
      byTime.set(t, [...(byTime.get(t) ?? []), `${c.path}r${n++}`]);
    }
  });
  const start = performance.now() + 100;
  const answers: Promise<number>[] = [];
  await Promise.all(
    [...byTime].map(
      ([at, paths]) =>
        new Promise<void>((resolve) => {
          setTimeout(
            () => {
              while (performance.now() < start + at) {
                // Waiting out the last milliseconds exactly.
              }
              for (const path of paths) {
                sentAt.set(path, performance.now());
                answers.push(get(port, path));
              }
              resolve();
            },
            Math.max(0, start + at - 15 - performance.now()),
          );
        }),
    ),
  );
  await Promise.all(answers);
  return n;
}

async function waitForPort(port: number, nginx: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (nginx.exitCode !== null) throw new Error(`nginx exited (${nginx.exitCode})`);
    try {
      await get(port, "/");
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error("nginx did not start listening");
}

interface Observed {
  readonly path: string;
  readonly tMs: number;
  readonly allowed: boolean;
  readonly delayMs: number;
}

/** NGINX's answers, from its access log: the start time, whether it was admitted, how long it was held. */
function nginxAnswers(log: string): Map<string, Observed> {
  const out = new Map<string, Observed>();
  for (const line of log.split("\n")) {
    const m = /^\S+ (\d+)\.(\d{3}) (\d+)\.(\d{3}) (\d+) "GET (\S+) HTTP/.exec(line);
    if (m === null || m[6] === "/") continue;
    const took = Number(m[3]) * 1000 + Number(m[4]);
    out.set(m[6]!, {
      path: m[6]!,
      tMs: Number(m[1]) * 1000 + Number(m[2]) - took,
      allowed: m[5] === "200",
      delayMs: took,
    });
  }
  return out;
}

interface SluiceAnswer {
  readonly t_ms: number;
  readonly path: string;
  readonly verdict: string;
  readonly delay_ms: number;
}

/**
 * NGINX limits by its monotonic clock; its log says wall-clock time, which may be slewed against it (0.1-0.2% on this
 * machine). The slope of logged times over the times the requests were sent (on the same monotonic clock) measures
 * it; `at` turns a logged time into NGINX's clock, relative to the first request.
 */
function nginxClock(
  trace: readonly SluiceAnswer[],
  sentAt: ReadonlyMap<string, number>,
): { slew: number; at: (tMs: number) => number } {
  const points = trace.map((r) => [sentAt.get(r.path)!, r.t_ms] as const);
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const slew =
    points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  const t0 = trace[0]!.t_ms;
  return { slew, at: (tMs) => t0 + (tMs - t0) / slew };
}

/**
 * The model's predictions, from the request times alone (on NGINX's clock), in trace order: NGINX's answer, and
 * whether moving the request by `MARGIN_MS` either way changes it.
 */
function predict(
  trace: readonly SluiceAnswer[],
  clockAt: (tMs: number) => number,
): Map<string, { allowed: boolean; delayMs: number; fragile: boolean }> {
  const zones = new Map(
    ZONES.map((z) => [z.name, new NginxZone(nginxStoredRate(z.amount, z.unit === "s" ? "s" : "min"))]),
  );
  const out = new Map<string, { allowed: boolean; delayMs: number; fragile: boolean }>();
  for (const r of trace) {
    const c = CASES.find((x) => r.path.startsWith(x.path))!;
    const limits: NginxLimit[] = c.limits.map((l) => ({
      zone: zones.get(l.zone)!,
      burst: l.burst,
      delay: l.delay === "nodelay" ? l.burst : l.delay,
    }));
    const t = Math.round(clockAt(r.t_ms));
    const peek = (at: number) => limits.every((l) => l.zone.excessAt(CLIENT, at, l.burst) !== null);
    const since = Math.max(0, ...limits.map((l) => t - (l.zone.lastMs(CLIENT) ?? t)));
    const margin = MARGIN_MS + Math.ceil(since * SLEW_MARGIN);
    const fragile = peek(t - margin) !== peek(t) || peek(t + margin) !== peek(t);
    const answer = nginxRequest(limits, CLIENT, t);
    out.set(r.path, { ...answer, fragile });
  }
  return out;
}

// long: the steps of the run, top to bottom, each printing what it found
async function main(): Promise<number> {
  const binary = nginxBinary();
  if (binary === null) {
    process.stderr.write(
      "test:nginx: nginx not found. Install it and rerun:\n  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y nginx\n  macOS (Homebrew): brew install nginx\n",
    );
    return 1;
  }
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-"));
  mkdirSync(join(dir, "www"));
  mkdirSync(join(dir, "tmp"));
  writeFileSync(join(dir, "www", "ok.txt"), "ok\n");
  const port = await freePort();
  const conf = join(dir, "nginx.conf");
  writeFileSync(conf, nginxConf(dir, port));
  let nginx: ChildProcess | null = null;
  try {
    const rules = join(dir, "rules.yaml");
    sluice(["import", "nginx", conf, "--out", rules]);
    console.log(spawnSync(binary, ["-v"], { encoding: "utf8" }).stderr.trim());
    nginx = spawn(binary, ["-p", dir, "-c", conf, "-e", join(dir, "error.log")], { stdio: "ignore" });
    await waitForPort(port, nginx);
    const sentAt = new Map<string, number>();
    const sent = await sendSchedule(port, sentAt);
    nginx.kill("SIGQUIT");
    await new Promise((r) => nginx!.once("exit", r));
    nginx = null;
    const trace = join(dir, "trace.csv");
    writeFileSync(trace, sluice(["trace", "from", "nginx", join(dir, "access.log"), "--conf", conf]));
    const replayed = sluice(["simulate", "--rules", rules, "--trace", trace])
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as SluiceAnswer)
      .filter((a) => a.path !== "/");
    const clock = nginxClock(replayed, sentAt);
    console.log(
      `the log's wall clock ran ${((clock.slew - 1) * 100).toFixed(3)}% off the monotonic clock NGINX limits by`,
    );
    const predicted = predict(replayed, clock.at);
    const observed = nginxAnswers(readFileSync(join(dir, "access.log"), "utf8"));
    return judge(sent, replayed, predicted, observed);
  } finally {
    if (nginx !== null) nginx.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Requests of one case at one ms: the same key at the same time, so which of them NGINX admitted is its order. */
interface Group {
  readonly where: string;
  readonly sluice: SluiceAnswer[];
  readonly nginx: Observed[];
  readonly predicted: { allowed: boolean; delayMs: number; fragile: boolean }[];
}

function groupsOf(
  replayed: readonly SluiceAnswer[],
  predicted: ReadonlyMap<string, { allowed: boolean; delayMs: number; fragile: boolean }>,
  observed: ReadonlyMap<string, Observed>,
  failures: string[],
): Group[] {
  const groups = new Map<string, Group>();
  for (const s of replayed) {
    const c = CASES.find((x) => s.path.startsWith(x.path))!;
    const first = replayed.find((x) => x.path.startsWith(c.path))!;
    const key = `${c.path} at ${s.t_ms - first.t_ms} ms`;
    const group = groups.get(key) ?? { where: key, sluice: [], nginx: [], predicted: [] };
    groups.set(key, group);
    const n = observed.get(s.path);
    if (n === undefined) failures.push(`${s.path}: not in NGINX's access log`);
    else group.nginx.push(n);
    group.sluice.push(s);
    group.predicted.push(predicted.get(s.path)!);
  }
  return [...groups.values()];
}

const admitted = (answers: readonly { allowed: boolean }[]) => answers.filter((a) => a.allowed).length;
const delays = (ds: readonly number[]) => [...ds].sort((x, y) => x - y);

// long: one pass over the groups, counting each kind of agreement, then the summary
function judge(
  sent: number,
  replayed: readonly SluiceAnswer[],
  predicted: ReadonlyMap<string, { allowed: boolean; delayMs: number; fragile: boolean }>,
  observed: ReadonlyMap<string, Observed>,
): number {
  const failures: string[] = [];
  const counts = { same: 0, predicted: 0, fragile: 0, maxDelayGap: 0 };
  for (const g of groupsOf(replayed, predicted, observed, failures)) {
    const sluice = g.sluice.map((s) => ({
      allowed: s.verdict === "allowed" || s.verdict === "delayed",
      delayMs: s.delay_ms,
    }));
    const [n, p, q] = [admitted(g.nginx), admitted(g.predicted), admitted(sluice)];
    const said = `${g.sluice.length} request(s) at ${g.where}: NGINX admitted ${n}, Sluice ${q}`;
    if (process.env.VERBOSE !== undefined) console.log(`  ${said}; the model predicted ${p}`);
    if (g.predicted.some((x) => x.fragile)) {
      counts.fragile += g.sluice.length;
      console.log(`  too near a boundary to judge: ${said}`);
      continue;
    }
    if (n !== p) failures.push(`${said}; the model predicted ${p} for NGINX`);
    if (q === n) counts.same += g.sluice.length;
    else if (p !== q) {
      counts.predicted += g.sluice.length;
      console.log(`  predicted difference (NGINX's integer rounding): ${said}`);
    } else failures.push(`${said}; no difference predicted`);
    if (q !== n) continue;
    const nd = delays(g.nginx.filter((x) => x.allowed).map((x) => x.delayMs));
    const sd = delays(sluice.filter((x) => x.allowed).map((x) => x.delayMs));
    nd.forEach((d, i) => {
      const gap = Math.abs(d - sd[i]!);
      counts.maxDelayGap = Math.max(counts.maxDelayGap, gap);
      if (gap > DELAY_TOLERANCE_MS) failures.push(`${g.where}: NGINX held a request ${d} ms, Sluice ${sd[i]} ms`);
    });
  }
  if (replayed.length !== sent) failures.push(`${sent} requests sent, ${replayed.length} replayed`);
  const judged = replayed.filter((s) => /^\/rm\d\//.test(s.path) && !predicted.get(s.path)!.fragile);
  if (!judged.some((s) => predicted.get(s.path)!.allowed !== (s.verdict !== "denied"))) {
    failures.push("no difference was predicted and judged: the schedule no longer exercises NGINX's rounding");
  }
  console.log(
    `${replayed.length} requests: ${counts.same} decided alike, ${counts.predicted} differ where NGINX's integer arithmetic was predicted to, ${counts.fragile} too near a boundary to judge; delays agree within ${counts.maxDelayGap} ms`,
  );
  for (const f of failures) console.log(`FAIL ${f}`);
  return failures.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
