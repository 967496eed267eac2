/**
 * Who holds what grew between two heap snapshots of one isolate (devtools .heapsnapshot, e.g. from
 * `npm run soak -- --snapshot-at 20,80` or `--keep`, which keeps the soak's own): bench/heap_diff.ts says what grew by
 * constructor, this says by holder.
 *
 *   node --import tsx bench/heap_holders.ts EARLIER.heapsnapshot LATER.heapsnapshot [--top N]
 *     the whole heap of each by holder group (bench/heap_groups.ts: a module variable `context.NAME`, the isolate's
 *     parts `context.ISOLATE.PART`, Sluice's Durable Object instances, the runtime's wrappers), before and after;
 *   ... --within GROUP
 *     that group's objects by constructor;
 *   ... --new [--depth D]
 *     the objects of the later snapshot whose id the earlier lacks (V8 keeps a JS object's id across the snapshots
 *     of one isolate; a native wrapper's is new in each), each charged to every holder on its path from the roots:
 *     the holders that took the most new bytes, with their path (holders nearer the roots than D edges skipped);
 *   ... --who NAME
 *     the new objects of one constructor: their paths from the roots (numbers as N) and their direct retainers.
 */
import { parseArgs } from "node:util";
import { type Graph, heapGroups, loadSnapshot, type Tree } from "./heap_groups.ts";

const { values, positionals } = parseArgs({
  options: {
    top: { type: "string", default: "40" },
    depth: { type: "string", default: "2" },
    new: { type: "boolean", default: false },
    who: { type: "string" },
    within: { type: "string" },
  },
  allowPositionals: true,
});

const [earlier, later] = positionals;
if (earlier === undefined || later === undefined) {
  process.stderr.write("usage: node --import tsx bench/heap_holders.ts EARLIER.heapsnapshot LATER.heapsnapshot\n");
  process.exit(2);
}
const top = Number(values.top);
const before = loadSnapshot(earlier);
const g = loadSnapshot(later);
const describe = (graph: Graph, n: number) => `${graph.typeName(n)} ${graph.nameOf(n).slice(0, 60)}`;
const pathOf = (tree: Tree, n: number): string => {
  const parts: string[] = [];
  for (let a = n; tree.parent[a]! >= 0; a = tree.parent[a]!) parts.unshift(tree.label[a]!);
  return parts.join("").slice(-200);
};

/** Each snapshot's reachable self sizes by group, or one group's by constructor. */
function byGroup(graph: Graph): Map<string, { bytes: number; count: number }> {
  const groups = heapGroups(graph);
  if (values.within === undefined) return groups.bytes;
  const out = new Map<string, { bytes: number; count: number }>();
  for (const n of groups.tree.order) {
    if (groups.groupOf(n) !== values.within) continue;
    const entry = out.get(describe(graph, n)) ?? { bytes: 0, count: 0 };
    entry.bytes += graph.field(n, "self_size");
    entry.count++;
    out.set(describe(graph, n), entry);
  }
  return out;
}

function printGroups(): void {
  const a = byGroup(before);
  const b = byGroup(g);
  const none = { bytes: 0, count: 0 };
  const rows = [...new Set([...a.keys(), ...b.keys()])]
    .map((k) => ({ k, a: a.get(k) ?? none, b: b.get(k) ?? none }))
    .sort((p, q) => q.b.bytes - q.a.bytes - (p.b.bytes - p.a.bytes));
  const sum = (m: Map<string, { bytes: number }>) => [...m.values()].reduce((s, e) => s + e.bytes, 0);
  process.stdout.write(`reachable self size: ${sum(a)} -> ${sum(b)} bytes\n`);
  process.stdout.write("growth bytes | bytes before -> after | objects before -> after | group\n");
  for (const r of rows.slice(0, top))
    process.stdout.write(
      `${r.b.bytes - r.a.bytes} | ${r.a.bytes} -> ${r.b.bytes} | ${r.a.count} -> ${r.b.count} | ${r.k}\n`,
    );
}

/** The ids of the earlier snapshot: what the later one has beyond them is new. */
function seenIds(): Set<number> {
  const seen = new Set<number>();
  for (let n = 0; n < before.count; n++) seen.add(before.field(n, "id"));
  return seen;
}

function printNewHolders(): void {
  const seen = seenIds();
  const groups = heapGroups(g);
  const { parent, depth } = groups.tree;
  const newBytes = new Float64Array(g.count);
  const newCount = new Float64Array(g.count);
  let total = 0;
  for (const n of groups.tree.order) {
    if (seen.has(g.field(n, "id"))) continue;
    const size = g.field(n, "self_size");
    total += size;
    for (let a = n; a >= 0; a = parent[a]!) {
      newBytes[a]! += size;
      newCount[a]!++;
    }
  }
  // A holder whose new bytes are nearly all one child's is that child's chain: print the deepest of each chain only.
  const chainEnd = (n: number) => {
    let best = 0;
    for (let e = g.firstEdge[n]!; e < g.firstEdge[n + 1]!; e++) {
      const to = g.edge(e).to;
      if (parent[to] === n) best = Math.max(best, newBytes[to]!);
    }
    return best < 0.9 * newBytes[n]!;
  };
  const rows = groups.tree.order
    .filter((n) => depth[n]! >= Number(values.depth) && newBytes[n]! > 0 && chainEnd(n))
    .sort((p, q) => newBytes[q]! - newBytes[p]!)
    .slice(0, top);
  process.stdout.write(`new objects' self size: ${total} bytes\n`);
  process.stdout.write("new bytes | new objects | holder (type name) | its own size | path from the roots\n");
  for (const n of rows)
    process.stdout.write(
      `${newBytes[n]} | ${newCount[n]} | ${describe(g, n)} | ${g.field(n, "self_size")} | ${pathOf(groups.tree, n)}\n`,
    );
}

/** Where the new objects of one node name hang, by path shape and by direct retainer. */
function printWho(name: string): void {
  const seen = seenIds();
  const { tree } = heapGroups(g);
  const wanted = new Set<number>();
  for (const n of tree.order) if (g.nameOf(n) === name && !seen.has(g.field(n, "id"))) wanted.add(n);
  const paths = new Map<string, number>();
  for (const n of wanted) {
    const shape = pathOf(tree, n).replace(/\d+/g, "N");
    paths.set(shape, (paths.get(shape) ?? 0) + 1);
  }
  const retainers = new Map<string, number>();
  for (let n = 0; n < g.count; n++)
    for (let e = g.firstEdge[n]!; e < g.firstEdge[n + 1]!; e++) {
      const { type, label, to } = g.edge(e);
      if (!wanted.has(to)) continue;
      const key = `${describe(g, n)} -${type}:${label.replace(/\d+/g, "N")}->`;
      retainers.set(key, (retainers.get(key) ?? 0) + 1);
    }
  process.stdout.write(`${wanted.size} new ${name}\nby path from the roots:\n`);
  for (const [k, v] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, 15)) process.stdout.write(`  ${v} ${k}\n`);
  process.stdout.write("by direct retainer:\n");
  for (const [k, v] of [...retainers].sort((a, b) => b[1] - a[1]).slice(0, 15)) process.stdout.write(`  ${v} ${k}\n`);
}

if (values.who !== undefined) printWho(values.who);
else if (values.new) printNewHolders();
else printGroups();
