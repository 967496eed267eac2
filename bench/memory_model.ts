/**
 * `node --import tsx bench/memory_model.ts [--minutes M] [--rate R] [--only a,b] [--quick]`: what local workerd's memory
 * is made of under steady load, to tell the runtime's allocator from a leak of Sluice's own. Six servers run side by
 * side at a low open-loop rate (the machine is shared): a Worker with **no object** (answers "ok"), a **bare** Durable
 * Object Worker (one counter object per client address, with an alarm, as Sluice's objects have) and **sluice** (one
 * per-address object rule and one `scope: local` rule), each under `wrangler dev` and under plain `workerd serve` (the
 * workerd binary from node_modules, with a config written here: no wrangler, no dev proxy).
 *
 * Each run has two halves: **warm** (WARM_KEYS addresses, each revisited every couple of seconds: its objects stay
 * live, so growth is per request) and **churn** (CHURN_KEYS addresses, each revisited after about a minute, past the
 * runtime's 10 s eviction of an idle object: nearly every request makes its object again). Every 10 s: workerd's RSS
 * (anonymous and file/shared apart) and the Worker isolate's JS heap (devtools inspector, each server its own free
 * port); every 60 s the heap after a full collection (what the code retains). The fits (least squares over each half,
 * the first minute of each skipped) give MB/min, KB per request and KB per object made. Writes memory_model.json
 * (bench/out/results/, or bench/results/ with --publish) after every sample, so a cut-short run still leaves figures.
 * `--churn-only` makes the whole run churn. `--snapshot-at 2,8` takes a heap snapshot of each server's isolate at
 * those minutes (bench/out/heap-KIND-RUNTIME-MIN.heapsnapshot; bench/heap_diff.ts compares two by constructor).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { bareCounterWorker, bareToml, ipv6Of } from "./bare_worker.ts";
import { log, QUICK, ROOT, round, writeResult } from "./common.ts";
import {
  dropBuildStep,
  freePort,
  groupCpuMs,
  groupRss,
  inspectHeap,
  killGroup,
  projectCopy,
  startWrangler,
  WRANGLER_BIN,
  WRANGLER_ENV,
  waitUp,
  workerdRssParts,
} from "./wrangler_dev.ts";

const argv = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const n = Number(argv[at + 1]);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`memory_model: ${name} needs a positive number`);
  return n;
};
const MINUTES = flag("--minutes", QUICK ? 2 : 30);
const RATE = flag("--rate", 25);
const onlyAt = argv.indexOf("--only");
/** `--churn-only`: every minute is churn (no warm half), to see the heap level off under churn for the whole run. */
const CHURN_ONLY = argv.includes("--churn-only");
const snapshotAt = argv.indexOf("--snapshot-at");
/** Minutes at which to take a heap snapshot of each server's isolate. */
const SNAPSHOT_MINUTES = snapshotAt < 0 ? [] : (argv[snapshotAt + 1] ?? "").split(",").map(Number);
const WARM_KEYS = 50;
/** Revisited every CHURN_KEYS / RATE s (60 s at 25 req/s): past the 10 s eviction, so each request makes an object. */
const CHURN_KEYS = Math.round(RATE * 60);
const SAMPLE_MS = 10_000;
const RETAINED_EVERY = 6; // samples: 60 s
const MAX_IN_FLIGHT = 64;

const NO_OBJECT = `export default { fetch() { return new Response("ok"); } };\n`;
const NO_OBJECT_TOML = `name = "noobj"\nmain = "index.js"\ncompatibility_date = "2026-04-20"\n`;
/** The bare object's alarm deletes it a minute after its first write, as a one-minute window rule's object does. */
const BARE = bareCounterWorker("Date.now() + 60_000");

const SLUICE_RULES = `- id: mm-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 1000000
  window: min
- id: mm-local
  match: { identity: ip }
  algorithm: gcra
  rate: 1000/s
  burst: 1000
  scope: local
`;

type Kind = "noobj" | "bare" | "sluice";
type Runtime = "wrangler" | "workerd";

interface Sample {
  atS: number;
  half: "warm" | "churn";
  requests: number;
  failed: number;
  dropped: number;
  objectsMade: number;
  workerdRssMb: number;
  groupRssMb: number;
  anonMb: number;
  fileMb: number;
  shmemMb: number;
  heapMb: number | null;
  heapTotalMb: number | null;
  retainedMb: number | null;
  cpuMs: number;
}

/** Least-squares slope of y over x. */
function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  if (n < 3) return Number.NaN;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

