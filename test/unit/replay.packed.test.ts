/**
 * The packed replay store (issue 24: `compare` and `plan` on a million keys in 512 MB): the key index, the state
 * rows, the admission queue with its spill, and the peak windows, each against a plain model; and the replay's
 * decisions and peaks against the definition they pack: every key's state folded through `decide` in a Map, never
 * dropped, and the most admitted in any span computed by brute force.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmState, type Decision, decide, peakSpanMs } from "../../src/algorithms/index.ts";
import { compareRules } from "../../src/replay/accumulate.ts";
import { AdmissionQueue, CHUNK, type ChunkSpill } from "../../src/replay/admission_queue.ts";
import { Replayer } from "../../src/replay/engine.ts";
import { KeyIndex } from "../../src/replay/key_index.ts";
import { PeakWindows } from "../../src/replay/peak.ts";
import { KeyedRows } from "../../src/replay/rows.ts";
import type { Peak, TraceLine } from "../../src/replay/run.ts";
import { loadRules } from "../../src/rules/load.ts";
import { needsObject } from "../../src/rules/outcome.ts";
import { seeded } from "../support/random.ts";
import { runs } from "../support/runs.ts";

// Rules that count by the response are replayed on records, checked without charging (replay.outcome.test.ts).
const SHIPPED = loadRules(["test/fixtures/shipped/shiplane.yaml"]).rules.filter((r) => !needsObject(r));

/** A spill that keeps chunks in a Map, counting what it was given. */
class MemorySpill implements ChunkSpill {
  readonly held = new Map<number, Uint8Array>();
  private next = 0;
  written = 0;

  write(bytes: Uint8Array): number {
    this.written++;
    this.held.set(this.next, bytes.slice());
    return this.next++;
  }

  read(handle: number, into: Uint8Array): void {
    into.set(this.held.get(handle)!);
    this.held.delete(handle);
  }
}

describe("KeyIndex", () => {
  it("numbers keys in order of first appearance, exactly, and gives their names back", () => {
    const keys = new KeyIndex();
    const names = ["a", "b", "", "ä", "鍵", "🔑", "a ", " a", "ab", "ba", "a".repeat(1000), "k1", "k10", "k01"];
    names.forEach((n, i) => {
      expect(keys.of(n)).toBe(i);
    });
    names.forEach((n, i) => {
      expect(keys.of(n)).toBe(i);
      expect(keys.find(n)).toBe(i);
      expect(keys.name(i)).toBe(n);
    });
    expect(keys.find("c")).toBe(-1);
    expect(keys.size).toBe(names.length);
  });

  it("stays exact past every growth of its arrays (200,000 keys differing in their last characters)", () => {
    const keys = new KeyIndex();
    const wrong: string[] = [];
    for (let i = 0; i < 200_000; i++) if (keys.of(`203.0.113.${i}`) !== i) wrong.push(`of ${i}`);
    for (let i = 0; i < 200_000; i += 7)
      if (keys.name(keys.find(`203.0.113.${i}`)) !== `203.0.113.${i}`) wrong.push(`${i}`);
    expect(wrong).toEqual([]);
    expect(keys.find("203.0.113.200000")).toBe(-1);
    // About 16 bytes of index and arrays per key besides its own bytes (with room to grow).
    expect(keys.byteSize).toBeLessThan(200_000 * 48);
  });
});

