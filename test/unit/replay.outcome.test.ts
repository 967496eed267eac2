/**
 * The replay engine on rules that count by the response and ban (src/replay/outcomes.ts): `sluice simulate` on a
 * `t_ms,key,cost,status,duration_ms` trace, and a property: over random (request, response) pairs, the engine admits
 * exactly what an independent fold admits (the rational reference, replayed from scratch at every step, with each
 * charge at its response's time and a ban from the first refusal or short charge).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Replayer } from "../../src/replay/engine.ts";
import { countsResponse } from "../../src/rules/outcome.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";
import { referenceKey } from "../support/reference.ts";

const RULES = `
- id: failed-logins
  match: { identity: ip }
  algorithm: sliding_log
  limit: 3
  window: 10s
  count_when: { status: [401, 403] }
  block_for: 60s
`;

function rulesFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-outcome-"));
  const path = join(dir, "rules.yaml");
  writeFileSync(path, RULES);
  return path;
}

describe("sluice simulate with status and duration_ms", () => {
  it("checks each request, charges the 401s when they answer, and bans from the next refusal", async () => {
    const trace = [
      "t_ms,key,cost,status,duration_ms",
      "0,a,1,200,10",
      "100,a,1,401,50",
      "200,a,1,401,50",
      "300,a,1,403,500",
      // Admitted while the 403 is still in flight (two charged so far); its own 401 fills the log at 410.
      "400,a,1,401,10",
      "900,a,1,200,10",
      "61000,a,1,200,10",
      "61001,b,1,,",
    ].join("\n");
    const r = await runCli(["simulate", "--rules", rulesFile(), "--rule", "failed-logins"], `${trace}\n`);
    expect(r.stderr).toBe("");
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { allowed: boolean; retry_after_ms: number | null });
    expect(lines.map((l) => l.allowed)).toEqual([true, true, true, true, true, false, true, true]);
    // The 403 sent at 300 answers at 800 into a full log: that charge crosses the limit, the ban runs to 60800.
    expect(lines[5]!.retry_after_ms).toBe(60_800 - 900);
    expect(lines[6]!.retry_after_ms).toBeNull();
  });

  it("a bad status or duration is an error naming the line", async () => {
    const r = await runCli(["simulate", "--rules", rulesFile(), "--rule", "failed-logins"], "0,a,1,99,10\n");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("status must be an HTTP status from 100 to 599");
  });
});

interface Pair {
  readonly tMs: number;
  readonly status: number;
  readonly durationMs: number;
}

/** The independent fold over (request, response) pairs for one key of `rule`. */
function fold(rule: ResolvedRule & { algorithm: "sliding_log" | "fixed_window" }, pairs: readonly Pair[]): boolean[] {
  const params = { ...rule };
  const applied: { atMs: number; cost: number }[] = [];
  const pending: { dueMs: number; seq: number }[] = [];
  let banUntil = Number.NEGATIVE_INFINITY;
  const replay = () => {
    const ref = referenceKey(params);
    for (const a of applied) ref.check(a.cost, a.atMs);
    return ref;
  };
  return pairs.map((p, seq) => {
    pending.sort((a, b) => a.dueMs - b.dueMs || a.seq - b.seq);
    while (pending.length > 0 && pending[0]!.dueMs < p.tMs) {
      const { dueMs } = pending.shift()!;
      const fits = replay().check(1, dueMs).allowed;
      if (fits) applied.push({ atMs: dueMs, cost: 1 });
      else if (rule.blockForMs !== null && dueMs >= banUntil) banUntil = dueMs + rule.blockForMs;
    }
    if (p.tMs < banUntil) return false;
    const allowed = replay().check(1, p.tMs).allowed;
    if (!allowed && rule.blockForMs !== null) banUntil = p.tMs + rule.blockForMs;
    if (allowed && countsResponse(rule.countWhen!, { status: p.status, header: () => null })) {
      pending.push({ dueMs: p.tMs + p.durationMs, seq });
    }
    return allowed;
  });
}

describe("property: the engine admits exactly what the fold over (request, response) pairs admits", () => {
  it("fixed_window and sliding_log, with and without block_for", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("sliding_log", "fixed_window"),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 50, max: 500 }),
        fc.option(fc.integer({ min: 1, max: 800 }), { nil: null }),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 60 }),
            status: fc.constantFrom(200, 401, 403, 500),
            durationMs: fc.integer({ min: 0, max: 300 }),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        (algorithm, limit, windowMs, blockForMs, raw) => {
          const yaml =
            `- id: r\n  match: { identity: ip }\n  algorithm: ${algorithm}\n  limit: ${limit}\n  window: ${windowMs}ms\n` +
            `  count_when: { status: [401, 403] }\n${blockForMs === null ? "" : `  block_for: ${blockForMs}ms\n`}`;
          const { rules, errors } = parseRules(yaml, "p.yaml");
          expect(errors).toEqual([]);
          let t = 1_000_000;
          const pairs = raw.map((r) => {
            t += r.gapMs;
            return { tMs: t, status: r.status, durationMs: r.durationMs };
          });
          const replayer = new Replayer(rules);
          const got = pairs.map(
            (p) => replayer.keyed(p.tMs, "k", 1, { status: p.status, durationMs: p.durationMs })[0]!.decision!.allowed,
          );
          const rule = rules[0]! as ResolvedRule & { algorithm: "sliding_log" | "fixed_window" };
          expect(got).toEqual(fold(rule, pairs));
        },
      ),
      { numRuns: 300 },
    );
  });
});
