/**
 * `sluice import aws-waf` on a web ACL as `aws wafv2 get-web-acl` prints it (a login limit, a per-key API limit, a
 * global one for search, a shadow rule, a challenge, a geo-scoped one, one on labels and a managed rule group): the
 * rules it gives, where each report item and each error says it is (`file:line:col`), and the command's exit status.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AwsImportError, importAwsWaf } from "../../src/migrate/aws_import.ts";
import { rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { line } from "../support/aws_waf.ts";
import { runCli } from "../support/io.ts";

/** Line numbers on the right, for reading the tables below. */
const WEB_ACL = [
  "{", // 1
  '  "WebACL": {',
  '    "Name": "shop",',
  '    "Rules": [',
  "      {", // 5
  '        "Name": "login-per-ip",',
  '        "Priority": 0,',
  '        "Statement": {',
  '          "RateBasedStatement": {',
  '            "Limit": 100,', // 10
  '            "EvaluationWindowSec": 300,',
  '            "AggregateKeyType": "IP",',
  '            "ScopeDownStatement": {',
  '              "AndStatement": {',
  '                "Statements": [', // 15
  '                  {"ByteMatchStatement": {"SearchString": "/login", "FieldToMatch": {"UriPath": {}}, "TextTransformations": [{"Priority": 0, "Type": "NONE"}], "PositionalConstraint": "EXACTLY"}},',
  '                  {"ByteMatchStatement": {"SearchString": "POST", "FieldToMatch": {"Method": {}}, "TextTransformations": [{"Priority": 0, "Type": "NONE"}], "PositionalConstraint": "EXACTLY"}}',
  "                ]",
  "              }",
  "            }", // 20
  "          }",
  "        },",
  '        "Action": {"Block": {"CustomResponse": {"ResponseCode": 429}}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "login"}',
  "      },", // 25
  "      {",
  '        "Name": "api-per-key",',
  '        "Priority": 1,',
  '        "Statement": {',
  '          "RateBasedStatement": {', // 30
  '            "Limit": 2000,',
  '            "EvaluationWindowSec": 60,',
  '            "AggregateKeyType": "CUSTOM_KEYS",',
  '            "CustomKeys": [',
  '              {"Header": {"Name": "x-api-key", "TextTransformations": [{"Priority": 0, "Type": "NONE"}]}},', // 35
  '              {"IP": {}}',
  "            ],",
  '            "ScopeDownStatement": {"ByteMatchStatement": {"SearchString": "/api/", "FieldToMatch": {"UriPath": {}}, "TextTransformations": [{"Priority": 0, "Type": "LOWERCASE"}], "PositionalConstraint": "STARTS_WITH"}}',
  "          }",
  "        },", // 40
  '        "Action": {"Block": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "api"}',
  "      },",
  "      {",
  '        "Name": "search-origin",', // 45
  '        "Priority": 2,',
  '        "Statement": {',
  '          "RateBasedStatement": {',
  '            "Limit": 5000,',
  '            "EvaluationWindowSec": 120,', // 50
  '            "AggregateKeyType": "CONSTANT",',
  '            "ScopeDownStatement": {"ByteMatchStatement": {"SearchString": "/search", "FieldToMatch": {"UriPath": {}}, "TextTransformations": [{"Priority": 0, "Type": "NONE"}], "PositionalConstraint": "STARTS_WITH"}}',
  "          }",
  "        },",
  '        "Action": {"Block": {"CustomResponse": {"ResponseCode": 503}}},', // 55
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "search"}',
  "      },",
  "      {",
  '        "Name": "crawlers-watch",',
  '        "Priority": 3,', // 60
  '        "Statement": {',
  '          "RateBasedStatement": {',
  '            "Limit": 600,',
  '            "AggregateKeyType": "IP",',
  '            "ScopeDownStatement": {"ByteMatchStatement": {"SearchString": "bot", "FieldToMatch": {"SingleHeader": {"Name": "user-agent"}}, "TextTransformations": [{"Priority": 0, "Type": "LOWERCASE"}], "PositionalConstraint": "CONTAINS"}}', // 65
  "          }",
  "        },",
  '        "Action": {"Count": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "crawlers"}',
  "      },", // 70
  "      {",
  '        "Name": "signup-challenge",',
  '        "Priority": 4,',
  '        "Statement": {',
  '          "RateBasedStatement": {', // 75
  '            "Limit": 20,',
  '            "EvaluationWindowSec": 600,',
  '            "AggregateKeyType": "FORWARDED_IP",',
  '            "ForwardedIPConfig": {"HeaderName": "X-Forwarded-For", "FallbackBehavior": "NO_MATCH"},',
  '            "ScopeDownStatement": {"ByteMatchStatement": {"SearchString": "/signup", "FieldToMatch": {"UriPath": {}}, "TextTransformations": [{"Priority": 0, "Type": "NONE"}], "PositionalConstraint": "EXACTLY"}}', // 80
  "          }",
  "        },",
  '        "Action": {"Challenge": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "signup"}',
  "      },", // 85
  "      {",
  '        "Name": "abroad",',
  '        "Priority": 5,',
  '        "Statement": {',
  '          "RateBasedStatement": {', // 90
  '            "Limit": 300,',
  '            "EvaluationWindowSec": 60,',
  '            "AggregateKeyType": "IP",',
  '            "ScopeDownStatement": {"NotStatement": {"Statement": {"GeoMatchStatement": {"CountryCodes": ["US", "CA"]}}}}',
  "          }", // 95
  "        },",
  '        "Action": {"Block": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "abroad"}',
  "      },",
  "      {", // 100
  '        "Name": "verified-bots",',
  '        "Priority": 6,',
  '        "Statement": {',
  '          "RateBasedStatement": {',
  '            "Limit": 50,', // 105
  '            "AggregateKeyType": "CUSTOM_KEYS",',
  '            "CustomKeys": [{"LabelNamespace": {"Namespace": "awswaf:managed:aws:bot-control:bot:name:"}}],',
  '            "ScopeDownStatement": {"LabelMatchStatement": {"Scope": "NAMESPACE", "Key": "awswaf:managed:aws:bot-control:bot:"}}',
  "          }",
  "        },", // 110
  '        "Action": {"Block": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "bots"}',
  "      },",
  "      {",
  '        "Name": "aws-common",', // 115
  '        "Priority": 7,',
  '        "Statement": {"ManagedRuleGroupStatement": {"VendorName": "AWS", "Name": "AWSManagedRulesCommonRuleSet"}},',
  '        "OverrideAction": {"None": {}},',
  '        "VisibilityConfig": {"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": "common"}',
  "      }", // 120
  "    ]",
  "  }",
  "}",
  "",
].join("\n");

