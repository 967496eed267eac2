/** AWS WAF rules for the `sluice import aws-waf` tests: a rule, its statements, and the draft as one line. */
import { expect } from "vitest";
import { importAwsWaf } from "../../src/migrate/aws_import.ts";
import { type DraftRule, type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

export type Obj = Record<string, unknown>;

export const rule = (over: Obj = {}, rbs: Obj = {}): Obj => ({
  Name: "r",
  Priority: 0,
  Action: { Block: {} },
  VisibilityConfig: { SampledRequestsEnabled: true, CloudWatchMetricsEnabled: true, MetricName: "r" },
  ...over,
  Statement: { RateBasedStatement: { Limit: 100, EvaluationWindowSec: 60, AggregateKeyType: "IP", ...rbs } },
});
export const scoped = (scope: Obj, over: Obj = {}) => rule(over, { ScopeDownStatement: scope });
export const keyed = (...CustomKeys: Obj[]) => rule({}, { AggregateKeyType: "CUSTOM_KEYS", CustomKeys });

export const tt = (...types: string[]) => types.map((Type, Priority) => ({ Type, Priority }));
export const byte = (
  FieldToMatch: Obj,
  SearchString: string,
  PositionalConstraint = "EXACTLY",
  ...types: string[]
) => ({
  ByteMatchStatement: {
    SearchString,
    FieldToMatch,
    TextTransformations: tt(...(types.length === 0 ? ["NONE"] : types)),
    PositionalConstraint,
  },
});
export const path = (s: string, c = "EXACTLY", ...t: string[]) => byte({ UriPath: {} }, s, c, ...t);
export const method = (m: string) => byte({ Method: {} }, m);
export const header = (name: string, s: string, c = "EXACTLY", ...t: string[]) =>
  byte({ SingleHeader: { Name: name } }, s, c, ...t);
export const and = (...Statements: Obj[]) => ({ AndStatement: { Statements } });
export const or = (...Statements: Obj[]) => ({ OrStatement: { Statements } });
export const not = (Statement: Obj) => ({ NotStatement: { Statement } });

export function imported(...rules: Obj[]): ImportResult {
  const result = importAwsWaf(JSON.stringify({ WebACL: { Name: "acl", Rules: rules } }), "acl.json");
  expect(parseRules(rulesYaml(result, "test"), "x.yaml").errors).toEqual([]);
  return result;
}

/** A draft as one line: id, match, key and fields (without the algorithm, count_denied and buckets every one has). */
export function line(r: DraftRule): string {
  const m = r.match;
  const match = [
    m.route === undefined ? "*" : [m.route].flat().join("|"),
    ...(m.except === undefined ? [] : [`except=${m.except.join("|")}`]),
    ...(["header", "cookie", "query", "cf"] as const).flatMap((k) => (m[k] ?? []).map((c) => `${k}=${c}`)),
    m.identity ?? `key=${r.key === "global" ? "global" : (r.key ?? []).join("+")}`,
  ];
  const fields = r.fields
    .filter(([k]) => k !== "algorithm" && k !== "count_denied" && k !== "buckets")
    .map(([k, v]) => `${k}=${typeof v === "object" ? v.flow : v}`);
  return [r.id, ...match, ...fields].join(" ");
}

export const kinds = (result: ImportResult, kind: string) =>
  result.report.filter((r) => r.kind === kind).map((r) => r.message);
