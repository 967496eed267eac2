/**
 * Concurrency's slot row kernel (src/algorithms/concurrency_rows.ts), what the replay decides a concurrency rule on,
 * held to the object algorithm (src/algorithms/concurrency.ts) step for step: on random runs of takes, releases,
 * renewals, refunds and time (leases ending, the clock stepping back, idle gaps past `slot_ttl`, ids released twice,
 * stale and never-taken ids), every decision, the slot each admission took, the cost held at any time, the fresh
 * time and the held slots themselves are the same. Also the replay's shell (src/replay/states.ts) on the same runs, for
 * a limit kept on a row and one above `MAX_ROW_SLOTS` (kept as objects).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ConcurrencyState } from "../../src/algorithms/concurrency.ts";
import { MAX_ROW_SLOTS, slotKernel } from "../../src/algorithms/concurrency_rows.ts";
import { type AlgorithmState, decide, freshAtMs, refund, slotPolicy } from "../../src/algorithms/index.ts";
import { decisionOf, decisionScratch } from "../../src/algorithms/scratch.ts";
import { RuleStates } from "../../src/replay/states.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { concurrencyP } from "../support/params.ts";

const T0 = 1_800_000_000_000;

type Op =
  | { readonly kind: "check"; readonly cost: number }
  | { readonly kind: "release"; readonly pick: number; readonly stale: boolean }
  | { readonly kind: "renew"; readonly pick: number; readonly stale: boolean }
  | { readonly kind: "refund"; readonly pick: number }
  | { readonly kind: "held"; readonly offsetMs: number };

interface Step {
  readonly gapMs: number;
  readonly key: number;
  readonly op: Op;
}

function steps(limit: number, slotTtlMs: number): fc.Arbitrary<Step[]> {
  const pick = fc.integer({ min: 0, max: 1000 });
  const op: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({ kind: fc.constant("check" as const), cost: fc.integer({ min: 1, max: limit }) }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), pick, stale: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("renew" as const), pick, stale: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("refund" as const), pick }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("held" as const),
        offsetMs: fc.integer({ min: -2 * slotTtlMs, max: 2 * slotTtlMs }),
      }),
    },
  );
  const step = fc.record({
    gapMs: fc.oneof(
      fc.integer({ min: 0, max: Math.ceil(slotTtlMs / 6) }),
      fc.constant(0),
      fc.integer({ min: -slotTtlMs, max: 0 }), // the clock steps back
      fc.integer({ min: slotTtlMs - 2, max: slotTtlMs + 2 }), // a lease ends just then
      fc.integer({ min: 0, max: 3 * slotTtlMs }), // idle past every lease
    ),
    key: fc.integer({ min: 0, max: 2 }),
    op,
  });
  return fc.array(step, { maxLength: 120 });
}

const CASES: AlgorithmParams[] = [
  concurrencyP(1, 1000),
  concurrencyP(3, 2000),
  concurrencyP(3, 600_000),
  concurrencyP(5, 1000),
  concurrencyP(MAX_ROW_SLOTS, 1500),
];

/** What both sides remember to name a slot by: ids taken, and admissions (cost, time) to refund. */
interface Seen {
  readonly ids: number[];
  readonly admissions: { readonly cost: number; readonly atMs: number }[];
}

function idFor(seen: Seen, pick: number, stale: boolean, t: number): number {
  if (stale || seen.ids.length === 0) return [0, t * 1000, t * 1000 + 1, (t - 1) * 1000, 7][pick % 5]!;
  return seen.ids[pick % seen.ids.length]!;
}