describe("KeyedRows", () => {
  it("finds, inserts and keeps only what it is told, as a Map does", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.nat({ max: 3000 }), fc.constant(-1)), { maxLength: 3000 }),
        fc.nat({ max: 9 }),
        (ops, keepMod) => {
          const rows = new KeyedRows(2, 4);
          const model = new Map<number, number>();
          let n = 0;
          for (const op of ops) {
            if (op === -1) {
              rows.keepOnly((s) => rows.get(s, 1) % 10 !== keepMod);
              for (const [k, v] of model) if (v % 10 === keepMod) model.delete(k);
              continue;
            }
            let slot = rows.find(op);
            expect(slot >= 0).toBe(model.has(op));
            if (slot < 0) slot = rows.insert(op);
            rows.set(slot, 0, op);
            rows.set(slot, 1, ++n);
            model.set(op, n);
          }
          expect(rows.size).toBe(model.size);
          for (const [k, v] of model) {
            const slot = rows.find(k);
            expect([rows.keyAt(slot), rows.get(slot, 0), rows.get(slot, 1)]).toEqual([k, k, v]);
          }
        },
      ),
      { numRuns: runs(100) },
    );
  });
});

describe("AdmissionQueue", () => {
  it("gives entries back first in, first out, through the spill when memory is full", () => {
    const spill = new MemorySpill();
    const queue = new AdmissionQueue(spill, 2);
    const model: [number, number, number][] = [];
    const wrong: number[] = [];
    const random = seeded(7);
    let t = 0;
    for (let step = 0; step < 7 * CHUNK; step++) {
      // Grow to several chunks, then drain to empty and grow again.
      const pushing = step < 3 * CHUNK || (step >= 5 * CHUNK && step < 6 * CHUNK) || random() < 0.3;
      if (pushing || model.length === 0) {
        t += Math.floor(random() * 5);
        const entry: [number, number, number] = [t, step % 70_001, 1 + (step % 3)];
        queue.push(...entry);
        model.push(entry);
      } else {
        const [t, key, cost] = model.shift()!;
        if (queue.headTime() !== t || queue.headKey() !== key || queue.headCost() !== cost) wrong.push(step);
        queue.shift();
      }
      if (queue.length !== model.length) wrong.push(step);
    }
    expect(wrong).toEqual([]);
    while (model.length > 0) {
      expect([queue.headTime(), queue.headKey(), queue.headCost()]).toEqual(model.shift());
      queue.shift();
    }
    expect(queue.length).toBe(0);
    expect(spill.written).toBeGreaterThan(0);
    expect(spill.held.size).toBe(0);
  });
});

/** The peak by its definition: after each admission of key k at t, what k admitted in (t − span, t]; first best. */
function bruteForcePeak(admissions: readonly TraceLine[], spanMs: number): Peak | null {
  let best: Peak | null = null;
  admissions.forEach(({ tMs, key }, i) => {
    let sum = 0;
    let startMs = tMs;
    for (let j = i; j >= 0; j--) {
      const a = admissions[j]!;
      if (a.tMs <= tMs - spanMs) break;
      if (a.key !== key) continue;
      sum += a.cost;
      startMs = a.tMs;
    }
    if (best === null || sum > best.cost) best = { cost: sum, key, startMs };
  });
  return best;
}

const admissionsArb = fc
  .array(
    fc.record({
      gapMs: fc.nat({ max: 400 }),
      key: fc.constantFrom("a", "b", "c", "d"),
      cost: fc.integer({ min: 1, max: 4 }),
    }),
    {
      maxLength: 300,
    },
  )
  .map((steps) => {
    let t = 0;
    return steps.map((s) => {
      t += s.gapMs;
      return { tMs: t, key: s.key, cost: s.cost };
    });
  });

