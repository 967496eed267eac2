/**
 * Two heap snapshots (devtools .heapsnapshot, e.g. from bench/memory_model.ts --snapshot-at) compared by constructor:
 * per node name and type, the count and self size in each, and the growth, largest first.
 *
 *   node --import tsx bench/heap_diff.ts EARLIER.heapsnapshot LATER.heapsnapshot [--top N]
 *
 * What grows between the two, with the load unchanged, is what something keeps; its retainers are for devtools.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  options: { top: { type: "string", default: "40" } },
  allowPositionals: true,
});

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: (string[] | string)[] } };
  nodes: number[];
  strings: string[];
}

/** Count and self size per `type name`. */
function byConstructor(path: string): Map<string, { count: number; bytes: number }> {
  const snap = JSON.parse(readFileSync(path, "utf8")) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0] as string[];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    // Strings by type alone: their text is data, not a kind of object.
    const name = type === "string" || type === "concatenated string" ? "" : snap.strings[snap.nodes[i + nameAt]!]!;
    const key = `${type} ${name.slice(0, 80)}`;
    const entry = out.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += snap.nodes[i + sizeAt]!;
    out.set(key, entry);
  }
  return out;
}

const [earlier, later] = positionals;
if (earlier === undefined || later === undefined) {
  process.stderr.write("usage: node --import tsx bench/heap_diff.ts EARLIER.heapsnapshot LATER.heapsnapshot\n");
  process.exit(2);
}
const a = byConstructor(earlier);
const b = byConstructor(later);
const total = (m: Map<string, { bytes: number }>) => [...m.values()].reduce((s, e) => s + e.bytes, 0);
const rows = [...new Set([...a.keys(), ...b.keys()])].map((key) => {
  const x = a.get(key) ?? { count: 0, bytes: 0 };
  const y = b.get(key) ?? { count: 0, bytes: 0 };
  return { key, countA: x.count, countB: y.count, bytesA: x.bytes, bytesB: y.bytes, growth: y.bytes - x.bytes };
});
rows.sort((p, q) => q.growth - p.growth);
process.stdout.write(`total self size: ${total(a)} -> ${total(b)} bytes (${total(b) - total(a)})\n`);
process.stdout.write("growth bytes | count before -> after | bytes before -> after | type name\n");
for (const r of rows.slice(0, Number(values.top))) {
  process.stdout.write(`${r.growth} | ${r.countA} -> ${r.countB} | ${r.bytesA} -> ${r.bytesB} | ${r.key}\n`);
}
