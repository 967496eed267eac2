/**
 * The soak's judgment of Sluice's own memory, from two heap snapshots of the Worker isolate taken over a warm phase
 * (bench/heap_groups.ts sums each snapshot's objects by holder):
 *
 * - every structure whose bound docs/production.md ("Bounded memory") states is read apart, against what it may
 *   hold at that bound (its entries times a cost per entry): the coalescer's keys (at most `COALESCE_MAX_KEYS`, each
 *   at most `KEY_MAX_BYTES`), the caches, and the Durable Objects' instances (their record and at most
 *   `CALL_MEMORY_MAX` call ids each: at most `INSTANCE_MAX_BYTES` a live object);
 * - everything else Sluice's code keeps (its other module variables and what they hold) must not grow with the load:
 *   at most `OTHER_MAX_BYTES_PER_REQUEST` per request served between the snapshots;
 * - the runtime's own part (the wrappers workerd keeps for each object it made: its storage, SQL and KV handles,
 *   about 0.8 KB each with no Sluice code at all, bench/object_churn.ts --snapshots) is reported, not judged.
 *
 * A leak of a kilobyte per request is ten times the allowance; a cache filling toward its stated bound is not counted
 * against it.
 */
import { CALL_MEMORY_MAX } from "../../src/protocol/store.ts";
import { countIn, type Groups, heapGroups, isSluices, loadSnapshot } from "../heap_groups.ts";

/**
 * The isolate's stated bounds (docs/production.md, "Bounded memory"), as src/isolate states them. Copied, not
 * imported: those modules reach the Workers API, which bench code must not (test/unit/architecture.test.ts);
 * test/unit/soak_heap_check.test.ts holds each copy to its source.
 */
export const ISOLATE_BOUNDS = {
  /** src/isolate/coalesce_types.ts */
  COALESCE_MAX_KEYS: 10_000,
  /** src/isolate/blocked_cache.ts */
  BLOCKED_CACHE_MAX_ENTRIES: 10_000,
  /** src/isolate/account_cache.ts */
  ACCOUNT_CACHE_MAX_ENTRIES: 10_000,
  /** src/isolate/key_lookups.ts */
  KEY_LOOKUPS_MAX_ADDRESSES: 100_000,
  /** src/isolate/recent_denials.ts */
  RECENT_DENIALS_MAX: 100,
  /** src/edge/hash.ts, `RECENT_KEYS` (not exported) */
  RECENT_KEYS: 1_024,
} as const;
const {
  COALESCE_MAX_KEYS,
  BLOCKED_CACHE_MAX_ENTRIES,
  ACCOUNT_CACHE_MAX_ENTRIES,
  KEY_LOOKUPS_MAX_ADDRESSES,
  RECENT_DENIALS_MAX,
  RECENT_KEYS,
} = ISOLATE_BOUNDS;

/**
 * What one coalescer key may cost, bytes: its KeyState, its name and rule, its closures (1.03 KB each measured in the
 * soak, 2026-12-07, `bench/heap_holders.ts --within context.ISOLATE.calls`).
 */
export const KEY_MAX_BYTES = 1_536;
/**
 * What one live Durable Object instance of Sluice's may keep, bytes: its record and call slots (1.6 KB) and up to
 * `CALL_MEMORY_MAX` call ids of about 120 bytes each (measured in the soak, 2026-12-07: 2.8-4.2 KB on average, 22 KB
 * for a key whose ring was full).
 */
export const INSTANCE_MAX_BYTES = 2_048 + CALL_MEMORY_MAX * 160;
/** What Sluice's code may keep per request served outside its bounded structures, bytes. */
export const OTHER_MAX_BYTES_PER_REQUEST = 100;

/** A generous cost per entry of a cache with a stated bound: "about a kilobyte each" (BENCHMARKS.md, section 9). */
const CACHE_ENTRY_MAX_BYTES = 1_024;

/**
 * The groups that are structures with a stated bound (docs/production.md, "Bounded memory"), that bound, and what
 * the structure may hold at it (its bound times a cost per entry; null: not stated).
 */
const BOUNDED: readonly { readonly group: string; readonly bound: string; readonly ceiling: number | null }[] = [
  {
    group: "context.ISOLATE.calls",
    bound: `coalescer: ${COALESCE_MAX_KEYS} keys`,
    ceiling: COALESCE_MAX_KEYS * KEY_MAX_BYTES,
  },
  {
    group: "context.ISOLATE.blocked",
    bound: `blocked-key cache: ${BLOCKED_CACHE_MAX_ENTRIES} entries (and as many refunds)`,
    ceiling: 2 * BLOCKED_CACHE_MAX_ENTRIES * CACHE_ENTRY_MAX_BYTES,
  },
  {
    group: "context.ISOLATE.accounts",
    bound: `account cache: ${ACCOUNT_CACHE_MAX_ENTRIES} records and as many misses`,
    ceiling: 2 * ACCOUNT_CACHE_MAX_ENTRIES * CACHE_ENTRY_MAX_BYTES,
  },
  {
    group: "context.ISOLATE.keyLookups",
    bound: `key lookups: ${KEY_LOOKUPS_MAX_ADDRESSES} addresses (about 30 bytes each, packed)`,
    ceiling: KEY_LOOKUPS_MAX_ADDRESSES * 64,
  },
  { group: "context.ISOLATE.local", bound: "local rules' stores: MAX_KEYS each (about 30 bytes a key)", ceiling: null },
  { group: "context.DEPLOYED_RULES", bound: "the rules, and the local rules' stores: MAX_KEYS each", ceiling: null },
  {
    group: "context.ISOLATE.denials",
    bound: `recent denials: ${RECENT_DENIALS_MAX}`,
    ceiling: RECENT_DENIALS_MAX * CACHE_ENTRY_MAX_BYTES,
  },
  {
    group: "context.recentHashes",
    bound: `recent key hashes: ${RECENT_KEYS} (about 200 bytes each)`,
    ceiling: RECENT_KEYS * 256,
  },
];
const isInstances = (group: string) => group.startsWith("instances of ");

