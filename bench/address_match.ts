/**
 * What `match.except_address` costs a request at the gateway, in process: `applicableRules` (src/request/match.ts)
 * over one rule with 0, 10, 100 and 1,000 excepted ranges (a third IPv6), for requests from 1,000 client addresses
 * (each a fresh string, as a request's header is), none of them excepted (the worst case: every range is tried).
 * Median over rounds of ns per request, and the ratio to the rule without ranges, side by side in one run.
 * Run: `node --import tsx bench/address_match.ts`.
 */
import { applicableRules, compileRules, type RequestFacts } from "../src/request/match.ts";
import { parseRules } from "../src/rules/yaml.ts";

const REQUESTS = 200_000;
const ROUNDS = 7;
const SIZES = [0, 10, 100, 1000] as const;

function ranges(n: number): string[] {
  return Array.from({ length: n }, (_, i) =>
    i % 3 === 2 ? `"2001:db8:${(i % 65536).toString(16)}::/48"` : `198.51.${Math.floor(i / 3) % 256}.0/24`,
  );
}

function rulesWith(n: number) {
  const except = n === 0 ? "" : `, except_address: [${ranges(n).join(", ")}]`;
  const yaml = `- id: r\n  match: { route: "GET /v1/**", identity: ip${except} }\n  algorithm: gcra\n  rate: 10/s\n  burst: 20\n`;
  const parsed = parseRules(yaml, "bench.yaml");
  if (parsed.errors.length > 0) throw new Error(parsed.errors.join("\n"));
  return compileRules(parsed.rules);
}

function run(n: number): number {
  const rules = rulesWith(n);
  const base = {
    methods: ["GET"],
    paths: ["/v1/things"],
    foldCase: true,
    plan: "free",
    keyHashes: { api_key: null, ip: "h", user: null },
    overrides: new Map(),
    unverified: null,
  };
  let applied = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < REQUESTS; i++) {
    const address = `203.0.${(i >> 8) & 3}.${i & 255}`;
    const values = { header: () => null, cookie: () => [], query: () => [], cf: () => null, host: null, address };
    const facts: RequestFacts = { ...base, values };
    applied += applicableRules(rules, facts).length;
  }
  const ns = Number(process.hrtime.bigint() - start) / REQUESTS;
  if (applied !== REQUESTS) throw new Error(`the rule applied to ${applied} of ${REQUESTS} requests`);
  return ns;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = new Map<number, number>();
for (const n of SIZES) {
  run(n);
  results.set(n, median(Array.from({ length: ROUNDS }, () => run(n))));
}
process.stdout.write("| except_address ranges | ns per request | vs none |\n|---:|---:|---:|\n");
for (const n of SIZES) {
  const ns = results.get(n)!;
  process.stdout.write(`| ${n} | ${Math.round(ns)} | ${(ns / results.get(0)!).toFixed(2)}x |\n`);
}
