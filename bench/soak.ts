/**
 * `npm run soak [-- --quick | --minutes N] [--concurrency C] [--timeout-ms T] [--seed S] [--addresses N] [--keep]`:
 * minutes of closed-loop load against a real `wrangler dev` (bench/wrangler_dev.ts: a temp copy of the project with
 * bench/soak/rules.yaml as its only rules), a SIGKILL of the server's process group half-way and a restart on the
 * same state, and the evidence that nothing was lost: every response is recorded and judged. CONTRIBUTING.md, "Soak",
 * describes the load (seeded, skewed, documentation-range addresses, a warm-up sweep of every object) and the checks:
 * - no over-admission per rule and key, across the crash (bench/soak/allowance.ts); local and shadow rules apart;
 * - every admitted request carries a decision of every enforcing rule the client expects, at the cost it expects;
 * - no 5xx but a fail-closed rule's deliberate 503 (wrangler dev's own "worker restarted mid-request" 503 apart);
 * - Sluice's own memory does not grow with the load: two heap snapshots of the Worker isolate over each warm phase (a
 *   minute or more of it: the full run), its objects summed by holder (bench/soak/heap_check.ts): what Sluice's code
 *   keeps outside its bounded structures grows at most 100 bytes per request, and the bounded ones (the coalescer's
 *   keys, the live Durable Objects' records) stay within their cost per entry; reported, not judged, the heap after a
 *   full collection every 15 s (it holds the runtime's wrappers of every object made too);
 * - reported, not judged: workerd's RSS by kind against the memory model (what wrangler dev keeps per request and the
 *   runtime per object made, measured by bench/memory_model.ts; docs/testing.md, "The soak's memory model").
 * Prints a summary, writes soak.json and regenerates BENCHMARKS.md (under bench/out/, or the committed ones with
 * `--publish`). Exit status 1 when a check fails.
 */
import { type ChildProcess, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { projectParams } from "../src/algorithms/index.ts";
import { CALL_MEMORY_MAX } from "../src/protocol/store.ts";
import { loadRules } from "../src/rules/load.ts";
import type { AlgorithmParams } from "../src/rules/types.ts";
import { seeded } from "../test/support/random.ts";
import { BENCH_DIR, log, OUT_DIR, PUBLISH, ROOT, round, writeResult } from "./common.ts";
import { type Admission, verdictOf } from "./soak/allowance.ts";
import {
  type HeapReading,
  heapCheck,
  INSTANCE_MAX_BYTES,
  ISOLATE_BOUNDS,
  KEY_MAX_BYTES,
  OTHER_MAX_BYTES_PER_REQUEST,
} from "./soak/heap_check.ts";
import {
  dropBuildStep,
  freePort,
  groupRss,
  inspectHeap,
  killGroup,
  projectCopy,
  signalGroup,
  startWrangler,
  WRANGLER_BIN,
  WRANGLER_ENV,
  workerdRssParts,
  wranglerReloads,
} from "./wrangler_dev.ts";

// ---------------------------------------------------------------------------------------------------------------
// Options

const USAGE =
  "usage: npm run soak -- [--quick | --minutes N] [--concurrency C] [--timeout-ms T] [--seed S] [--keep] [--publish]\n" +
  "  --quick          about 60 s (default: 5 minutes)\n" +
  "  --minutes N      run for N minutes (a positive number)\n" +
  "  --concurrency C  closed-loop clients (default 32)\n" +
  "  --timeout-ms T   the server's LIMITER_TIMEOUT_MS (default 5000)\n" +
  "  --seed S         seed of the request generator (default 1)\n" +
  "  --addresses N    client addresses the per-address routes come from (default 50; see below)\n" +
  "  --keep           keep the temp copy and its state and server log\n" +
  "  --snapshot-at S  heap snapshots of the Worker isolate at these seconds from the start, comma-separated\n" +
  "                   (bench/out/soak-heap-PHASE-S.heapsnapshot; bench/heap_holders.ts compares two)\n" +
  "  --publish        write the committed bench/results/soak.json and BENCHMARKS.md (default: under bench/out/)\n";

function options(argv: readonly string[]) {
  let minutes = 5;
  let quick = false;
  let concurrency = 32;
  let timeoutMs = 5_000;
  let seed = 1;
  let keep = false;
  let addresses = 50;
  let snapshotAtS: number[] = [];
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
    else if (arg === "--publish")
      continue; // read by common.ts (PUBLISH)
    else if (arg === "--minutes") minutes = number(arg, argv[++i], false);
    else if (arg === "--concurrency") concurrency = number(arg, argv[++i], true);
    else if (arg === "--seed") seed = number(arg, argv[++i], true);
    else if (arg === "--timeout-ms") timeoutMs = number(arg, argv[++i], true);
    else if (arg === "--addresses") addresses = number(arg, argv[++i], true);
    else if (arg === "--snapshot-at") snapshotAtS = (argv[++i] ?? "").split(",").map((s) => number(arg, s, false));
    else if (arg === "--help" || arg === "-h") {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`soak: unknown argument ${arg}\n${USAGE}`);
      process.exit(2);
    }
  }
  return {
    durationMs: quick ? 60_000 : Math.round(minutes * 60_000),
    quick,
    concurrency,
    seed,
    keep,
    timeoutMs,
    addresses,
    snapshotAtS,
  };
}

const opts = options(process.argv.slice(2));
const COMMAND = `npm run soak${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`;

