/**
 * Keys of many parts against today's identities: what one key costs an isolate, and what reading it costs a request.
 * A key's values are joined and hashed (src/request/key.ts `ruleKeyOf`, src/edge/hash.ts) before anything keeps them,
 * so the isolate holds a 64-hex-digit hash per key whatever the parts. Measured, not assumed: each structure is built
 * in a child process of its own (`node --expose-gc`), with N keys hashed from (a) a client address, as `identity: ip`
 * keys it, or (b) an 8-part key (a masked address, a 40-character tenant header, a 64-character session cookie, a
 * query value, method, route, host, country); heapUsed + arrayBuffers after GC, minus before, per key, for a Map from
 * object name to a number: the shape of the isolate's per-key caches (coalescer, blocked keys), which keep the name
 * `<rule>:<hash>`. (The local store of a `scope: local` rule keeps a 64-bit hash of that name, never the string:
 * section 2's bytes per key hold for any key; measuring it here gave negative deltas, the hashing's own garbage.)
 * Then the time to read and hash a key per request, in Node (SHA-256 by WebCrypto, as the Worker does).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type KeySource, ruleKeyOf } from "../src/request/key.ts";
import { compileRules, type RequestFacts } from "../src/request/match.ts";
import { parseRules } from "../src/rules/yaml.ts";
import { log, median, QUICK, round, writeResult } from "./common.ts";

/** SHA-256 hex by WebCrypto, as src/edge/hash.ts computes it in the Worker (bench reaches no edge code). */
async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Buffer.from(digest).toString("hex");
}

const COUNTS = QUICK ? [10_000] : [10_000, 100_000];
const RUNS = QUICK ? 1 : 3;
const KINDS = ["identity: ip", "8-part key"] as const;
const STRUCTURES = ["Map<object name, number>"] as const;
type Kind = (typeof KINDS)[number];
type Structure = (typeof STRUCTURES)[number];

const RULES = parseRules(
  `- id: many-parts
  match: { route: "* /v1/**" }
  key: [{ ip: { v4: 24, v6: 48 } }, { header: X-Tenant-Id }, { cookie: session }, { query: region }, method, route, host, country]
  algorithm: gcra
  rate: 10/s
  burst: 20
`,
  "bench/key_memory.ts",
);
const COMPILED = compileRules(RULES.rules)[0]!;
const FACTS: RequestFacts = {
  methods: ["GET"],
  paths: ["/v1/search/labels"],
  foldCase: true,
  plan: "free",
  keyHashes: { api_key: null, ip: null, user: null },
  overrides: new Map(),
  unverified: { keyHash: null },
};

function sourceOf(i: number): KeySource {
  const tenant = `tenant-${String(i).padStart(33, "0")}`;
  const session = `${i.toString(16).padStart(64, "a")}`;
  return {
    header: (name) => (name === "x-tenant-id" ? tenant : null),
    cookie: (name) => (name === "session" ? [session] : []),
    query: (name) => (name === "region" ? ["eu-west"] : []),
    host: "api.example.com",
    address: `198.51.${(i >> 8) & 0xff}.${i & 0xff}`,
    cf: (f) => (f === "country" ? "DE" : null),
  };
}

/** The key text, before hashing, of request i. */
function textOf(kind: Kind, i: number): string {
  if (kind === "identity: ip") return `198.51.${(i >> 8) & 0xff}.${i & 0xff}`;
  const key = ruleKeyOf(COMPILED, FACTS, sourceOf(i), { ipv6PrefixBits: 64 });
  if (key.kind !== "key") throw new Error("the bench's key must resolve");
  return key.text;
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error("run with node --expose-gc");
  collect();
  collect();
}
const used = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;

async function measure(kind: Kind, structure: Structure, n: number): Promise<number> {
  const hashes: string[] = [];
  for (let i = 0; i < n; i++) hashes.push(await sha256Hex(textOf(kind, i)));
  gc();
  const before = used();
  let keep: unknown;
  if (structure === "Map<object name, number>") {
    const map = new Map<string, number>();
    for (let i = 0; i < n; i++) map.set(`many-parts:${hashes[i]!}`, i);
    keep = map;
  }
  // The hashes were made before `before` and stay alive to the end: only what the structure adds is counted.
  gc();
  const after = used();
  if (keep === null || hashes.length !== n) log("unreachable");
  return (after - before) / n;
}

async function timing(kind: Kind): Promise<{ readUs: number; readAndHashUs: number }> {
  const n = QUICK ? 20_000 : 100_000;
  let sink = 0;
  let t = performance.now();
  for (let i = 0; i < n; i++) sink += textOf(kind, i).length;
  const readUs = ((performance.now() - t) * 1000) / n;
  t = performance.now();
  for (let i = 0; i < n; i++) sink += (await sha256Hex(textOf(kind, i))).length;
  const readAndHashUs = ((performance.now() - t) * 1000) / n;
  if (sink === 0) log("unreachable");
  return { readUs: round(readUs, 2), readAndHashUs: round(readAndHashUs, 2) };
}

async function main(): Promise<void> {
  const rows: { kind: Kind; structure: Structure; keys: number; bytesPerKey: number }[] = [];
  for (const n of COUNTS) {
    for (const structure of STRUCTURES) {
      for (const kind of KINDS) {
        const runs: number[] = [];
        for (let r = 0; r < RUNS; r++) {
          const child = spawnSync(
            process.execPath,
            ["--expose-gc", "--import", "tsx", fileURLToPath(import.meta.url), "--one", kind, structure, String(n)],
            { encoding: "utf8" },
          );
          if (child.status !== 0) throw new Error(`key_memory ${kind} ${structure} ${n}: ${child.stderr}`);
          runs.push(Number(child.stdout.trim().split("\n").pop()));
        }
        const bytesPerKey = round(median(runs), 1);
        rows.push({ kind, structure, keys: n, bytesPerKey });
        log(`${structure.padEnd(26)} ${kind.padEnd(14)} ${String(n).padStart(7)} keys: ${bytesPerKey} B/key`);
      }
    }
  }
  const times = { "identity: ip": await timing("identity: ip"), "8-part key": await timing("8-part key") };
  log(`per request, read + SHA-256: ${JSON.stringify(times)}`);
  writeResult("key_memory", `node --import tsx bench/key_memory.ts${QUICK ? " --quick" : ""}`, {
    runs: RUNS,
    rows,
    microsPerRequest: times,
  });
}

const one = process.argv.indexOf("--one");
if (one >= 0) {
  const bytes = await measure(
    process.argv[one + 1] as Kind,
    process.argv[one + 2] as Structure,
    Number(process.argv[one + 3]),
  );
  process.stdout.write(`${bytes}\n`);
} else await main();
