/**
 * `sluice import cloudflare` says where: every report item and every error starts with `file:line:col` of the JSON
 * value it is about (the rule, the field's value, the expression string), in multi-line files as people keep them.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CloudflareImportError, importCloudflare } from "../../src/migrate/cloudflare_import.ts";
import { runCli } from "../support/io.ts";

/** Line numbers on the right, for reading the table below. */
const RULESET = [
  "{", // 1
  '  "result": {',
  '    "phase": "http_ratelimit",',
  '    "rules": [',
  "      {", // 5
  '        "description": "Login",',
  '        "expression": "http.request.uri.path eq \\"/login\\"",',
  '        "action": "managed_challenge",',
  '        "ratelimit": {',
  '          "characteristics": ["cf.colo.id", "ip.src"],', // 10
  '          "period": 60,',
  '          "requests_per_period": 5,',
  '          "requests_to_origin": true',
  "        }",
  "      },", // 15
  "      {",
  '        "ref": "api",',
  '        "expression": "http.host eq \\"a.example\\"",',
  '        "action": "block",',
  '        "action_parameters": {"response": {"status_code": 200}},', // 20
  '        "ratelimit": {',
  '          "characteristics": ["cf.colo.id", "cf.unique_visitor_id"],',
  '          "period": 10,',
  '          "requests_per_period": 100,',
  '          "counting_expression": "http.response.code ge 400",', // 25
  '          "mitigation_expression": "true"',
  "        }",
  "      },",
  "      {",
  '        "description": "Old",', // 30
  '        "enabled": false,',
  '        "ratelimit": {"period": 60, "requests_per_period": 1}',
  "      },",
  '      {"description": "Skip", "action": "skip", "expression": "true"},',
  "      {", // 35
  '        "description": "Search",',
  '        "expression": "http.request.uri.path eq \\"/search",',
  '        "action": "log",',
  '        "ratelimit": {"characteristics": ["cf.colo.id"], "period": 60, "score_per_period": 400}',
  "      },", // 40
  "      {",
  '        "description": "Block",',
  '        "expression": "",',
  '        "action": "block",',
  '        "action_parameters": {"response": {"status_code": 403, "content": "slow down"}},', // 45
  '        "ratelimit": {"characteristics": ["cf.colo.id"], "period": 60, "requests_per_period": 10}',
  "      }",
  "    ]",
  "  }",
  "}", // 50
  "",
].join("\n");

describe("every report item says file:line:col of what it is about", () => {
  const result = importCloudflare(RULESET, "cf.json");

  it("in the report's order", () => {
    expect(result.report.map((r) => `${r.where}: ${r.kind}`)).toEqual([
      "cf.json:10:31: rules[0] (Login): approximate",
      "cf.json:8:19: rules[0] (Login): approximate",
      "cf.json:13:33: rules[0] (Login): approximate",
      "cf.json:10:45: rules[0] (Login): note",
      "cf.json:18:23: rules[1] (api): left out",
      "cf.json:22:45: rules[1] (api): left out",
      "cf.json:25:34: rules[1] (api): left out",
      "cf.json:20:59: rules[1] (api): left out",
      "cf.json:26:36: rules[1] (api): left out",
      "cf.json:31:20: rules[2] (Old): note",
      "cf.json:34:7: rules[3] (Skip): left out",
      "cf.json:39:92: rules[4] (Search): left out",
      "cf.json:37:23: rules[4] (Search): left out",
      "cf.json:46:43: rules[5] (Block): approximate",
      "cf.json:45:75: rules[5] (Block): note",
      "cf.json:4:14: note",
    ]);
  });

  it.each([
    ["a characteristic: its string in the list", "cf.json:10:31: rules[0] (Login)", "per data center (cf.colo.id)"],
    ["the action: its value", "cf.json:8:19: rules[0] (Login)", "action managed_challenge"],
    ["a ratelimit field: its value", "cf.json:13:33: rules[0] (Login)", "requests_to_origin"],
    ["the IPv6 grouping: the ip characteristic", "cf.json:10:45: rules[0] (Login)", "IPv6 client by its /64"],
    ["a test the expression cannot say: the expression", "cf.json:18:23: rules[1] (api)", "`http.host eq"],
    ["a characteristic left out", "cf.json:22:45: rules[1] (api)", "cf.unique_visitor_id"],
    ["the counting expression", "cf.json:25:34: rules[1] (api)", "http.response.code ge 400"],
    ["a status code: its value", "cf.json:20:59: rules[1] (api)", "status_code 200"],
    ["mitigation_expression: its value", "cf.json:26:36: rules[1] (api)", "mitigation_expression"],
    ["disabled: enabled's value", "cf.json:31:20: rules[2] (Old)", "disabled (enabled: false)"],
    ["no ratelimit: the rule", "cf.json:34:7: rules[3] (Skip)", "no ratelimit"],
    ["score_per_period: its value", "cf.json:39:92: rules[4] (Search)", "score_per_period"],
    ["an expression that does not parse: the string's start", "cf.json:37:23: rules[4] (Search)", "character 26"],
    ["a custom body: its value", "cf.json:45:75: rules[5] (Block)", "custom response body"],
    ["the evaluation order: the list of rules", "cf.json:4:14", "evaluates its rules in order"],
  ])("%s: %s", (_, where, message) => {
    expect(result.report).toContainEqual({
      where,
      kind: expect.any(String),
      message: expect.stringContaining(message),
    });
  });

  it("names the rule object as each rule's source", () => {
    expect(result.rules.map((r) => r.source)).toEqual([
      "cf.json:5:7: rules[0] (Login): 5 requests per 60 s, action managed_challenge",
      "cf.json:41:7: rules[5] (Block): 10 requests per 60 s, action block",
    ]);
  });
});