// ---------------------------------------------------------------------------------------------------------------
// The population: keys, users, addresses, with a seeded generator and skewed picks

/** The request generator's seeded randomness (xorshift32), so a run's traffic can be replayed. */
const random = seeded(opts.seed);

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
const USERS = 500;
/** Client addresses: tens of thousands, all seen by the isolate's own structures (the local flood guard, key lookups). */
const ADDRESSES = 50_000;
/**
 * The addresses that send the routes a global rule counts per address (logins, public pages): a bounded set, so the
 * Durable Objects are a bounded population that the warm-up sweep creates (see "The server's memory" below). About
 * 1,400 objects plus 6 per address: 50 addresses (the default) keep the live objects under what one local workerd
 * process holds (with 100, a fast warm-up still hit it once). Its SQLite heap is capped at 512 MiB for the whole process, and at about 2,750 live objects it
 * answers SQLITE_NOMEM with no Sluice code at all (bench/object_limit.ts, BENCHMARKS.md section 9b). `--addresses 1000`
 * (7,400 objects) shows that limit.
 */
const IP_KEYED_ADDRESSES = opts.addresses;
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
/**
 * 30% of the traffic from a few hundred hot addresses, the rest spread evenly over all of them, or over the bounded
 * set for a route that a global rule counts per address.
 */
const pickAddress = (ipKeyed: boolean) =>
  random() < 0.3
    ? pickHotAddress() % (ipKeyed ? IP_KEYED_ADDRESSES : HOT_ADDRESSES)
    : Math.floor(random() * (ipKeyed ? IP_KEYED_ADDRESSES : ADDRESSES));

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
const ipKeyed = (kind: Kind) => kind.expect("free").some((e) => e.identity === "ip");

/** A request chosen in advance: the warm-up sweep's. */
interface Planned {
  readonly kind: Kind;
  readonly ids: Record<Identity, number>;
  /** Which sweep it belongs to (the restart starts another). */
  readonly sweep: number;
}

/**
 * The warm-up sweep: one request for every Durable Object the load can reach (every API key's sync request, which
 * three rules decide; every user's validation; every counted address's public page, login, and a sync with a key that
 * has no account, which the api_key rules count by address), so that the object
 * population is complete early and the server's memory can be judged once the key set is warm. Its requests are
 * recorded and judged like all others (they spend the keys' budgets like any request).
 */
function sweep(n: number): Planned[] {
  const kind = (name: string) => KINDS.find((k) => k.name === name)!;
  const list: { kind: Kind; ids: Record<Identity, number> }[] = [];
  const other = () => pickAddress(false);
  for (let i = 0; i < KEYS; i++) list.push({ kind: kind("sync"), ids: { api_key: i, user: 0, ip: other() } });
  // Sent without an API key: the api_key rules count it by address (`counted`), so from the bounded set.
  for (let i = 0; i < USERS; i++)
    list.push({ kind: kind("validate"), ids: { api_key: 0, user: i, ip: pickAddress(true) } });
  const unseededKey = [...Array(KEYS).keys()].find((i) => !planOfKey(i).seeded)!;
  for (let i = 0; i < IP_KEYED_ADDRESSES; i++) {
    list.push({ kind: kind("public"), ids: { api_key: 0, user: 0, ip: i } });
    list.push({ kind: kind("login"), ids: { api_key: 0, user: 0, ip: i } });
    // A key without an account, from this address: the api_key rules' buckets for the address.
    list.push({ kind: kind("sync"), ids: { api_key: unseededKey, user: 0, ip: i } });
  }
  return list.map((p) => ({ ...p, sweep: n })).reverse(); // taken from the end
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
/** What wrangler dev's proxy answers (node_modules/wrangler/wrangler-dist/ProxyWorker.js) when its runtime restarts. */
const WRANGLER_DEV_RESTARTED =
  "Your worker restarted mid-request. Please try sending the request again. Only GET or HEAD requests are retried automatically.";

/**
 * Where a 5xx came from, told by its body and headers alone:
 * - `wrangler_dev_restart`: wrangler dev's proxy, whose local runtime restarted with this request (not a GET or HEAD,
 *   which it retries itself) in flight: the exact text of ProxyWorker.js. Not Sluice's, reported apart.
 * - `sluice_problem`: a problem+json answer of Sluice's other than a fail-closed rule's deliberate 503. Unexpected.
 * - `other`: anything else (an uncaught exception's 500, a proxy error). Unexpected.
 */
type FiveXXClass = "wrangler_dev_restart" | "sluice_problem" | "other";
interface FiveXX {
  readonly atMs: number;
  readonly phase: string;
  readonly kind: string;
  readonly method: string;
  readonly path: string;
  /** The enforcing rules the client expects to decide it. */
  readonly rules: readonly string[];
  readonly status: number;
  readonly class: FiveXXClass;
  readonly headers: Record<string, string>;
  readonly body: string;
}
/** Every 5xx other than a fail-closed rule's deliberate 503, in full (the first 1,000). */
const fiveXX: FiveXX[] = [];
const fiveXXCounts: Record<FiveXXClass, number> = { wrangler_dev_restart: 0, sluice_problem: 0, other: 0 };
const failClosedSamples: string[] = [];
const distinct = { keys: new Set<number>(), users: new Set<number>(), addresses: new Set<number>() };
/** The (rule, key) objects answered requests went to, as the client counts them: how warm the key set is. */
const objectsSeen = new Set<string>();
/**
 * When each (rule, key) object last had a request answered, and how many times the server made an object, as the
 * client can tell: a first request, or one after more than IDLE_EVICTION_MS without any (the runtime evicts an idle
 * object from memory after 10 s and makes it again on its next request). Reset by the restart (a new process).
 */
const lastUseMs = new Map<string, number>();
let objectsMade = 0;
const IDLE_EVICTION_MS = 10_000;

let phase: "before" | "down" | "after" = "before";
let loadStartMs = 0;
let stopping = false;
/** The warm-up sweep still to send, and when each phase's sweep was done (ms since the start). */
let warmup: Planned[] = [];
let warmupLeft = 0;
const warmedAtMs: { before: number | null; after: number | null } = { before: null, after: null };

interface EchoDecision {
  readonly rule: string;
  readonly cost: number;
  readonly allowed?: boolean;
  readonly error?: string;
}

/**
 * Who a rule counts, as the Worker does: an API key without an account record (or no key) is not an identity, so an
 * `identity: api_key` rule (`unverified: by_address`, the default) counts its caller by client address instead
 * (docs/rules.md, "Who counts as the same caller"). Such a bucket is numbered -(address + 1), apart from the keys.
 */
function counted(e: Expected, ids: Record<Identity, number>, kind: Kind): number {
  const keyless = !kind.identities.includes("api_key");
  if (e.identity === "api_key" && (keyless || !planOfKey(ids.api_key).seeded)) return -(ids.ip + 1);
  return ids[e.identity];
}

/**
 * The (rule, identity) objects a request goes to: the rules the client expects to decide it and, for a request
 * without an API key, the api_key rules, which count such a caller by its address (docs/rules.md, "Who counts as the
 * same caller"; not held to their allowance here: the echo of such a request is not checked for them).
 */
function objectsOf(kind: Kind, plan: Plan): readonly Expected[] {
  const expected = kind.expect(plan);
  if (kind.identities.includes("api_key")) return expected;
  const unknownKey = (e: Expected): Expected => ({ ...e, identity: "api_key" });
  return [...expected, unknownKey(byPlan("free", 1)), unknownKey(windowOf(1))];
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
    const id = counted(e, ids, kind);
    const list = perKey.get(id) ?? [];
    perKey.set(id, list);
    list.push({ sentMs, receivedMs, cost: e.cost });
  }
}

