/**
 * `node --import tsx bench/object_churn.ts [--quick] [--keys K] [--rate R] [--minutes M] [--variants a,b]`: is the
 * soak's memory growth Sluice's or local workerd's? The same churn of Durable Objects, driven at the same call rate,
 * against a bare Worker and against Sluice, one `wrangler dev` after the other (state on tmpfs, as the soak's).
 *
 * The soak's server holds about 2,000 objects once warm, called about 250 times a second, and the runtime evicts an
 * object after 10 s without a call and makes it again on the next one (or for its alarm). Here: K keys (default
 * 2,000), a warm-up sweep that calls each once, then M minutes (default 2) of calls at a fixed rate R (default 150/s,
 * open loop, so a faster server does not get more calls), half of them over a few hot keys (Zipf) and half uniform over
 * all K, so most calls of the uniform half find their object evicted. Variants:
 * - **bare + alarm**: one Durable Object class whose RPC method writes one value and, as Sluice's objects do, arms an
 *   alarm when none is pending (a minute plus a spread of its own), whose handler deletes the object's storage;
 * - **bare**: the same without the alarm (`--variants bare`);
 * - **bare + storage**: Sluice's object's storage pattern (record, a ring of call ids, the group commit's turn, the
 *   alarm) in a bare Worker, without Sluice's code (`--variants bare+storage`);
 * - **sluice**: Sluice with one `fixed_window` rule per client address (a minute, never denying): one object call per
 *   request, each object's record written per call and deleted by its alarm once fresh.
 * Sampled every 2 s: workerd's RSS (and its anonymous / file / shared parts), the Worker isolate's V8 heap (used and
 * total, through the inspector), and the objects made as the client can tell (a first call, or one after 10 s idle).
 * Judged over the churn's second half: RSS slope (MB/min) and its cost per object made again. `--snapshots` takes a
 * heap snapshot of the Worker isolate as the churn starts and as it ends (bench/out/churn-heap-VARIANT-start|end
 * .heapsnapshot; bench/heap_holders.ts names what grew between them).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { seeded } from "../test/support/random.ts";
import { BARE_FETCH, bareCounterWorker, bareToml, bareWorkerCopy, ipv6Of } from "./bare_worker.ts";
import { BENCH_DIR, log, QUICK, round, writeResult } from "./common.ts";
import {
  dropBuildStep,
  freePort,
  groupRss,
  inspectHeap,
  killGroup,
  projectCopy,
  startWrangler,
  waitUp,
  workerdRssParts,
} from "./wrangler_dev.ts";

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(process.argv[i + 1]);
  if (!(n > 0)) throw new Error(`object_churn: ${name} needs a positive number`);
  return n;
}
const KEYS = flag("--keys", 2_000);
const RATE = flag("--rate", 150);
const CHURN_MS = flag("--minutes", QUICK ? 1 : 2) * 60_000;
const VARIANTS = (() => {
  const i = process.argv.indexOf("--variants");
  return i < 0 ? ["bare + alarm", "sluice"] : process.argv[i + 1]!.split(",").map((v) => v.replace("+", " + "));
})();
const SNAPSHOTS = process.argv.includes("--snapshots");
const MAX_IN_FLIGHT = 64;
const SAMPLE_MS = 2_000;
const IDLE_EVICTION_MS = 10_000;

const BARE_WORKER = (alarm: boolean) =>
  bareCounterWorker(
    alarm ? "Date.now() + 60_000 + (Number.parseInt(this.ctx.id.toString().slice(-8), 16) % 60_000)" : null,
  );

/**
 * Sluice's object's storage pattern without Sluice's code (src/object/limiter.ts): on its first call it reads its
 * record and lists its remembered call ids; each call waits one scheduler turn (the group commit), writes a call slot
 * of a 128-slot ring and the record, reads its alarm once and arms it when none is pending; the alarm reads the record
 * and the call ids again and deletes all.
 */
const STORAGE_WORKER = `import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  record = undefined;
  alarmAt = undefined;
  slot = 0;
  load() {
    if (this.record !== undefined) return this.record;
    const kv = this.ctx.storage.kv;
    const stored = kv.get("record") ?? null;
    this.slot = [...kv.list({ prefix: "call:" })].length;
    this.record = stored;
    return stored;
  }
  async check(n) {
    const before = this.load();
    const record = { algorithm: "fixed_window", windowStartMs: Date.now(), count: (before?.count ?? 0) + n, rulesVersion: 1 };
    this.record = record;
    await scheduler.wait(0);
    const kv = this.ctx.storage.kv;
    kv.put("call:" + (this.slot++ % 128), { id: crypto.randomUUID(), atMs: Date.now(), cost: n, allowed: true });
    kv.put("record", record);
    if (this.alarmAt === undefined) this.alarmAt = await this.ctx.storage.getAlarm();
    if (this.alarmAt === null) {
      this.alarmAt = Date.now() + 60_000 + (Number.parseInt(this.ctx.id.toString().slice(-8), 16) % 60_000);
      await this.ctx.storage.setAlarm(this.alarmAt);
    }
    return record.count;
  }
  async alarm() {
    this.alarmAt = null;
    this.record = undefined;
    this.load();
    this.record = null;
    await this.ctx.storage.deleteAll();
  }
}
${BARE_FETCH}`;

