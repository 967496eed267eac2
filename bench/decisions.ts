/**
 * Part 1: decisions per second. Sluice's pure core with the state in hand, Sluice's keyed local store, and three
 * baselines doing equivalent work (same rate, burst and key set) in the same process: rate-limiter-flexible's
 * RateLimiterMemory, the `limiter` package's TokenBucket (one per key in a Map) and a naive Map<string, number> GCRA.
 *
 * One tinybench sample is a batch of BATCH decisions (a single decision is below the timer's resolution), so
 * ns/decision = sample latency / BATCH. The figure is the median over rounds of each task's p50 sample.
 */
import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { TokenBucket } from "limiter";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { Bench } from "tinybench";
import { type AlgorithmState, algorithmFor } from "../src/algorithms/index.ts";
import { createLocalStore } from "../src/isolate/local_store.ts";
import type { AlgorithmParams } from "../src/rules/types.ts";
import {
  fixedWindow,
  gcraP,
  leakyBucket,
  leakyQueue,
  slidingCounter,
  slidingLog,
  tokenBucket,
} from "../test/support/params.ts";
import { boundVerdicts } from "./bounds.ts";
import { log, median, QUICK, round, writeResult } from "./common.ts";

/** The one rate every contender gets: 10 per second, burst 20 (window algorithms: 20 per 2 s). */
const AMOUNT = 10;
const PERIOD_MS = 1000;
const BURST = 20;
const BATCH = 1000;
const MANY = 100_000;
const ROUNDS = QUICK ? 3 : 5;
/** `--check` runs quick samples but more rounds: the bounds are ratios of medians, on a machine others share. */
const CHECK_ROUNDS = 5;
const TIME_MS = QUICK ? 150 : 500;
const T0 = 1_700_000_000_000;

const PARAMS: readonly AlgorithmParams[] = [
  gcraP(AMOUNT, PERIOD_MS, BURST),
  tokenBucket(AMOUNT, PERIOD_MS, BURST),
  leakyBucket(AMOUNT, PERIOD_MS, BURST),
  leakyQueue(AMOUNT, PERIOD_MS, BURST),
  fixedWindow(BURST, 2 * PERIOD_MS),
  slidingCounter(BURST, 2 * PERIOD_MS),
  slidingLog(BURST, 2 * PERIOD_MS),
];

/**
 * Decision `i`'s key, built anew for each decision as a request's key is (read from a header, a prefix added): a new
 * string every call, never one the contender has seen, so its hash is computed on the decision as in a Worker. V8
 * caches a string's hash on the string, so a benchmark that hands a contender the same prebuilt strings again lets a
 * `Map` skip hashing while the keyed store (which hashes the key's characters itself) cannot: BENCHMARKS.md, section
 * 1. Keys are under 13 characters, so V8 builds each one flat (no rope to flatten). Every contender with a key calls
 * this, the naive Map included, so each pays the same to build it; the core rows take no key (state in hand).
 */
const keyAt = (i: number): string => `k${i}`;

type BatchFn = () => unknown;

/** Naive GCRA over a Map<string, number> of TATs (float ms): the same fields as a Sluice decision, no exactness. */
function naiveGcra(keyCount: number): BatchFn {
  const tatByKey = new Map<string, number>();
  const intervalMs = PERIOD_MS / AMOUNT;
  const toleranceMs = BURST * intervalMs;
  let nowMs = T0;
  let i = 0;
  let sink = 0;
  const check = (key: string, now: number) => {
    const tat = tatByKey.get(key) ?? now;
    const next = Math.max(tat, now) + intervalMs;
    if (next - now > toleranceMs) {
      return {
        allowed: false,
        remaining: 0,
        resetAfterMs: Math.ceil(tat - now),
        retryAfterMs: Math.ceil(next - now - toleranceMs),
      };
    }
    tatByKey.set(key, next);
    return {
      allowed: true,
      remaining: Math.floor((toleranceMs - (next - now)) / intervalMs),
      resetAfterMs: Math.ceil(next - now),
      retryAfterMs: null,
    };
  };
  // Every key present before the timing starts: the figure is a store at 100k keys, not one filling up.
  for (let k = 0; k < keyCount; k++) check(keyAt(k), nowMs);
  return () => {
    nowMs++;
    for (let b = 0; b < BATCH; b++) {
      if (check(keyAt(i), nowMs).allowed) sink++;
      i = i + 1 === keyCount ? 0 : i + 1;
    }
    return sink;
  };
}

