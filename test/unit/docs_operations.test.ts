/**
 * docs/operations.md stays true to src/isolate/metrics.ts: its column table says what writeDataPoint really writes
 * where, its outcome list is complete, and its SQL reads only documented columns and real outcomes. The dashboard's
 * fleet view runs its queries from one module (src/edge/admin/fleet_sql.ts): each of them is in the doc word for
 * word (rendered with the doc's period), and every period's rendering reads only documented columns too.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { FLEET_PERIODS, fleetQueries } from "../../src/edge/admin/fleet_sql.ts";
import { type DataPoint, writeDataPoint } from "../../src/isolate/metrics.ts";

const text = readFileSync("docs/operations.md", "utf8");
const rowOf = (column: string) => text.split("\n").find((l) => new RegExp(`^\\|\\s*\`${column}\`\\s*\\|`).test(l));
const blocks = [...text.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
const sql = blocks.join("\n");

/** A point whose every field is distinct, and the words the doc's row for each column must start with. */
const POINT: DataPoint = {
  rule: "r-id",
  outcome: "denied",
  source: "object",
  plan: "p-name",
  route: "GET /r",
  method: "PATCH",
  keyHash: "k-hash",
  cost: 7,
  retryAfterMs: 1234,
};
const DOC_WORDS: Record<string, [keyof DataPoint, string]> = {
  blob1: ["rule", "rule id"],
  blob2: ["outcome", "outcome"],
  blob3: ["plan", "plan"],
  blob4: ["route", "the rule's route pattern"],
  blob5: ["method", "HTTP method"],
  blob6: ["source", "source"],
  double1: ["cost", "cost"],
  double2: ["retryAfterMs", "`retry_after_ms`"],
  index1: ["keyHash", "the hashed key"],
};
const OUTCOMES = [
  "allowed",
  "refunded",
  "denied",
  "shadow_denied",
  "fail_open",
  "fail_closed",
  "cost_exceeds_capacity",
  "not_asked",
];

describe("docs/operations.md", () => {
  it("documents each column as writeDataPoint fills it", () => {
    const written: AnalyticsEngineDataPoint[] = [];
    writeDataPoint({ writeDataPoint: (p) => written.push(p ?? {}) } as AnalyticsEngineDataset, POINT);
    const [point] = written;
    const columns: Record<string, unknown> = {};
    point!.blobs!.forEach((v, i) => {
      columns[`blob${i + 1}`] = v;
    });
    point!.doubles!.forEach((v, i) => {
      columns[`double${i + 1}`] = v;
    });
    point!.indexes!.forEach((v, i) => {
      columns[`index${i + 1}`] = v;
    });
    expect(Object.keys(columns).sort()).toEqual(Object.keys(DOC_WORDS).sort());
    for (const [column, [field, words]] of Object.entries(DOC_WORDS)) {
      expect(columns[column], column).toBe(POINT[field]);
      expect(rowOf(column), column).toMatch(new RegExp(`^\\|\\s*\`${column}\`\\s*\\|\\s*${literal(words)}`));
    }
  });

  it("lists every outcome, and its SQL names only documented columns and real outcomes", () => {
    const outcomeRow = rowOf("blob2")!;
    for (const outcome of OUTCOMES) expect(outcomeRow).toContain(`\`${outcome}\``);
    expect([...outcomeRow.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]).sort()).toEqual([...OUTCOMES].sort());
    expect(sql).toContain("FROM sluice_decisions");
    for (const [, column] of sql.matchAll(/\b((?:blob|double|index)\d+)\b/g)) expect(DOC_WORDS).toHaveProperty(column!);
    for (const [, literal] of sql.matchAll(/'([a-z_]+)'/g)) expect(OUTCOMES).toContain(literal);
    // Sampled rows are counted by their weight.
    expect(sql).not.toMatch(/COUNT\(/i);
  });

  it("prints each query of the fleet view word for word", () => {
    const hour = FLEET_PERIODS.find((p) => p.name === "1h")!;
    const queries = fleetQueries("sluice_decisions", hour);
    // The doc's time series spans a day in minutes; the dashboard picks the bucket per period.
    const overADay = fleetQueries("sluice_decisions", { ...hour, interval: "'1' DAY" }).denialsOverTime;
    for (const query of [overADay, queries.topDeniedKeys, queries.ruleTotals]) expect(blocks).toContain(query);
  });

  it("the fleet view's queries read only documented columns and real outcomes, for every period", () => {
    for (const period of FLEET_PERIODS) {
      for (const query of Object.values(fleetQueries("sluice_decisions", period))) {
        for (const [, column] of query.matchAll(/\b((?:blob|double|index)\d+)\b/g))
          expect(DOC_WORDS).toHaveProperty(column!);
        for (const [, literal] of query.matchAll(/'([a-z_]+)'/g)) expect(OUTCOMES).toContain(literal);
        expect(query).not.toMatch(/COUNT\(/i);
        expect(query).toContain(`NOW() - INTERVAL ${period.interval}`);
      }
    }
    expect(() => fleetQueries("x; DROP", FLEET_PERIODS[0]!)).toThrow("not a dataset name");
  });
});

function literal(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