describe("a realistic web ACL", () => {
  const result = importAwsWaf(WEB_ACL, "acl.json");

  it("gives one rule per rate-based rule it can say, which validate", () => {
    expect(result.rules.map(line)).toEqual([
      "login-per-ip POST /login ip limit=100 window=5min",
      "api-per-key * /api/** key=api_key+ip limit=2000 window=min status=403 key_missing=skip",
      "search-origin * /search** key=global limit=5000 window=2min status=503",
      'crawlers-watch * header={ name: user-agent, contains: "bot", ignore_case: true } ip limit=600 window=5min mode=shadow',
      "signup-challenge * /signup ip limit=20 window=10min",
      'abroad * cf={ name: country, matches: "^(?:US|CA)$", not: true, missing_as_empty: true } ip limit=300 window=min status=403',
    ]);
    const parsed = parseRules(rulesYaml(result, "test"), "x.yaml");
    expect(parsed.errors).toEqual([]);
    expect(parsed.rules.map((r) => r.id)).toEqual(result.rules.map((r) => r.id));
  });

  it("says where each report item is about", () => {
    expect(result.report.map((r) => `${r.where}: ${r.kind}`)).toEqual([
      "acl.json:12:33: Rules[0] (login-per-ip): note",
      "acl.json:35:26: Rules[1] (api-per-key): approximate",
      "acl.json:34:27: Rules[1] (api-per-key): note",
      "acl.json:64:33: Rules[3] (crawlers-watch): note",
      "acl.json:78:33: Rules[4] (signup-challenge): approximate",
      "acl.json:83:33: Rules[4] (signup-challenge): approximate",
      "acl.json:78:33: Rules[4] (signup-challenge): note",
      "acl.json:93:33: Rules[5] (abroad): note",
      "acl.json:94:88: Rules[5] (abroad): note",
      "acl.json:107:47: Rules[6] (verified-bots): left out",
      "acl.json:108:59: Rules[6] (verified-bots): left out",
      "acl.json:117:52: Rules[7] (aws-common): note",
      "acl.json:4:14: approximate",
      "acl.json:4:14: note",
    ]);
  });

  it("names the source of each rule in its comment", () => {
    expect(result.rules.map((r) => r.source.split(": ").slice(0, 2).join(": "))).toEqual([
      "acl.json:5:7: Rules[0] (login-per-ip)",
      "acl.json:26:7: Rules[1] (api-per-key)",
      "acl.json:44:7: Rules[2] (search-origin)",
      "acl.json:58:7: Rules[3] (crawlers-watch)",
      "acl.json:71:7: Rules[4] (signup-challenge)",
      "acl.json:86:7: Rules[5] (abroad)",
    ]);
  });
});

