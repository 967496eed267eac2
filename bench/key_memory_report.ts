/**
 * BENCHMARKS.md section 8d from bench/results/key_memory.json (bench/key_memory.ts): what a key of many parts costs
 * the isolate per key against today's identities, side by side as ratios, and reading one per request.
 */
export interface KeyMemoryData {
  readonly runs: number;
  readonly rows: readonly { kind: string; structure: string; keys: number; bytesPerKey: number }[];
  readonly microsPerRequest: Record<string, { readUs: number; readAndHashUs: number }>;
}

const IDENTITY = "identity: ip";
const MANY = "8-part key";

export function keyMemorySection(d: KeyMemoryData): string[] {
  const counts = [...new Set(d.rows.map((r) => r.keys))];
  const bytes = (kind: string, keys: number) => d.rows.find((r) => r.kind === kind && r.keys === keys)?.bytesPerKey;
  const ratio = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined || b <= 0 ? "n/a" : `${(a / b).toFixed(2)}x`;
  const t = d.microsPerRequest;
  return [
    `A key's values are joined and hashed before anything keeps them (src/request/key.ts, src/edge/rule_keys.ts), so the isolate's per-key caches hold the object name \`<rule>:<64 hex digits>\` whatever the key's parts. Per key: a Map from object name to a number (the shape of the coalescer's and the blocked-key cache's entries), built in a child process (\`--expose-gc\`, heapUsed + arrayBuffers after GC minus before), median of ${d.runs} run(s). "8-part key": a masked address, a 40-character header, a 64-character cookie, a query value, the method, the route, the host and the country, hashed with WebCrypto SHA-256 as the Worker does. A \`scope: local\` rule's store keeps a 64-bit hash of the name, never the string (section 2 holds for any key).`,
    "",
    "| keys | identity: ip, bytes per key | 8-part key, bytes per key | 8-part / identity |",
    "| ---: | ---: | ---: | ---: |",
    ...counts.map(
      (n) =>
        `| ${n.toLocaleString("en-US")} | ${bytes(IDENTITY, n) ?? "n/a"} | ${bytes(MANY, n) ?? "n/a"} | ${ratio(bytes(MANY, n), bytes(IDENTITY, n))} |`,
    ),
    "",
    `Reading the key per request, in Node: an address ${t[IDENTITY]?.readUs ?? "n/a"} µs, the 8-part key ${t[MANY]?.readUs ?? "n/a"} µs (${ratio(t[MANY]?.readUs, t[IDENTITY]?.readUs)}: JSON-joining eight values, parsing the cookie, matching the route); reading and hashing (WebCrypto SHA-256, as the Worker does) ${t[IDENTITY]?.readAndHashUs ?? "n/a"} and ${t[MANY]?.readAndHashUs ?? "n/a"} µs: the digest dominates, and on a shared, loaded machine its timing varies more than the two keys differ (the load average is in the line above). Bytes per key are heap figures, not timings: the load does not change them.`,
    "",
  ];
}
