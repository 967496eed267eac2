/**
 * The concurrency algorithm (src/algorithms/concurrency.ts) and its release (src/protocol/slots.ts): slots taken and
 * given back by id, leases that end, ids never reused, and the bound "never more than `limit` held" on random runs of
 * takes, releases and time.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ConcurrencyState } from "../../src/algorithms/concurrency.ts";
import { type AlgorithmState, decide, freshAtMs, refund, slotPolicy } from "../../src/algorithms/index.ts";
import { releaseRecord } from "../../src/protocol/slots.ts";
import { checkRecord, type LimiterRecord, type LimiterRule } from "../../src/protocol/store.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { concurrencyP } from "../support/params.ts";
import { runs } from "../support/runs.ts";

const T0 = 1_800_000_000_000;
const P3 = concurrencyP(3, 60_000);
const policy = slotPolicy(P3)!;

function take(state: AlgorithmState | null, t: number, cost = 1) {
  const r = decide(P3, state, cost, t);
  if (!r.ok) throw new Error(r.error);
  return r;
}

describe("concurrency: decisions", () => {
  it("admits `limit` at once; the next waits for the oldest lease (no release in between)", () => {
    let state: AlgorithmState | null = null;
    const remaining: number[] = [];
    for (const t of [T0, T0 + 10, T0 + 20]) {
      const r = take(state, t);
      expect(r.decision.allowed).toBe(true);
      remaining.push(r.decision.remaining);
      state = r.state;
    }
    expect(remaining).toEqual([2, 1, 0]);
    const denied = take(state, T0 + 30);
    expect(denied.decision).toEqual({
      allowed: false,
      remaining: 0,
      resetAfterMs: 60_000 - 10,
      retryAfterMs: 60_000 - 30,
      delayMs: 0,
    });
    expect(denied.state).toBe(state);
    expect(take(state, T0 + 60_000 - 1).decision.allowed).toBe(false);
    expect(take(state, T0 + 60_000).decision.allowed).toBe(true);
  });

  it("a release frees its slot at once, and only its own; a second release of it changes nothing", () => {
    let state = take(null, T0).state;
    const first = policy.taken(state);
    state = take(state, T0).state;
    const second = policy.taken(state);
    state = take(state, T0).state;
    expect(new Set([first, second, policy.taken(state)]).size).toBe(3);
    expect(take(state, T0 + 1).decision.allowed).toBe(false);
    const back = policy.release(P3, state, first, T0 + 1);
    expect(policy.heldAt(P3, back, T0 + 1)).toBe(2);
    expect(policy.release(P3, back, first, T0 + 1)).toBe(back);
    const again = take(back, T0 + 2);
    expect(again.decision).toMatchObject({ allowed: true, remaining: 0 });
    // the slot just taken is not the released one: a late duplicate release of `first` frees nothing
    expect(policy.release(P3, again.state, first, T0 + 3)).toBe(again.state);
  });

  it("a release after its lease ended frees nobody else's slot", () => {
    const a = take(null, T0);
    const idA = policy.taken(a.state);
    // a's lease ends at T0 + 60 s; three new slots fill the key
    let state: AlgorithmState = a.state;
    for (const t of [T0 + 60_000, T0 + 60_001, T0 + 60_002]) state = take(state, t).state;
    expect(policy.heldAt(P3, state, T0 + 60_003)).toBe(3);
    const late = policy.release(P3, state, idA, T0 + 60_003);
    expect(policy.heldAt(P3, late, T0 + 60_003)).toBe(3);
  });

  it("a renewal starts a held slot's lease again; an ended lease or an unknown id is not revived", () => {
    let state: AlgorithmState = take(null, T0).state;
    const idA = policy.taken(state);
    state = take(state, T0 + 10).state;
    const renewed = policy.renew(P3, state, idA, T0 + 30_000) as ConcurrencyState;
    // a's lease now ends at T0 + 90 s, after b's: it moves to the end, in lease order
    expect(renewed.slots.map((s) => [s.id, s.atMs])).toEqual([
      [policy.taken(state), T0 + 10],
      [idA, T0 + 30_000],
    ]);
    expect(policy.heldAt(P3, renewed, T0 + 60_010)).toBe(1);
    expect(policy.heldAt(P3, renewed, T0 + 89_999)).toBe(1);
    expect(policy.heldAt(P3, renewed, T0 + 90_000)).toBe(0);
    expect(policy.renew(P3, renewed, 42, T0 + 30_001)).toBe(renewed);
    // past its lease, a renewal comes too late: the slot stays ended, its capacity free for others
    expect(policy.heldAt(P3, policy.renew(P3, renewed, idA, T0 + 90_000), T0 + 90_000)).toBe(0);
  });

  it("ids are at least now × 1000: a record dropped when fresh never hands out an old id again", () => {
    const a = take(null, T0);
    const id = policy.taken(a.state);
    expect(id).toBe(T0 * 1000);
    const back = policy.release(P3, a.state, id, T0);
    // fresh only after the ms of the last id: a new key made then starts above it
    const freshAt = freshAtMs(P3, back);
    expect(freshAt).toBe(T0 + 1);
    expect(policy.taken(take(null, freshAt).state)).toBeGreaterThan(id);
  });

  it("a refund gives back the slot the request just took", () => {
    const a = take(null, T0, 2);
    const back = refund(P3, a.state, 2, T0);
    expect(policy.heldAt(P3, back, T0)).toBe(0);
    expect(take(back, T0, 3).decision.allowed).toBe(true);
  });

  it("costs hold that many units of one slot", () => {
    const a = take(null, T0, 2);
    expect(a.decision.remaining).toBe(1);
    expect(take(a.state, T0, 2).decision).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 60_000 });
  });
});

describe("concurrency: never more than `limit` held, on random takes, releases and time", () => {
  type Op =
    | { readonly kind: "take"; cost: number }
    | { readonly kind: "release"; pick: number }
    | { kind: "wait"; ms: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant("take" as const), cost: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 3000 }) }),
  );
  it("a model of held slots (id, taken at, cost) agrees with every decision", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1000, max: 5000 }),
        fc.array(opArb, { maxLength: 80 }),
        (limit, ttl, ops) => {
          const params = concurrencyP(limit, ttl);
          const slots = slotPolicy(params)!;
          let state: AlgorithmState | null = null;
          let t = T0;
          // the model: what a client believes it holds, by id
          let model: { id: number; atMs: number; cost: number }[] = [];
          const ids = new Set<number>();
          for (const op of ops) {
            model = model.filter((s) => t - s.atMs < ttl);
            const heldModel = model.reduce((n, s) => n + s.cost, 0);
            expect(slots.heldAt(params, state, t)).toBe(heldModel);
            expect(heldModel).toBeLessThanOrEqual(limit);
            if (op.kind === "wait") t += op.ms;
            else if (op.kind === "take") {
              const cost = Math.min(op.cost, limit);
              const r = decide(params, state, cost, t);
              if (!r.ok) throw new Error(r.error);
              expect(r.decision.allowed).toBe(heldModel + cost <= limit);
              if (r.decision.allowed) {
                const id = slots.taken(r.state);
                expect(ids.has(id)).toBe(false);
                ids.add(id);
                model.push({ id, atMs: t, cost });
              }
              state = r.state;
            } else if (state !== null && ids.size > 0) {
              const all = [...ids];
              const id = all[op.pick % all.length]!;
              state = slots.release(params, state, id, t);
              model = model.filter((s) => s.id !== id);
            }
          }
        },
      ),
      { numRuns: runs(200) },
    );
  });
});

describe("releaseRecord: the object's side", () => {
  const rule: LimiterRule = { id: "exports", params: P3 };
  it("gives back the slots named, idempotently; unknown ids and other algorithms change nothing", () => {
    let record: LimiterRecord | null = null;
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const out = checkRecord(record, { rule, cost: 1 }, T0);
      if (!out.result.ok) throw new Error("not ok");
      ids.push(out.result.slot!);
      record = out.record;
    }
    const once = releaseRecord(record, { rule, slots: [ids[1]!, 12345] }, T0 + 5);
    expect(once.result).toEqual({ released: 1, held: 2, atMs: T0 + 5 });
    const twice = releaseRecord(once.record, { rule, slots: [ids[1]!] }, T0 + 6);
    expect(twice.result.released).toBe(0);
    expect(twice.record).toBe(once.record);
    expect((once.record!.state as ConcurrencyState).next).toBe((record!.state as ConcurrencyState).next);
    expect(releaseRecord(null, { rule, slots: [1] }, T0).result.released).toBe(0);
  });

  it("a check of another algorithm returns no slot", () => {
    const other: LimiterRule = { id: "x", params: { algorithm: "sliding_log", limit: 2, windowMs: 1000 } };
    const out = checkRecord(null, { rule: other, cost: 1 }, T0);
    expect(out.result.ok && out.result.slot).toBeUndefined();
  });
});

describe("rule files", () => {
  const parse = (body: string) => parseRules(`- id: exports\n  match: { identity: api_key }\n${body}`, "r.yaml");
  it("reads limit and slot_ttl (default 60s)", () => {
    expect(parse("  algorithm: concurrency\n  limit: 3\n").rules[0]).toMatchObject(concurrencyP(3, 60_000));
    expect(parse("  algorithm: concurrency\n  limit: 3\n  slot_ttl: 5min\n").rules[0]).toMatchObject(
      concurrencyP(3, 300_000),
    );
  });
  it("says what is wrong, with the file, rule and field", () => {
    expect(parse("  algorithm: concurrency\n  limit: 3\n  slot_ttl: 500ms\n").errors).toEqual([
      "r.yaml: exports.slot_ttl: must be at least 1s (a slot's lease must outlive its request), got 500ms",
    ]);
    expect(parse("  algorithm: concurrency\n  limit: 3\n  slot_ttl: 60\n").errors[0]).toMatch(
      /^r\.yaml: exports\.slot_ttl: must be a duration like 250ms/,
    );
    expect(parse("  algorithm: concurrency\n  limit: 20000\n").errors).toEqual([
      "r.yaml: exports.limit: must be at most 10000 for concurrency (each slot is kept), got 20000",
    ]);
    expect(parse("  algorithm: concurrency\n  limit: 3\n  scope: local\n").errors).toEqual([
      "r.yaml: exports.scope: must be global for concurrency: its slots are counted by the key's object",
    ]);
    expect(parse("  algorithm: concurrency\n  limit: 3\n  window: 1s\n").errors[0]).toMatch(
      /exports\.window: not a parameter of concurrency/,
    );
    expect(parse("  algorithm: concurrency\n  limit: 3\n  lease: { ttl: 1s }\n").errors.length).toBe(1);
  });
});
