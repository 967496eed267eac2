/** docs/rules.md stays true: it covers every field and algorithm, its examples validate, its links resolve. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { ALGORITHMS } from "../../src/algorithms/index.ts";
import { MATCH_FIELDS, RULE_FIELDS } from "../../src/rules/fields.ts";
import { ALL_PARAM_KEYS } from "../../src/rules/params.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const DOC = "docs/rules.md";
const text = readFileSync(DOC, "utf8");
const lines = text.split("\n");
/** The table row whose first cell is `name` in backticks (the formatter pads cells, so spaces vary). */
const rowOf = (name: string) => lines.find((l) => new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`).test(l));

/** Every rule-file key: the field table's, `match`'s, and every algorithm's parameters. */
const FIELDS = [
  "id",
  ...MATCH_FIELDS.map((m) => `match.${m.yaml}`),
  "algorithm",
  ...ALL_PARAM_KEYS,
  ...RULE_FIELDS.map((f) => f.yaml),
];

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("docs/rules.md", () => {
  it("has a row for every rule field, with a type, a default and an example", () => {
    for (const field of FIELDS) {
      const row = rowOf(field);
      expect(row, `no table row for ${field}`).toBeDefined();
      // | field | type | default | example | meaning |, every cell filled
      const cells = row!.split(/\s\|\s/).map((c) => c.trim());
      expect(cells.length, `row for ${field}`).toBe(5);
      for (const cell of cells) expect(cell.replace(/^\|\s*/, ""), `row for ${field}`).not.toBe("");
    }
  });

  it("says for every field of the field table what the table says: its default and its first sentence", () => {
    expect(FIELDS).toEqual(expect.arrayContaining(["rate_per_s", "count_denied", "on_error", "lease", "description"]));
    for (const f of RULE_FIELDS) {
      const cells = rowOf(f.yaml)!
        .split(/\s\|\s/)
        .map((c) => c.trim());
      const printed = (f.print as (v: unknown) => string)(f.fallback);
      if (printed === "none") expect(cells[2], f.yaml).toMatch(/^none\b/);
      else expect(cells[2], f.yaml).toMatch(new RegExp(`^\`${printed}\``));
      expect(cells[4]!.replace(/\s*\|$/, ""), f.yaml).toMatch(new RegExp(`^${escapeRegExp(f.doc)}`));
    }
  });

  it("describes every algorithm in the comparison table", () => {
    for (const algorithm of ALGORITHMS) expect(rowOf(algorithm), algorithm).toBeDefined();
  });

  it("documents every decision field and the defaults the validator fills in", () => {
    for (const field of ["remaining", "reset_after_ms", "retry_after_ms", "delay_ms"]) {
      expect(rowOf(field), field).toBeDefined();
    }
    const resolved = parseRules(
      "- id: x\n  match: { identity: ip }\n  algorithm: gcra\n  rate_per_s: 1\n  burst: 1\n",
      "x",
    );
    const rule = resolved.rules[0]!;
    const row = (field: string) => rowOf(field)!;
    expect(row("on_error")).toContain(`\`${rule.onError}\``);
    expect(row("timeout_ms")).toContain(`\`${rule.timeoutMs}\``);
    expect(row("status")).toContain(`\`${rule.status}\``);
    expect(row("cost")).toContain(`\`${rule.cost}\``);
    expect(row("mode")).toContain(`\`${rule.mode}\``);
    expect(row("scope")).toContain(`\`${rule.scope}\``);
    expect(row("retry_jitter_s")).toContain(`\`${rule.retryJitterS}\``);
  });

  it("every YAML example is a valid rule file", () => {
    const blocks = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    blocks.forEach((block, i) => {
      const parsed = parseRules(block, `${DOC} yaml block ${i + 1}`);
      expect(parsed.errors).toEqual([]);
      expect(parsed.rules.length + parsed.denies.length).toBeGreaterThan(0);
    });
  });

  it("links and images point at files that exist", () => {
    for (const m of text.matchAll(/\]\(((?:examples\/)[^)#]+)\)/g)) {
      expect(existsSync(join(dirname(DOC), m[1]!)), m[1]).toBe(true);
    }
  });
});
