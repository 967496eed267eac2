/**
 * One contract for every shell (throttled's storetest is the model): the Durable Object's record functions
 * (src/protocol/store.ts), the in-isolate store (src/isolate/local_store.ts) and the simulator (`sluice simulate`) run the same random
 * scenarios, for every algorithm in the table, and must answer exactly as the pure core does, decision for decision
 * (the local store while no key is evicted, with a clock that only moves forward, as an isolate's does).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  type Decision,
  decide,
  refund,
} from "../../src/algorithms/index.ts";
import { createLocalStore } from "../../src/isolate/local_store.ts";
import { checkRecord, type LimiterRecord, refundRecord } from "../../src/protocol/store.ts";
import { PARAMS, type Step, stepsArb, yamlOf } from "../support/contract.ts";
import { runCli } from "../support/io.ts";

const T0 = 1_800_000_000_000;

type Answer = { readonly ok: true; readonly decision: Decision } | { readonly ok: false; readonly error: string };

/** A shell under test: one state per key, decisions out, refunds in. */
interface Shell {
  check(key: string, cost: number, nowMs: number): Answer;
  refund(key: string, cost: number, admittedAtMs: number, nowMs: number): void;
}

/** The pure core with a Map of states: the reference every shell must equal. */
function core(params: AlgorithmParams): Shell {
  const states = new Map<string, AlgorithmState>();
  return {
    check(key, cost, nowMs) {
      const r = decide(params, states.get(key) ?? null, cost, nowMs);
      if (r.ok) states.set(key, r.state);
      return r;
    },
    refund(key, cost, admittedAtMs) {
      const s = states.get(key);
      if (s !== undefined) states.set(key, refund(params, s, cost, admittedAtMs));
    },
  };
}

/** The Durable Object's record functions, with the record kept as the object keeps it. */
function records(params: AlgorithmParams): Shell {
  const rule = { id: "r", params };
  const stored = new Map<string, LimiterRecord | null>();
  return {
    check(key, cost, nowMs) {
      const out = checkRecord(stored.get(key) ?? null, { rule, cost }, nowMs);
      stored.set(key, out.record === null ? null : structuredClone(out.record)); // what storage gives back
      return out.result.ok ? { ok: true, decision: out.result.decision } : out.result;
    },
    refund(key, cost, admittedAtMs, nowMs) {
      stored.set(key, refundRecord(stored.get(key) ?? null, { rule, cost, admittedAtMs }, nowMs).record);
    },
  };
}

function local(params: AlgorithmParams): Shell {
  const store = createLocalStore(params, 64);
  return {
    check: (key, cost, nowMs) => store.check(key, cost, nowMs),
    refund: (key, cost, admittedAtMs) => store.refund(key, cost, admittedAtMs),
  };
}

const decisionOf = (r: Answer) => (r.ok ? r.decision : r);

/** Run `steps` through the shells side by side; every answer must equal the core's. */
function agree(params: AlgorithmParams, steps: readonly Step[], shells: Record<string, Shell>, refunds: boolean) {
  const reference = core(params);
  let t = T0;
  for (const step of steps) {
    t += step.gapMs;
    const key = `k${step.key}`;
    const expected = reference.check(key, step.cost, t);
    for (const [name, shell] of Object.entries(shells))
      expect({ name, answer: decisionOf(shell.check(key, step.cost, t)) }).toEqual({
        name,
        answer: decisionOf(expected),
      });
    if (refunds && step.refund && expected.ok && expected.decision.allowed) {
      reference.refund(key, step.cost, t, t);
      for (const shell of Object.values(shells)) shell.refund(key, step.cost, t, t);
    }
  }
}

describe.each(ALGORITHMS.map((name) => [name] as const))("every shell answers as the core: %s", (name) => {
  const withSteps = (PARAMS[name] as fc.Arbitrary<AlgorithmParams>).chain((p) => fc.tuple(fc.constant(p), stepsArb(p)));

  it("Durable Object records and the local store, with refunds", () => {
    fc.assert(
      fc.property(withSteps, ([params, steps]) => {
        agree(params, steps, { records: records(params), local: local(params) }, true);
      }),
      { numRuns: 150 },
    );
  });

  it("the simulator, line for line", async () => {
    const dir = mkdtempSync(join(tmpdir(), `sluice-shells-${name}-`));
    let n = 0;
    await fc.assert(
      fc.asyncProperty(withSteps, async ([params, steps]) => {
        const file = join(dir, `rules-${n++}.yaml`);
        writeFileSync(file, `- id: r\n  match: { identity: ip }\n${yamlOf(params)}\n`);
        const reference = core(params);
        let t = T0;
        const lines: string[] = [];
        const expected: unknown[] = [];
        for (const step of steps) {
          t += step.gapMs;
          lines.push(`${t},k${step.key},${step.cost}`);
          const r = reference.check(`k${step.key}`, step.cost, t);
          const head = { t_ms: t, key: `k${step.key}`, cost: step.cost };
          if (!r.ok) {
            expect(step.cost).toBeGreaterThan(capacityOf(params));
            expected.push({ ...head, error: r.error });
            continue;
          }
          const d = r.decision;
          expected.push({
            ...head,
            allowed: d.allowed,
            remaining: d.remaining,
            reset_after_ms: d.resetAfterMs,
            retry_after_ms: d.retryAfterMs,
            delay_ms: d.delayMs,
          });
        }
        const out = await runCli(["simulate", "--rules", file, "--rule", "r"], `${lines.join("\n")}\n`);
        expect(out.stderr).toBe("");
        expect(
          out.stdout
            .trimEnd()
            .split("\n")
            .map((l) => JSON.parse(l)),
        ).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });
});
