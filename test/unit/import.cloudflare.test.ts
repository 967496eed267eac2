/**
 * `sluice import cloudflare`: whole rate limiting rules with the rule and the report each must give, malformed files
 * with their errors, and the command's exit status and output.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CloudflareImportError, duration, importCloudflare } from "../../src/migrate/cloudflare_import.ts";
import { type DraftRule, type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

type Rule = Record<string, unknown>;

const rule = (over: Rule = {}, ratelimit: Rule = {}): Rule => ({
  description: "r",
  expression: 'http.request.uri.path eq "/login"',
  action: "block",
  ...over,
  ratelimit: { characteristics: ["cf.colo.id", "ip.src"], period: 60, requests_per_period: 5, ...ratelimit },
});

function imported(...rules: Rule[]): ImportResult {
  const result = importCloudflare(JSON.stringify({ result: { rules } }), "cf.json");
  expect(parseRules(rulesYaml(result, "test"), "x.yaml").errors).toEqual([]);
  return result;
}

/** A draft as one line: id, match, key and fields. */
function line(r: DraftRule): string {
  const m = r.match;
  const match = [
    m.route === undefined ? "*" : [m.route].flat().join("|"),
    ...(m.except === undefined ? [] : [`except=${m.except.join("|")}`]),
    ...(m.header ?? []).map((h) => `header=${h}`),
    m.identity ?? `key=${r.key === "global" ? "global" : (r.key ?? []).join("+")}`,
  ];
  const fields = r.fields
    .filter(([k]) => k !== "description" && k !== "algorithm")
    .map(([k, v]) => `${k}=${typeof v === "object" ? v.flow : v}`);
  return [r.id, ...match, ...fields].join(" ");
}

const kinds = (result: ImportResult, kind: string) =>
  result.report.filter((r) => r.kind === kind).map((r) => r.message);

