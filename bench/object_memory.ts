/**
 * `node --import tsx bench/object_memory.ts [--quick]`: what a distinct Durable Object costs the memory of a local
 * `wrangler dev` (workerd), for Sluice and for a minimal Worker in the same run, so the soak's memory can be read.
 *
 * Servers, one after the other, each a real `wrangler dev` on a free 127.0.0.1 port with its state on tmpfs: **bare**
 * (one Durable Object class that writes one small value, and a Worker that calls the object named by the request),
 * **bare + alarm** (`--quick` only: the object also sets an alarm, as Sluice's do) and **sluice** (one `fixed_window`
 * rule per client address, never denying, so each new address is one new object). Each gets three phases from 16
 * closed-loop clients: **new** (N requests, each a new object), **idle** (15 s: past the runtime's 10 s eviction of an
 * idle object), **reuse** (3N requests over the first 1,000 keys: each evicted and made again). workerd's RSS is
 * sampled every 1,000 requests: growth with the objects made, at the bare Worker's slope, is the runtime's cost, not
 * Sluice's.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { bareCounterWorker, bareToml, bareWorkerCopy, ipv6Of } from "./bare_worker.ts";
import { log, QUICK, round, writeResult } from "./common.ts";
import {
  dropBuildStep,
  freePort,
  groupRss,
  killGroup,
  projectCopy,
  startWrangler,
  waitUp,
  wranglerReloads,
} from "./wrangler_dev.ts";

const NEW_KEYS = QUICK ? 4_000 : 8_000;
/** Requests of the reuse phase, over the first REUSE_KEYS keys: long enough to see whether memory levels off. */
const REUSE_REQUESTS = 3 * NEW_KEYS;
const REUSE_KEYS = 1_000;
const STEP = 1_000;
const CLIENTS = 16;
const IDLE_MS = 15_000;

const BARE_WORKER = (alarm: boolean) => bareCounterWorker(alarm ? "Date.now() + 600_000" : null);

const BARE_TOML = bareToml("bare");

const SLUICE_RULES = `- id: mem-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 1000000
  window: 10min
`;

const bareCopy = (alarm: boolean) => bareWorkerCopy("sluice-objmem-", BARE_WORKER(alarm), BARE_TOML);

interface Sample {
  readonly atMs: number;
  readonly phase: "new" | "idle" | "reuse";
  readonly requests: number;
  readonly objectsCreated: number;
  readonly workerdRssMb: number;
}

async function load(base: string, count: number, keyOf: (i: number) => number, onStep: (done: number) => void) {
  let next = 0;
  let done = 0;
  let failed = 0;
  const client = async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      try {
        const r = await fetch(`${base}/v1/mem`, {
          headers: { "CF-Connecting-IP": ipv6Of(keyOf(i)) },
          signal: AbortSignal.timeout(30_000),
        });
        await r.arrayBuffer();
        if (r.status !== 200) failed++;
      } catch {
        failed++;
      }
      done++;
      if (done % STEP === 0) onStep(done);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  return failed;
}