function sluiceKeyed(params: AlgorithmParams, keyCount: number): BatchFn {
  const store = createLocalStore(params, MANY);
  let nowMs = T0;
  let i = 0;
  let sink = 0;
  // Every key present before the timing starts (as for the naive GCRA): a store at 100k keys, not one filling up.
  for (let k = 0; k < keyCount; k++) store.check(keyAt(k), 1, nowMs);
  return () => {
    nowMs++;
    for (let b = 0; b < BATCH; b++) {
      const out = store.check(keyAt(i), 1, nowMs);
      if (out.ok && out.decision.allowed) sink++;
      i = i + 1 === keyCount ? 0 : i + 1;
    }
    return sink;
  };
}

function sluiceCore(params: AlgorithmParams, keyCount: number): BatchFn {
  const algorithm = algorithmFor(params);
  const states: (AlgorithmState | null)[] = new Array(keyCount).fill(null);
  let nowMs = T0;
  let i = 0;
  let sink = 0;
  return () => {
    nowMs++;
    for (let b = 0; b < BATCH; b++) {
      const out = algorithm.check(params, states[i]!, 1, nowMs);
      states[i] = out.state;
      if (out.decision.allowed) sink++;
      i = i + 1 === keyCount ? 0 : i + 1;
    }
    return sink;
  };
}

/** `limiter`: one TokenBucket per key (it has no keyed store of its own); it reads the wall clock itself. */
function limiterPackage(keyCount: number): BatchFn {
  const buckets = new Map<string, TokenBucket>();
  let i = 0;
  let sink = 0;
  return () => {
    for (let b = 0; b < BATCH; b++) {
      const key = keyAt(i);
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        bucket = new TokenBucket({ bucketSize: BURST, tokensPerInterval: AMOUNT, interval: PERIOD_MS });
        buckets.set(key, bucket);
      }
      if (bucket.tryRemoveTokens(1)) sink++;
      i = i + 1 === keyCount ? 0 : i + 1;
    }
    return sink;
  };
}

/**
 * rate-limiter-flexible's RateLimiterMemory: its API is promise-based (a rejection means "denied"), so each decision
 * is awaited, as a server would. Its algorithm is a fixed window of `points` per `duration` s; 20 per 2 s is the
 * same long-run rate and burst. It reads the wall clock itself.
 */
function rateLimiterFlexible(keyCount: number): () => Promise<number> {
  const limiter = new RateLimiterMemory({ points: BURST, duration: (2 * PERIOD_MS) / 1000 });
  let i = 0;
  let sink = 0;
  return async () => {
    for (let b = 0; b < BATCH; b++) {
      try {
        await limiter.consume(keyAt(i), 1);
        sink++;
      } catch {
        // A rejection is a denial (a RateLimiterRes), the expected outcome for a flooded key.
      }
      i = i + 1 === keyCount ? 0 : i + 1;
    }
    return sink;
  };
}

interface Row {
  readonly name: string;
  readonly group: "core" | "keyed" | "baseline";
  readonly keys: number;
  readonly nsPerDecision: number;
  readonly decisionsPerS: number;
  readonly roundsNs: number[];
}

interface Task {
  readonly name: string;
  readonly group: Row["group"];
  readonly keys: number;
  readonly make: () => BatchFn | (() => Promise<number>);
}

/** Tasks grouped by contender; each contender runs in a child process of its own, so no contender's code shapes
 * another's JIT feedback (a call site that has seen seven algorithms is slower than one that has seen one). */
function contenders(): Map<string, Task[]> {
  const byContender = new Map<string, Task[]>();
  const add = (contender: string, task: Task) =>
    byContender.set(contender, [...(byContender.get(contender) ?? []), task]);
  for (const keyCount of [1, MANY]) {
    for (const p of PARAMS) {
      add(p.algorithm, {
        name: `core ${p.algorithm}`,
        group: "core",
        keys: keyCount,
        make: () => sluiceCore(p, keyCount),
      });
      add(p.algorithm, {
        name: `keyed ${p.algorithm}`,
        group: "keyed",
        keys: keyCount,
        make: () => sluiceKeyed(p, keyCount),
      });
    }
    add("naive", { name: "naive Map GCRA", group: "baseline", keys: keyCount, make: () => naiveGcra(keyCount) });
    add("limiter", {
      name: "limiter TokenBucket",
      group: "baseline",
      keys: keyCount,
      make: () => limiterPackage(keyCount),
    });
    add("rlf", {
      name: "rate-limiter-flexible Memory",
      group: "baseline",
      keys: keyCount,
      make: () => rateLimiterFlexible(keyCount),
    });
  }
  return byContender;
}