export interface HeapReading {
  readonly atS: number;
  readonly requests: number;
  readonly path: string;
}

interface Part {
  readonly bytes: number;
  readonly count: number;
}

/** One snapshot's parts: Sluice's bounded structures, its instances, the rest of Sluice's, the runtime's. */
function partsOf(path: string) {
  const g = loadSnapshot(path);
  const groups: Groups = heapGroups(g);
  const sum = (keep: (group: string) => boolean): Part => {
    let bytes = 0;
    let count = 0;
    for (const [group, e] of groups.bytes)
      if (keep(group)) {
        bytes += e.bytes;
        count += e.count;
      }
    return { bytes, count };
  };
  const bounded = Object.fromEntries(BOUNDED.map((b) => [b.group, groups.bytes.get(b.group)?.bytes ?? 0]));
  return {
    bounded,
    keys: countIn(g, groups, "context.ISOLATE.calls", "KeyState"),
    instances: sum(isInstances).bytes,
    liveInstances: [...groups.instances.values()].reduce((a, b) => a + b, 0),
    other: sum((group) => isSluices(group) && !isInstances(group) && !BOUNDED.some((b) => b.group === group)).bytes,
    runtime: sum((group) => !isSluices(group)).bytes,
    /** The runtime's wrappers of each Durable Object it made (its storage handle), counted. */
    storages: countIn(g, groups, null, "workerd / DurableObjectStorage"),
  };
}

const mb = (bytes: number) => Math.round(bytes / 10_485.76) / 100;

/** Sluice's own memory over one warm phase, from its first and last snapshot; `judged` false when too short. */
export function heapCheck(start: HeapReading, end: HeapReading, judged: boolean) {
  const a = partsOf(start.path);
  const b = partsOf(end.path);
  const requests = Math.max(1, end.requests - start.requests);
  const otherPerRequest = Math.round((b.other - a.other) / requests);
  const keyBytes = b.keys === 0 ? 0 : Math.round(b.bounded["context.ISOLATE.calls"]! / b.keys);
  const instanceBytes = b.liveInstances === 0 ? 0 : Math.round(b.instances / b.liveInstances);
  const overCeiling = BOUNDED.filter((s) => s.ceiling !== null && b.bounded[s.group]! > s.ceiling).map((s) => s.group);
  const ok = otherPerRequest <= OTHER_MAX_BYTES_PER_REQUEST && keyBytes <= KEY_MAX_BYTES && overCeiling.length === 0;
  return {
    spanS: Math.round(end.atS - start.atS),
    requests,
    /** Sluice's code outside its bounded structures: MB at each end, and bytes per request served between. */
    other: { startMb: mb(a.other), endMb: mb(b.other), bytesPerRequest: otherPerRequest },
    /** The coalescer: keys and MB at each end, bytes per key at the end (its ceiling: COALESCE_MAX_KEYS of them). */
    coalescer: {
      keys: [a.keys, b.keys],
      mb: [mb(a.bounded["context.ISOLATE.calls"]!), mb(b.bounded["context.ISOLATE.calls"]!)],
      bytesPerKey: keyBytes,
      ceilingMb: mb(COALESCE_MAX_KEYS * Math.max(keyBytes, 1)),
    },
    /** Sluice's Durable Object instances: live at each end, MB, bytes per live object at the end. */
    instances: {
      live: [a.liveInstances, b.liveInstances],
      mb: [mb(a.instances), mb(b.instances)],
      bytesPerObject: instanceBytes,
    },
    bounded: BOUNDED.map((s) => ({
      group: s.group,
      bound: s.bound,
      mb: [mb(a.bounded[s.group]!), mb(b.bounded[s.group]!)],
      ceilingMb: s.ceiling === null ? null : mb(s.ceiling),
    })),
    /** The bounded structures above what they may hold at their bound. */
    overCeiling,
    runtime: { mb: [mb(a.runtime), mb(b.runtime)], storageHandles: [a.storages, b.storages] },
    levelled: judged ? ok && instanceBytes <= INSTANCE_MAX_BYTES : null,
  };
}
