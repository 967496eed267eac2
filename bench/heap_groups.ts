/**
 * A devtools heap snapshot (.heapsnapshot) of the Worker isolate, its reachable objects summed by who holds them:
 * each object is charged, with its self size, to the holder on its path from the GC roots (a breadth-first tree over
 * the strong edges: its first, shortest retainer). The groups:
 *
 * - `context.NAME`: a module variable of the Worker's bundle and everything under it (`context.ISOLATE.PART` apart:
 *   the isolate's bounded structures, src/isolate/isolate.ts);
 * - `instances of CLASS`: the Durable Object instances of one of Sluice's classes (their `record`, call slots, ...),
 *   with `instances` counting them;
 * - the rest is the runtime's: the JS wrappers workerd keeps for its own objects (`workerd / DurableObjectStorage`,
 *   `workerd / IsolateBase`: each object's storage, SQL and KV handles), compiled code, internalized strings.
 *
 * Used by bench/heap_holders.ts (by hand) and bench/soak.ts (to judge what Sluice's own code keeps).
 */
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: (string[] | string)[]; edge_fields: string[]; edge_types: string[][] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export interface Graph {
  readonly snap: Snapshot;
  readonly width: number;
  readonly count: number;
  readonly field: (node: number, name: string) => number;
  readonly typeName: (node: number) => string;
  readonly nameOf: (node: number) => string;
  readonly firstEdge: Int32Array;
  /** Edge `e`'s type, its label (`.name` or `[index]`) and its target node. */
  readonly edge: (e: number) => { type: string; label: string; to: number };
}

export function loadSnapshot(path: string): Graph {
  return graphOf(JSON.parse(readFileSync(path, "utf8")) as Snapshot);
}

function graphOf(snap: Snapshot): Graph {
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const count = snap.nodes.length / width;
  const at = new Map(fields.map((f, i) => [f, i]));
  const field = (node: number, name: string) => snap.nodes[node * width + at.get(name)!]!;
  const types = snap.snapshot.meta.node_types[0] as string[];
  const typeName = (node: number) => types[field(node, "type")]!;
  const firstEdge = new Int32Array(count + 1);
  for (let n = 0; n < count; n++) firstEdge[n + 1] = firstEdge[n]! + field(n, "edge_count");
  const ef = snap.snapshot.meta.edge_fields;
  const ew = ef.length;
  const [typeAt, nameAt, toAt] = ["type", "name_or_index", "to_node"].map((f) => ef.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const edgeTypes = snap.snapshot.meta.edge_types[0]!;
  const edge = (e: number) => {
    const type = edgeTypes[snap.edges[e * ew + typeAt]!]!;
    const name = snap.edges[e * ew + nameAt]!;
    const label = type === "element" || type === "hidden" ? `[${name}]` : `.${snap.strings[name]}`;
    return { type, label, to: snap.edges[e * ew + toAt]! / width };
  };
  const nameOf = (n: number) => snap.strings[field(n, "name")]!;
  return { snap, width, count, field, typeName, nameOf, firstEdge, edge };
}

export interface Tree {
  /** Each node's first retainer in the breadth-first tree; -1 for the root, -2 when unreachable. */
  readonly parent: Int32Array;
  readonly label: string[];
  readonly depth: Int32Array;
  /** The reachable nodes, nearest the roots first. */
  readonly order: number[];
}

/** The breadth-first tree from the root (node 0) over strong edges. */
export function bfsTree(g: Graph): Tree {
  const parent = new Int32Array(g.count).fill(-2);
  const depth = new Int32Array(g.count);
  const label: string[] = new Array(g.count);
  const order = [0];
  parent[0] = -1;
  for (let i = 0; i < order.length; i++) {
    const n = order[i]!;
    for (let e = g.firstEdge[n]!; e < g.firstEdge[n + 1]!; e++) {
      const { type, label: l, to } = g.edge(e);
      if (type === "weak" || parent[to] !== -2) continue;
      parent[to] = n;
      depth[to] = depth[n]! + 1;
      label[to] = l;
      order.push(to);
    }
  }
  return { parent, label, depth, order };
}

/** The name of the object `n`'s `__proto__` points to, or "". */
function protoName(g: Graph, n: number): string {
  for (let e = g.firstEdge[n]!; e < g.firstEdge[n + 1]!; e++) {
    const { label, to } = g.edge(e);
    if (label === ".__proto__") return g.nameOf(to);
  }
  return "";
}

export interface Groups {
  readonly bytes: Map<string, { bytes: number; count: number }>;
  /** Durable Object instances of each class matched by `instances`. */
  readonly instances: Map<string, number>;
  /** Each reachable node's group (for `--within`). */
  readonly groupOf: (node: number) => string;
  readonly tree: Tree;
}

/** Each reachable object's group (see the header); `instances` names the Durable Object classes counted apart. */
export function heapGroups(g: Graph, instances = /^Sluice(Limiter|Delegate)$/): Groups {
  const tree = bfsTree(g);
  const group = new Array<string>(g.count);
  const counted = new Map<string, number>();
  const describe = (n: number) => `${g.typeName(n)} ${g.nameOf(n).slice(0, 50)}`;
  for (const n of tree.order) {
    const up = tree.parent[n]!;
    const inherited = up < 0 ? "" : group[up]!;
    const edge = tree.label[n] ?? "";
    const upIsWrapper = up >= 0 && g.nameOf(up) === "CppgcShim" && g.typeName(up) === "native";
    if (g.nameOf(n) === "CppgcShim" && g.typeName(n) === "native" && instances.test(protoName(g, n))) {
      group[n] = `instances of ${protoName(g, n)}`;
      counted.set(group[n]!, (counted.get(group[n]!) ?? 0) + 1);
    } else if (inherited.startsWith("instances of ") || inherited.startsWith("context.")) {
      group[n] = inherited === "context.ISOLATE" ? `${inherited}${edge}` : inherited;
    } else if (edge === ".ISOLATE" && g.nameOf(up) === "system / Context") group[n] = "context.ISOLATE";
    else if (up >= 0 && g.nameOf(up) === "system / Context" && edge.startsWith(".")) group[n] = `context${edge}`;
    // A JS object the runtime wraps (not one of Sluice's objects): its properties are the runtime's.
    else if (upIsWrapper && edge.startsWith(".") && !edge.startsWith(".__")) group[n] = `runtime-wrapped ${edge}`;
    else if (tree.depth[n]! <= 2) group[n] = describe(n);
    else group[n] = inherited;
  }
  const bytes = new Map<string, { bytes: number; count: number }>();
  for (const n of tree.order) {
    const entry = bytes.get(group[n]!) ?? { bytes: 0, count: 0 };
    entry.bytes += g.field(n, "self_size");
    entry.count++;
    bytes.set(group[n]!, entry);
  }
  return { bytes, instances: counted, groupOf: (n) => group[n]!, tree };
}

/** Whether a group is Sluice's own code's (a module variable of the bundle, or one of its objects' instances). */
export const isSluices = (group: string): boolean => group.startsWith("context.") || group.startsWith("instances of ");

/** How many reachable nodes of constructor `name` there are in the group (in any group: `group` null). */
export function countIn(g: Graph, groups: Groups, group: string | null, name: string): number {
  let n = 0;
  for (const node of groups.tree.order)
    if (g.nameOf(node) === name && (group === null || groups.groupOf(node) === group)) n++;
  return n;
}
