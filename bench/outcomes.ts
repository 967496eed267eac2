/**
 * What counting by the response and bans cost the key's Durable Object per request, in process: the record protocol
 * the object runs (src/protocol/share.ts `keyCall`, one call per request as these rules send them), for a plain rule
 * (one `check`), a `block_for` rule (one `check` that may ban), and a `count_when` rule (a `probe` before forwarding
 * and a `charge` after, two calls). 1,000 keys in turn, each call a fresh id (the object remembers ids), time moving
 * 1 ms per request. Median over rounds of ns per request. Run: `node --import tsx bench/outcomes.ts`.
 */
import { keyCall } from "../src/protocol/share.ts";
import type { CallInput, LimiterRecord, LimiterRule } from "../src/protocol/store.ts";
import { slidingLog } from "../test/support/params.ts";

const KEYS = 1000;
const REQUESTS = 200_000;
const ROUNDS = 5;
const T0 = 1_700_000_000_000;
const params = slidingLog(5, 60_000);

type Kind = "plain" | "block_for" | "count_when";

function run(kind: Kind): number {
  const rule: LimiterRule = kind === "block_for" ? { id: "r", params, blockForMs: 900_000 } : { id: "r", params };
  const records: (LimiterRecord | null)[] = new Array(KEYS).fill(null);
  let id = 0;
  const call = (key: number, input: Omit<CallInput, "rule" | "id">, nowMs: number) => {
    const out = keyCall(records[key]!, { rule, id: `c${id++}`, ...input }, nowMs);
    records[key] = out.record;
    return out.result;
  };
  const start = process.hrtime.bigint();
  for (let i = 0; i < REQUESTS; i++) {
    const key = i % KEYS;
    const nowMs = T0 + i;
    if (kind === "count_when") {
      const probe = call(key, { costs: [1], kind: "probe" }, nowMs);
      const admitted = probe.results[0]?.ok === true && probe.results[0].decision.allowed;
      // Every other admitted request fails (a 401): charged.
      if (admitted && i % 2 === 0) call(key, { costs: [1], kind: "charge" }, nowMs + 1);
    } else {
      call(key, { costs: [1] }, nowMs);
    }
  }
  return Number(process.hrtime.bigint() - start) / REQUESTS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results: Record<Kind, number> = { plain: 0, block_for: 0, count_when: 0 };
for (const kind of Object.keys(results) as Kind[]) {
  run(kind); // warm-up
  results[kind] = median(Array.from({ length: ROUNDS }, () => run(kind)));
}
process.stdout.write("| rule (sliding_log 5/min, 1,000 keys) | ns per request | vs plain |\n|---|---:|---:|\n");
for (const kind of Object.keys(results) as Kind[]) {
  const ns = results[kind];
  process.stdout.write(`| ${kind} | ${Math.round(ns)} | ${(ns / results.plain).toFixed(2)}x |\n`);
}