const BARE_TOML = bareToml("bare");

const SLUICE_RULES = `- id: churn-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 1000000
  window: min
`;

const bareCopy = (source: string) => bareWorkerCopy("sluice-churn-", source, BARE_TOML);

interface Sample {
  readonly atS: number;
  readonly phase: "warm-up" | "churn";
  readonly rssMb: number;
  readonly anonMb: number;
  readonly fileMb: number;
  readonly shmemMb: number;
  readonly calls: number;
  readonly objectsMade: number;
  v8UsedMb: number | null;
  v8TotalMb: number | null;
}

/** Least-squares slope of `y` over `atS`, per minute. */
function slopePerMin(samples: readonly Sample[], y: (s: Sample) => number | null): number | null {
  const xs = samples.filter((s) => y(s) !== null);
  if (xs.length < 3) return null;
  const mx = xs.reduce((a, s) => a + s.atS, 0) / xs.length;
  const my = xs.reduce((a, s) => a + y(s)!, 0) / xs.length;
  let num = 0;
  let den = 0;
  for (const s of xs) {
    num += (s.atS - mx) * (y(s)! - my);
    den += (s.atS - mx) ** 2;
  }
  return den === 0 ? null : round((num / den) * 60, 1);
}

async function measure(name: string, dir: string, extra: readonly string[]) {
  const random = seeded(7);
  const state = mkdtempSync(join("/dev/shm", "sluice-churn-state-"));
  const port = await freePort();
  const inspectorPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startWrangler(
    dir,
    port,
    ["--persist-to", state, "--log-level", "warn", "--inspector-port", String(inspectorPort), ...extra],
    "pipe",
  );
  let output = "";
  child.stdout?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  child.stderr?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  const samples: Sample[] = [];
  const lastUse = new Map<number, number>();
  let calls = 0;
  let failed = 0;
  let skipped = 0;
  let objectsMade = 0;
  let inFlight = 0;
  let phase: Sample["phase"] = "warm-up";
  try {
    await waitUp(`${base}/`, child, 90_000).catch((error: unknown) => {
      throw new Error(`${name}: ${String(error)}\n${output}`);
    });
    const heap = await inspectHeap(inspectorPort);
    const t0 = Date.now();
    const sample = () => {
      const parts = workerdRssParts(child.pid!);
      const taken: Sample = {
        atS: round((Date.now() - t0) / 1000, 1),
        phase,
        rssMb: round(groupRss(child.pid!).workerdKb / 1024, 1),
        anonMb: round(parts.anonKb / 1024, 1),
        fileMb: round(parts.fileKb / 1024, 1),
        shmemMb: round(parts.shmemKb / 1024, 1),
        calls,
        objectsMade,
        v8UsedMb: null,
        v8TotalMb: null,
      };
      samples.push(taken);
      void heap.heapMb().then((mb) => {
        taken.v8UsedMb = mb === null ? null : round(mb, 1);
        const total = heap.heapTotalMb();
        taken.v8TotalMb = total === null ? null : round(total, 1);
      });
    };
    const call = async (key: number) => {
      const now = Date.now();
      const last = lastUse.get(key);
      if (last === undefined || now - last > IDLE_EVICTION_MS) objectsMade++;
      lastUse.set(key, now);
      inFlight++;
      try {
        const r = await fetch(`${base}/v1/churn`, {
          headers: { "CF-Connecting-IP": ipv6Of(key) },
          signal: AbortSignal.timeout(30_000),
        });
        await r.arrayBuffer();
        if (r.status !== 200) failed++;
      } catch {
        failed++;
      } finally {
        inFlight--;
        calls++;
      }
    };
    const hot = (() => {
      const n = Math.min(KEYS, 200);
      const cdf: number[] = [];
      let sum = 0;
      for (let i = 0; i < n; i++) {
        sum += 1 / (i + 1) ** 1.1;
        cdf.push(sum);
      }
      return () => {
        const u = random() * sum;
        const i = cdf.findIndex((c) => c >= u);
        return i < 0 ? n - 1 : i;
      };
    })();
    /** Calls at RATE per second, open loop, until `pick` returns null or `untilMs`. */
    const drive = async (pick: () => number | null, untilMs: number) => {
      const pending = new Set<Promise<void>>();
      const start = Date.now();
      for (let i = 0; ; i++) {
        const due = start + (i * 1000) / RATE;
        if (due >= untilMs) break;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const key = pick();
        if (key === null) break;
        if (inFlight >= MAX_IN_FLIGHT) {
          skipped++;
          continue;
        }
        const p: Promise<void> = call(key).then(() => {
          pending.delete(p);
        });
        pending.add(p);
      }
      await Promise.all(pending);
    };
    sample();
    const sampler = setInterval(sample, SAMPLE_MS);
    let next = 0;
    await drive(() => (next < KEYS ? next++ : null), Number.POSITIVE_INFINITY);
    phase = "churn";
    const warmS = (Date.now() - t0) / 1000;
    log(`object_churn: ${name}: ${KEYS} objects warm in ${round(warmS, 1)} s; churning for ${CHURN_MS / 1000} s`);
    const snapshot = async (at: string) => {
      if (!SNAPSHOTS) return;
      mkdirSync(join(BENCH_DIR, "out"), { recursive: true });
      const path = join(BENCH_DIR, "out", `churn-heap-${name.replaceAll(" ", "")}-${at}.heapsnapshot`);
      const ok = await heap.snapshot(path);
      log(
        `object_churn: ${name}: heap snapshot (${calls} calls, ${objectsMade} objects made): ${ok ? path : "failed"}`,
      );
    };
    await snapshot("start");
    await drive(() => (random() < 0.5 ? hot() : Math.floor(random() * KEYS)), Date.now() + CHURN_MS);
    await snapshot("end");
    clearInterval(sampler);
    sample();
    await new Promise((resolve) => setTimeout(resolve, 500)); // the last heap reading
    heap.close();
  } finally {
    await killGroup(child.pid!, child);
    rmSync(state, { recursive: true, force: true });
  }
  const churn = samples.filter((s) => s.phase === "churn");
  const half = churn.filter((s) => s.atS >= (churn[0]!.atS + churn[churn.length - 1]!.atS) / 2);
  const first = half[0]!;
  const last = half[half.length - 1]!;
  const minutes = (last.atS - first.atS) / 60;
  const madePerMin = (last.objectsMade - first.objectsMade) / minutes;
  const rssSlope = slopePerMin(half, (s) => s.rssMb);
  const result = {
    variant: name,
    calls,
    failed,
    skipped,
    warm: samples.find((s) => s.phase === "churn") ?? null,
    end: samples[samples.length - 1]!,
    secondHalf: {
      minutes: round(minutes, 2),
      callsPerS: round((last.calls - first.calls) / (minutes * 60), 1),
      objectsMadePerMin: round(madePerMin, 0),
      rssSlopeMbPerMin: rssSlope,
      anonSlopeMbPerMin: slopePerMin(half, (s) => s.anonMb),
      fileSlopeMbPerMin: slopePerMin(half, (s) => s.fileMb),
      shmemSlopeMbPerMin: slopePerMin(half, (s) => s.shmemMb),
      v8UsedSlopeMbPerMin: slopePerMin(half, (s) => s.v8UsedMb),
      v8TotalSlopeMbPerMin: slopePerMin(half, (s) => s.v8TotalMb),
      kbPerObjectMade: rssSlope === null || madePerMin <= 0 ? null : round((rssSlope * 1024) / madePerMin, 1),
    },
    samples,
  };
  log(`object_churn: ${name}: ${JSON.stringify(result.secondHalf)} (failed ${failed}, skipped ${skipped})`);
  return result;
}

