/**
 * AWS WAF rules that Block what their statement matches, without a rate (src/migrate/aws_block.ts): deny rules, with
 * AWS's 403 (or the CustomResponse's code), the statement read as a scope-down statement is; an Allow rule of a lower
 * Priority (AWS ends its evaluation there) reported as approximate; Allow and Count rules still no rule.
 */
import { describe, expect, it } from "vitest";
import { importAwsWaf } from "../../src/migrate/aws_import.ts";
import { readIpSet } from "../../src/migrate/aws_ip_set.ts";
import { rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ARN = "arn:aws:wafv2:us-east-1:123456789012:regional/ipset/bad/a1b2";
const OFFICE = "arn:aws:wafv2:us-east-1:123456789012:regional/ipset/office/c3d4";
const sets = [
  readIpSet(
    JSON.stringify({ IPSet: { Name: "bad", ARN, IPAddressVersion: "IPV4", Addresses: ["198.51.100.0/24"] } }),
    "bad.json",
  ),
  readIpSet(
    JSON.stringify({ IPSet: { Name: "office", ARN: OFFICE, IPAddressVersion: "IPV4", Addresses: ["203.0.113.0/28"] } }),
    "office.json",
  ),
];
const visibility = { SampledRequestsEnabled: true, CloudWatchMetricsEnabled: true, MetricName: "m" };
const rule = (Name: string, Priority: number, Statement: object, Action: object) => ({
  Name,
  Priority,
  Statement,
  Action,
  VisibilityConfig: visibility,
});

function imported(rules: object[]) {
  const result = importAwsWaf(JSON.stringify({ WebACL: { Rules: rules } }), "acl.json", sets);
  const parsed = parseRules(rulesYaml(result, "test"), "x.yaml");
  expect(parsed.errors).toEqual([]);
  return { result, parsed };
}

describe("a Block rule without a rate is a deny rule", () => {
  it("an IP set blocked: match.address, status 403", () => {
    const { result, parsed } = imported([rule("block-bad", 0, { IPSetReferenceStatement: { ARN } }, { Block: {} })]);
    expect(result.rules.map((r) => [r.id, r.match, r.fields])).toEqual([
      [
        "block-bad",
        { address: ["198.51.100.0/24"] },
        [
          ["deny", true],
          ["status", 403],
        ],
      ],
    ]);
    expect(parsed.denies.map((d) => [d.id, d.status])).toEqual([["block-bad", 403]]);
    expect(result.report.filter((i) => i.kind !== "note")).toEqual([]);
  });

  it("a path blocked with a custom response code", () => {
    const statement = {
      ByteMatchStatement: {
        FieldToMatch: { UriPath: {} },
        PositionalConstraint: "STARTS_WITH",
        SearchString: "/internal/",
        TextTransformations: [{ Priority: 0, Type: "NONE" }],
      },
    };
    const action = { Block: { CustomResponse: { ResponseCode: 404 } } };
    const { result } = imported([rule("hide-internal", 0, statement, action)]);
    expect(result.rules.map((r) => [r.match, r.fields])).toEqual([
      [
        { route: ["* /internal/**"] },
        [
          ["deny", true],
          ["status", 404],
        ],
      ],
    ]);
  });

  it("an Allow of a lower Priority is reported: AWS ends its evaluation there", () => {
    const { result } = imported([
      rule("allow-office", 0, { IPSetReferenceStatement: { ARN: OFFICE } }, { Allow: {} }),
      rule("block-bad", 1, { IPSetReferenceStatement: { ARN } }, { Block: {} }),
    ]);
    expect(result.rules.map((r) => r.id)).toEqual(["block-bad"]);
    expect(result.report.filter((i) => i.kind === "approximate").map((i) => i.message)).toEqual([
      "Rules[0] (allow-office) allows before it (a lower Priority), and AWS ends its evaluation there; the deny rule refuses what it matches whatever they allow",
    ]);
    expect(result.report.filter((i) => i.kind === "note").map((i) => i.message)).toContainEqual(
      "an IPSetReferenceStatement, not a rate-based rule: not a rate limit, so no rule",
    );
  });

  it("a statement a match cannot say: noted (no rate limit, so AWS WAF keeps it), not left out", () => {
    const { result } = imported([
      rule(
        "block-sqli",
        0,
        { SqliMatchStatement: { FieldToMatch: { Body: {} }, TextTransformations: [] } },
        { Block: {} },
      ),
    ]);
    expect(result.rules).toEqual([]);
    expect(result.report.filter((i) => i.kind === "left out")).toEqual([]);
    expect(result.report.map((i) => i.message)).toContainEqual(
      expect.stringMatching(/^a Block without a rate, not a rate limit; as a deny rule: .*; so no rule$/),
    );
  });
});
