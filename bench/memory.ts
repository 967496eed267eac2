/**
 * Part 2: bytes per key of the local-scope store at 100k, 1M and 2.04M keys, next to naive Maps, in the same run.
 * Each measurement runs in a child process of its own (`node --expose-gc`), so one structure's garbage never counts
 * against another: heapUsed + arrayBuffers after GC, minus the same before, divided by the key count.
 *
 * Keys are `k${i}`. The compact store keeps a 64-bit hash of each key, never the string, so the string is garbage as
 * soon as the check returns; a Map keeps every key string alive, and that is part of what a Map costs.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createLocalStore } from "../src/isolate/local_store.ts";
import { gcraP, slidingCounter } from "../test/support/params.ts";
import { log, median, QUICK, round, writeResult } from "./common.ts";

const COUNTS = [100_000, 1_000_000, 2_040_000];
const RUNS = QUICK ? 1 : 3;
const T0 = 1_700_000_000_000;

const KINDS = {
  "compact gcra (1 field)": "Sluice local store, gcra/token_bucket/leaky_* (the TAT)",
  "compact sliding_counter (3 fields)": "Sluice local store, sliding_counter (window, prev, curr)",
  "Map<string, {tokens, last}>": "naive token bucket: one object per key",
  "Map<string, number>": "naive GCRA: one TAT per key",
} as const;
type Kind = keyof typeof KINDS;

/** A back-of-the-envelope estimate per key for a Map: 8 B per number + ~100 B of Map overhead. */
const SEED_ESTIMATES = { tokenBucket: 116, slidingCounter: 124 };

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error("run with node --expose-gc");
  collect();
  collect();
}

function used(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Build one structure of `n` keys and report its bytes (run in a child). */
function measure(kind: Kind, n: number): { bytesPerKey: number; typedArrayBytesPerKey: number | null } {
  gc();
  const before = used();
  let keep: unknown;
  let typed: number | null = null;
  if (kind.startsWith("compact")) {
    const params = kind.includes("gcra") ? gcraP(10, 1000, 20) : slidingCounter(20, 2000);
    const store = createLocalStore(params, n);
    for (let i = 0; i < n; i++) store.check(`k${i}`, 1, T0 + (i >> 10));
    typed = store.bytes / n;
    keep = store;
  } else if (kind === "Map<string, number>") {
    const map = new Map<string, number>();
    for (let i = 0; i < n; i++) map.set(`k${i}`, T0 + (i >> 10) + 100.5);
    keep = map;
  } else {
    const map = new Map<string, { tokens: number; last: number }>();
    for (let i = 0; i < n; i++) map.set(`k${i}`, { tokens: 19.5, last: T0 + (i >> 10) });
    keep = map;
  }
  gc();
  const after = used();
  if (keep === null) log("unreachable");
  return { bytesPerKey: (after - before) / n, typedArrayBytesPerKey: typed };
}

function main(): void {
  const rows: { kind: Kind; what: string; keys: number; bytesPerKey: number; typedArrayBytesPerKey: number | null }[] =
    [];
  for (const n of COUNTS) {
    for (const kind of Object.keys(KINDS) as Kind[]) {
      const runs: number[] = [];
      let typed: number | null = null;
      for (let r = 0; r < RUNS; r++) {
        const child = spawnSync(
          process.execPath,
          ["--expose-gc", "--import", "tsx", fileURLToPath(import.meta.url), "--one", kind, String(n)],
          { encoding: "utf8" },
        );
        if (child.status !== 0) throw new Error(`memory ${kind} ${n}: ${child.stderr}`);
        const out = JSON.parse(child.stdout.trim().split("\n").pop() ?? "{}") as ReturnType<typeof measure>;
        runs.push(out.bytesPerKey);
        typed = out.typedArrayBytesPerKey;
      }
      const bytesPerKey = round(median(runs), 1);
      rows.push({ kind, what: KINDS[kind], keys: n, bytesPerKey, typedArrayBytesPerKey: typed && round(typed, 1) });
      log(`${kind.padEnd(36)} ${String(n).padStart(9)} keys: ${bytesPerKey} B/key`);
    }
  }
  writeResult("memory", `node bench/memory.ts via bin/bench.mjs${QUICK ? " --quick" : ""}`, {
    runs: RUNS,
    seedEstimatesBytesPerKey: SEED_ESTIMATES,
    note: "heapUsed + arrayBuffers after GC, minus before; the compact store does not keep key strings, Maps do",
    rows,
  });
}

const one = process.argv.indexOf("--one");
if (one >= 0) {
  const out = measure(process.argv[one + 1] as Kind, Number(process.argv[one + 2]));
  process.stdout.write(`${JSON.stringify(out)}\n`);
} else main();
