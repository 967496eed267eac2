/**
 * The soak's judgment of Sluice's own memory (bench/soak/heap_check.ts, on bench/heap_groups.ts) on small made-up
 * heap snapshots: objects are charged to the module variable, isolate part, Durable Object instance or runtime root
 * that holds them; a module variable that grows with the requests fails the check, a bounded structure filling
 * within its bound does not; and the bounds it copies are src/isolate's.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { heapGroups, loadSnapshot } from "../../bench/heap_groups.ts";
import { heapCheck, ISOLATE_BOUNDS, OTHER_MAX_BYTES_PER_REQUEST } from "../../bench/soak/heap_check.ts";
import { ACCOUNT_CACHE_MAX_ENTRIES } from "../../src/isolate/account_cache.ts";
import { BLOCKED_CACHE_MAX_ENTRIES } from "../../src/isolate/blocked_cache.ts";
import { COALESCE_MAX_KEYS } from "../../src/isolate/coalesce_types.ts";
import { KEY_LOOKUPS_MAX_ADDRESSES } from "../../src/isolate/key_lookups.ts";
import { RECENT_DENIALS_MAX } from "../../src/isolate/recent_denials.ts";

const NODE_TYPES = ["hidden", "array", "string", "object", "code", "closure", "native", "synthetic"];
const EDGE_TYPES = ["context", "element", "property", "internal", "hidden", "shortcut", "weak"];

/** A made-up snapshot in the devtools format: nodes by key, edges as [from, type, name, to]. */
function snapshot(
  nodes: Record<string, { type: string; name: string; size: number }>,
  edges: [string, string, string, string][],
): string {
  const keys = Object.keys(nodes);
  const strings: string[] = [];
  const str = (s: string) => (strings.includes(s) ? strings.indexOf(s) : strings.push(s) - 1);
  const flatNodes: number[] = [];
  const flatEdges: number[] = [];
  const index = new Map(keys.map((key, i) => [key, i]));
  const from = new Map<string, [string, string, string, string][]>();
  for (const e of edges) {
    const list = from.get(e[0]) ?? [];
    list.push(e);
    from.set(e[0], list);
  }
  keys.forEach((key, i) => {
    const n = nodes[key]!;
    const out = from.get(key) ?? [];
    flatNodes.push(NODE_TYPES.indexOf(n.type), str(n.name), i * 2 + 1, n.size, out.length);
    for (const [, type, name, to] of out)
      flatEdges.push(EDGE_TYPES.indexOf(type), type === "element" ? Number(name) : str(name), index.get(to)! * 5);
  });
  return JSON.stringify({
    snapshot: {
      meta: {
        node_fields: ["type", "name", "id", "self_size", "edge_count"],
        node_types: [NODE_TYPES],
        edge_fields: ["type", "name_or_index", "to_node"],
        edge_types: [EDGE_TYPES],
      },
    },
    nodes: flatNodes,
    edges: flatEdges,
    strings,
  });
}

/** An isolate with `keys` coalescer keys of 1,000 bytes, a module array holding `kept` bytes, one live object. */
function isolateHeap(keys: number, kept: number): string {
  const nodes: Record<string, { type: string; name: string; size: number }> = {
    root: { type: "synthetic", name: "", size: 0 },
    gcRoots: { type: "synthetic", name: "(GC roots)", size: 0 },
    handles: { type: "synthetic", name: "(Global handles)", size: 0 },
    module: { type: "object", name: "system / Context", size: 100 },
    isolate: { type: "object", name: "Object", size: 50 },
    calls: { type: "object", name: "Coalescer", size: 50 },
    array: { type: "array", name: "", size: 16 },
    kept: { type: "string", name: "leak", size: kept },
    instance: { type: "native", name: "CppgcShim", size: 100 },
    proto: { type: "object", name: "SluiceLimiter", size: 20 },
    record: { type: "object", name: "Object", size: 2_000 },
    storage: { type: "native", name: "workerd / DurableObjectStorage", size: 800 },
  };
  const edges: [string, string, string, string][] = [
    ["root", "element", "1", "gcRoots"],
    ["root", "property", "module", "module"],
    ["gcRoots", "element", "1", "handles"],
    ["handles", "element", "1", "instance"],
    ["gcRoots", "element", "2", "storage"],
    ["instance", "property", "__proto__", "proto"],
    ["instance", "property", "record", "record"],
    ["module", "context", "ISOLATE", "isolate"],
    ["module", "context", "KEPT", "array"],
    ["isolate", "property", "calls", "calls"],
    ["array", "element", "0", "kept"],
  ];
  for (let k = 0; k < keys; k++) {
    nodes[`key${k}`] = { type: "object", name: "KeyState", size: 1_000 };
    edges.push(["calls", "element", String(k), `key${k}`]);
  }
  return snapshot(nodes, edges);
}