function record5xx(status: number, body: unknown, text: string, headers: Headers, kind: Kind, path: string): void {
  const problem = typeof body === "object" ? (body as { type?: string; "violated-policies"?: string[] } | null) : null;
  const rules = problem?.["violated-policies"] ?? [];
  const problemJson = headers.get("content-type")?.startsWith("application/problem+json") === true;
  if (status === 503 && problemJson && problem?.type === TEMPORARY_REDUCED_CAPACITY && rules.length > 0) {
    if (rules.every((r) => FAIL_CLOSED.has(r))) {
      for (const r of rules) failClosed503.set(r, (failClosed503.get(r) ?? 0) + 1);
      if (failClosedSamples.length < 3) failClosedSamples.push(`${kind.name}: ${text.slice(0, 200)}`);
      return;
    }
  }
  const klass: FiveXXClass =
    status === 503 && text === WRANGLER_DEV_RESTARTED
      ? "wrangler_dev_restart"
      : problemJson
        ? "sluice_problem"
        : "other";
  fiveXXCounts[klass]++;
  if (fiveXX.length < 1000)
    fiveXX.push({
      atMs: Date.now(),
      phase,
      kind: kind.name,
      method: kind.method,
      path,
      rules: kind.expect("free").map((e) => e.rule),
      status,
      class: klass,
      headers: Object.fromEntries(headers.entries()),
      body: text.slice(0, 500),
    });
}

async function client(base: string): Promise<void> {
  while (!stopping) {
    // While a sweep lasts, every other request is the sweep's: the random load (hot keys included) runs from the start.
    const planned = (sent++ & 1) === 0 ? warmup.pop() : undefined;
    const kind = planned?.kind ?? pickKind();
    const apiKey = planned?.ids.api_key ?? pickKey();
    // A request without a known key (none, or one without an account) is counted by address by the api_key rules
    // (`counted`): its addresses come from the bounded set too, or every new address would make objects.
    const byAddress = ipKeyed(kind) || !kind.identities.includes("api_key") || !planOfKey(apiKey).seeded;
    const ids: Record<Identity, number> = planned?.ids ?? {
      api_key: apiKey,
      user: pickUser(),
      ip: pickAddress(byAddress),
    };
    const { plan } = planOfKey(ids.api_key);
    const headers: Record<string, string> = { "CF-Connecting-IP": addressOf(ids.ip) };
    if (kind.identities.includes("api_key")) headers["Authorization"] = `Bearer ${apiKeyOf(ids.api_key)}`;
    if (kind.identities.includes("user")) headers["X-User-Id"] = userOf(ids.user);
    const path = kind.path();
    const sentMs = Date.now();
    let status: number;
    let body: unknown;
    let text: string;
    let responseHeaders: Headers;
    try {
      const response = await fetch(base + path, {
        method: kind.method,
        headers,
        signal: AbortSignal.timeout(20_000),
      });
      status = response.status;
      responseHeaders = response.headers;
      text = await response.text();
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    } catch {
      networkErrors++;
      networkErrorsByPhase[phase]++;
      if (planned !== undefined) warmedOne(planned);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the server is down: do not spin
      continue;
    }
    if (planned !== undefined) warmedOne(planned);
    const receivedMs = Date.now();
    for (const e of objectsOf(kind, plan)) {
      const object = `${e.rule}:${counted(e, ids, kind)}`;
      objectsSeen.add(object);
      const last = lastUseMs.get(object);
      if (last === undefined || sentMs - last > IDLE_EVICTION_MS) objectsMade++;
      lastUseMs.set(object, receivedMs);
    }
    latencies.push(receivedMs - sentMs);
    statuses.set(String(status), (statuses.get(String(status)) ?? 0) + 1);
    if (kind.identities.includes("api_key")) distinct.keys.add(ids.api_key);
    if (kind.identities.includes("user")) distinct.users.add(ids.user);
    distinct.addresses.add(ids.ip);
    if (status >= 200 && status < 300) recordAdmitted(kind, plan, ids, body as object, sentMs, receivedMs);
    else if (status >= 500) record5xx(status, body, text, responseHeaders, kind, path);
  }
}

