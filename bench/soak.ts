/**
 * `npm run soak [-- --quick | --minutes N] [--concurrency C] [--timeout-ms T] [--seed S] [--keep]`: minutes of closed-loop load against
 * a real `wrangler dev`, with a SIGKILL of the server half-way and a restart on the same persisted state, and the
 * evidence that nothing was lost: every response is recorded and judged.
 *
 * - The server: a temp copy of the project with bench/soak/rules.yaml as its only rules (every algorithm, mixed
 *   routes, identities and costs, both failure policies, a shadow and a local rule), on a free 127.0.0.1 port, its
 *   state in a temp dir (on /dev/shm when there is one) (bench/wrangler_dev.ts). Hundreds of API keys are seeded as accounts in its local KV,
 *   the way scripts/seed-accounts.mjs does; a quarter of the keys have no record (the default plan).
 * - The clients: `--concurrency` loops (default 32), each sending its next request as soon as the last one is
 *   answered. Each request picks a route (quotes, label batches, tracking, sync, address validation, login, public
 *   pages) and its identities with a seeded generator, skewed: most requests come from a few hot keys, users and
 *   addresses, the rest are spread over hundreds of keys, thousands of users and up to 200,000 client addresses, all
 *   from the documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, and one 2001:db8::/32 /64 each).
 * - The crash: at half-time the server's whole process group gets SIGKILL (no shutdown of any kind), and the same
 *   command restarts it on the same state directory and port. Clients see connection errors meanwhile and go on.
 *
 * What is judged, from the responses alone (the echo origin lists each rule's decision in an admitted response):
 * - over-admission, per rule and key, against what the rule allows (bench/soak/allowance.ts: burst + rate × t in any
 *   span for rate rules, the limit per window for window rules), across the crash; local and shadow rules are not
 *   held to it (approximate and log-only by design);
 * - that every admitted request carries a decision of every enforcing rule the client expects to apply to it, at the
 *   cost it expects (a rule silently skipped would be a free pass); fail-open decisions are counted apart;
 * - 5xx other than a fail-closed rule's deliberate 503 (must be 0);
 * - the RSS of the server's workerd processes, sampled every 2 s (must level off, not grow with the keys seen).
 *
 * Prints a summary, writes bench/results/soak.json and regenerates BENCHMARKS.md. Exit status 1 when a check fails.
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectParams } from "../src/algorithms/index.ts";
import { loadRules } from "../src/rules/load.ts";
import type { AlgorithmParams } from "../src/rules/types.ts";
import { BENCH_DIR, log, ROOT, round, writeResult } from "./common.ts";
import { type Admission, verdictOf } from "./soak/allowance.ts";
import {
  freePort,
  killGroup,
  projectCopy,
  signalGroup,
  startWrangler,
  WRANGLER_BIN,
  WRANGLER_ENV,
} from "./wrangler_dev.ts";

// ---------------------------------------------------------------------------------------------------------------
// Options

const USAGE =
  "usage: npm run soak -- [--quick | --minutes N] [--concurrency C] [--timeout-ms T] [--seed S] [--keep]\n" +
  "  --quick          about 60 s (default: 5 minutes)\n" +
  "  --minutes N      run for N minutes (a positive number)\n" +
  "  --concurrency C  closed-loop clients (default 32)\n" +
  "  --timeout-ms T   the server's LIMITER_TIMEOUT_MS (default 5000)\n" +
  "  --seed S         seed of the request generator (default 1)\n" +
  "  --keep           keep the temp copy and its state and server log\n";

function options(argv: readonly string[]) {
  let minutes = 5;
  let quick = false;
  let concurrency = 32;
  let timeoutMs = 5_000;
  let seed = 1;
  let keep = false;
  const number = (flag: string, value: string | undefined, integer: boolean): number => {
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
      process.stderr.write(`soak: ${flag} needs a positive ${integer ? "integer" : "number"}, got ${value}\n${USAGE}`);
      process.exit(2);
    }
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--quick") quick = true;
    else if (arg === "--keep") keep = true;
    else if (arg === "--minutes") minutes = number(arg, argv[++i], false);
    else if (arg === "--concurrency") concurrency = number(arg, argv[++i], true);
    else if (arg === "--seed") seed = number(arg, argv[++i], true);
    else if (arg === "--timeout-ms") timeoutMs = number(arg, argv[++i], true);
    else if (arg === "--help" || arg === "-h") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`soak: unknown argument ${arg}\n${USAGE}`);
      process.exit(2);
    }
  }
  return { durationMs: quick ? 60_000 : Math.round(minutes * 60_000), quick, concurrency, seed, keep, timeoutMs };
}

const opts = options(process.argv.slice(2));
const COMMAND = `npm run soak${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;

// ---------------------------------------------------------------------------------------------------------------
// The population: keys, users, addresses, with a seeded generator and skewed picks

/** xorshift32: a small seeded generator, so a run's traffic can be replayed. */
function generator(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4_294_967_296;
  };
}
const random = generator(opts.seed);

