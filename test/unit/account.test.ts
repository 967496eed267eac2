/**
 * Account records and per-account overrides: the record format, and overrides checked by the rule-file validator
 * with the rule file's messages (a parity table: the same bad parameters in a rule file and in an override give the
 * same message after the location), plus what only an override can get wrong.
 */
import { describe, expect, it } from "vitest";
import { readAccount } from "../../src/rules/account.ts";
import { resolveOverride } from "../../src/rules/parse.ts";
import { rawFromJson } from "../../src/rules/raw.ts";
import { parseRules, parseYaml } from "../../src/rules/yaml.ts";

const RULES_YAML = `
- id: growth-global
  match: { plan: [growth, scale], identity: api_key }
  algorithm: gcra
  rate: 50/s
  burst: 100
- id: free-global
  match: { plan: free, identity: api_key }
  algorithm: token_bucket
  rate_per_s: 10
  burst: 20
- id: bulk
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 10
  burst: 20
  cost_by_route: { "POST /v1/labels:batch": 10 }
- id: daily
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 1000
  window: d
- id: per-ip
  match: { identity: ip }
  algorithm: sliding_log
  limit: 5
  window_s: 60
- id: local-key
  match: { identity: api_key }
  algorithm: gcra
  rate: 5/s
  burst: 5
  scope: local
`;
const { rules, errors } = parseRules(RULES_YAML, "rules.yaml");
expect(errors).toEqual([]);
const rule = (id: string) => rules.find((r) => r.id === id)!;

/** `value` in YAML spelling, as an override of `ruleId`: the resolved parameters, or the messages. */
function override(ruleId: string, yaml: string): { params: unknown; errors: string[] } {
  const parsed = parseYaml(yaml, "override.yaml");
  if ("errors" in parsed) throw new Error(parsed.errors.join("\n"));
  const out: string[] = [];
  const params = resolveOverride(rule(ruleId), parsed.value, "acct", out);
  return { params, errors: out };
}

describe("resolveOverride", () => {
  it("resolves a full parameter set of the rule's algorithm, defaults filled in as in a rule file", () => {
    expect(override("growth-global", "{ rate: 250/s, burst: 500 }")).toEqual({
      params: { algorithm: "gcra", rate: { amount: 250, periodMs: 1000, tokens: 1, perMs: 4 }, burst: 500 },
      errors: [],
    });
    expect(override("daily", "{ limit: 5000, window: d }").params).toEqual({
      algorithm: "fixed_window",
      limit: 5000,
      window: { kind: "ms", ms: 86_400_000 },
    });
  });

  it.each([
    // [parameters, the YAML rule-file fragment that must give the same message]
    ["{ rate: 10/s, burst: '20x' }"],
    ["{ rate: 10/s, burst: 0 }"],
    ["{ rate: 10/s, burst: 1.5 }"],
    ["{ rate: ten, burst: 20 }"],
    ["{ rate_per_s: 10, rate: 10/s, burst: 20 }"],
    ["{ burst: 20 }"],
    ["{ rate: 10/s }"],
    ["{ rate: 10/s, brust: 20 }"],
    ["{ rate: 10/s, burst: 20, limit: 5 }"],
    ["{ rate: 1/d, burst: 1125899906842624 }"],
  ])("%s: the message a rule file gets", (params) => {
    const fromOverride = override("free-global", params).errors.map((m) => m.replace(/^acct: free-global\./, ""));
    const yaml = `- id: free-global\n  match: { identity: api_key }\n  algorithm: token_bucket\n${Object.entries(
      parseFlow(params),
    )
      .map(([k, v]) => `  ${k}: ${v}`)
      .join("\n")}\n`;
    const fromFile = parseRules(yaml, "f.yaml").errors.map((m) => m.replace(/^f\.yaml(:\d+:\d+)?: free-global\./, ""));
    expect(fromOverride.length).toBeGreaterThan(0);
    expect(fromOverride).toEqual(fromFile);
  });

  it.each([
    [
      "bulk",
      "{ rate_per_s: 10, burst: 5 }",
      [
        `acct: bulk.cost_by_route["POST /v1/labels:batch"]: cost 10 is more than the rule's capacity 5 (burst); such a request could never be admitted`,
      ],
    ],
    [
      "growth-global",
      "{ algorithm: token_bucket, rate: 10/s, burst: 5 }",
      ["acct: growth-global.algorithm: an override keeps the rule's algorithm (gcra); change it in the rule file"],
    ],
    [
      "growth-global",
      "{ rate: 10/s, burst: 5, mode: shadow }",
      ["acct: growth-global.mode: unknown key (gcra takes rate_per_s or rate, and burst)"],
    ],
    [
      "per-ip",
      "{ limit: 50, window_s: 60 }",
      [
        "acct: per-ip.limits: only scope: global rules counted by api_key take a per-account override; this one is scope: global, identity: ip",
      ],
    ],
    [
      "local-key",
      "{ rate: 50/s, burst: 50 }",
      [
        "acct: local-key.limits: only scope: global rules counted by api_key take a per-account override; this one is scope: local, identity: api_key",
      ],
    ],
    [
      "growth-global",
      "250",
      ["acct: growth-global.limits: must be a mapping of gcra parameters (rate_per_s or rate, and burst), got 250"],
    ],
  ])("%s %s: %j", (ruleId, params, expected) => {
    expect(override(ruleId, params)).toEqual({ params: null, errors: expected });
  });
});