const lines = (...l: string[]) => l.join("\n");

describe("every error says file:line:col of the value that is wrong", () => {
  it.each([
    [
      "a field of the wrong type: its value",
      lines(
        "[",
        "  {",
        '    "ratelimit": {',
        '      "period": "60",',
        '      "requests_per_period": 5',
        "    }",
        "  }",
        "]",
      ),
      'cf.json:4:17: rules[0].ratelimit.period: must be a whole number of seconds, got string "60"',
    ],
    [
      "a rule's field of the wrong type",
      lines("[", "  {", '    "description": "a",', '    "expression": 1', "  }", "]"),
      "cf.json:4:19: rules[0].expression: must be a string, got number 1",
    ],
    [
      "a rule that is not an object: it",
      lines(
        "{",
        '  "rules": [',
        '    {"ratelimit": {"period": 60, "requests_per_period": 5}},',
        '    "login"',
        "  ]",
        "}",
      ),
      'cf.json:4:5: rules[1]: a rule must be an object, got string "login"',
    ],
    [
      "a requests_per_period of 0: its value",
      lines(
        '{"rules": [',
        "  {",
        '    "ratelimit": {',
        '      "period": 60,',
        '      "requests_per_period": 0',
        "    }",
        "  }",
        "]}",
      ),
      "cf.json:5:30: rules[0].ratelimit: needs a period and a requests_per_period above 0",
    ],
    [
      "no period: the ratelimit object",
      lines("[", "  {", '    "ratelimit": {', '      "requests_per_period": 5', "    }", "  }", "]"),
      "cf.json:3:18: rules[0].ratelimit: needs a period and a requests_per_period above 0",
    ],
    [
      "another phase: its value",
      lines("{", '  "result": {', '    "phase": "http_request_firewall_custom",', '    "rules": []', "  }", "}"),
      "cf.json:3:14: a ruleset of phase http_request_firewall_custom, not of rate limiting rules (phase http_ratelimit)",
    ],
    [
      "an API error: success's value",
      lines("{", '  "success": false,', '  "errors": [{"code": 10000, "message": "Authentication error"}]', "}"),
      "cf.json:2:14: the API answered an error (success: false), not a ruleset",
    ],
    [
      "rules that are not a list: their value",
      lines("{", '  "result": {', '    "rules": {}', "  }", "}"),
      'cf.json:3:14: expected a ruleset ({"result": {"rules": [...]}} as the Rulesets API returns it), {"rules": [...]} or a list of rules',
    ],
    [
      "no ruleset at all: the document",
      lines("", "  42"),
      'cf.json:2:3: expected a ruleset ({"result": {"rules": [...]}} as the Rulesets API returns it), {"rules": [...]} or a list of rules',
    ],
    [
      "a trailing comma: the comma",
      lines("[", "  {", '    "description": "a",', "  }", "]"),
      'cf.json:3:23: not JSON: a comma before "}": JSON allows no trailing comma',
    ],
    [
      "a file cut short: its end, and where the object opened",
      lines("{", '  "result": {', '    "rules": [', '      {"description": "a"'),
      "cf.json:4:26: not JSON: the file ends inside the object opened at 4:7 (is it cut short?)",
    ],
    [
      "a key twice: the second",
      lines(
        "[",
        "  {",
        '    "expression": "http.request.uri.path eq \\"/a\\"",',
        '    "expression": "true"',
        "  }",
        "]",
      ),
      'cf.json:4:5: the key "expression" twice in one object (first at 3:5): JSON.parse would keep the last silently; keep one of them',
    ],
  ])("%s", (_, text, message) => {
    expect(() => importCloudflare(text, "cf.json")).toThrow(CloudflareImportError);
    expect(() => importCloudflare(text, "cf.json")).toThrow(new CloudflareImportError(message));
  });
});

describe("sluice import cloudflare prints the places", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-import-cf-lines-"));

  it("in the report on standard error", async () => {
    const file = join(dir, "ruleset.json");
    writeFileSync(file, RULESET);
    const r = await runCli(["import", "cloudflare", file, "--allow-partial"]);
    expect(r.code).toBe(0);
    expect(r.stderr.split("\n")[0]).toBe(
      `${file}:10:31: rules[0] (Login): approximate: Cloudflare counts per data center (cf.colo.id); Sluice counts across all of them, so a client spread over several gets less (add the colo key part to count per data center)`,
    );
    expect(r.stderr).toContain(`${file}:37:23: rules[4] (Search): left out: the expression does not parse`);
    expect(r.stdout).toContain(`# from ${file}:5:7: rules[0] (Login): 5 requests per 60 s, action managed_challenge\n`);
  });

  it("in an error, exit 1", async () => {
    const file = join(dir, "cut.json");
    writeFileSync(file, lines("{", '  "rules": [', '    {"description": "a",'));
    const r = await runCli(["import", "cloudflare", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`${file}:3:25: not JSON: the file ends inside the object opened at 3:5 (is it cut short?)\n`);
  });
});