let sweeps = 0;
let sent = 0;
function warmedOne(planned: Planned): void {
  if (planned.sweep !== sweeps) return; // the sweep before the crash
  if (--warmupLeft === 0 && (phase === "before" || phase === "after")) warmedAtMs[phase] = Date.now() - loadStartMs;
}

function startWarmup(): void {
  warmup = sweep(++sweeps);
  warmupLeft = warmup.length;
}

// ---------------------------------------------------------------------------------------------------------------
// The server's memory: RSS of its workerd processes (its process group), from /proc

const SAMPLE_EVERY_MS = 2_000;

interface MemorySample {
  readonly atS: number;
  readonly phase: string;
  /** Taken after this phase's warm-up sweep was answered: every object the load can reach exists. */
  readonly warm: boolean;
  readonly workerdRssMb: number;
  readonly groupRssMb: number;
  readonly requests: number;
  readonly distinctAddresses: number;
  /** (rule, key) objects answered requests went to so far. */
  readonly objectsSeen: number;
  /** Objects the server made so far (first uses, and uses after 10 s idle), as the client counts them. */
  readonly objectsMade: number;
  /** The Worker isolate's JS heap in use (its code's own objects, the objects' records included), MB; null: unread. */
  jsHeapMb: number | null;
  /** V8's whole heap for that isolate, used or not (what it holds from the system), MB; null: unread. */
  jsHeapTotalMb: number | null;
  /** workerd's RSS by kind (/proc/<pid>/status): anonymous (heaps: V8's, SQLite's, the runtime's), file, shared, MB. */
  readonly anonMb: number;
  readonly fileMb: number;
  readonly shmemMb: number;
}

/** The Worker isolate's JS heap still in use after a full garbage collection (forced through the inspector), MB. */
interface RetainedSample {
  readonly atS: number;
  readonly phase: string;
  readonly warm: boolean;
  readonly mb: number;
}
const RETAINED_EVERY_MS = 15_000;
/**
 * The Worker isolate's heap after a full collection, over a warm phase: reported against this slope, MB/min, not
 * judged. It was the soak's check until 2026-12-07, and could not tell a leak from a structure filling: its heap
 * snapshots (`--snapshot-at`, bench/heap_holders.ts) showed the 5.8 MB/min of the published run to be the runtime's
 * wrappers of every Durable Object it made (about 0.8 KB each, kept by local workerd with no Sluice code too), the
 * coalescer's keys filling toward their bound (about 1 KB each) and the live objects' call ids (about 120 bytes each,
 * at most 128 an object), while a leak of 1 KB per request would have grown about 6 MB/min, barely above the bound.
 * Sluice's own memory is judged from two snapshots instead (bench/soak/heap_check.ts).
 */
const RETAINED_MB_PER_MIN = 5;
/** How long before a phase's end its last heap snapshot is taken (a snapshot pauses the isolate for a second or two). */
const END_SNAPSHOT_LEAD_MS = 8_000;

/**
 * The memory model of local workerd under the soak (bench/memory_model.ts, 30-minute runs side by side; docs/testing.md,
 * "The soak's memory model"): under `wrangler dev` even a Worker with no object and no Sluice code grows by about
 * 9.1 KB per request (9.0-9.1 KB over 30 min, never levelling; under plain `workerd serve` the same Worker keeps
 * 0.02-0.36 KB), and every Durable Object the runtime makes again after evicting it costs about 3 KB more (Sluice's
 * object under `workerd serve`, where nothing else grows; a bare object 1.0 KB). workerd's RSS over the second warm
 * half is compared with REQUEST_KB × requests + OBJECT_KB × objects made, plus MODEL_MARGIN for the noise of one
 * minute's fit; reported, not judged (the runtime's growth is not Sluice's: its own memory is judged by the heap).
 */
const RUNTIME_KB_PER_REQUEST = 9.1;
const RUNTIME_KB_PER_OBJECT_MADE = 3.0;
const MODEL_MARGIN = 0.5;
/** A warm phase shorter than this is reported, not judged. */
const JUDGED_SPAN_S = 60;

/** The Worker isolate's JS heap over a phase: its largest, and its least-squares slope over the second warm half. */
function jsHeapOf(all: readonly MemorySample[], secondHalf: readonly MemorySample[]) {
  const read = (xs: readonly MemorySample[]) =>
    xs.filter((x) => x.jsHeapMb !== null).map((x) => ({ ...x, workerdRssMb: x.jsHeapMb! }));
  const sampled = read(all);
  if (sampled.length === 0) return null;
  const slope = slopeMbPerMin(read(secondHalf));
  return {
    firstMb: sampled[0]!.workerdRssMb,
    lastMb: sampled[sampled.length - 1]!.workerdRssMb,
    maxMb: Math.max(...sampled.map((x) => x.workerdRssMb)),
    secondHalfSlopeMbPerMin: Number.isFinite(slope) ? round(slope, 2) : null,
  };
}