describe("readAccount", () => {
  const where = "ACCOUNTS/3f2a";
  it("reads the plan and every valid override, from JSON", () => {
    const r = readAccount(
      JSON.parse('{"plan":"growth","limits":{"growth-global":{"rate":"250/s","burst":500}},"crm_id":"C-17"}'),
      rules,
      where,
    );
    expect(r.recordErrors).toEqual([]);
    expect(r.limitErrors).toEqual([]);
    expect(r.account.plan).toBe("growth");
    expect([...r.account.limits.keys()]).toEqual(["growth-global"]);
    expect(r.account.limits.get("growth-global")).toMatchObject({ algorithm: "gcra", burst: 500 });
  });

  it("keeps the valid overrides and reports each bad one", () => {
    const r = readAccount(
      {
        plan: "growth",
        limits: {
          "growth-global": { rate: "250/s", burst: "lots" },
          "growth-globl": { rate: "250/s", burst: 5 },
          "free-global": { rate_per_s: 100, burst: 200 },
          daily: { limit: 5000, window: "d" },
        },
      },
      rules,
      where,
    );
    expect(r.account.plan).toBe("growth");
    expect([...r.account.limits.keys()]).toEqual(["daily"]);
    expect(r.limitErrors).toEqual([
      `${where}: growth-global.burst: must be a positive integer, got "lots"`,
      `${where}: growth-globl: no such rule is deployed; did you mean "growth-global"?`,
      `${where}: free-global.limits: the rule applies to plan free, not to this account's plan growth, so the override would never apply`,
    ]);
  });

  it.each([
    [[1, 2], `${where}: an account record must be a JSON object such as {"plan": "growth"}`],
    ["growth", `${where}: an account record must be a JSON object such as {"plan": "growth"}`],
    [{}, `${where}: plan: must be a non-empty string, got nothing`],
    [{ plan: "" }, `${where}: plan: must be a non-empty string, got ""`],
    [{ plan: 3 }, `${where}: plan: must be a non-empty string, got 3`],
  ])("%j: no plan (the default applies)", (value, message) => {
    const r = readAccount(value, rules, where);
    expect(r.account.plan).toBeNull();
    expect(r.recordErrors).toEqual([message]);
  });

  it("a limits field that is not an object is reported; the plan still holds", () => {
    const r = readAccount({ plan: "scale", limits: ["growth-global"] }, rules, where);
    expect(r.account.plan).toBe("scale");
    expect(r.limitErrors).toEqual([
      `${where}: limits: must be an object of rule id -> parameters, got ["growth-global"]`,
    ]);
  });
});

describe("rawFromJson", () => {
  it("integers become exact bigints; other numbers keep their text; deep nesting stops", () => {
    expect(rawFromJson({ a: [1, 2.5, "x", true, null] })).toEqual(
      new Map([["a", [1n, expect.objectContaining({ value: 2.5, source: "2.5" }), "x", true, null]]]),
    );
    let deep: unknown = 1;
    for (let i = 0; i < 200; i++) deep = [deep];
    expect(() => rawFromJson(deep)).not.toThrow();
  });
});

/** `{ a: 1, b: x }` -> entries, for building the equivalent rule file (flow maps of scalars only). */
function parseFlow(flow: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of flow.replace(/^\{\s*|\s*\}$/g, "").split(",")) {
    const [k, ...v] = part.split(":");
    out[k!.trim()] = v.join(":").trim();
  }
  return out;
}