describe("Cloudflare rate limiting rules: the rules and the report", () => {
  it.each([
    [
      "block, with a mitigation timeout",
      rule({}, { mitigation_timeout: 600 }),
      "r * /login ip limit=5 window=min block_for=10min",
    ],
    [
      "block without one: throttling, no block_for",
      rule({}, { mitigation_timeout: 0 }),
      "r * /login ip limit=5 window=min",
    ],
    [
      "block with its own status",
      rule({ action_parameters: { response: { status_code: 403 } } }),
      "r * /login ip limit=5 window=min status=403",
    ],
    [
      "block with 429, the default",
      rule({ action_parameters: { response: { status_code: 429 } } }),
      "r * /login ip limit=5 window=min",
    ],
    ["log: shadow", rule({ action: "log" }, { period: 10 }), "r * /login ip limit=5 window=10s mode=shadow"],
    [
      "managed_challenge: enforced",
      rule({ action: "managed_challenge" }, { period: 3600 }),
      "r * /login ip limit=5 window=h",
    ],
    [
      "the data center only: global",
      rule({}, { characteristics: ["cf.colo.id"], period: 120 }),
      "r * /login key=global limit=5 window=2min",
    ],
    [
      "a header part: its values accepted as Cloudflare counted them",
      rule({}, { characteristics: ["cf.colo.id", 'http.request.headers["x-tenant"]'] }),
      "r * /login key={ header: x-tenant } limit=5 window=min key_client_chosen=accept",
    ],
    [
      "a status counting expression that repeats the rule's",
      rule({}, { counting_expression: 'http.request.uri.path eq "/login" and http.response.code in {401 403}' }),
      "r * /login ip limit=5 window=min count_when={ status: [401, 403] }",
    ],
    [
      "a class of statuses",
      rule({}, { counting_expression: 'http.request.uri.path eq "/login" and http.response.code in {500..599}' }),
      "r * /login ip limit=5 window=min count_when={ status: 5xx }",
    ],
    [
      "a counting expression equal to the rule's: every matched request",
      rule({}, { counting_expression: 'http.request.uri.path  eq "/login"' }),
      "r * /login ip limit=5 window=min",
    ],
    [
      "log with a timeout: a shadow rule that holds a caller out",
      rule({ action: "log" }, { mitigation_timeout: 86400 }),
      "r * /login ip limit=5 window=min mode=shadow block_for=d",
    ],
    [
      "a challenge that counts failed logins with a lockout",
      rule(
        { action: "managed_challenge" },
        {
          mitigation_timeout: 3600,
          counting_expression: 'http.request.uri.path eq "/login" and http.response.code eq 401',
        },
      ),
      "r * /login ip limit=5 window=min count_when={ status: 401 } block_for=h",
    ],
    ["no expression: every request", rule({ expression: "" }), "r * ip limit=5 window=min"],
  ])("%s", (_, r, want) => {
    const result = imported(r);
    expect(result.rules.map(line)).toEqual([want]);
    expect(kinds(result, "left out")).toEqual([]);
  });

  it("reports the data center, the IPv6 grouping, a challenge and requests_to_origin", () => {
    const result = imported(rule({ action: "js_challenge" }, { requests_to_origin: true }));
    expect(kinds(result, "approximate")).toEqual([
      expect.stringContaining("Cloudflare counts per data center (cf.colo.id)"),
      expect.stringContaining("action js_challenge: Sluice refuses (429) where Cloudflare would challenge"),
      expect.stringContaining("requests_to_origin: Cloudflare counts only requests that reach the origin"),
    ]);
    expect(kinds(result, "note")).toEqual([expect.stringContaining("IPv6 client by its /64")]);
    expect(result.rules[0]!.notes).toHaveLength(3);
  });

  it("reports a status counting expression that leaves out the rule's tests (it counts more in Cloudflare)", () => {
    const result = imported(rule({}, { counting_expression: "http.response.code eq 401" }));
    expect(result.rules.map(line)).toEqual(["r * /login ip limit=5 window=min count_when={ status: 401 }"]);
    expect(kinds(result, "approximate")).toContainEqual(
      expect.stringContaining("does not repeat the rule's expression"),
    );
  });

  it("names rules after description, ref or id, each unique", () => {
    const result = imported(
      rule({ description: "Login limit" }),
      rule({ description: "Login limit" }),
      rule({ description: undefined, ref: "my_ref" }),
      rule({ description: undefined, id: "2c0fc9fa" }),
      rule({ description: undefined }),
    );
    expect(result.rules.map((r) => r.id)).toEqual([
      "login-limit",
      "login-limit-2",
      "my_ref",
      "2c0fc9fa",
      "cloudflare-rule",
    ]);
  });

  it.each([
    [rule({ enabled: false }), "note", "disabled (enabled: false), so no rule"],
    [rule({ expression: 'http.host eq "a"' }), "left out", 'the expression\'s `http.host eq "a"`: http.host'],
    [rule({ expression: 'http.request.uri.path eq "/a' }), "left out", "the expression does not parse"],
    [rule({}, { characteristics: ["cf.colo.id", "cf.unique_visitor_id"] }), "left out", "IP with NAT support"],
    [
      rule({}, { counting_expression: "http.response.code ge 400" }),
      "left out",
      "the status is read with eq or in, not ge",
    ],
    [
      rule({}, { counting_expression: 'http.request.method eq "POST"' }),
      "left out",
      "which the rule's expression does not",
    ],
    [
      rule({}, { score_per_period: 400, score_response_header_name: "x-score", requests_per_period: undefined }),
      "left out",
      "score_per_period: complexity-based counting",
    ],
    [rule({}, { mitigation_expression: "true" }), "left out", "mitigation_expression"],
    [rule({ action: "skip" }), "left out", 'action "skip": not a rate limiting rule\'s action'],
    [
      rule({ action_parameters: { response: { status_code: 200 } } }),
      "left out",
      "status_code 200: a refusal's status is 400 to 599",
    ],
    [{ expression: "true", action: "block" }, "left out", "no ratelimit"],
  ])("%j: %s", (r, kind, message) => {
    const result = imported(r);
    expect(result.rules).toEqual([]);
    expect(result.report.filter((i) => i.kind !== "approximate" && !i.message.includes("IPv6"))).toEqual([
      {
        // The place of each item: test/unit/import.cloudflare_lines.test.ts.
        where: expect.stringMatching(
          r.description === undefined ? /^cf\.json:1:\d+: rules\[0\]$/ : /^cf\.json:1:\d+: rules\[0\] \(r\)$/,
        ),
        kind,
        message: expect.stringContaining(message),
      },
    ]);
  });

  it("lists every reason a rule is left out at once", () => {
    const result = imported(
      rule({ expression: 'http.host eq "a"', action: "skip" }, { characteristics: ["cf.unique_visitor_id"] }),
    );
    expect(kinds(result, "left out")).toHaveLength(3);
  });

  it.each([
    ["{", /^cf\.json:1:2: not JSON: the file ends inside the object opened at 1:1/],
    [
      '{"result": {"phase": "http_request_firewall_custom", "rules": []}}',
      /phase http_request_firewall_custom, not of rate limiting rules/,
    ],
    ['{"success": false, "errors": [{"message": "x"}]}', /the API answered an error/],
    ['{"result": {}}', /expected a ruleset/],
    ["[1]", /^cf\.json:1:2: rules\[0\]: a rule must be an object, got number 1$/],
    [
      '[{"ratelimit": {"period": "60", "requests_per_period": 5}}]',
      /^cf\.json:1:27: rules\[0\]\.ratelimit\.period: must be a whole number of seconds, got string "60"$/,
    ],
    ['[{"ratelimit": {"period": 60}}]', /rules\[0\]\.ratelimit: needs a period and a requests_per_period above 0/],
    ['[{"expression": 1, "ratelimit": {}}]', /rules\[0\]\.expression: must be a string/],
  ])("refuses %s", (text, message) => {
    expect(() => importCloudflare(text, "cf.json")).toThrow(CloudflareImportError);
    expect(() => importCloudflare(text, "cf.json")).toThrow(message);
  });

  it("reads {rules} and a bare list as the API's {result: {rules}}", () => {
    // The same but for the columns (`cf.json:1:21` is `cf.json:1:11` in {rules}).
    const read = (root: unknown) =>
      JSON.parse(
        JSON.stringify(importCloudflare(JSON.stringify(root), "cf.json")).replace(/cf\.json:1:\d+/g, "cf.json"),
      );
    const want = read({ result: { rules: [rule()] } });
    expect(want.rules[0].source).toMatch(/^cf\.json: rules\[0\] \(r\): /);
    expect(read({ rules: [rule()] })).toEqual(want);
    expect(read([rule()])).toEqual(want);
  });

  it.each([
    [10, "10s"],
    [60, "min"],
    [600, "10min"],
    [3600, "h"],
    [86400, "d"],
    [90, "90s"],
  ])("writes %i s as %s", (seconds, want) => {
    expect(duration(seconds)).toBe(want);
  });
});