const dir = mkdtempSync(join(tmpdir(), "sluice-heap-check-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const written = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe("heap groups", () => {
  it("charges each object to its module variable, isolate part, object instance or runtime root", () => {
    const groups = heapGroups(loadSnapshot(written("one.heapsnapshot", isolateHeap(3, 500))));
    expect(groups.bytes.get("context.ISOLATE.calls")).toEqual({ bytes: 3_050, count: 4 });
    expect(groups.bytes.get("context.KEPT")).toEqual({ bytes: 516, count: 2 });
    expect(groups.bytes.get("instances of SluiceLimiter")).toEqual({ bytes: 2_120, count: 3 });
    expect(groups.instances.get("instances of SluiceLimiter")).toBe(1);
    expect(groups.bytes.get("native workerd / DurableObjectStorage")).toEqual({ bytes: 800, count: 1 });
  });
});

describe("the soak's heap check", () => {
  const check = (keys: [number, number], kept: [number, number], requests: number) =>
    heapCheck(
      { atS: 0, requests: 0, path: written("start.heapsnapshot", isolateHeap(keys[0], kept[0])) },
      { atS: 60, requests, path: written("end.heapsnapshot", isolateHeap(keys[1], kept[1])) },
      true,
    );

  it("passes a bounded structure filling within its bound", () => {
    const c = check([100, 2_000], [500, 500], 10_000);
    expect(c.coalescer.keys).toEqual([100, 2_000]);
    expect(c.other.bytesPerRequest).toBe(0);
    expect(c.levelled).toBe(true);
  });

  it("fails a module variable that keeps more than the allowance per request", () => {
    const perRequest = OTHER_MAX_BYTES_PER_REQUEST + 50;
    const c = check([100, 100], [500, 500 + perRequest * 10_000], 10_000);
    expect(c.other.bytesPerRequest).toBe(perRequest);
    expect(c.levelled).toBe(false);
  });

  it("fails a bounded structure holding more than its bound allows", () => {
    const c = check([100, COALESCE_MAX_KEYS + 1_000], [500, 500], 10_000);
    expect(c.overCeiling).toEqual([]); // 1,000 bytes a key is within KEY_MAX_BYTES...
    const big = heapCheck(
      { atS: 0, requests: 0, path: written("s.heapsnapshot", isolateHeap(10, 0)) },
      { atS: 60, requests: 10, path: written("e.heapsnapshot", isolateHeap(16_000, 0)) },
      true,
    );
    expect(big.overCeiling).toEqual(["context.ISOLATE.calls"]); // ...but 16,000 keys are not
    expect(big.levelled).toBe(false);
  });

  it("copies src/isolate's bounds", () => {
    expect(ISOLATE_BOUNDS).toEqual({
      COALESCE_MAX_KEYS,
      BLOCKED_CACHE_MAX_ENTRIES,
      ACCOUNT_CACHE_MAX_ENTRIES,
      KEY_LOOKUPS_MAX_ADDRESSES,
      RECENT_DENIALS_MAX,
      RECENT_KEYS: Number(/const RECENT_KEYS = (\d+);/.exec(readFileSync("src/edge/hash.ts", "utf8"))?.[1]),
    });
  });
});
