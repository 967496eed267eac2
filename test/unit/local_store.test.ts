/** The packed local store: same decisions as the pure core, bounded, LRU eviction, exact across rebases. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, decide } from "../../src/algorithms/index.ts";
import { CompactTable } from "../../src/isolate/compact_table.ts";
import { createLocalStore } from "../../src/isolate/local_store.ts";
import { gcraP, KERNEL_CASES, slidingCounter, tokenBucket } from "../support/params.ts";

const ALL = KERNEL_CASES;

describe("local store decides exactly as the pure core (while no key is evicted)", () => {
  it.each(ALL.map((p) => [JSON.stringify(p), p] as const))("%s", (_n, params) => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 9 }), fc.integer({ min: 1, max: 3 })),
          {
            maxLength: 200,
          },
        ),
        (steps) => {
          const store = createLocalStore(params, 10);
          const states = new Map<string, AlgorithmState>();
          let t = 1_700_000_000_000;
          for (const [gap, k, cost] of steps) {
            t += gap;
            const key = `key-${k}`;
            const expected = decide(params, states.get(key) ?? null, cost, t);
            const got = store.check(key, cost, t);
            expect(got.ok && got.decision).toEqual(expected.ok && expected.decision);
            if (expected.ok) states.set(key, expected.state);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it("refund gives back the charge", () => {
    const store = createLocalStore(tokenBucket(10, 1000, 2), 10);
    expect(store.check("a", 2, 0)).toMatchObject({ ok: true, decision: { allowed: true, remaining: 0 } });
    store.refund("a", 2, 0);
    expect(store.check("a", 2, 0)).toMatchObject({ ok: true, decision: { allowed: true, remaining: 0 } });
  });

  it("cost above capacity is an error and stores nothing", () => {
    const store = createLocalStore(gcraP(10, 1000, 2), 10);
    expect(store.check("a", 3, 0)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
    expect(store.size).toBe(0);
  });

  it("stays exact when stored times are rebased (1000000/s over days)", () => {
    const params = gcraP(1_000_000, 1000, 1_000_000);
    const store = createLocalStore(params, 4);
    let state: AlgorithmState | null = null;
    let t = 0;
    for (let i = 0; i < 200; i++) {
      t += i % 10 === 0 ? 86_400_000 * 30 : 1; // a month now and then forces a rebase (2^51 / 1000 per ms)
      const cost = 1 + ((i * 7919) % 999_999);
      const expected = decide(params, state, cost, t);
      const got = store.check("k", cost, t);
      expect(got.ok && got.decision).toEqual(expected.ok && expected.decision);
      if (expected.ok) state = expected.state;
    }
  });
});

describe("bounded with least-recently-used eviction", () => {
  it.each(ALL.map((p) => [p.algorithm, p] as const))(
    "%s: never more than max_keys, and the LRU key goes first",
    (_n, params) => {
      const store = createLocalStore(params, 3);
      store.check("a", 1, 0);
      store.check("b", 1, 0);
      store.check("c", 1, 0);
      store.check("a", 1, 1); // a is now the most recent: b is the least
      store.check("d", 1, 2);
      expect(store.size).toBe(3);
      expect(store.evictions).toBe(1);
      expect(store.peek("b")).toBeNull();
      expect(store.peek("a")).not.toBeNull();
      expect(store.peek("c")).not.toBeNull();
      expect(store.peek("d")).not.toBeNull();
    },
  );
});

describe("CompactTable", () => {
  it("behaves as a map with LRU eviction, under random inserts, lookups and deletes", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("insert", "find", "delete"), fc.integer({ min: 0, max: 60 })), {
          maxLength: 400,
        }),
        fc.integer({ min: 1, max: 40 }),
        (ops, maxKeys) => {
          const table = new CompactTable(1, maxKeys, 4);
          const model: number[] = []; // keys, least recently used first
          for (const [op, k] of ops) {
            const hi = k * 2654435761;
            const lo = (k * 40503) >>> 0;
            const at = model.indexOf(k);
            if (op === "insert") {
              const slot = table.insert(hi >>> 0, lo);
              table.set(slot, 0, k);
              if (at >= 0) model.splice(at, 1);
              else if (model.length >= maxKeys) model.shift();
              model.push(k);
            } else if (op === "find") {
              const slot = table.find(hi >>> 0, lo);
              expect(slot >= 0).toBe(at >= 0);
              if (slot >= 0) {
                expect(table.get(slot, 0)).toBe(k);
                model.splice(at, 1);
                model.push(k);
              }
            } else {
              expect(table.delete(hi >>> 0, lo)).toBe(at >= 0);
              if (at >= 0) model.splice(at, 1);
            }
            expect(table.size).toBe(model.length);
          }
          expect([...table.lruOrder()].map(([, , slot]) => table.get(slot, 0))).toEqual(model);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("holds a one-field state in 30 bytes per key when full", () => {
    const table = new CompactTable(1, 100_000, 100_000);
    for (let k = 0; k < 100_000; k++) table.insert(k, (k * 2654435761) >>> 0);
    expect(table.size).toBe(100_000);
    expect(table.bytes / table.size).toBeLessThanOrEqual(30.01);
  });

  it.each([1, 2, 4, 6, 10, 60])(
    "a sliding_counter with buckets %i keeps k + 2 fields: 8k + 38 bytes per key when full",
    (k) => {
      const store = createLocalStore(slidingCounter(100, 60_000, false, k), 4096);
      for (let i = 0; i < 4096; i++) store.check(`key-${i}`, 1, 0);
      expect(store.size).toBe(4096);
      // 8 (hash) + 8 × (k + 2) (window, prev, k − 1 middle counts, curr) + 8 (LRU links) + 6 (index)
      expect(store.bytes / store.size).toBeLessThanOrEqual(8 * k + 38 + 0.01);
      expect(store.bytes / store.size).toBeGreaterThanOrEqual(8 * k + 38 - 0.01);
    },
  );
});