/** One round of one contender's tasks, in this process: prints `{task: nsPerDecision}` as JSON. */
async function runContender(name: string): Promise<void> {
  const tasks = contenders().get(name);
  if (tasks === undefined) throw new Error(`unknown contender ${name}`);
  const bench = new Bench({ time: TIME_MS, warmupTime: Math.max(50, TIME_MS / 4), warmupIterations: 5 });
  for (const t of tasks) bench.add(`${t.name} @${t.keys}`, t.make());
  await bench.run();
  const out: Record<string, number> = {};
  for (const task of bench.tasks) {
    const result = task.result;
    if (result.state !== "completed") throw new Error(`${task.name}: ${result.state}`);
    out[task.name] = (result.latency.p50 * 1e6) / BATCH;
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/**
 * Every round of the chosen contenders: all (or those `BENCH_ONLY` names), or with `storesOnly` Sluice's and the
 * naive GCRA (what the bounds compare).
 */
async function measure(storesOnly: boolean, rounds_ = ROUNDS): Promise<Row[]> {
  const all = contenders();
  const only = storesOnly
    ? [...all.keys()].filter((n) => n !== "limiter" && n !== "rlf")
    : process.env.BENCH_ONLY?.split(",");
  const names = [...all.keys()].filter((n) => only === undefined || only.includes(n));
  const rounds = new Map<string, number[]>();
  for (let r = 0; r < rounds_; r++) {
    for (const name of names) {
      const args = ["--import", "tsx", fileURLToPath(import.meta.url), "--contender", name];
      const child = spawnSync(process.execPath, QUICK ? [...args, "--quick"] : args, { encoding: "utf8" });
      if (child.status !== 0) throw new Error(`decisions ${name}: ${child.stderr}`);
      const figures = JSON.parse(child.stdout.trim().split("\n").pop() ?? "{}") as Record<string, number>;
      for (const [task, ns] of Object.entries(figures)) rounds.set(task, [...(rounds.get(task) ?? []), ns]);
    }
    log(`decisions: round ${r + 1}/${rounds_} done`);
  }
  const rows: Row[] = names.flatMap((n) =>
    (all.get(n) ?? []).map((t) => {
      const roundsNs = rounds.get(`${t.name} @${t.keys}`) ?? [];
      const ns = median(roundsNs);
      return {
        name: t.name,
        group: t.group,
        keys: t.keys,
        nsPerDecision: round(ns),
        decisionsPerS: Math.round(1e9 / ns),
        roundsNs: roundsNs.map((v) => round(v)),
      };
    }),
  );
  for (const r of rows) log(`${r.name.padEnd(32)} keys=${String(r.keys).padEnd(6)} ${r.nsPerDecision} ns`);
  return rows;
}

async function main(): Promise<void> {
  const only = process.env.BENCH_ONLY?.split(",");
  const rows = await measure(false);
  const command = `node --import tsx bench/decisions.ts${QUICK ? " --quick" : ""}`;
  writeResult(only === undefined ? "decisions" : `decisions-${only.join("-")}`, command, {
    rate: `${AMOUNT}/${PERIOD_MS}ms burst ${BURST}; windows ${BURST} per ${2 * PERIOD_MS} ms`,
    batch: BATCH,
    rounds: ROUNDS,
    timePerTaskMs: TIME_MS,
    rows,
  });
}

/**
 * `npm run bench:check`: the keyed stores and the two references they are held to, in one run, and the bounds
 * (bench/bounds.ts) checked on it; exit 1 on a miss. Not part of `npm test` (timings belong in bench/).
 */
async function check(): Promise<void> {
  const rows = await measure(true, CHECK_ROUNDS);
  const verdicts = boundVerdicts(rows);
  for (const v of verdicts)
    log(`${v.ok ? "ok  " : "MISS"} ${v.store.padEnd(22)} ${v.bound.padEnd(42)} ratio ${v.ratio}`);
  const misses = verdicts.filter((v) => !v.ok);
  log(
    `bench:check: ${verdicts.length - misses.length}/${verdicts.length} bounds held (load average ${loadavg()[0]!.toFixed(1)})`,
  );
  process.exitCode = misses.length === 0 && verdicts.length > 0 ? 0 : 1;
}

const contenderArg = process.argv.indexOf("--contender");
if (contenderArg >= 0) await runContender(process.argv[contenderArg + 1] ?? "");
else if (process.argv.includes("--check")) await check();
else await main();
