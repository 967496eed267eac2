/**
 * `sluice import envoy`: ratelimit service configurations and local rate limit filters with the rules and the report
 * each must give, malformed ones with their errors, and the mapping flags.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
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
  const key = rule.key === undefined ? m.identity : `key=${rule.key === "global" ? "global" : rule.key.join("+")}`;
  return `${rule.id} ${m.plan === undefined ? "" : `plan=${m.plan} `}${m.route ?? "*"} ${key} ${fields}`;
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
      "3 the same without the mapping: generic_key is every request by default, said in a note",
      "domain: edge\ndescriptors:\n  - key: generic_key\n    value: search\n    descriptors:\n      - key: remote_address\n        rate_limit: { unit: second, requests_per_unit: 5 }\n",
      [],
      ["edge-search-remote_address * ip algorithm=fixed_window limit=5 window=s"],
      [
        "note: generic_key=search > remote_address: generic_key=search is set by Envoy's route actions: imported for every request",
      ],
    ],
    [
      "4 shadow_mode",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 1000 }\n    shadow_mode: true\n",
      [],
      ["edge-remote_address * ip algorithm=fixed_window limit=1000 window=h mode=shadow"],
      [],
    ],
    [
      "5 unlimited for one address: the address's rule leaves it out (match.except_address)",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 60 }\n  - key: remote_address\n    value: 203.0.113.5\n    rate_limit: { unlimited: true }\n",
      [],
      ["edge-remote_address * ip algorithm=fixed_window limit=60 window=min"],
      [
        "note: remote_address=203.0.113.5: unlimited for these clients: the rules of remote_address alone leave them out (match.except_address), so no rule",
      ],
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
      "8 a key with no meaning is left out; a generic_key alone is one budget for every client (key: global)",
      "domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 10 }\n  - key: generic_key\n    value: global\n    rate_limit: { unit: second, requests_per_unit: 1000 }\n",
      [],
      ["api-global * key=global algorithm=fixed_window limit=1000 window=s"],
      ["left out: tenant: no meaning for descriptor key tenant: give --map tenant=api_key, ip, user, header:NAME"],
    ],
    [
      "9 the local filter: the filter-wide bucket (key: global, local), a per-address descriptor",
      LOCAL(
        "filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }\ndescriptors:\n  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 20, tokens_per_fill: 10, fill_interval: 1s }\n",
      ),
      [],
      [
        "local * key=global algorithm=token_bucket rate=100/1s burst=100 scope=local status=429",
        "local-remote_address * ip algorithm=token_bucket rate=10/1s burst=20 scope=local status=429",
      ],
      [
        "approximate: local: the filter-wide bucket is one per Envoy instance",
        // always_consume_default_token_bucket is true unless set: the filter-wide bucket counts every request.
        "approximate: remote_address: an entry without a value gives each value its own bucket, and Envoy keeps at most 20 of them",
        "approximate: remote_address: Envoy adds 10 token(s) at once every 1s",
        "approximate: local: Envoy takes a request's tokens bucket by bucket",
      ],
    ],
    [
      "10 the local filter not enforced: shadow",
      LOCAL("descriptors:\n  - entries: [{ key: x-user }]\n    token_bucket: { max_tokens: 5, fill_interval: 0.5s }\n"),
      ["x-user=user"],
      [
        "local * key=global algorithm=token_bucket rate=100/1s burst=100 scope=local status=429 mode=shadow",
        "local-x-user * user algorithm=token_bucket rate=1/500ms burst=5 scope=local status=429 mode=shadow",
      ],
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
      "12 a week window; a year is the service's fixed 365 days",
      "domain: q\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: week, requests_per_unit: 7000 }\n  - key: user_id\n    rate_limit: { unit: year, requests_per_unit: 1 }\n",
      ["user_id=user"],
      [
        "q-remote_address * ip algorithm=fixed_window limit=7000 window=7d",
        "q-user_id * user algorithm=fixed_window limit=1 window=365d",
      ],
      [],
    ],
    [
      "13 month is the service's fixed 30 days, not a calendar month",
      "domain: q\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: month, requests_per_unit: 100000 }\n",
      [],
      ["q-remote_address * ip algorithm=fixed_window limit=100000 window=30d"],
      [],
    ],
    [
      "14 request_headers and masked_remote_address as key parts; nested, with and without values",
      "domain: api\ndescriptors:\n  - key: tenant\n    descriptors:\n      - key: masked_remote_address\n        rate_limit: { unit: second, requests_per_unit: 50 }\n  - key: header_match\n    value: bots\n    descriptors:\n      - key: remote_address\n        rate_limit: { unit: minute, requests_per_unit: 10 }\n",
      ["tenant=header:X-Tenant-Id", "masked_remote_address=ip:24:56", "header_match:bots=route:* /v1/**"],
      [
        "api-tenant-masked_remote_address * key={ header: x-tenant-id }+{ ip: { v4: 24, v6: 56 } } algorithm=fixed_window limit=50 window=s key_missing=skip",
        "api-bots-remote_address * /v1/** ip algorithm=fixed_window limit=10 window=min",
      ],
      [],
    ],
    [
      "15 refused: a valued descriptor nobody mapped, a wildcard value",
      "domain: api\ndescriptors:\n  - key: header_match\n    value: bots\n    rate_limit: { unit: second, requests_per_unit: 1 }\n  - key: client_id\n    value: acme*\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
      ["client_id=api_key"],
      [],
      [
        "left out: header_match=bots: header_match=bots comes from an Envoy route action, which this file does not show",
        "left out: client_id=acme*: the wildcard value client_id=acme* matches values by a pattern; client_id is not a request header (--map client_id=header:NAME if it is), so no match.header can test it",
      ],
    ],
    [
      "16 the local filter's status; a per-connection filter is refused",
      LOCAL("status: { code: ServiceUnavailable }\n"),
      [],
      ["local * key=global algorithm=token_bucket rate=100/1s burst=100 scope=local status=503 mode=shadow"],
      [],
    ],
    [
      "17 local_rate_limit_per_downstream_connection",
      LOCAL("local_rate_limit_per_downstream_connection: true\n"),
      [],
      [],
      ["left out: local: local_rate_limit_per_downstream_connection keeps a bucket per client connection"],
    ],
    [
      // The service's wildcardMatch: `*` alone matches every value, one counter each, as a key without a value; it was
      // left out ("one counter per actual value starting with \"\"; Sluice cannot match a value's prefix").
      "18 a value of * alone is the key without a value",
      'domain: api\ndescriptors:\n  - key: client_id\n    value: "*"\n    rate_limit: { unit: minute, requests_per_unit: 5 }\n',
      ["client_id=header:x-client-id"],
      ["api-client_id * key={ header: x-client-id } algorithm=fixed_window limit=5 window=min key_missing=skip"],
      ["note: client_id=* matches every client_id value, one counter per value: read as client_id without a value"],
    ],
    [
      // Fields that change what a client sees or what a bucket holds were dropped without a word (Istio's local rate
      // limit example adds `x-local-rate-limit: true` to limited responses with response_headers_to_add).
      "19 the local filter's headers, gRPC status and cluster-wide division are said",
      LOCAL(
        "filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }\nresponse_headers_to_add: [{ header: { key: x-local-rate-limit, value: 'true' } }]\nenable_x_ratelimit_headers: DRAFT_VERSION_03\nrate_limited_as_resource_exhausted: true\nlocal_cluster_rate_limit: {}\n",
      ),
      [],
      ["local * key=global algorithm=token_bucket rate=100/1s burst=100 scope=local status=429"],
      [
        "note: local: response_headers_to_add: Envoy adds these headers to the responses it limits",
        "note: local: enable_x_ratelimit_headers: Envoy's x-ratelimit-* headers (draft 03)",
        "note: local: rate_limited_as_resource_exhausted: a gRPC status",
        "approximate: local: local_cluster_rate_limit: Envoy divides each bucket among the local cluster's hosts",
      ],
    ],
  ] as const)("%s", (_name, yaml, maps, rules, report) => {
    const result = imported(yaml, ...maps);
    expect(result.rules.map(line)).toEqual(rules);
    const items = result.report.map((r) => `${r.kind}: ${r.message}`);
    for (const expected of report) expect(items.some((i) => i.startsWith(expected))).toBe(true);
  });

  it("x-ratelimit headers disabled (Envoy's default value) are not said; enabled, they are", () => {
    const said = (value: string) =>
      imported(LOCAL(`enable_x_ratelimit_headers: ${value}\n`)).report.filter((r) =>
        r.message.includes("enable_x_ratelimit_headers"),
      ).length;
    expect(said("DISABLE_X_RATELIMIT_HEADERS")).toBe(0);
    expect(said("DRAFT_VERSION_03")).toBe(1);
  });

  it("a rule for every request is written `match: {}`, as a person writes it", () => {
    const yaml =
      "domain: api\ndescriptors:\n  - key: generic_key\n    value: global\n    rate_limit: { unit: second, requests_per_unit: 1000 }\n";
    const text = rulesYaml(imported(yaml), "test");
    expect(text).toContain("- id: api-global\n  match: {}\n  key: global\n");
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
      /ratelimit\.yaml:3: descriptor has empty key; the ratelimit service refuses this configuration/,
    ],
    [
      "a bad unit",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
      /ratelimit\.yaml:4: invalid rate limit unit 'fortnight' \(second, minute, hour, day, week, month, year\)/,
    ],
    [
      "a bad count",
      "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: many }\n",
      /requests_per_unit: cannot unmarshal "many" into a whole number from 0 to 4294967295/,
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

  it("something left out: exit 1 and nothing written, not even --out; --allow-partial writes the rest", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-"));
    const path = join(dir, "ratelimit.yaml");
    const out = join(dir, "rules.yaml");
    writeFileSync(
      path,
      "domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 5 }\n  - key: destination_cluster\n    value: search\n    rate_limit: { unit: second, requests_per_unit: 100 }\n",
    );
    const r = await runCli(["import", "envoy", path, "--out", out]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(existsSync(out)).toBe(false);
    expect(r.stderr).toContain(
      "destination_cluster=search: destination_cluster is the cluster Envoy routes the request to: give --envoy FILE",
    );
    expect(r.stderr).toContain("1 left out; nothing written");
    const partial = await runCli(["import", "envoy", path, "--out", out, "--allow-partial"]);
    expect(partial.code).toBe(0);
    expect(readFileSync(out, "utf8")).toContain("- id: api-remote_address");
  });

  it("a bad --map is a usage error", async () => {
    const r = await runCli(["import", "envoy", "x.yaml", "--map", "client_id=apikey"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      "--map client_id: expected api_key, ip, user, header:NAME, ip:V4:V6, any, plan:NAME or route:METHOD /path",
    );
  });
});

describe("values of the client address: match.address, and except_address for the key alone", () => {
  const yaml = `domain: edge
descriptors:
  - key: remote_address
    value: 203.0.113.7
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 50 }
  - key: masked_remote_address
    value: 198.51.100.0/24
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: masked_remote_address
    value: 198.51.0.0/16
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: masked_remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000 }
`;
  const placed = (r: ImportResult) =>
    r.rules.map((x) => [x.id, x.match.address, x.match.except_address, x.key ?? x.match.identity]);

  it("one address and one masked range: their own counters; the key alone: every other client", () => {
    // The service looks up key_value before the key alone, so 203.0.113.7 never reaches the per-address limit.
    const r = imported(yaml, "masked_remote_address=ip:24:48");
    expect(placed(r)).toEqual([
      ["edge-203.0.113.7", ["203.0.113.7"], undefined, "global"],
      ["edge-remote_address", undefined, ["203.0.113.7"], "ip"],
      ["edge-198.51.100.0-24", ["198.51.100.0/24"], undefined, "global"],
      ["edge-masked_remote_address", undefined, ["198.51.100.0/24"], ["{ ip: { v4: 24, v6: 48 } }"]],
    ]);
    // A range at another mask than the action's is a value the service never sends: not an address value here.
    expect(r.report.map((i) => `${i.kind}: ${i.message}`).join("\n")).toMatch(
      /left out: masked_remote_address=198\.51\.0\.0\/16: a limit for one masked_remote_address value/,
    );
  });
});
