/**
 * The algorithm contract: every entry of the algorithm table (src/algorithms/index.ts) runs the same suite, on random
 * parameters and traces. A new algorithm is one file plus one table entry; test/support/contract.ts then asks for its
 * random parameters and its YAML, and this suite holds it to what every shell relies on: well-formed decisions, the
 * capacity, denials that change nothing, an honest retry_after_ms, exact refunds, freshAtMs, carry-over, the
 * blocked-cache bound, the chart level and, where there is one, the packed fast path, the row kernel and the field
 * layout.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmParams,
  type AlgorithmState,
  algorithmFor,
  capacityOf,
  carryOver,
  type Decision,
  decide,
  denialsCount,
  deniedUntilMs,
  fieldLayout,
  fingerprintOf,
  freshAtMs,
  headerWindowMs,
  levelAt,
  packedPath,
  projectParams,
  refund,
  rowPath,
} from "../../src/algorithms/index.ts";
import { PARAMS, stepsArb } from "../support/contract.ts";
import { runs } from "../support/runs.ts";

const T0 = 1_800_000_000_000;

function check(params: AlgorithmParams, state: AlgorithmState | null, cost: number, t: number) {
  const r = decide(params, state, cost, t);
  if (!r.ok) throw new Error(`unexpected ${r.error}`);
  return r;
}

/** The next decision of a cost-1 request: what "the same state" means to a client. */
const probe = (params: AlgorithmParams, state: AlgorithmState | null, t: number): Decision =>
  check(params, state, 1, t).decision;