/** A temp dir for one server: the Worker's source (or Sluice's copy), node_modules linked. */
function workerDir(kind: Kind): string {
  if (kind === "sluice") {
    const dir = projectCopy("sluice-memmodel-", { "mm.yaml": SLUICE_RULES });
    dropBuildStep(dir);
    return dir;
  }
  const dir = mkdtempSync(join(tmpdir(), "sluice-memmodel-"));
  writeFileSync(join(dir, "index.js"), kind === "noobj" ? NO_OBJECT : BARE);
  writeFileSync(join(dir, "wrangler.toml"), kind === "noobj" ? NO_OBJECT_TOML : bareToml("bare"));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

/** The [vars] of Sluice's wrangler.toml, as workerd text bindings (ECHO_ORIGIN on, as under wrangler dev here). */
function sluiceVars(dir: string): string[] {
  const toml = readFileSync(join(dir, "wrangler.toml"), "utf8");
  const vars = toml.slice(toml.indexOf("[vars]")).split(/\n\[/)[0]!;
  const out = [`(name = "ECHO_ORIGIN", text = "true")`];
  for (const m of vars.matchAll(/^([A-Z_]+) = "(.*)"$/gm)) out.push(`(name = "${m[1]}", text = "${m[2]}")`);
  return out;
}

/**
 * A workerd config for `kind` in `dir`: Sluice bundled by wrangler (`deploy --dry-run`), its KV namespace a stub that
 * finds nothing (the rules here never read it); objects stored on disk under `state`.
 */
async function workerdConfig(kind: Kind, dir: string, state: string, port: number): Promise<string> {
  // Paths relative to the config file (workerd resolves an absolute embed against its import path).
  let main = "index.js";
  const bindings: string[] = [];
  const namespaces: string[] = [];
  if (kind === "sluice") {
    const built = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      // Not spawnSync: the other servers' load generators keep their pace while this one bundles.
      const p = spawn(WRANGLER_BIN, ["deploy", "--dry-run", "--outdir", join(dir, "dist")], {
        cwd: dir,
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, ...WRANGLER_ENV },
      });
      let stderr = "";
      p.stderr?.on("data", (b: Buffer) => {
        stderr += b.toString();
      });
      p.once("exit", (status) => resolve({ status, stderr }));
    });
    if (built.status !== 0) throw new Error(`memory_model: bundling Sluice failed\n${built.stderr}`);
    main = "dist/index.js";
    bindings.push(
      `(name = "LIMITER", durableObjectNamespace = "SluiceLimiter")`,
      `(name = "DELEGATE", durableObjectNamespace = "SluiceDelegate")`,
      `(name = "ACCOUNTS", kvNamespace = "kv")`,
      ...sluiceVars(dir),
    );
    namespaces.push(
      `(className = "SluiceLimiter", uniqueKey = "sluice-limiter", enableSql = true)`,
      `(className = "SluiceDelegate", uniqueKey = "sluice-delegate", enableSql = true)`,
    );
  } else if (kind === "bare") {
    bindings.push(`(name = "COUNTER", durableObjectNamespace = "Counter")`);
    namespaces.push(`(className = "Counter", uniqueKey = "bare-counter", enableSql = true)`);
  }
  const objects =
    namespaces.length === 0
      ? ""
      : `durableObjectNamespaces = [${namespaces.join(", ")}],\n    durableObjectStorage = (localDisk = "state"),`;
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      modules = [(name = "index.js", esModule = embed "${main}")],
      compatibilityDate = "2026-04-20",
      bindings = [${bindings.join(", ")}],
      ${objects}
    )),
    (name = "state", disk = (path = "${state}", writable = true)),
    (name = "kv", worker = (
      modules = [(name = "kv.js", esModule = "export default { fetch() { return new Response(null, { status: 404 }); } };")],
      compatibilityDate = "2026-04-20",
    )),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
