/**
 * What a concurrency rule costs per request in the key's object's pure record protocol, beside a plain rule: a take
 * (`checkRecord`) and its release (`releaseRecord`), against one `checkRecord` of sliding_log (limit 3 per minute,
 * a plain rule of the same size). One key, the record in hand, no I/O: the object's CPU per request, not the round
 * trip (a concurrency request makes two object calls, the take and, after the response, the release).
 * `node --import tsx bench/concurrency.ts`
 */
import { releaseRecord } from "../src/protocol/slots.ts";
import { checkRecord, type LimiterRecord, type LimiterRule } from "../src/protocol/store.ts";

const N = 200_000;
const ROUNDS = 5;
const T0 = 1_800_000_000_000;
const concurrency: LimiterRule = { id: "c", params: { algorithm: "concurrency", limit: 3, slotTtlMs: 60_000 } };
const plain: LimiterRule = { id: "p", params: { algorithm: "sliding_log", limit: 3, windowMs: 60_000 } };

function takeAndRelease(): number {
  let record: LimiterRecord | null = null;
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const out = checkRecord(record, { rule: concurrency, cost: 1 }, T0 + i);
    const slot = out.result.ok ? out.result.slot : undefined;
    record = releaseRecord(out.record, { rule: concurrency, slots: slot === undefined ? [] : [slot] }, T0 + i).record;
  }
  return Number(process.hrtime.bigint() - start) / N;
}

function plainCheck(): number {
  let record: LimiterRecord | null = null;
  const start = process.hrtime.bigint();
  // One request per 20 s: the log never fills, every request is admitted, as every concurrency take above is.
  for (let i = 0; i < N; i++) record = checkRecord(record, { rule: plain, cost: 1 }, T0 + i * 20_000).record;
  return Number(process.hrtime.bigint() - start) / N;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: [string, number][] = [
  ["sliding_log limit 3: checkRecord", median(Array.from({ length: ROUNDS }, plainCheck))],
  ["concurrency limit 3: checkRecord + releaseRecord", median(Array.from({ length: ROUNDS }, takeAndRelease))],
];
const base = rows[0]![1];
console.log("| per request | ns (median of 5 rounds of 200k) | ratio to the plain rule |\n|---|---:|---:|");
for (const [name, ns] of rows) console.log(`| ${name} | ${ns.toFixed(1)} | ${(ns / base).toFixed(2)}x |`);