/** Least-squares slope of one reading over time, MB per minute, rounded; null with fewer than 3 readings. */
function slopeOf(samples: readonly MemorySample[], pick: (x: MemorySample) => number | null): number | null {
  const read = samples.filter((x) => pick(x) !== null).map((x) => ({ ...x, workerdRssMb: pick(x)! }));
  const slope = slopeMbPerMin(read);
  return Number.isFinite(slope) ? round(slope, 1) : null;
}

/** Least-squares slope of RSS over time, MB per minute; NaN with fewer than 3 samples. */
function slopeMbPerMin(samples: readonly MemorySample[]): number {
  if (samples.length < 3) return Number.NaN;
  const n = samples.length;
  const mx = samples.reduce((a, x) => a + x.atS, 0) / n;
  const my = samples.reduce((a, x) => a + x.workerdRssMb, 0) / n;
  let num = 0;
  let den = 0;
  for (const x of samples) {
    num += (x.atS - mx) * (x.workerdRssMb - my);
    den += (x.atS - mx) ** 2;
  }
  return den === 0 ? Number.NaN : (num / den) * 60;
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
  dropBuildStep(dir); // the rules are compiled once, above: no reload of the Worker by wrangler dev's rules/ watcher
  // The state lives in memory when the machine has a tmpfs: a fresh Durable Object opens its own SQLite file, and on a
  // disk each one costs a synchronous flush (~80 ms here, against ~10 ms on tmpfs). A SIGKILL leaves a tmpfs intact
  // exactly as it leaves a disk's page cache, so the crash is the same crash.
  const state = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : dir, "sluice-soak-state-"));
  const serverLog = join(dir, "server.log");
  const logStream = createWriteStream(serverLog);
  const port = await freePort();
  let inspectorPort = await freePort();
  while (inspectorPort === port) inspectorPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  log(`soak: ${opts.durationMs / 1000} s, ${opts.concurrency} clients, seed ${opts.seed}; server in ${dir}`);
  const seeded = seedAccounts(dir, state);
  log(`soak: seeded ${seeded} accounts into the local KV`);

  // A small MAX_KEYS, so the local rule's store reaches its bound within the run and its memory is seen flat.
  // LIMITER_TIMEOUT_MS: a budget a shared 2-core machine meets even while cold objects open their storage, so that
  // decisions are decisions (fail-opens are counted apart either way; the failure paths have their own tests).
  const args = [
    "--inspector-port",
    String(inspectorPort),
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
    const child = startWrangler(dir, port, args, "pipe", {
      WRANGLER_LOG_PATH: join(dir, "wrangler-logs"), // its debug log: when it reloaded its runtime, and why
      WRANGLER_CI_DISABLE_CONFIG_WATCHING: "true", // no reload if something touches the copy's wrangler.toml
    });
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
  let heap = await inspectHeap(inspectorPort);
  log(`soak: server up in ${server.upAfterMs} ms on ${base}`);
  const samples: MemorySample[] = [];
  const retained: RetainedSample[] = [];
  const t0 = Date.now();
  loadStartMs = t0;
  const loads: number[] = [];
  const sample = () => {
    loads.push(loadavg()[0]!);
    const { workerdKb, totalKb } = groupRss(server.child.pid!);
    const parts = workerdRssParts(server.child.pid!);
    const taken: MemorySample = {
      atS: round((Date.now() - t0) / 1000, 1),
      phase,
      warm: phase !== "down" && warmedAtMs[phase] !== null,
      workerdRssMb: round(workerdKb / 1024, 1),
      groupRssMb: round(totalKb / 1024, 1),
      requests: latencies.length,
      distinctAddresses: distinct.addresses.size,
      objectsSeen: objectsSeen.size,
      objectsMade,
      jsHeapMb: null,
      jsHeapTotalMb: null,
      anonMb: round(parts.anonKb / 1024, 1),
      fileMb: round(parts.fileKb / 1024, 1),
      shmemMb: round(parts.shmemKb / 1024, 1),
    };
    samples.push(taken);
    if (phase !== "down")
      void heap.heapMb().then((mb) => {
        taken.jsHeapMb = mb === null ? null : round(mb, 1);
        const total = heap.heapTotalMb();
        taken.jsHeapTotalMb = total === null ? null : round(total, 1);
      });
  };
  const sampler = setInterval(sample, SAMPLE_EVERY_MS);
  // What the Worker isolate retains after a full collection, every RETAINED_EVERY_MS (each pauses it for a moment).
  const retainedSampler = setInterval(() => {
    if (phase === "down") return;
    const at = { atS: round((Date.now() - t0) / 1000, 1), phase, warm: warmedAtMs[phase] !== null };
    void heap.retainedMb().then((mb) => {
      if (mb !== null && at.phase === phase) retained.push({ ...at, mb: round(mb, 1) });
    });
  }, RETAINED_EVERY_MS);
  // Heap snapshots asked for (`--snapshot-at`): what grows, by constructor and holder (bench/heap_diff.ts).
  const snapshotTimers = opts.snapshotAtS.map((s) =>
    setTimeout(() => {
      if (phase === "down") return;
      const path = join(BENCH_DIR, "out", `soak-heap-${phase}-${s}.heapsnapshot`);
      const at = `${latencies.length} requests, ${distinct.addresses.size} addresses, ${objectsSeen.size} objects`;
      mkdirSync(join(BENCH_DIR, "out"), { recursive: true });
      void heap.snapshot(path).then((ok) => log(`soak: heap snapshot at ${s} s (${at}): ${ok ? path : "failed"}`));
    }, s * 1000),
  );
  // Sluice's own memory, judged: a heap snapshot once each phase is warm and one near its end (bench/soak/heap_check.ts).
  const judgedSnapshots: Record<"before" | "after", { start?: HeapReading; end?: HeapReading }> = {
    before: {},
    after: {},
  };
  let snapshotting = false;
  const judgedSnapshot = (which: "start" | "end") => {
    const p = phase;
    if (p === "down" || snapshotting || judgedSnapshots[p][which] !== undefined) return;
    if (which === "start" ? warmedAtMs[p] === null : judgedSnapshots[p].start === undefined) return;
    snapshotting = true;
    const atS = round((Date.now() - t0) / 1000, 1);
    const reading = { atS, requests: latencies.length, path: join(dir, `heap-${p}-${which}.heapsnapshot`) };
    void heap.snapshot(reading.path).then((ok) => {
      snapshotting = false;
      if (ok && phase === p) judgedSnapshots[p][which] = reading;
      log(`soak: heap snapshot, ${p} the crash, ${which} of its warm part (${atS} s): ${ok ? "taken" : "failed"}`);
    });
  };
  const startSnapshots = setInterval(() => judgedSnapshot("start"), SAMPLE_EVERY_MS);
  const endSnapshots = [opts.durationMs / 2, opts.durationMs].map((atMs) =>
    setTimeout(() => judgedSnapshot("end"), Math.max(0, atMs - END_SNAPSHOT_LEAD_MS)),
  );
  const progress = setInterval(() => {
    const last = samples[samples.length - 1];
    log(
      `soak: ${Math.round((Date.now() - t0) / 1000)} s, ${latencies.length} answered, ${networkErrors} connection errors, workerd ${last?.workerdRssMb ?? "?"} MB, ${objectsSeen.size} objects, ${warmupLeft > 0 ? `warm-up: ${warmupLeft} to go` : "warm"}`,
    );
  }, 10_000);

  startWarmup();
  const clients = Array.from({ length: opts.concurrency }, () => client(base));
  let crash: { atS: number; downMs: number; restartUpMs: number } | null = null;
  let killedAt: number | null = null;
  try {
    await new Promise((resolve) => setTimeout(resolve, opts.durationMs / 2));
    const pgid = server.child.pid!;
    killedAt = Date.now();
    const exited = new Promise<void>((resolve) => server.child.once("exit", () => resolve()));
    signalGroup(pgid, "SIGKILL");
    phase = "down";
    lastUseMs.clear(); // the new process makes every object again
    await exited;
    log(`soak: SIGKILL sent to the server's process group at ${Math.round((killedAt - t0) / 1000)} s; restarting`);
    heap.close();
    server = await start();
    heap = await inspectHeap(inspectorPort);
    phase = "after";
    startWarmup(); // the restarted server's objects are made again as they are used: sweep them again
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
    clearInterval(retainedSampler);
    for (const timer of [...snapshotTimers, ...endSnapshots]) clearTimeout(timer);
    clearInterval(startSnapshots);
    clearInterval(progress);
    sample();
    await new Promise((resolve) => setTimeout(resolve, 500)); // the last heap reading
    heap.close();
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
      const over: { key: number; excess: number; admissions: [number, number, number][] }[] = [];
      for (const [key, list] of keys) {
        const v = verdictOf(params, list);
        // A key over its allowance: its admissions (sent, received: s from the kill; cost), to see when and why.
        if (v.excess > 0 && over.length < 3)
          over.push({
            key,
            excess: v.excess,
            admissions: list.map((a) => [
              round((a.sentMs - (killedAt ?? t0)) / 1000, 3),
              round((a.receivedMs - (killedAt ?? t0)) / 1000, 3),
              a.cost,
            ]),
          });
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
        over,
        ambiguous,
        failOpen: failOpen.get(rule.id) ?? 0,
        failClosed503: failClosed503.get(rule.id) ?? 0,
      };
    });

  // Memory, per phase, after its warm-up sweep. Judged: the Worker isolate's heap after full collections (Sluice's own
  // memory) over the warm part. Reported: workerd's RSS over the second half, by kind, against what a bare Worker's
  // runtime keeps per request and per object made (the memory model: RUNTIME_KB_PER_REQUEST, RUNTIME_KB_PER_OBJECT_MADE).
  const memory = (["before", "after"] as const).map((p) => {
    const all = samples.filter((x) => x.phase === p);
    const warm = all.filter((x) => x.warm);
    const spanS = warm.length === 0 ? 0 : warm[warm.length - 1]!.atS - warm[0]!.atS;
    const mid = warm.length === 0 ? 0 : warm[0]!.atS + spanS / 2;
    const firstHalf = warm.filter((x) => x.atS < mid);
    const secondHalf = warm.filter((x) => x.atS >= mid);
    const slope = slopeMbPerMin(secondHalf);
    const h0 = secondHalf[0];
    const h1 = secondHalf[secondHalf.length - 1];
    const minutes = h0 === undefined || h1 === undefined ? 0 : (h1.atS - h0.atS) / 60;
    const made = h0 === undefined || h1 === undefined ? 0 : h1.objectsMade - h0.objectsMade;
    const grewMb = slope * minutes;
    const requestsInHalf = h0 === undefined || h1 === undefined ? 0 : h1.requests - h0.requests;
    const allowedMb =
      ((1 + MODEL_MARGIN) * (RUNTIME_KB_PER_REQUEST * requestsInHalf + RUNTIME_KB_PER_OBJECT_MADE * made)) / 1024;
    // Sluice's own memory: the Worker isolate's heap after a full collection, over the whole warm part.
    const kept = retained.filter((r) => r.phase === p && r.warm);
    const keptSpanS = kept.length === 0 ? 0 : kept[kept.length - 1]!.atS - kept[0]!.atS;
    const keptSlope = slopeMbPerMin(kept.map((r) => ({ ...warm[0]!, atS: r.atS, workerdRssMb: r.mb })));
    return {
      phase: p,
      samples: all.length,
      warmAtS: warmedAtMs[p] === null ? null : round(warmedAtMs[p]! / 1000, 1),
      warmSpanS: round(spanS, 1),
      startMb: all[0]?.workerdRssMb ?? Number.NaN,
      warmMb: warm[0]?.workerdRssMb ?? Number.NaN,
      endMb: all[all.length - 1]?.workerdRssMb ?? Number.NaN,
      maxMb: Math.max(...all.map((x) => x.workerdRssMb)),
      warmupSlopeMbPerMin: round(slopeMbPerMin(all.filter((x) => !x.warm)), 1),
      firstHalfSlopeMbPerMin: round(slopeMbPerMin(firstHalf), 1),
      secondHalfSlopeMbPerMin: round(slope, 1),
      jsHeap: jsHeapOf(all, secondHalf),
      /** Over the second warm half, MB/min: workerd's RSS by kind, and V8's whole heap (used or not). */
      secondHalfSlopesMbPerMin: {
        anon: slopeOf(secondHalf, (x) => x.anonMb),
        file: slopeOf(secondHalf, (x) => x.fileMb),
        shmem: slopeOf(secondHalf, (x) => x.shmemMb),
        jsHeapTotal: slopeOf(secondHalf, (x) => x.jsHeapTotalMb),
        /** RSS less V8's whole heap: workerd's native memory, without the garbage collector's saw-tooth. */
        native: slopeOf(secondHalf, (x) => (x.jsHeapTotalMb === null ? null : x.workerdRssMb - x.jsHeapTotalMb)),
      },
      objectsSeenSecondHalf:
        secondHalf.length === 0 ? null : [secondHalf[0]!.objectsSeen, secondHalf[secondHalf.length - 1]!.objectsSeen],
      secondHalf: {
        minutes: round(minutes, 2),
        requests: h0 === undefined || h1 === undefined ? 0 : h1.requests - h0.requests,
        objectsMade: made,
        grewMb: round(grewMb, 1),
        allowedMb: round(allowedMb, 1),
      },
      levelled: spanS >= JUDGED_SPAN_S && Number.isFinite(slope) ? grewMb <= allowedMb : null,
      retainedHeap: {
        readings: kept.map((r) => [r.atS, r.mb]),
        slopeMbPerMin: Number.isFinite(keptSlope) ? round(keptSlope, 2) : null,
        levelled: keptSpanS >= JUDGED_SPAN_S && Number.isFinite(keptSlope) ? keptSlope <= RETAINED_MB_PER_MIN : null,
      },
    };
  });
  const sluiceHeap = (["before", "after"] as const).map((p) => {
    const { start, end } = judgedSnapshots[p];
    if (start === undefined || end === undefined) return { phase: p, levelled: null, check: null };
    const check = heapCheck(start, end, end.atS - start.atS >= JUDGED_SPAN_S);
    return { phase: p, levelled: check.levelled, check };
  });
  const heapLevelled = sluiceHeap.some((m) => m.levelled === false)
    ? false
    : sluiceHeap.every((m) => m.levelled === true)
      ? true
      : null;
  const retainedLevelled = memory.some((m) => m.retainedHeap.levelled === false)
    ? false
    : memory.every((m) => m.retainedHeap.levelled === true)
      ? true
      : null;
  const levelled = memory.some((m) => m.levelled === false)
    ? false
    : memory.every((m) => m.levelled === true)
      ? true
      : null;

  // wrangler dev's own messages in the server log (its JSON lines are Sluice's events), the errors among them counted.
  const serverMessages = new Map<string, number>();
  for (const line of serverText.split("\n")) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes in wrangler's output
    const plain = line.replace(/\x1b\[[0-9;]*m/g, "").trim();
    if (plain === "" || plain.startsWith("{") || !/error|warn|restart|reload|overload|crash|fail/i.test(plain))
      continue;
    const shape = plain.replace(/\d+/g, "N").slice(0, 200);
    serverMessages.set(shape, (serverMessages.get(shape) ?? 0) + 1);
  }

  const fromKill = (atMs: number) => (killedAt === null ? null : round((atMs - killedAt) / 1000, 1));
  const fiveXXRecords = fiveXX.map(({ atMs, ...rest }) => ({
    atS: round((atMs - t0) / 1000, 1),
    fromKillS: fromKill(atMs),
    ...rest,
  }));
  const unexpected5xx = fiveXXCounts.sluice_problem + fiveXXCounts.other;
  const reloads = wranglerReloads(join(dir, "wrangler-logs")).map((r) => ({
    atS: round((r.atMs - t0) / 1000, 1),
    fromKillS: fromKill(r.atMs),
    before: r.before,
  }));

  const sorted = [...latencies].sort((a, b) => a - b);
  const answered = latencies.length;
  const downMs = crash?.downMs ?? 0;
  const overAdmission = perRule.reduce((s, r) => s + r.overAdmission, 0);
  const data = {
    durationS: round(elapsedMs / 1000, 1),
    concurrency: opts.concurrency,
    seed: opts.seed,
    limiterTimeoutMs: opts.timeoutMs,
    // The machine's 1-minute load average over the run (this process, wrangler dev and anything else): a 2-core
    // machine near 2 was running little besides the soak.
    loadAverage: {
      median: round([...loads].sort((a, b) => a - b)[loads.length >> 1] ?? 0, 2),
      max: round(Math.max(0, ...loads), 2),
    },
    population: {
      apiKeys: KEYS,
      seededAccounts: seeded,
      users: USERS,
      addressSpace: ADDRESSES,
      ipKeyedAddresses: IP_KEYED_ADDRESSES,
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
    fiveXX: { counts: fiveXXCounts, records: fiveXXRecords },
    /** wrangler dev's reloads of its runtime mid-run (not the start, not the restart after the kill). */
    wranglerReloads: reloads,
    failClosedSamples,
    serverEvents: events,
    /** Rule decisions that failed with no fault injected (the server's `limiter_failed` events), and the local
     * runtime's SQLite `out of memory` lines among the server's messages (bench/object_limit.ts). */
    failedDecisions: {
      total: events.limiter_failed ?? 0,
      failOpen: [...failOpen.values()].reduce((a, b) => a + b, 0),
      failClosed503: [...failClosed503.values()].reduce((a, b) => a + b, 0),
      sqliteNomemLines: (serverText.match(/SQLITE_NOMEM/g) ?? []).length,
    },
    serverMessages: Object.fromEntries([...serverMessages.entries()].slice(0, 30)),
    memory: {
      criterion: `reported, not judged: over the second half of each phase after its warm-up sweep (at least ${JUDGED_SPAN_S} s of it), whether workerd's RSS (least-squares fit) grows by at most ${RUNTIME_KB_PER_REQUEST} KB per request (wrangler dev's own, a no-object Worker) plus ${RUNTIME_KB_PER_OBJECT_MADE} KB per object the client saw the runtime make again after evicting it, plus ${MODEL_MARGIN * 100}% (bench/memory_model.ts; docs/testing.md, "The soak's memory model")`,
      levelled,
      retainedCriterion: `reported, not judged: over each phase's warm part (at least ${JUDGED_SPAN_S} s of it), the Worker isolate's JS heap after a full collection (forced every ${RETAINED_EVERY_MS / 1000} s through the inspector: what Sluice's code and its objects' records retain, and the runtime's wrappers of every object it made) against ${RETAINED_MB_PER_MIN} MB/min (least-squares fit)`,
      retainedLevelled,
      sluiceHeapCriterion: `over each phase's warm part (at least ${JUDGED_SPAN_S} s between a heap snapshot of the Worker isolate once it is warm and one ${END_SNAPSHOT_LEAD_MS / 1000} s before its end; bench/soak/heap_check.ts): what Sluice's code keeps outside its bounded structures grows by at most ${OTHER_MAX_BYTES_PER_REQUEST} bytes per request, the coalescer's keys cost at most ${KEY_MAX_BYTES} bytes each (at most ${ISOLATE_BOUNDS.COALESCE_MAX_KEYS} keys), a live Durable Object instance at most ${Math.round(INSTANCE_MAX_BYTES / 1024)} KB (its record and up to ${CALL_MEMORY_MAX} call ids); the runtime's wrappers of each object it made are reported apart`,
      sluiceHeapLevelled: heapLevelled,
      sluiceHeap,
      phases: memory,
      samples,
    },
  };
  const path = writeResult("soak", COMMAND, data);
  log(`soak: wrote ${path}`);
  const report = spawnSync(
    process.execPath,
    ["--import", "tsx", join("bench", "report.ts"), ...(PUBLISH ? ["--publish"] : [])],
    {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  // The section report.ts wrote into BENCHMARKS.md, printed as it stands there.
  const benchmarks = readFileSync(join(OUT_DIR, "BENCHMARKS.md"), "utf8");
  const at = benchmarks.indexOf("## 6. Soak");
  const next = benchmarks.indexOf("\n## ", at + 1);
  process.stdout.write(`\n${at < 0 ? "" : benchmarks.slice(at, next < 0 ? undefined : next + 1)}`);
  for (const r of fiveXXRecords)
    process.stdout.write(
      `5xx ${r.class} at ${r.atS} s (${r.fromKillS === null ? "no kill" : `${r.fromKillS} s from the kill`}), ${r.method} ${r.path} (${r.kind}): ${r.status} ${r.body.slice(0, 160)}\n`,
    );
  if (opts.keep) log(`soak: kept ${dir} (server log in server.log) and its state in ${state}`);
  else {
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
  const ok =
    overAdmission === 0 &&
    unexplained.length === 0 &&
    unexpected5xx === 0 &&
    // Sluice's own memory is judged (heap_check.ts); the retained heap's slope and workerd's RSS are reported.
    heapLevelled !== false;
  log(ok ? "soak: PASS" : "soak: FAIL");
  return ok && report.status === 0 ? 0 : 1;
}

process.exitCode = await main();
