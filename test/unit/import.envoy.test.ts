/**
 * `sluice import envoy`: ratelimit service configurations and local rate limit filters with the rules and the report
 * each must give, malformed ones with their errors, and the mapping flags.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { type EnvoyMapping, parseMapping } from "../../src/migrate/envoy_mapping.ts";
import { type DraftRule, type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

function mapping(...specs: string[]): EnvoyMapping {
  const m = parseMapping(specs);
  if ("error" in m) throw new Error(m.error);
  return m.mapping;
}

function line(rule: DraftRule): string {
  const m = rule.match;
  const fields = rule.fields.map(([k, v]) => `${k}=${v}`).join(" ");
  return `${rule.id} ${m.plan === undefined ? "" : `plan=${m.plan} `}${m.route ?? "*"} ${m.identity} ${fields}`;
}

function imported(yaml: string, ...maps: string[]): ImportResult {
  const result = importEnvoy(yaml, "ratelimit.yaml", mapping(...maps));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const LOCAL = (body: string) => `stat_prefix: local
token_bucket: { max_tokens: 100, tokens_per_fill: 100, fill_interval: 1s }
filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
${body}`;

describe("Envoy configurations: the rules and the report", () => {
  it.each([
    [
      "1 per address, per minute",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n",
      [],
      ["edge-remote_address * ip algorithm=fixed_window limit=100 window=min"],
      [],
    ],
    [
      "2 nested descriptors: a route's limit per address, with the route mapped",
      "domain: edge\ndescriptors:\n  - key: generic_key\n    value: search\n    descriptors:\n      - key: remote_address\n        rate_limit: { unit: second, requests_per_unit: 5 }\n",
      ["generic_key:search=route:GET /v1/search/**"],
      ["edge-search-remote_address GET /v1/search/** ip algorithm=fixed_window limit=5 window=s"],
      [],
    ],
    [
      "3 the same without the mapping: every request, approximately",
      "domain: edge\ndescriptors:\n  - key: generic_key\n    value: search\n    descriptors:\n      - key: remote_address\n        rate_limit: { unit: second, requests_per_unit: 5 }\n",
      [],
      ["edge-search-remote_address * ip algorithm=fixed_window limit=5 window=s"],
      ["approximate: generic_key=search > remote_address: generic_key=search comes from an Envoy route action"],
    ],
    [
      "4 shadow_mode",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n    shadow_mode: true\n",
      [],
      ["edge-remote_address * ip algorithm=fixed_window limit=1000 window=h mode=shadow"],
      [],
    ],
    [
      "5 unlimited for one address: Sluice cannot exempt it",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 60 }\n  - key: remote_address\n    value: 203.0.113.5\n    rate_limit: { unlimited: true }\n",
      [],
      ["edge-remote_address * ip algorithm=fixed_window limit=60 window=min"],
      ["approximate: remote_address=203.0.113.5: unlimited for one remote_address; Sluice cannot exempt one caller"],
    ],
    [
      "6 replaces and name",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { name: per-ip, unit: minute, requests_per_unit: 100 }\n  - key: generic_key\n    value: bulk\n    descriptors:\n      - key: remote_address\n        rate_limit:\n          name: bulk-ip\n          replaces: [{ name: per-ip }]\n          unit: minute\n          requests_per_unit: 500\n",
      ["generic_key:bulk=route:POST /v1/bulk"],
      [
        "per-ip * ip algorithm=fixed_window limit=100 window=min",
        "bulk-ip POST /v1/bulk ip algorithm=fixed_window limit=500 window=min",
      ],
      ["approximate: bulk-ip replaces per-ip where both apply"],
    ],
    [
      "7 a header descriptor mapped to the API key, a plan from a valued descriptor",
      "domain: api\ndescriptors:\n  - key: plan\n    value: free\n    descriptors:\n      - key: client_id\n        rate_limit: { unit: day, requests_per_unit: 10000 }\n",
      ["client_id=api_key", "plan:free=plan:free"],
      ["api-free-client_id plan=free * api_key algorithm=fixed_window limit=10000 window=d"],
      [],
    ],
    [
      "8 a key with no meaning is left out; a shared budget too",
      "domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 10 }\n  - key: generic_key\n    value: global\n    rate_limit: { unit: second, requests_per_unit: 1000 }\n",
      [],
      [],
      [
        "left out: tenant: no meaning for descriptor key tenant: give --map tenant=api_key, ip or user",
        "left out: generic_key=global: one budget shared by every client",
      ],
    ],
    [
      "9 the local filter: per-address descriptor, the filter-wide bucket left out",
      LOCAL(
        "filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }\ndescriptors:\n  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 20, tokens_per_fill: 10, fill_interval: 1s }\n",
      ),
      [],
      ["local-remote_address * ip algorithm=token_bucket rate=10/1s burst=20 scope=local"],
      [
        "left out: local: the filter-wide token_bucket is one budget shared by every client",
        "approximate: remote_address: Envoy adds 10 token(s) at once every 1s",
      ],
    ],
    [
      "10 the local filter not enforced: shadow",
      LOCAL("descriptors:\n  - entries: [{ key: x-user }]\n    token_bucket: { max_tokens: 5, fill_interval: 0.5s }\n"),
      ["x-user=user"],
      ["local-x-user * user algorithm=token_bucket rate=1/500ms burst=5 scope=local mode=shadow"],
      [],
    ],
    [
      "11 the local filter inside a bootstrap, not enabled: nothing",
      "static_resources:\n  listeners:\n    - filter_chains:\n        - filters:\n            - typed_config:\n                stat_prefix: rl\n                token_bucket: { max_tokens: 10, fill_interval: 1s }\n",
      [],
      [],
      ["left out: rl: filter_enabled is 0% (Envoy's default when not set), so the filter limits nothing"],
    ],
    [
      "12 a week window and a year left out",
      "domain: q\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: week, requests_per_unit: 7000 }\n  - key: user_id\n    rate_limit: { unit: year, requests_per_unit: 1 }\n",
      ["user_id=user"],
      ["q-remote_address * ip algorithm=fixed_window limit=7000 window=7d"],
      ["left out: user_id: unit year: Sluice windows go up to a month"],
    ],
  ] as const)("%s", (_name, yaml, maps, rules, report) => {
    const result = imported(yaml, ...maps);
    expect(result.rules.map(line)).toEqual(rules);
    const items = result.report.map((r) => `${r.kind}: ${r.message}`);
    for (const expected of report) expect(items.some((i) => i.startsWith(expected))).toBe(true);
  });
});

describe("malformed Envoy configurations", () => {
  it.each([
    ["YAML syntax", "domain: edge\ndescriptors:\n  - key: [unclosed\n", /ratelimit\.yaml:\d+:\d+: /],
    [
      "no domain and no filter",
      "hello: world\n",
      /neither a ratelimit service configuration .* nor a local rate limit filter/,
    ],
    [
      "a descriptor without key",
      "domain: edge\ndescriptors:\n  - value: x\n",
      /ratelimit\.yaml:3: a descriptor needs a key/,
    ],
    [
      "a bad unit",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
      /ratelimit\.yaml:3: rate_limit\.unit must be second, minute/,
    ],
    [
      "a bad count",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: many }\n",
      /requests_per_unit must be a whole number, got "many"/,
    ],
    [
      "a bad fill interval",
      LOCAL(
        "descriptors:\n  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 5, fill_interval: soon }\n",
      ),
      /fill_interval must be a duration/,
    ],
  ])("%s", async (_name, yaml, message) => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-"));
    const path = join(dir, "ratelimit.yaml");
    writeFileSync(path, yaml);
    const r = await runCli(["import", "envoy", path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
  });

  it("a bad --map is a usage error", async () => {
    const r = await runCli(["import", "envoy", "x.yaml", "--map", "client_id=apikey"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--map client_id: expected api_key, ip, user, any, plan:NAME or route:METHOD /path");
  });
});