/** The web ACL with `from` replaced by `to` once (it must be there). */
function edited(from: string, to: string): string {
  expect(WEB_ACL).toContain(from);
  return WEB_ACL.replace(from, to);
}

describe("a malformed file: an error naming the place, the field and the reason", () => {
  it.each([
    ["not JSON", WEB_ACL.slice(0, 200), /^acl\.json:11:4: not JSON: the file ends inside/],
    [
      "a trailing comma",
      edited('"Limit": 100,', '"Limit": 100,,'),
      /^acl\.json:10:26: not JSON: expected a key in double quotes, got ","/,
    ],
    ["no rules", '{"WebACL": {"Name": "x"}}', /^acl\.json:1:12: expected a web ACL/],
    [
      "a rule that is a string",
      '["login"]',
      /^acl\.json:1:2: Rules\[0\]: a rule must be an object, got string "login"/,
    ],
    [
      "a Limit of the wrong type",
      edited('"Limit": 100,', '"Limit": "100",'),
      /^acl\.json:10:22: Rules\[0\]\.Statement\.RateBasedStatement\.Limit: must be a whole number, got string "100"/,
    ],
    [
      "a Limit below AWS's range",
      edited('"Limit": 100,', '"Limit": 5,'),
      /^acl\.json:10:22: Rules\[0\]\.Statement\.RateBasedStatement\.Limit: 10 to 2000000000 \(AWS's range\), got 5/,
    ],
    [
      "a Limit above it",
      edited('"Limit": 100,', '"Limit": 3000000000,'),
      /^acl\.json:10:22: .*Limit: 10 to 2000000000/,
    ],
    [
      "a window AWS does not take",
      edited('"EvaluationWindowSec": 300,', '"EvaluationWindowSec": 30,'),
      /^acl\.json:11:36: .*EvaluationWindowSec: 60, 120, 300 or 600, got 30/,
    ],
    [
      "an aggregation AWS does not take",
      edited('"AggregateKeyType": "IP",', '"AggregateKeyType": "USER",'),
      /^acl\.json:12:33: .*AggregateKeyType: IP, FORWARDED_IP, CUSTOM_KEYS or CONSTANT, got "USER"/,
    ],
    [
      "CONSTANT without a scope-down",
      edited(
        '"ScopeDownStatement": {"ByteMatchStatement": {"SearchString": "/search"',
        '"Elsewhere": {"ByteMatchStatement": {"SearchString": "/search"',
      ),
      /^acl\.json:51:33: .*AggregateKeyType CONSTANT needs a ScopeDownStatement/,
    ],
    [
      "a statement of two kinds",
      edited('"Statement": {"ManagedRuleGroupStatement"', '"Statement": {"A": 1, "ManagedRuleGroupStatement"'),
      /^acl\.json:117:22: Rules\[7\]\.Statement: a statement has one member naming its kind, got A, ManagedRuleGroupStatement/,
    ],
    [
      "a rule without a Name",
      edited('"Name": "login-per-ip",', ""),
      /^acl\.json:5:7: Rules\[0\]: needs Name \(a string\)/,
    ],
    [
      "a key repeated",
      edited('"Priority": 0,', '"Priority": 0, "Priority": 1,'),
      /^acl\.json:7:24: the key "Priority" twice in one object/,
    ],
    [
      "statements that are not a list",
      edited('"Statements": [', '"Statements": {"x": [').replace("]\n              }", "]}\n              }"),
      /^acl\.json:15:31: .*AndStatement\.Statements: must be a list of statements, got/,
    ],
  ])("%s", (_, text, error) => {
    expect(() => importAwsWaf(text, "acl.json")).toThrow(AwsImportError);
    expect(() => importAwsWaf(text, "acl.json")).toThrow(error);
  });
});

describe("sluice import aws-waf", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-import-aws-"));
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };

  it("exits 1 without --allow-partial when a rule was left out, writing nothing", async () => {
    const out = join(dir, "partial.yaml");
    const r = await runCli(["import", "aws-waf", file("acl.json", WEB_ACL), "--out", out]);
    expect(r.code).toBe(1);
    expect(existsSync(out)).toBe(false);
    expect(r.stderr).toContain("6 rules written; 4 approximate, 2 left out\n");
    expect(r.stderr).toContain("sluice import: 2 left out; nothing written; rerun with --allow-partial");
  });

  it("exits 0 with --allow-partial and writes rules that validate", async () => {
    const out = join(dir, "rules.yaml");
    const r = await runCli(["import", "aws-waf", file("acl.json", WEB_ACL), "--out", out, "--allow-partial"]);
    expect(r.code).toBe(0);
    const yaml = readFileSync(out, "utf8");
    expect(yaml).toContain("# from ");
    expect(yaml).toContain(
      "acl.json:5:7: Rules[0] (login-per-ip): 100 requests per 300 s, action Block\n- id: login-per-ip\n",
    );
    expect((await runCli(["validate", out])).code).toBe(0);
  });

  it("--ip-set FILE gives an IP set's addresses: its NOT is match.except_address, and the rule validates", async () => {
    const arn = "arn:aws:wafv2:us-east-1:123456789012:regional/ipset/office/a1b2";
    const acl = JSON.stringify({
      WebACL: {
        Rules: [
          {
            Name: "spare-office",
            Action: { Block: {} },
            Statement: {
              RateBasedStatement: {
                Limit: 100,
                AggregateKeyType: "IP",
                ScopeDownStatement: { NotStatement: { Statement: { IPSetReferenceStatement: { ARN: arn } } } },
              },
            },
          },
        ],
      },
    });
    const set = JSON.stringify({
      IPSet: { Name: "office", ARN: arn, IPAddressVersion: "IPV6", Addresses: ["2001:db8:1::/48"] },
    });
    const out = join(dir, "sets.yaml");
    const without = await runCli(["import", "aws-waf", file("sets.json", acl), "--out", out]);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain("give its addresses with --ip-set FILE");
    const r = await runCli([
      "import",
      "aws-waf",
      file("sets.json", acl),
      "--ip-set",
      file("office.json", set),
      "--out",
      out,
    ]);
    expect(r.code).toBe(0);
    expect(readFileSync(out, "utf8")).toContain('match: { except_address: ["2001:db8:1::/48"], identity: ip }');
    expect((await runCli(["validate", out])).code).toBe(0);
    expect((await runCli(["import", "nginx", file("n.conf", "http {}"), "--ip-set", "x.json"])).code).toBe(2);
  });

  it("exits 0 when everything was said", async () => {
    const list = JSON.stringify([JSON.parse(WEB_ACL).WebACL.Rules[0]]);
    const r = await runCli(["import", "aws-waf", file("one.json", list)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("- id: login-per-ip\n");
  });

  it("reads a rule group as get-rule-group prints it", async () => {
    const group = JSON.stringify({
      RuleGroup: { Name: "g", Capacity: 10, Rules: JSON.parse(WEB_ACL).WebACL.Rules.slice(0, 3) },
    });
    const r = await runCli(["import", "aws-waf", file("group.json", group)]);
    expect(r.code).toBe(0);
    expect(r.stdout.match(/^- id: /gm)).toHaveLength(3);
  });

  it("exits 1 on a malformed file, with the place", async () => {
    const r = await runCli(["import", "aws-waf", file("bad.json", edited('"Limit": 100,', '"Limit": 5,'))]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/bad\.json:10:22: Rules\[0\]\.Statement\.RateBasedStatement\.Limit: 10 to 2000000000/);
  });

  it("exits 1 on a file with nothing to import", async () => {
    const r = await runCli(["import", "aws-waf", file("empty.json", '{"WebACL": {"Rules": []}}')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("has no rate limits to import (no rules); nothing written");
  });

  it("exits 2 on an unknown kind, naming aws-waf among the kinds", async () => {
    const r = await runCli(["import", "aws", "x.json"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('expected "nginx", "envoy", "cloudflare" or "aws-waf"');
  });
});
