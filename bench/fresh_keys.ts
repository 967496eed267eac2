/**
 * Hand-run (`node --import tsx bench/fresh_keys.ts`): keyed gcra against the naive Map GCRA of bench/decisions.ts at
 * 100,000 keys, with each decision's key either one of 100,000 strings built before the timing (as bench/decisions.ts
 * did) or a string built for the decision (as a request's key is: a new string from a header or a hash each time).
 * V8 caches a string's hash on the string, so a Map given the same string objects again never hashes a key, while the
 * keyed store hashes every key itself. Both contenders build the same strings; the figure is the median over rounds,
 * the contenders interleaved in each round (a shared machine: read the ratios, not the nanoseconds).
 * bench/decisions.ts builds each decision's key since this measured it; this file keeps both kinds side by side, so
 * that choice can be rerun (BENCHMARKS.md, section 1q).
 */
import { loadavg } from "node:os";
import { createLocalStore } from "../src/isolate/local_store.ts";
import { gcraP } from "../test/support/params.ts";
import { median } from "./common.ts";

const KEYS = 100_000;
const BATCH = 1000;
const BATCHES = 2000;
const ROUNDS = 7;
const T0 = 1_700_000_000_000;
const prebuilt = Array.from({ length: KEYS }, (_, i) => `k${i}`);
const keyOf = (fresh: boolean, i: number) => (fresh ? `k${i}` : prebuilt[i]!);

/** The naive Map GCRA of bench/decisions.ts (10/s, burst 20), every key present before the timing. */
function naive(fresh: boolean): () => number {
  const tatByKey = new Map<string, number>();
  let nowMs = T0;
  let i = 0;
  let sink = 0;
  const check = (key: string) => {
    const tat = tatByKey.get(key) ?? nowMs;
    const next = Math.max(tat, nowMs) + 100;
    if (next - nowMs > 2000) return false;
    tatByKey.set(key, next);
    return true;
  };
  for (let k = 0; k < KEYS; k++) check(prebuilt[k]!);
  return () => {
    nowMs++;
    for (let b = 0; b < BATCH; b++) {
      if (check(keyOf(fresh, i))) sink++;
      i = i + 1 === KEYS ? 0 : i + 1;
    }
    return sink;
  };
}

/** Sluice's keyed gcra store, as bench/decisions.ts measures it. */
function keyed(fresh: boolean): () => number {
  const store = createLocalStore(gcraP(10, 1000, 20), KEYS);
  let nowMs = T0;
  let i = 0;
  let sink = 0;
  for (let k = 0; k < KEYS; k++) store.check(prebuilt[k]!, 1, nowMs);
  return () => {
    nowMs++;
    for (let b = 0; b < BATCH; b++) {
      const out = store.check(keyOf(fresh, i), 1, nowMs);
      if (out.ok && out.decision.allowed) sink++;
      i = i + 1 === KEYS ? 0 : i + 1;
    }
    return sink;
  };
}

/** ns per decision over `BATCHES` batches, after a warm-up. */
function nsPerDecision(batch: () => number): number {
  for (let r = 0; r < 300; r++) batch();
  const start = process.hrtime.bigint();
  for (let r = 0; r < BATCHES; r++) batch();
  return Number(process.hrtime.bigint() - start) / (BATCHES * BATCH);
}

const contenders = [
  ["naive Map GCRA, prebuilt keys", () => naive(false)],
  ["keyed gcra, prebuilt keys", () => keyed(false)],
  ["naive Map GCRA, fresh keys", () => naive(true)],
  ["keyed gcra, fresh keys", () => keyed(true)],
] as const;
const samples = contenders.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  for (const [c, [, make]] of contenders.entries()) samples[c]!.push(nsPerDecision(make()));
}
const ns = samples.map((s) => median(s));
console.log(`fresh_keys: ${KEYS} keys, median of ${ROUNDS} rounds, load average ${loadavg().map((l) => l.toFixed(2))}`);
for (const [c, [name]] of contenders.entries()) console.log(`${name.padEnd(32)} ${ns[c]!.toFixed(1)} ns`);
console.log(
  `keyed / naive, prebuilt keys: ${(ns[1]! / ns[0]!).toFixed(2)}x; fresh keys: ${(ns[3]! / ns[2]!).toFixed(2)}x`,
);