describe("PeakWindows", () => {
  it("finds the most admitted in any span, its key and where it starts, as the definition does", () => {
    fc.assert(
      fc.property(admissionsArb, fc.constantFrom(1, 100, 1000, 5000), (admissions, spanMs) => {
        const keys = new KeyIndex();
        const windows = new PeakWindows(spanMs);
        for (const a of admissions) windows.add(keys.of(a.key), a.key, a.tMs, a.cost);
        expect(windows.finish()).toEqual(bruteForcePeak(admissions, spanMs));
      }),
      { numRuns: runs(200) },
    );
  });

  it("gives the same peak when its admissions go through the spill", () => {
    const random = seeded(11);
    const admissions: TraceLine[] = [];
    for (let i = 0, t = 0; i < 3 * CHUNK; i++) {
      t += Math.floor(random() * 3);
      admissions.push({ tMs: t, key: `k${Math.floor(random() * 50)}`, cost: 1 });
    }
    const spanMs = 20_000;
    const spill = new MemorySpill();
    const keys = new KeyIndex();
    const windows = new PeakWindows(spanMs, spill, 1);
    for (const a of admissions) windows.add(keys.of(a.key), a.key, a.tMs, a.cost);
    const got = windows.finish();
    expect(spill.written).toBeGreaterThan(0);
    // The definition, by a sliding window per key (the brute force is quadratic).
    let best: Peak | null = null;
    const perKey = new Map<string, TraceLine[]>();
    for (const a of admissions) {
      const list = perKey.get(a.key) ?? [];
      perKey.set(a.key, list);
      list.push(a);
      while (list[0]!.tMs <= a.tMs - spanMs) list.shift();
      if (best === null || list.length > best.cost) best = { cost: list.length, key: a.key, startMs: list[0]!.tMs };
    }
    expect(got).toEqual(best);
  });
});

describe("the packed replay decides as the plain fold of decide does", () => {
  /** Every rule alone over the trace, each key's state an object in a Map, never dropped. */
  function reference(trace: readonly TraceLine[]) {
    return SHIPPED.map((rule) => {
      const states = new Map<string, AlgorithmState>();
      return trace.map(({ tMs, key, cost }) => {
        const r = decide(rule, states.get(key) ?? null, cost, tMs);
        if (!r.ok) return null;
        states.set(key, r.state);
        return r.decision;
      });
    });
  }

  /** `lines` requests, a share `hot` of them among `keys` keys and the rest each from a key of its own. */
  function trace(lines: number, keys: number, hot: number, seed: number, costs = [1]): TraceLine[] {
    const random = seeded(seed);
    let t = 1_764_547_200_000; // 2025-12-01, a real epoch time: states hold large numbers
    return Array.from({ length: lines }, (_, i) => {
      t += Math.floor(random() * 40);
      return {
        tMs: t,
        key: random() < hot ? `k${Math.floor(random() * keys)}` : `once${i}`,
        cost: costs[Math.floor(random() * costs.length)]!,
      };
    });
  }

  const same = (a: Decision, b: Decision) =>
    a.allowed === b.allowed &&
    a.remaining === b.remaining &&
    a.resetAfterMs === b.resetAfterMs &&
    a.retryAfterMs === b.retryAfterMs &&
    a.delayMs === b.delayMs;

  it.each([
    ["few keys, busy (denials, delays, month windows)", trace(20_000, 7, 1, 1, [1, 1, 2, 5])],
    [
      "many keys: the sweeps of fresh states run (more than 65,536 live), busy keys keep theirs",
      trace(80_000, 40, 0.15, 2),
    ],
  ])("%s", (_, lines) => {
    const replayer = new Replayer(SHIPPED);
    const expected = reference(lines);
    const wrong: string[] = [];
    lines.forEach(({ tMs, key, cost }, j) => {
      replayer.keyed(tMs, key, cost).forEach((a, i) => {
        const want = expected[i]![j]!;
        if (a.decision === null || want === null ? a.decision !== want : !same(a.decision, want)) {
          wrong.push(`line ${j} rule ${SHIPPED[i]!.id}`);
        }
      });
    });
    expect(wrong.slice(0, 5)).toEqual([]);
    // ... and compare's peaks are the definition's.
    const head = lines.slice(0, 3000);
    const comparison = compareRules(SHIPPED, head, null);
    const decisions = reference(head);
    const peaks = SHIPPED.map((rule, i) => {
      const admitted = head.filter((_, j) => decisions[i]![j]?.allowed === true);
      return bruteForcePeak(admitted, peakSpanMs(rule));
    });
    expect(comparison.lanes.map((l) => l.stats.peak)).toEqual(peaks);
  });
});