async function measure(name: string, dir: string, extra: readonly string[]) {
  const state = mkdtempSync(join("/dev/shm", "sluice-objmem-state-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logs = join(dir, `wrangler-logs-${port}`);
  const child = startWrangler(dir, port, ["--persist-to", state, "--log-level", "warn", ...extra], "pipe", {
    WRANGLER_LOG_PATH: logs, // its debug log: whether it reloaded its runtime during the run
  });
  let output = "";
  child.stdout?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  child.stderr?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  const samples: Sample[] = [];
  let failed = 0;
  try {
    await waitUp(`${base}/`, child, 90_000).catch((error: unknown) => {
      throw new Error(`${name}: ${String(error)}\n${output}`);
    });
    const rss = () => round(groupRss(child.pid!).workerdKb / 1024, 1);
    samples.push({ atMs: Date.now(), phase: "new", requests: 0, objectsCreated: 0, workerdRssMb: rss() });
    const t = Date.now();
    failed += await load(
      base,
      NEW_KEYS,
      (i) => i,
      (done) =>
        samples.push({ atMs: Date.now(), phase: "new", requests: done, objectsCreated: done, workerdRssMb: rss() }),
    );
    const newS = (Date.now() - t) / 1000;
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    samples.push({
      atMs: Date.now(),
      phase: "idle",
      requests: NEW_KEYS,
      objectsCreated: NEW_KEYS,
      workerdRssMb: rss(),
    });
    failed += await load(
      base,
      REUSE_REQUESTS,
      (i) => i % REUSE_KEYS,
      (done) =>
        samples.push({
          atMs: Date.now(),
          phase: "reuse",
          requests: NEW_KEYS + done,
          objectsCreated: NEW_KEYS,
          workerdRssMb: rss(),
        }),
    );
    log(`object_memory: ${name}: ${NEW_KEYS} new objects in ${round(newS, 1)} s, ${failed} failed requests`);
  } finally {
    await killGroup(child.pid!, child);
    rmSync(state, { recursive: true, force: true });
  }
  // Mid-run reloads of wrangler dev's runtime (a new workerd process), placed by the requests answered before each.
  const reloads = wranglerReloads(logs).map((r) => ({
    phase: samples.filter((s) => s.atMs <= r.atMs).at(-1)?.phase ?? "new",
    afterRequests: samples.filter((s) => s.atMs <= r.atMs).at(-1)?.requests ?? 0,
  }));
  const newPhase = samples.filter((s) => s.phase === "new");
  const reuse = samples.filter((s) => s.phase === "reuse");
  const first = newPhase[1]!; // after the first 1,000: the Worker's code and first isolate are loaded
  const last = newPhase[newPhase.length - 1]!;
  const kbPerObject = ((last.workerdRssMb - first.workerdRssMb) * 1024) / (last.objectsCreated - first.objectsCreated);
  return {
    variant: name,
    failedRequests: failed,
    reloads,
    kbPerNewObject: round(kbPerObject, 1),
    startMb: newPhase[0]!.workerdRssMb,
    afterNewMb: last.workerdRssMb,
    afterIdleMb: samples.find((s) => s.phase === "idle")!.workerdRssMb,
    reuseFirstMb: reuse[0]?.workerdRssMb ?? Number.NaN,
    reuseLastMb: reuse[reuse.length - 1]?.workerdRssMb ?? Number.NaN,
    samples,
  };
}

async function main(): Promise<void> {
  const results = [];
  const bare = bareCopy(false);
  const bareAlarm = bareCopy(true);
  const sluice = projectCopy("sluice-objmem-", { "mem.yaml": SLUICE_RULES });
  dropBuildStep(sluice);
  try {
    results.push(await measure("bare", bare, []));
    if (QUICK) results.push(await measure("bare + alarm", bareAlarm, []));
    results.push(await measure("sluice (one rule per address)", sluice, ["--var", "LIMITER_TIMEOUT_MS:10000"]));
  } finally {
    for (const dir of [bare, bareAlarm, sluice]) rmSync(dir, { recursive: true, force: true });
  }
  const command = `node --import tsx bench/object_memory.ts${QUICK ? " --quick" : ""}`;
  const path = writeResult("object_memory", command, {
    newKeys: NEW_KEYS,
    reuseKeys: REUSE_KEYS,
    reuseRequests: REUSE_REQUESTS,
    results,
  });
  process.stdout.write(
    "\nvariant                          KB per new object   start -> after new -> after 15 s idle -> reuse (MB)\n",
  );
  for (const r of results)
    process.stdout.write(
      `${r.variant.padEnd(33)}${String(r.kbPerNewObject).padStart(17)}   ${r.startMb} -> ${r.afterNewMb} -> ${r.afterIdleMb} -> ${r.reuseFirstMb}..${r.reuseLastMb}\n`,
    );
  log(`object_memory: wrote ${path}`);
}

await main();