async function main(): Promise<void> {
  const results = [];
  const dirs: string[] = [];
  try {
    for (const variant of VARIANTS) {
      if (variant === "bare" || variant === "bare + alarm" || variant === "bare + storage") {
        const dir = bareCopy(variant === "bare + storage" ? STORAGE_WORKER : BARE_WORKER(variant === "bare + alarm"));
        dirs.push(dir);
        results.push(await measure(variant, dir, []));
      } else if (variant === "sluice") {
        const dir = projectCopy("sluice-churn-", { "churn.yaml": SLUICE_RULES });
        dirs.push(dir);
        dropBuildStep(dir);
        results.push(await measure(variant, dir, ["--var", "LIMITER_TIMEOUT_MS:10000"]));
      } else throw new Error(`object_churn: unknown variant ${variant} (bare, bare+alarm, bare+storage, sluice)`);
    }
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
  const command = `node --import tsx bench/object_churn.ts ${process.argv.slice(2).join(" ")}`.trim();
  // One run per file; a report may hold several (bench/report.ts, section 9c), each with its own command and date.
  const run = { command, date: new Date().toISOString(), keys: KEYS, rate: RATE, churnMs: CHURN_MS, results };
  const path = writeResult("object_churn", command, { runs: [run] });
  process.stdout.write(
    "\nvariant        calls/s  objects made/min  RSS MB/min  anon  file  shmem  V8 used  V8 total  KB per object made\n",
  );
  for (const r of results) {
    const h = r.secondHalf;
    process.stdout.write(
      `${r.variant.padEnd(14)} ${h.callsPerS} ${h.objectsMadePerMin} ${h.rssSlopeMbPerMin} ${h.anonSlopeMbPerMin} ${h.fileSlopeMbPerMin} ${h.shmemSlopeMbPerMin} ${h.v8UsedSlopeMbPerMin} ${h.v8TotalSlopeMbPerMin} ${h.kbPerObjectMade}\n`,
    );
  }
  log(`object_churn: wrote ${path}`);
}

await main();
