/** The rule field table (src/rules/fields.ts): each field once, walked by the parser, printed in rule-file terms. */
import { describe, expect, it } from "vitest";
import { fieldChanges } from "../../src/replay/deploy_plan.ts";
import { printRule, RULE_FIELDS } from "../../src/rules/fields.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const one = (extra: string, params = "  algorithm: gcra\n  rate: 10/s\n  burst: 20\n") => {
  const { rules, errors } = parseRules(`- id: r\n  match: { identity: ip }\n${params}${extra}`, "f.yaml");
  return { rule: rules[0], errors };
};

describe("the rule field table", () => {
  it("names each field once, and a resolved rule is its id, file, match, algorithm, the table and the parameters", () => {
    const yaml = RULE_FIELDS.map((f) => f.yaml);
    const resolved = RULE_FIELDS.map((f) => f.resolved);
    expect(new Set(yaml).size).toBe(yaml.length);
    expect(new Set(resolved).size).toBe(resolved.length);
    const { rule } = one("");
    expect(Object.keys(rule!).sort()).toEqual(
      ["id", "file", "match", "algorithm", ...resolved, "rate", "burst"].sort(),
    );
    for (const f of RULE_FIELDS) expect(rule![f.resolved], f.yaml).toEqual(f.fallback);
  });

  it("prints a rule in rule-file terms, parameters by their kind", () => {
    const counter = one("", "  algorithm: sliding_counter\n  limit: 10\n  window: min\n  count_denied: true\n").rule!;
    expect(Object.fromEntries(printRule(counter))).toMatchObject({
      algorithm: "sliding_counter",
      limit: "10",
      window: "min",
      count_denied: "true",
    });
    const { rule } = one('  lease: { ttl: 2s, above: 5/s }\n  description: "Per address"\n');
    expect(Object.fromEntries(printRule(rule!))).toMatchObject({
      "match.plan": "any",
      "match.route": "any",
      "match.identity": "ip",
      algorithm: "gcra",
      rate: "10/s",
      burst: "20",
      cost_by_route: "none",
      on_error: "open",
      timeout_ms: "250",
      lease: "ttl 2s, above 5/s",
      description: "Per address",
    });
  });
});

describe("description (the field docs/adding-a-field.md was tried with)", () => {
  it("is one line of text, empty by default", () => {
    expect(one("").rule!.description).toBe("");
    expect(one("  description: Login attempts per address\n").rule!.description).toBe("Login attempts per address");
  });

  it("refuses anything else, saying why", () => {
    expect(one("  description: 5\n").errors).toEqual([
      "f.yaml: r.description: must be one line of text, at most 200 characters, got 5",
    ]);
    expect(one(`  description: ${"x".repeat(201)}\n`).errors).toEqual([
      "f.yaml: r.description: must be one line of text, at most 200 characters, got 201 characters",
    ]);
    expect(one('  description: "first line and then some more words\\nsecond line"\n').errors).toEqual([
      "f.yaml: r.description: must be one line of text, at most 200 characters, got 47 characters over several lines",
    ]);
  });

  it("is a change sluice plan reports", () => {
    const before = one("").rule!;
    const after = one("  description: Per address\n").rule!;
    expect(fieldChanges(before, after)).toEqual([{ field: "description", before: "none", after: "Per address" }]);
  });
});