describe("concurrency slot row kernel = object algorithm", () => {
  it("has no row above MAX_ROW_SLOTS", () => {
    expect(slotKernel({ limit: MAX_ROW_SLOTS + 1, slotTtlMs: 1000 })).toBeNull();
    expect(slotKernel({ limit: MAX_ROW_SLOTS, slotTtlMs: 1000 })).not.toBeNull();
  });

  it.each(CASES.map((p) => [JSON.stringify(p), p] as const))("%s", (_n, params) => {
    const policy = slotPolicy(params)!;
    const kernel = policy.rows!.compile(params)!;
    const { limit, slotTtlMs } = params as unknown as { limit: number; slotTtlMs: number };
    fc.assert(
      fc.property(steps(limit, slotTtlMs), (run) => {
        // Three keys' rows side by side in one array, with a guard field between them that must stay untouched.
        const stride = kernel.width + 1;
        const table = new Float64Array(3 * stride).fill(0);
        for (let k = 0; k < 3; k++) table[k * stride + kernel.width] = -42;
        const fresh = [true, true, true];
        const objects: (AlgorithmState | null)[] = [null, null, null];
        const seen: Seen[] = [0, 1, 2].map(() => ({ ids: [], admissions: [] }));
        const scratch = decisionScratch();
        const change = { changed: false };
        let t = T0;
        for (const { gapMs, key, op } of run) {
          t += gapMs;
          const at = key * stride;
          const before = objects[key]!;
          switch (op.kind) {
            case "check": {
              const expected = decide(params, before, op.cost, t);
              if (!expected.ok) throw new Error(expected.error);
              kernel.into(table, at, fresh[key]!, op.cost, t, scratch, change);
              expect(decisionOf(scratch)).toEqual(expected.decision);
              expect(change.changed).toBe(expected.state !== before);
              objects[key] = expected.state;
              if (change.changed) fresh[key] = false;
              if (expected.decision.allowed) {
                expect(kernel.taken(table, at)).toBe(policy.taken(expected.state));
                seen[key]!.ids.push(policy.taken(expected.state));
                const clock = (expected.state as ConcurrencyState).slots.at(-1)!.atMs;
                seen[key]!.admissions.push({ cost: op.cost, atMs: clock });
              }
              break;
            }
            case "release":
            case "renew": {
              if (before === null) break;
              const id = idFor(seen[key]!, op.pick, op.stale, t);
              const change = op.kind === "release" ? policy.release : policy.renew;
              objects[key] = change(params, before, id, t);
              kernel[op.kind](table, at, id, t);
              break;
            }
            case "refund": {
              const { admissions } = seen[key]!;
              if (before === null || admissions.length === 0) break;
              const a = admissions[op.pick % admissions.length]!;
              objects[key] = refund(params, before, a.cost, a.atMs);
              kernel.refund(table, at, a.cost, a.atMs);
              break;
            }
            case "held":
              expect(kernel.heldAt(table, at, t + op.offsetMs)).toBe(policy.heldAt(params, before, t + op.offsetMs));
              break;
          }
          const object = objects[key]!;
          if (object === null) continue;
          const row = kernel.read(table, at);
          expect(row).toEqual(object);
          expect(freshAtMs(params, row)).toBe(freshAtMs(params, object));
          expect(kernel.heldAt(table, at, t)).toBe(policy.heldAt(params, object, t));
        }
        for (let k = 0; k < 3; k++) expect(table[k * stride + kernel.width]).toBe(-42);
      }),
      { numRuns: 300 },
    );
  });
});

describe("the replay's states = object algorithm, on a row and above MAX_ROW_SLOTS", () => {
  it.each([concurrencyP(3, 2000), concurrencyP(MAX_ROW_SLOTS + 1, 1000)].map((p) => [JSON.stringify(p), p] as const))(
    "%s",
    (_n, params) => {
      const policy = slotPolicy(params)!;
      const { limit, slotTtlMs } = params as unknown as { limit: number; slotTtlMs: number };
      fc.assert(
        fc.property(steps(Math.min(limit, 8), slotTtlMs), (run) => {
          const states = new RuleStates(params, () => params);
          const objects: (AlgorithmState | null)[] = [null, null, null];
          const seen: Seen[] = [0, 1, 2].map(() => ({ ids: [], admissions: [] }));
          let t = T0;
          for (const { gapMs, key, op } of run) {
            t += gapMs;
            const before = objects[key]!;
            if (op.kind === "check") {
              const expected = decide(params, before, op.cost, t);
              if (!expected.ok) throw new Error(expected.error);
              const got = states.decide(key, op.cost, t, t);
              expect(got === null ? null : decisionOf(got)).toEqual(expected.decision);
              objects[key] = expected.state;
              if (expected.decision.allowed) {
                expect(states.lastSlot(key)).toBe(policy.taken(expected.state));
                seen[key]!.ids.push(policy.taken(expected.state));
                const clock = (expected.state as ConcurrencyState).slots.at(-1)!.atMs;
                seen[key]!.admissions.push({ cost: op.cost, atMs: clock });
              }
            } else if ((op.kind === "release" || op.kind === "renew") && before !== null) {
              const id = idFor(seen[key]!, op.pick, op.stale, t);
              if (op.kind === "release") {
                objects[key] = policy.release(params, before, id, t);
                states.release(key, id, t);
              } else {
                objects[key] = policy.renew(params, before, id, t);
                states.renew(key, id, t);
              }
            } else if (op.kind === "refund" && before !== null && seen[key]!.admissions.length > 0) {
              const a = seen[key]!.admissions[op.pick % seen[key]!.admissions.length]!;
              objects[key] = refund(params, before, a.cost, a.atMs);
              states.refund(key, a.cost, a.atMs);
            }
            expect(states.get(key)).toEqual(objects[key]);
          }
          expect(states.packedBytes > 0).toBe(limit <= MAX_ROW_SLOTS);
        }),
        { numRuns: 200 },
      );
    },
  );
});