/** A Zipf(s) pick over `n` items: item 0 is the hottest. */
function zipf(n: number, s: number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    sum += 1 / (i + 1) ** s;
    cdf[i] = sum;
  }
  return () => {
    const u = random() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

const KEYS = 400;
const USERS = 3_000;
const ADDRESSES = 200_000;
const HOT_ADDRESSES = 500;

type Plan = "free" | "pro";
/** A quarter of the keys are "pro", half "free", a quarter have no account record (the default plan, free). */
const planOfKey = (i: number): { plan: Plan; seeded: boolean } =>
  i % 4 === 0 ? { plan: "pro", seeded: true } : { plan: "free", seeded: i % 4 !== 3 };
const apiKeyOf = (i: number) => `sk_soak_${opts.seed}_${i}`;
const userOf = (i: number) => `soak-user-${i}`;
/** Client address `i`: the 768 IPv4 documentation addresses, then one 2001:db8::/32 /64 each (IPV6_PREFIX 64). */
function addressOf(i: number): string {
  if (i < 768) return `${["192.0.2", "198.51.100", "203.0.113"][i >> 8]}.${i & 255}`;
  const n = i - 768 + 1;
  return `2001:db8:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}::${(i % 250) + 1}`;
}

const pickKey = zipf(KEYS, 1.1);
const pickUser = zipf(USERS, 1.1);
const pickHotAddress = zipf(HOT_ADDRESSES, 1.1);
/** 30% of the traffic from a few hundred hot addresses, the rest spread evenly over all of them. */
const pickAddress = () => (random() < 0.3 ? pickHotAddress() : Math.floor(random() * ADDRESSES));

// ---------------------------------------------------------------------------------------------------------------
// Requests, and the rules the client expects to decide each (its own table, independent of the Worker's matcher)

type Identity = "api_key" | "user" | "ip";
interface Expected {
  readonly rule: string;
  readonly identity: Identity;
  readonly cost: number;
}
interface Kind {
  readonly name: string;
  readonly weight: number;
  readonly method: string;
  readonly path: () => string;
  readonly identities: readonly Identity[];
  readonly expect: (plan: Plan) => readonly Expected[];
}
const byPlan = (plan: Plan, cost: number): Expected => ({
  rule: plan === "pro" ? "soak-pro-gcra" : "soak-free-tb",
  identity: "api_key",
  cost,
});
const windowOf = (cost: number): Expected => ({ rule: "soak-key-window", identity: "api_key", cost });

const KINDS: readonly Kind[] = [
  {
    name: "quote",
    weight: 30,
    method: "GET",
    path: () => `/v1/quotes?weight=${1 + Math.floor(random() * 30)}`,
    identities: ["api_key", "ip"],
    expect: (plan) => [byPlan(plan, 1), windowOf(1)],
  },
  {
    name: "batch",
    weight: 5,
    method: "POST",
    path: () => "/v1/labels:batch",
    identities: ["api_key", "ip"],
    expect: (plan) => [byPlan(plan, 5), windowOf(10)],
  },
  {
    name: "tracking",
    weight: 5,
    method: "GET",
    path: () => `/v1/tracking/1Z${Math.floor(random() * 1e9)}`,
    identities: ["api_key", "ip"],
    expect: (plan) => [byPlan(plan, 1), windowOf(1)],
  },
  {
    name: "sync",
    weight: 5,
    method: "POST",
    path: () => "/v1/sync",
    identities: ["api_key", "ip"],
    expect: (plan) => [byPlan(plan, 1), windowOf(1), { rule: "soak-sync-queue", identity: "api_key", cost: 1 }],
  },
  {
    name: "validate",
    weight: 10,
    method: "POST",
    path: () => `/v1/addresses/a${Math.floor(random() * 1e6)}/validate`,
    identities: ["user", "ip"],
    expect: () => [{ rule: "soak-validate-meter", identity: "user", cost: 1 }],
  },
  {
    name: "login",
    weight: 10,
    method: "POST",
    path: () => "/v1/login",
    identities: ["ip"],
    expect: () => [{ rule: "soak-login-log", identity: "ip", cost: 1 }],
  },
  {
    name: "public",
    weight: 35,
    method: "GET",
    path: () => "/v1/public/rates",
    identities: ["ip"],
    expect: () => [
      { rule: "soak-public-counter", identity: "ip", cost: 1 },
      { rule: "soak-public-window", identity: "ip", cost: 1 },
    ],
  },
];
const TOTAL_WEIGHT = KINDS.reduce((s, k) => s + k.weight, 0);
function pickKind(): Kind {
  let u = random() * TOTAL_WEIGHT;
  for (const kind of KINDS) {
    u -= kind.weight;
    if (u < 0) return kind;
  }
  return KINDS[KINDS.length - 1]!;
}

// ---------------------------------------------------------------------------------------------------------------
// The rules, as the Worker runs them

const RULES_FILE = join(BENCH_DIR, "soak", "rules.yaml");
const loaded = loadRules([RULES_FILE]);
if (loaded.errors.length > 0) throw new Error(loaded.errors.join("\n"));
const RULES = new Map(loaded.rules.map((rule) => [rule.id, rule]));
for (const kind of KINDS)
  for (const plan of ["free", "pro"] as const)
    for (const e of kind.expect(plan)) {
      const rule = RULES.get(e.rule);
      if (rule === undefined || rule.mode !== "enforce" || rule.scope !== "global")
        throw new Error(`soak: ${kind.name} expects ${e.rule}, which is not an enforcing global rule in ${RULES_FILE}`);
    }
const FAIL_CLOSED = new Set(loaded.rules.filter((r) => r.onError === "closed").map((r) => r.id));
const TEMPORARY_REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

// ---------------------------------------------------------------------------------------------------------------
// What is recorded

/** Every answered request: how long it took, what it got. */
const latencies: number[] = [];
const statuses = new Map<string, number>();
let networkErrors = 0;
const networkErrorsByPhase = { before: 0, down: 0, after: 0 };
/** (rule, identity index) -> admissions. */
const admissions = new Map<string, Map<number, Admission[]>>();
const failOpen = new Map<string, number>();
const failClosed503 = new Map<string, number>();
/** An admitted request without a decision of a rule that applies to it, or with another cost: must be 0. */
const unexplained: string[] = [];
let unexpected5xx = 0;
/** What wrangler dev's proxy answers (node_modules/wrangler/wrangler-dist/ProxyWorker.js) when its runtime restarts. */
const WRANGLER_DEV_RESTARTED =
  "Your worker restarted mid-request. Please try sending the request again. Only GET or HEAD requests are retried automatically.";
let devServerRestart503 = 0;
const unexpected5xxSamples: string[] = [];
const distinct = { keys: new Set<number>(), users: new Set<number>(), addresses: new Set<number>() };

let phase: "before" | "down" | "after" = "before";
let loadStartMs = 0;
let stopping = false;

interface EchoDecision {
  readonly rule: string;
  readonly cost: number;
  readonly allowed?: boolean;
  readonly error?: string;
}

function recordAdmitted(
  kind: Kind,
  plan: Plan,
  ids: Record<Identity, number>,
  body: { decisions?: EchoDecision[] },
  sentMs: number,
  receivedMs: number,
): void {
  const decisions = body.decisions ?? [];
  for (const e of kind.expect(plan)) {
    const d = decisions.find((x) => x.rule === e.rule);
    if (d === undefined || d.cost !== e.cost || (d.error === undefined && d.allowed !== true)) {
      if (unexplained.length < 1000)
        unexplained.push(`${kind.name} ${plan}: ${e.rule} cost ${e.cost}: got ${JSON.stringify(d ?? null)}`);
      continue;
    }
    if (d.error !== undefined) {
      failOpen.set(e.rule, (failOpen.get(e.rule) ?? 0) + 1);
      continue;
    }
    const perKey = admissions.get(e.rule) ?? new Map<number, Admission[]>();
    admissions.set(e.rule, perKey);
    const id = ids[e.identity];
    const list = perKey.get(id) ?? [];
    perKey.set(id, list);
    list.push({ sentMs, receivedMs, cost: e.cost });
  }
}

function record5xx(status: number, body: unknown, kind: Kind): void {
  const problem = body as { type?: string; "violated-policies"?: string[] } | null;
  const rules = problem?.["violated-policies"] ?? [];
  if (status === 503 && problem?.type === TEMPORARY_REDUCED_CAPACITY && rules.length > 0) {
    if (rules.every((r) => FAIL_CLOSED.has(r))) {
      for (const r of rules) failClosed503.set(r, (failClosed503.get(r) ?? 0) + 1);
      return;
    }
  }
  if (status === 503 && body === WRANGLER_DEV_RESTARTED) {
    // wrangler dev's proxy, not Sluice: its local runtime restarted with this (non-GET) request in flight.
    devServerRestart503++;
    return;
  }
  unexpected5xx++;
  if (unexpected5xxSamples.length < 5)
    unexpected5xxSamples.push(
      `${phase} at ${Date.now() - loadStartMs} ms, ${kind.name}: ${status} ${JSON.stringify(body)}`,
    );
}

async function client(base: string): Promise<void> {
  while (!stopping) {
    const kind = pickKind();
    const ids: Record<Identity, number> = { api_key: pickKey(), user: pickUser(), ip: pickAddress() };
    const { plan } = planOfKey(ids.api_key);
    const headers: Record<string, string> = { "CF-Connecting-IP": addressOf(ids.ip) };
    if (kind.identities.includes("api_key")) headers["Authorization"] = `Bearer ${apiKeyOf(ids.api_key)}`;
    if (kind.identities.includes("user")) headers["X-User-Id"] = userOf(ids.user);
    const sentMs = Date.now();
    let status: number;
    let body: unknown;
    try {
      const response = await fetch(base + kind.path(), {
        method: kind.method,
        headers,
        signal: AbortSignal.timeout(20_000),
      });
      status = response.status;
      const text = await response.text();
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    } catch {
      networkErrors++;
      networkErrorsByPhase[phase]++;
      await new Promise((resolve) => setTimeout(resolve, 50)); // the server is down: do not spin
      continue;
    }
    const receivedMs = Date.now();
    latencies.push(receivedMs - sentMs);
    statuses.set(String(status), (statuses.get(String(status)) ?? 0) + 1);
    if (kind.identities.includes("api_key")) distinct.keys.add(ids.api_key);
    if (kind.identities.includes("user")) distinct.users.add(ids.user);
    distinct.addresses.add(ids.ip);
    if (status >= 200 && status < 300) recordAdmitted(kind, plan, ids, body as object, sentMs, receivedMs);
    else if (status >= 500) record5xx(status, body, kind);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The server's memory: RSS of its workerd processes (its process group), from /proc

const SAMPLE_EVERY_MS = 2_000;

interface MemorySample {
  readonly atS: number;
  readonly phase: string;
  readonly workerdRssMb: number;
  readonly groupRssMb: number;
  readonly requests: number;
  readonly distinctAddresses: number;
}

function groupRss(pgid: number): { workerdKb: number; totalKb: number } {
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

// ---------------------------------------------------------------------------------------------------------------
// Run

const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");

function seedAccounts(dir: string, state: string): number {
  const records = [];
  for (let i = 0; i < KEYS; i++) {
    const { plan, seeded } = planOfKey(i);
    if (seeded) records.push({ key: sha256Hex(apiKeyOf(i)), value: JSON.stringify({ plan }) });
  }
  const file = join(dir, "soak-accounts.json");
  writeFileSync(file, JSON.stringify(records));
  const put = spawnSync(
    WRANGLER_BIN,
    ["kv", "bulk", "put", file, "--binding", "ACCOUNTS", "--local", "--persist-to", state],
    { cwd: dir, encoding: "utf8", env: { ...process.env, ...WRANGLER_ENV } },
  );
  if (put.status !== 0) throw new Error(`seeding accounts failed:\n${put.stdout}${put.stderr}`);
  return records.length;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

async function main(): Promise<number> {
  const dir = projectCopy("sluice-soak-", { "soak.yaml": readFileSync(RULES_FILE, "utf8") });
  // The rules are compiled above, once. Without this, wrangler dev re-runs the build command as soon as its watcher of
  // rules/ is ready and reloads the Worker a few seconds after start-up (and after the restart), answering requests
  // in flight with its own "worker restarted mid-request" 503: an artefact of wrangler dev, not of Sluice.
  const toml = join(dir, "wrangler.toml");
  writeFileSync(toml, readFileSync(toml, "utf8").replace(/\[build\]\n(?:[a-z_]+ = .*\n)+/, ""));
  if (readFileSync(toml, "utf8").includes("[build]")) throw new Error(`soak: could not drop [build] from ${toml}`);
  // The state lives in memory when the machine has a tmpfs: a fresh Durable Object opens its own SQLite file, and on a
  // disk each one costs a synchronous flush (~80 ms here, against ~10 ms on tmpfs). A SIGKILL leaves a tmpfs intact
  // exactly as it leaves a disk's page cache, so the crash is the same crash.
  const state = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : dir, "sluice-soak-state-"));
  const serverLog = join(dir, "server.log");
  const logStream = createWriteStream(serverLog);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  log(`soak: ${opts.durationMs / 1000} s, ${opts.concurrency} clients, seed ${opts.seed}; server in ${dir}`);
  const seeded = seedAccounts(dir, state);
  log(`soak: seeded ${seeded} accounts into the local KV`);

  // A small MAX_KEYS, so the local rule's store reaches its bound within the run and its memory is seen flat.
  // LIMITER_TIMEOUT_MS: a budget a shared 2-core machine meets even while cold objects open their storage, so that
  // decisions are decisions (fail-opens are counted apart either way; the failure paths have their own tests).
  const args = [
    "--persist-to",
    state,
    "--log-level",
    "warn",
    "--var",
    "MAX_KEYS:10000",
    "--var",
    `LIMITER_TIMEOUT_MS:${opts.timeoutMs}`,
  ];
  const start = async (): Promise<{ child: ChildProcess; upAfterMs: number }> => {
    const t = Date.now();
    const child = startWrangler(dir, port, args, "pipe", { WRANGLER_LOG_PATH: join(dir, "wrangler-logs") });
    child.stdout?.pipe(logStream, { end: false });
    child.stderr?.pipe(logStream, { end: false });
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`wrangler dev exited with ${child.exitCode}; see ${serverLog}`);
      if (Date.now() > deadline) throw new Error(`wrangler dev did not come up in 90 s; see ${serverLog}`);
      try {
        const r = await fetch(`${base}/soak-probe`, { signal: AbortSignal.timeout(2_000) });
        await r.arrayBuffer();
        return { child, upAfterMs: Date.now() - t };
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100)); // not listening yet
      }
    }
  };

  let server = await start();
  log(`soak: server up in ${server.upAfterMs} ms on ${base}`);
  const samples: MemorySample[] = [];
  const t0 = Date.now();
  loadStartMs = t0;
  const sample = () => {
    const { workerdKb, totalKb } = groupRss(server.child.pid!);
    samples.push({
      atS: round((Date.now() - t0) / 1000, 1),
      phase,
      workerdRssMb: round(workerdKb / 1024, 1),
      groupRssMb: round(totalKb / 1024, 1),
      requests: latencies.length,
      distinctAddresses: distinct.addresses.size,
    });
  };
  const sampler = setInterval(sample, SAMPLE_EVERY_MS);
  const progress = setInterval(() => {
    const last = samples[samples.length - 1];
    log(
      `soak: ${Math.round((Date.now() - t0) / 1000)} s, ${latencies.length} answered, ${networkErrors} connection errors, workerd ${last?.workerdRssMb ?? "?"} MB`,
    );
  }, 10_000);

  const clients = Array.from({ length: opts.concurrency }, () => client(base));
  let crash: { atS: number; downMs: number; restartUpMs: number } | null = null;
  try {
    await new Promise((resolve) => setTimeout(resolve, opts.durationMs / 2));
    const pgid = server.child.pid!;
    const killedAt = Date.now();
    const exited = new Promise<void>((resolve) => server.child.once("exit", () => resolve()));
    signalGroup(pgid, "SIGKILL");
    phase = "down";
    await exited;
    log(`soak: SIGKILL sent to the server's process group at ${Math.round((killedAt - t0) / 1000)} s; restarting`);
    server = await start();
    phase = "after";
    crash = {
      atS: round((killedAt - t0) / 1000, 1),
      downMs: Date.now() - killedAt,
      restartUpMs: server.upAfterMs,
    };
    log(`soak: server back after ${crash.downMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + opts.durationMs - Date.now())));
  } finally {
    stopping = true;
    await Promise.all(clients);
    clearInterval(sampler);
    clearInterval(progress);
    sample();
    await killGroup(server.child.pid!, server.child);
    logStream.end();
  }
  const elapsedMs = Date.now() - t0;

  // Server-side events in its log (one JSON line each).
  const serverText = readFileSync(serverLog, "utf8");
  const events: Record<string, number> = {};
  for (const m of serverText.matchAll(/"event":"([a-z_]+)"/g)) events[m[1]!] = (events[m[1]!] ?? 0) + 1;

  // Over-admission per rule.
  const perRule = [...RULES.values()]
    .filter((rule) => rule.mode === "enforce" && rule.scope === "global")
    .map((rule) => {
      const params: AlgorithmParams = projectParams(rule);
      let admitted = 0;
      let allowed = 0;
      let excess = 0;
      let keysOver = 0;
      let ambiguous = 0;
      let saturated = 0;
      let tightest: { admitted: number; allowedOverRun: number } | null = null;
      const keys = admissions.get(rule.id) ?? new Map<number, Admission[]>();
      for (const list of keys.values()) {
        const v = verdictOf(params, list);
        admitted += v.admitted;
        allowed += v.allowedOverRun;
        excess = Math.max(excess, v.excess);
        ambiguous += v.ambiguous;
        if (v.excess > 0) keysOver++;
        if (v.admitted >= 0.9 * v.allowedOverRun) saturated++;
        if (tightest === null || v.admitted / v.allowedOverRun > tightest.admitted / tightest.allowedOverRun)
          tightest = { admitted: v.admitted, allowedOverRun: v.allowedOverRun };
      }
      return {
        rule: rule.id,
        algorithm: rule.algorithm,
        keys: keys.size,
        admittedCost: admitted,
        allowedOverRun: allowed,
        tightestKey: tightest,
        keysAt90PctOrMore: saturated,
        overAdmission: excess,
        keysOver,
        ambiguous,
        failOpen: failOpen.get(rule.id) ?? 0,
        failClosed503: failClosed503.get(rule.id) ?? 0,
      };
    });

  // Memory: does it level off? Per phase, the median of its last quarter against the median of its second quarter.
  const memory = (["before", "after"] as const).map((p) => {
    const list = samples.filter((s) => s.phase === p).map((s) => s.workerdRssMb);
    const q = Math.floor(list.length / 4);
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? Number.NaN;
    const second = med(list.slice(q, 2 * q));
    const last = med(list.slice(3 * q));
    return {
      phase: p,
      samples: list.length,
      secondQuarterMb: second,
      lastQuarterMb: last,
      growthPct: round(((last - second) / second) * 100, 1),
      maxMb: Math.max(...list),
    };
  });
  // Judged only over phases of 2 minutes or more: a shorter one is mostly the server warming up (and the objects the
  // runtime keeps for 10 s after their last request filling up to their steady number).
  const judged = memory.every((m) => m.samples * SAMPLE_EVERY_MS >= 120_000);
  const grows = memory.some((m) => m.growthPct > 15 && m.lastQuarterMb - m.secondQuarterMb > 30);
  const levelled = judged ? !grows : null;

  const sorted = [...latencies].sort((a, b) => a - b);
  const answered = latencies.length;
  const downMs = crash?.downMs ?? 0;
  const overAdmission = perRule.reduce((s, r) => s + r.overAdmission, 0);
  const data = {
    durationS: round(elapsedMs / 1000, 1),
    concurrency: opts.concurrency,
    seed: opts.seed,
    limiterTimeoutMs: opts.timeoutMs,
    population: {
      apiKeys: KEYS,
      seededAccounts: seeded,
      users: USERS,
      addressSpace: ADDRESSES,
      distinctKeysUsed: distinct.keys.size,
      distinctUsersUsed: distinct.users.size,
      distinctAddressesUsed: distinct.addresses.size,
    },
    requests: answered,
    requestsPerS: round(answered / (elapsedMs / 1000), 1),
    requestsPerSWhileUp: round(answered / ((elapsedMs - downMs) / 1000), 1),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    statuses: Object.fromEntries([...statuses.entries()].sort()),
    connectionErrors: { total: networkErrors, ...networkErrorsByPhase },
    crash,
    rules: perRule,
    overAdmission,
    unexplainedAdmissions: unexplained.length,
    unexplainedSamples: unexplained.slice(0, 5),
    unexpected5xx,
    unexpected5xxSamples,
    devServerRestart503,
    serverEvents: events,
    memory: { levelled, phases: memory, samples },
  };
  const path = writeResult("soak", COMMAND, data);
  printSummary(data);
  log(`soak: wrote ${path}`);
  const report = spawnSync(process.execPath, ["--import", "tsx", join("bench", "report.ts")], {
    cwd: ROOT,
    stdio: "inherit",
  });
  if (opts.keep) log(`soak: kept ${dir} (server log in server.log) and its state in ${state}`);
  else {
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
  const ok = overAdmission === 0 && unexplained.length === 0 && unexpected5xx === 0 && levelled !== false;
  log(ok ? "soak: PASS" : "soak: FAIL");
  return ok && report.status === 0 ? 0 : 1;
}

function printSummary(d: {
  durationS: number;
  requests: number;
  requestsPerS: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
  connectionErrors: Record<string, number>;
  crash: { atS: number; downMs: number } | null;
  population: Record<string, number>;
  rules: readonly {
    rule: string;
    algorithm: string;
    keys: number;
    admittedCost: number;
    tightestKey: { admitted: number; allowedOverRun: number } | null;
    keysAt90PctOrMore: number;
    overAdmission: number;
    failOpen: number;
    failClosed503: number;
  }[];
  overAdmission: number;
  unexplainedAdmissions: number;
  unexpected5xx: number;
  devServerRestart503: number;
  memory: {
    levelled: boolean | null;
    phases: readonly { phase: string; secondQuarterMb: number; lastQuarterMb: number }[];
  };
}): void {
  const out = process.stdout;
  out.write(
    `\nsoak: ${d.durationS} s, ${d.requests} requests answered, ${d.requestsPerS} req/s, p50 ${d.p50Ms} ms, p99 ${d.p99Ms} ms\n`,
  );
  out.write(`statuses: ${JSON.stringify(d.statuses)}; connection errors: ${JSON.stringify(d.connectionErrors)}\n`);
  if (d.crash !== null) out.write(`crash: SIGKILL at ${d.crash.atS} s, back after ${d.crash.downMs} ms\n`);
  out.write(
    `distinct: ${d.population.distinctKeysUsed} API keys, ${d.population.distinctUsersUsed} users, ${d.population.distinctAddressesUsed} client addresses\n\n`,
  );
  out.write(
    "rule                  algorithm        keys  admitted  tightest key (admitted/allowed)  keys>=90%  over  fail_open  fail_closed\n",
  );
  for (const r of d.rules)
    out.write(
      `${r.rule.padEnd(22)}${r.algorithm.padEnd(17)}${String(r.keys).padStart(5)}${String(r.admittedCost).padStart(10)}  ${(r.tightestKey === null ? "-" : `${r.tightestKey.admitted}/${r.tightestKey.allowedOverRun}`).padStart(31)}${String(r.keysAt90PctOrMore).padStart(11)}${String(r.overAdmission).padStart(6)}${String(r.failOpen).padStart(11)}${String(r.failClosed503).padStart(13)}\n`,
    );
  out.write(
    `\nover-admission: ${d.overAdmission}; admissions without an expected rule's decision: ${d.unexplainedAdmissions}; unexpected 5xx: ${d.unexpected5xx} (and ${d.devServerRestart503} of wrangler dev's own "worker restarted mid-request" 503)\n`,
  );
  out.write(
    `memory (workerd RSS, 2nd -> last quarter of each phase): ${d.memory.phases.map((m) => `${m.phase} ${m.secondQuarterMb} -> ${m.lastQuarterMb} MB`).join(", ")}: ${d.memory.levelled === null ? "not judged (phases under 2 minutes)" : d.memory.levelled ? "levels off" : "GROWS"}\n\n`,
  );
}

process.exitCode = await main();