describe("sluice import cloudflare", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-import-cf-"));
  const file = (name: string, rules: Rule[]) => {
    writeFileSync(join(dir, name), JSON.stringify({ result: { rules } }));
    return join(dir, name);
  };

  it("writes the rules to --out and the report to standard error, exit 0", async () => {
    const out = join(dir, "ok.yaml");
    const r = await runCli([
      "import",
      "cloudflare",
      file("ok.json", [rule({}, { mitigation_timeout: 60 })]),
      "--out",
      out,
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    const yaml = readFileSync(out, "utf8");
    expect(yaml).toContain("# Imported from cloudflare ok.json by sluice import.");
    expect(yaml).toContain('  match: { route: "* /login", identity: ip }\n');
    expect(yaml).toContain("  algorithm: sliding_counter\n  limit: 5\n  window: min\n  block_for: min\n");
    expect(parseRules(yaml, "ok.yaml").errors).toEqual([]);
    expect(r.stderr).toMatch(
      /approximate: Cloudflare counts per data center.*\n.*\n1 rule written; 1 approximate, 0 left out\n$/,
    );
  });

  it("exits 1 writing nothing when a rule was left out, unless --allow-partial", async () => {
    const f = file("partial.json", [rule(), rule({ expression: 'http.host eq "a"' })]);
    const out = join(dir, "partial.yaml");
    const r = await runCli(["import", "cloudflare", f, "--out", out]);
    expect(r.code).toBe(1);
    expect(existsSync(out)).toBe(false);
    expect(r.stderr).toContain("1 left out; nothing written; rerun with --allow-partial");
    const partial = await runCli(["import", "cloudflare", f, "--allow-partial"]);
    expect(partial.code).toBe(0);
    expect(partial.stdout).toContain("- id: r\n");
  });

  it("refuses a malformed file with its name and no stack trace, exit 1", async () => {
    writeFileSync(join(dir, "bad.json"), "{ not json");
    const r = await runCli(["import", "cloudflare", join(dir, "bad.json")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.json:1:3: not JSON: expected a key in double quotes, got "n"\n$/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("says a file without rules has nothing to import", async () => {
    const r = await runCli(["import", "cloudflare", file("empty.json", [])]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "sluice import: cloudflare empty.json has no rate limits to import (no rules); nothing written\n",
    );
  });

  it("takes no --map, --root or --envoy", async () => {
    const r = await runCli(["import", "cloudflare", file("m.json", [rule()]), "--map", "a=ip"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--map is for envoy");
  });
});