`;
}

function startWorkerd(dir: string, config: string, inspectorPort: number): ChildProcess {
  const path = join(dir, "config.capnp");
  writeFileSync(path, config);
  const bin = join(ROOT, "node_modules", ".bin", "workerd");
  return spawn(bin, ["serve", path, `--inspector-addr=127.0.0.1:${inspectorPort}`], {
    cwd: dir,
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
}

async function run(kind: Kind, runtime: Runtime, results: Record<string, unknown>, flush: () => void) {
  const name = `${kind}/${runtime}`;
  const dir = workerDir(kind);
  const state = mkdtempSync(join("/dev/shm", "sluice-memmodel-state-"));
  const port = await freePort();
  let inspectorPort = await freePort();
  while (inspectorPort === port) inspectorPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let child: ChildProcess;
  if (runtime === "wrangler") {
    child = startWrangler(dir, port, [
      "--persist-to",
      state,
      "--log-level",
      "warn",
      "--inspector-port",
      String(inspectorPort),
      ...(kind === "sluice" ? ["--var", "LIMITER_TIMEOUT_MS:10000"] : []),
    ]);
  } else {
    mkdirSync(state, { recursive: true });
    child = startWorkerd(dir, await workerdConfig(kind, dir, state, port), inspectorPort);
    let err = "";
    child.stderr?.on("data", (b: Buffer) => {
      if (err.length < 20_000) err += b.toString();
    });
    child.once("exit", (code) => {
      if (code !== 0 && code !== null) log(`memory_model: ${name}: workerd exited ${code}\n${err.slice(0, 2000)}`);
    });
  }
  const samples: Sample[] = [];
  const entry = { kind, runtime, rate: RATE, warmKeys: WARM_KEYS, churnKeys: CHURN_KEYS, samples, fit: {} };
  results[name] = entry;
  try {
    await waitUp(`${base}/v1/mm`, child, 120_000);
    const heap = await inspectHeap(inspectorPort);
    const t0 = Date.now();
    const endMs = t0 + MINUTES * 60_000;
    const halfMs = CHURN_ONLY ? t0 : t0 + (MINUTES * 60_000) / 2;
    let requests = 0;
    let failed = 0;
    let dropped = 0;
    let inFlight = 0;
    let objectsMade = 0;
    const lastSeenMs = new Map<number, number>();
    let sent = 0;
    const send = (key: number) => {
      const now = Date.now();
      const last = lastSeenMs.get(key);
      // An address idle for over 10 s has had its object evicted: this request makes it again.
      if (last === undefined || now - last > 10_000) objectsMade++;
      lastSeenMs.set(key, now);
      inFlight++;
      fetch(`${base}/v1/mm`, { headers: { "CF-Connecting-IP": ipv6Of(key) }, signal: AbortSignal.timeout(30_000) })
        .then(async (r) => {
          await r.arrayBuffer();
          if (r.status !== 200) failed++;
        })
        .catch(() => {
          failed++;
        })
        .finally(() => {
          inFlight--;
          requests++;
        });
    };
    const pace = setInterval(() => {
      const now = Date.now();
      const due = Math.floor(((now - t0) / 1000) * RATE);
      while (sent < due) {
        const churn = now >= halfMs;
        const key = churn ? WARM_KEYS + (sent % CHURN_KEYS) : sent % WARM_KEYS;
        sent++;
        if (inFlight >= MAX_IN_FLIGHT) dropped++;
        else send(key);
      }
    }, 20);
    let n = 0;
    const snapshots = new Set<number>();
    while (Date.now() < endMs && child.exitCode === null) {
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
      const retained = ++n % RETAINED_EVERY === 0 ? await heap.retainedMb() : null;
      const heapMb = retained ?? (await heap.heapMb());
      const pgid = child.pid!;
      const rss = groupRss(pgid);
      const parts = workerdRssParts(pgid);
      samples.push({
        atS: round((Date.now() - t0) / 1000, 1),
        half: Date.now() >= halfMs ? "churn" : "warm",
        requests,
        failed,
        dropped,
        objectsMade: kind === "noobj" ? 0 : objectsMade,
        workerdRssMb: round(rss.workerdKb / 1024, 1),
        groupRssMb: round(rss.totalKb / 1024, 1),
        anonMb: round(parts.anonKb / 1024, 1),
        fileMb: round(parts.fileKb / 1024, 1),
        shmemMb: round(parts.shmemKb / 1024, 1),
        heapMb: heapMb === null ? null : round(heapMb, 2),
        heapTotalMb: heap.heapTotalMb() === null ? null : round(heap.heapTotalMb()!, 2),
        retainedMb: retained === null ? null : round(retained, 2),
        cpuMs: groupCpuMs(pgid),
      });
      entry.fit = fits(samples, kind);
      flush();
      const due = SNAPSHOT_MINUTES.filter((m) => (Date.now() - t0) / 60_000 >= m && !snapshots.has(m));
      for (const m of due) {
        snapshots.add(m);
        const path = join(ROOT, "bench", "out", `heap-${kind}-${runtime}-${m}.heapsnapshot`);
        mkdirSync(join(ROOT, "bench", "out"), { recursive: true });
        log(`memory_model: ${name}: heap snapshot at ${m} min: ${(await heap.snapshot(path)) ? path : "failed"}`);
      }
    }
    clearInterval(pace);
    heap.close();
    if (child.exitCode !== null) log(`memory_model: ${name}: server exited early (${child.exitCode})`);
  } finally {
    await killGroup(child.pid!, child);
    rmSync(state, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Per half, after its first minute: RSS and heap slopes, and what a request and an object made cost. */
function fits(samples: readonly Sample[], kind: Kind) {
  const out: Record<string, unknown> = {};
  for (const half of ["warm", "churn"] as const) {
    const xs = samples.filter((s) => s.half === half);
    if (xs.length === 0) continue;
    const start = xs[0]!.atS;
    const steady = xs.filter((s) => s.atS >= start + 60);
    if (steady.length < 3) continue;
    const perMin = (pick: (s: Sample) => number | null) => {
      const pts = steady.filter((s) => pick(s) !== null).map((s) => [s.atS / 60, pick(s)!] as const);
      const v = slope(pts);
      return Number.isFinite(v) ? round(v, 2) : null;
    };
    const minutes = (steady.at(-1)!.atS - steady[0]!.atS) / 60;
    const reqPerMin = (steady.at(-1)!.requests - steady[0]!.requests) / minutes;
    const madePerMin = (steady.at(-1)!.objectsMade - steady[0]!.objectsMade) / minutes;
    const rss = perMin((s) => s.workerdRssMb);
    out[half] = {
      minutes: round(minutes, 2),
      requestsPerMin: round(reqPerMin, 0),
      objectsMadePerMin: round(madePerMin, 0),
      workerdRssMbPerMin: rss,
      anonMbPerMin: perMin((s) => s.anonMb),
      fileMbPerMin: perMin((s) => s.fileMb),
      shmemMbPerMin: perMin((s) => s.shmemMb),
      groupRssMbPerMin: perMin((s) => s.groupRssMb),
      heapTotalMbPerMin: perMin((s) => s.heapTotalMb),
      retainedMbPerMin: perMin((s) => s.retainedMb),
      rssKbPerRequest: rss === null ? null : round((rss * 1024) / reqPerMin, 2),
      rssKbPerObjectMade:
        rss === null || kind === "noobj" || madePerMin === 0 ? null : round((rss * 1024) / madePerMin, 2),
      cpuMsPerRequest: round(
        (steady.at(-1)!.cpuMs - steady[0]!.cpuMs) / (steady.at(-1)!.requests - steady[0]!.requests),
        3,
      ),
      rssMb: [steady[0]!.workerdRssMb, steady.at(-1)!.workerdRssMb],
      retainedMaxMb: Math.max(0, ...xs.map((s) => s.retainedMb ?? 0)),
    };
  }
  return out;
}

async function main() {
  const all: [Kind, Runtime][] = [
    ["noobj", "wrangler"],
    ["bare", "wrangler"],
    ["sluice", "wrangler"],
    ["noobj", "workerd"],
    ["bare", "workerd"],
    ["sluice", "workerd"],
  ];
  const only = onlyAt >= 0 ? (argv[onlyAt + 1] ?? "").split(",") : null;
  const chosen = all.filter(([k, r]) => only === null || only.includes(`${k}/${r}`) || only.includes(k));
  const results: Record<string, unknown> = {};
  const startedAt = new Date().toISOString();
  const command = `node --import tsx bench/memory_model.ts ${argv.join(" ")}`.trim();
  const loads: number[][] = [];
  const flush = () =>
    writeResult("memory_model", command, {
      startedAt,
      minutes: MINUTES,
      ratePerServer: RATE,
      servers: chosen.map(([k, r]) => `${k}/${r}`),
      loadAverages: loads,
      results,
    });
  const loadTimer = setInterval(() => loads.push(loadavg().map((x) => round(x, 2))), 60_000);
  // Started a few seconds apart, so six wrangler/workerd start-ups do not all land on two cores at once.
  await Promise.all(
    chosen.map(async ([k, r], i) => {
      await new Promise((resolve) => setTimeout(resolve, i * 8_000));
      try {
        await run(k, r, results, flush);
      } catch (error) {
        results[`${k}/${r}`] = { error: String(error) };
        log(`memory_model: ${k}/${r}: ${String(error)}`);
      }
    }),
  );
  clearInterval(loadTimer);
  flush();
  for (const [name, entry] of Object.entries(results))
    process.stdout.write(`${name}: ${JSON.stringify((entry as { fit?: unknown }).fit ?? entry)}\n`);
}

await main();
