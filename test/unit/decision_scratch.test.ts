/**
 * The fast paths write each decision into a caller's scratch (`PackedPath.into`, `RowKernel.into`) and make no object
 * per decision. Where the API promises a decision object to keep (`decide`, an algorithm's `check`, a kernel's and a
 * packed path's `check`, the local store that the gateway answers from), that object must be the caller's own: these
 * tests keep two decisions in a row, the second different from the first (one unit fewer remaining, or a denial),
 * and fail if the first one changed when the second was made, i.e. if a scratch leaked out aliased. The replay's
 * answer, by contrast, is documented as read-at-once; the last test holds it to the pure fold for two rules side by
 * side, each with its own scratch.
 */
import { describe, expect, it } from "vitest";
import {
  type AlgorithmParams,
  capacityOf,
  type Decision,
  decide,
  packedPath,
  rowPath,
} from "../../src/algorithms/index.ts";
import { windowIndex } from "../../src/algorithms/windows.ts";
import { createLocalStore } from "../../src/isolate/local_store.ts";
import { RuleStates } from "../../src/replay/states.ts";
import { concurrencyP, fixedWindow, KERNEL_CASES } from "../support/params.ts";

const T0 = 1_764_547_200_000; // 2025-12-01
const CASES: readonly AlgorithmParams[] = [...KERNEL_CASES, fixedWindow(3, "month"), concurrencyP(2)];

/** Decisions of cost 1 at one instant until the first denial: each differs from the one before it. */
function untilDenied(next: () => Decision): Decision[] {
  const kept: Decision[] = [];
  for (let i = 0; i < 5000; i++) {
    const d = next();
    kept.push(d);
    if (!d.allowed) return kept;
  }
  throw new Error("never denied");
}

/** Each kept decision is its own object, and still holds what it held when it was made. */
function expectKept(kept: readonly Decision[], copies: readonly Decision[]): void {
  expect(new Set(kept).size).toBe(kept.length);
  expect(kept).toEqual(copies);
  // the sequence really changes (else aliasing could not show): admissions, then a denial
  expect(kept[0]!.allowed).toBe(true);
  expect(kept.at(-1)!.allowed).toBe(false);
}

function run(next: () => Decision): void {
  const copies: Decision[] = [];
  const kept = untilDenied(() => {
    const d = next();
    copies.push({ ...d });
    return d;
  });
  expectKept(kept, copies);
}

describe("a decision the API hands out is the caller's own (no scratch aliased)", () => {
  it.each(CASES.map((p) => [JSON.stringify(p), p] as const))("decide: %s", (_n, params) => {
    let state = null as Parameters<typeof decide>[1];
    run(() => {
      const r = decide(params, state, 1, T0);
      if (!r.ok) throw new Error("a valid cost");
      state = r.state;
      return r.decision;
    });
  });

  it.each(CASES.map((p) => [JSON.stringify(p), p] as const))("the local store: %s", (_n, params) => {
    const store = createLocalStore(params, 16);
    run(() => {
      const r = store.check("k", 1, T0);
      if (!r.ok) throw new Error("a valid cost");
      return r.decision;
    });
  });

  it.each(KERNEL_CASES.map((p) => [JSON.stringify(p), p] as const))("a row kernel's check: %s", (_n, params) => {
    const kernel = rowPath(params)!.compile(params)!;
    const row = new Float64Array(kernel.width);
    const change = { changed: false };
    let fresh = true;
    run(() => {
      const d = kernel.check(row, 0, fresh, 1, T0, change);
      if (change.changed) fresh = false;
      return d;
    });
  });

  it.each(KERNEL_CASES.filter((p) => packedPath(p) !== undefined).map((p) => [JSON.stringify(p), p] as const))(
    "a packed path's check: %s",
    (_n, params) => {
      const path = packedPath(params)!;
      let stored: number | null = null;
      run(() => {
        const r = path.check(params, stored, 0, 1);
        if (r.stored !== null) stored = r.stored;
        return r.decision;
      });
    },
  );
});

describe("the replay's decisions: a scratch per rule, read at once", () => {
  it("two rules decided one after the other each keep their own answer until their next decision", () => {
    const a = fixedWindow(2, 1000);
    const b = KERNEL_CASES[0]!; // gcra 10/s, burst 20
    const states = [new RuleStates(a, () => a), new RuleStates(b, () => b)];
    const folded = [a, b].map((p) => {
      let state = null as Parameters<typeof decide>[1];
      return () => {
        const r = decide(p, state, 1, T0);
        if (!r.ok) throw new Error("a valid cost");
        state = r.state;
        return r.decision;
      };
    });
    for (let i = 0; i < 4; i++) {
      const da = states[0]!.decide(7, 1, T0, T0)!;
      const db = states[1]!.decide(7, 1, T0, T0)!;
      // rule b's decision did not overwrite rule a's
      expect({ ...da }).toEqual(folded[0]!());
      expect({ ...db }).toEqual(folded[1]!());
      expect(da).not.toBe(db);
    }
    expect(capacityOf(a)).toBe(2);
  });
});

describe("month windows without a Date per decision", () => {
  it("windowIndex's month is Date's UTC year and month, at every month's edges over five centuries", () => {
    const month = { kind: "month" } as const;
    const wrong: number[] = [];
    for (let y = 1800; y < 2300; y++) {
      for (let m = 0; m < 12; m++) {
        const start = Date.UTC(y, m, 1);
        for (const t of [start - 1, start, start + 1, start + 86_399_999]) {
          const d = new Date(t);
          if (windowIndex(month, t) !== (d.getUTCFullYear() - 1970) * 12 + d.getUTCMonth()) wrong.push(t);
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});