function wellFormed(d: Decision, params: AlgorithmParams): void {
  for (const v of [d.remaining, d.resetAfterMs, d.delayMs]) {
    expect(Number.isSafeInteger(v)).toBe(true);
    expect(v).toBeGreaterThanOrEqual(0);
  }
  expect(d.remaining).toBeLessThanOrEqual(capacityOf(params));
  if (d.allowed) expect(d.retryAfterMs).toBeNull();
  else {
    expect(Number.isSafeInteger(d.retryAfterMs)).toBe(true);
    expect(d.retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(d.delayMs).toBe(0);
  }
}

describe.each(ALGORITHMS.map((name) => [name] as const))("%s meets the algorithm contract", (name) => {
  const paramsArb = PARAMS[name] as fc.Arbitrary<AlgorithmParams>;
  const withSteps = paramsArb.chain((p) => fc.tuple(fc.constant(p), stepsArb(p)));

  it("projects its own parameters (idempotent, extra rule fields dropped) and fingerprints by them", () => {
    fc.assert(
      fc.property(paramsArb, (params) => {
        const projected = projectParams({ ...params, id: "r", file: "x.yaml" } as unknown as AlgorithmParams);
        expect(projected).toEqual(params);
        expect(projectParams(projected)).toEqual(projected);
        expect(fingerprintOf({ ...params, mode: "shadow" } as unknown as AlgorithmParams)).toBe(fingerprintOf(params));
        expect(algorithmFor(params)).toBe(algorithmFor({ algorithm: name }));
      }),
      { numRuns: runs(50) },
    );
  });

  it("a fresh key admits `capacity` cost at once, and a cost above it is an error that changes nothing", () => {
    fc.assert(
      fc.property(paramsArb, (params) => {
        const capacity = capacityOf(params);
        expect(capacity).toBeGreaterThanOrEqual(1);
        const first = check(params, null, 1, T0).decision;
        expect(first).toMatchObject({ allowed: true, remaining: capacity - 1 });
        expect(check(params, null, capacity, T0).decision.allowed).toBe(true);
        expect(decide(params, null, capacity + 1, T0)).toEqual({ ok: false, error: "cost_exceeds_capacity" });
        expect(headerWindowMs(params, T0)).toBeGreaterThanOrEqual(1);
      }),
      { numRuns: runs(100) },
    );
  });

  it("on every step: well-formed decisions, denials change no state, retry_after_ms exact, refunds exact", () => {
    fc.assert(
      fc.property(withSteps, ([params, steps]) => {
        let state: AlgorithmState | null = null;
        let t = T0;
        for (const step of steps) {
          t += step.gapMs;
          const cost = Math.min(step.cost, capacityOf(params));
          const out = check(params, state, cost, t);
          const d = out.decision;
          wellFormed(d, params);
          if (!d.allowed) {
            // a denial keeps the very state, unless the algorithm says its denials count (then it changes it)
            if (denialsCount(params)) expect(out.state).not.toEqual(state);
            else expect(out.state).toBe(state);
            // retrying at exactly now + retry_after_ms succeeds; 1 ms earlier fails
            const retry = d.retryAfterMs as number;
            expect(check(params, out.state, cost, t + retry).decision.allowed).toBe(true);
            if (retry > 1) expect(check(params, out.state, cost, t + retry - 1).decision.allowed).toBe(false);
            // the blocked-cache bound: a smaller cost is denied wherever it says so
            for (let c = 1; c < cost; c++) {
              const until = deniedUntilMs(params, { cost, remaining: d.remaining, untilMs: t + retry }, c);
              if (until === null || until <= t) continue;
              expect(check(params, out.state, c, t).decision.allowed).toBe(false);
              expect(check(params, out.state, c, until - 1).decision.allowed).toBe(false);
            }
          } else if (step.refund) {
            // a refund right after the admission: the key answers as it did before it
            const back = refund(params, out.state, cost, t);
            expect(probe(params, back, t)).toEqual(probe(params, state, t));
          }
          state = out.state;
          // the chart's level is a finite number
          expect(Number.isFinite(levelAt(params, state, t))).toBe(true);
          // at freshAtMs the key is as good as fresh
          const freshAt = Math.max(t, freshAtMs(params, state));
          expect(probe(params, state, freshAt)).toEqual(probe(params, null, freshAt));
        }
      }),
      { numRuns: runs(150) },
    );
  });

  it("carry-over: the same parameters keep the very state; other parameters give a state it can decide on", () => {
    fc.assert(
      fc.property(withSteps, paramsArb, ([params, steps], other) => {
        let state: AlgorithmState | null = null;
        let t = T0;
        for (const step of steps) {
          t += step.gapMs;
          state = check(params, state, Math.min(step.cost, capacityOf(params)), t).state;
        }
        if (state === null) return;
        expect(carryOver(params, { ...params }, state, t)).toBe(state);
        const moved = carryOver(params, other, state, t);
        if (moved !== null) wellFormed(check(other, moved, 1, t).decision, other);
        // never more room under the new rule than a fresh key has
        const fresh = probe(other, null, t);
        if (moved !== null) expect(probe(other, moved, t).remaining).toBeLessThanOrEqual(fresh.remaining);
      }),
      { numRuns: runs(100) },
    );
  });

  const packed = packedPath({ algorithm: name } as AlgorithmParams);
  it.runIf(packed !== undefined)("its packed path decides as its check does, on the packed number", () => {
    fc.assert(
      fc.property(withSteps, ([params, steps]) => {
        const path = packedPath(params);
        if (path === undefined) throw new Error("no packed path");
        const a = path.rate(params).tokens;
        const stateParams = path.stateParams(params) as AlgorithmParams;
        const states = new Map<number, AlgorithmState>();
        const packedStates = new Map<number, number>();
        let t = T0;
        for (const step of steps) {
          t += step.gapMs;
          const cost = Math.min(step.cost, capacityOf(params));
          const expected = check(params, states.get(step.key) ?? null, cost, t);
          // the packed number is the TAT of the state the path keeps, from a base of T0
          const got = path.check(params, packedStates.get(step.key) ?? null, (t - T0) * a, cost);
          expect(got.decision).toEqual(expected.decision);
          const kept = check(stateParams, toState(packedStates.get(step.key) ?? null, a), cost, t);
          expect(kept.decision).toEqual(expected.decision);
          states.set(step.key, expected.state);
          if (got.stored !== null) packedStates.set(step.key, got.stored);
        }
      }),
      { numRuns: runs(150) },
    );
  });

  const rows = rowPath({ algorithm: name } as AlgorithmParams);
  it.runIf(rows !== undefined)("its row kernel decides as its check does, in place on a row, refunds too", () => {
    fc.assert(
      fc.property(withSteps, ([params, steps]) => {
        const kernel = rowPath(params)?.compile(params) ?? null;
        if (kernel === null) return; // too wide a row for these parameters: the shells keep objects
        const states = new Map<number, AlgorithmState>();
        // Rows of four keys side by side (offsets not 0), plus a guard field each side that must stay untouched.
        const table = new Float64Array(2 + 4 * kernel.width).fill(0);
        table[0] = -7;
        table[table.length - 1] = -7;
        const change = { changed: false };
        let t = T0;
        for (const step of steps) {
          t += step.gapMs;
          const cost = Math.min(step.cost, capacityOf(params));
          const before = states.get(step.key) ?? null;
          const expected = check(params, before, cost, t);
          const at = 1 + step.key * kernel.width;
          expect(kernel.check(table, at, before === null, cost, t, change)).toEqual(expected.decision);
          expect(change.changed).toBe(expected.state !== before);
          if (!change.changed && before === null) table.fill(0, at, at + kernel.width);
          else states.set(step.key, expected.state);
          if (expected.decision.allowed && step.refund) {
            states.set(step.key, refund(params, expected.state, cost, t));
            kernel.refund(table, at, cost, t);
          }
          if (states.has(step.key)) expect(kernel.read(table, at)).toEqual(states.get(step.key));
          expect([table[0], table[table.length - 1]]).toEqual([-7, -7]);
        }
      }),
      { numRuns: runs(150) },
    );
  });

  const layout = fieldLayout({ algorithm: name } as AlgorithmParams);
  it.runIf(layout !== undefined)("its field layout keeps every state it makes, field for field", () => {
    fc.assert(
      fc.property(withSteps, ([params, steps]) => {
        const fields = fieldLayout(params);
        if (fields === undefined) throw new Error("no field layout");
        let state: AlgorithmState | null = null;
        let t = T0;
        for (const step of steps) {
          t += step.gapMs;
          state = check(params, state, Math.min(step.cost, capacityOf(params)), t).state;
          if (state === null) continue;
          const row: number[] = [];
          fields.write(params, state, (i, value) => {
            row[i] = value;
          });
          expect(row.length).toBe(fields.count(params));
          expect(row.every(Number.isSafeInteger)).toBe(true);
          expect(fields.read(params, (i) => row[i]!)).toEqual(state);
        }
      }),
      { numRuns: runs(100) },
    );
  });
});

/** A packed TAT (units of 1/a ms from T0) as the GCRA-shaped state it stands for. */
function toState(stored: number | null, a: number): AlgorithmState | null {
  if (stored === null) return null;
  const whole = Math.floor(stored / a);
  return { tatMs: T0 + whole, tatFrac: stored - whole * a };
}
