/**
 * `sluice import envoy` reading what descriptors mean from Envoy's route actions (the file's own routes, or
 * `--envoy FILE`) instead of `--map`: `header_value_match` on `:path`/`:method` as a route, on anything else (or with
 * `expect_match: false`) left out with its reason; `request_headers`, `query_parameters`; Kubernetes manifests of
 * several documents and ConfigMaps holding the service's configuration.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { load } from "../../src/migrate/envoy_file.ts";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { parseMapping } from "../../src/migrate/envoy_mapping.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

const SERVICE = `domain: edge
descriptors:
  - key: header_match
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: header_match
    value: bots
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: header_match
    value: no-key
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 100 }
  - key: generic_key
    value: search
    rate_limit: { unit: second, requests_per_unit: 200 }
`;

const ROUTES = `static_resources:
  listeners:
    - filter_chains:
        - filters:
            - typed_config:
                route_config:
                  virtual_hosts:
                    - name: api
                      rate_limits:
                        - actions:
                            - header_value_match:
                                descriptor_value: login
                                headers:
                                  - { name: ":method", string_match: { exact: POST } }
                                  - { name: ":path", string_match: { exact: /v1/login } }
                            - remote_address: {}
                        - actions:
                            - header_value_match:
                                descriptor_value: bots
                                headers: [{ name: user-agent, string_match: { contains: bot } }]
                        - actions:
                            - header_value_match:
                                descriptor_value: no-key
                                expect_match: false
                                headers: [{ name: x-api-key, present_match: true }]
                        - actions:
                            - request_headers: { header_name: X-Tenant, descriptor_key: tenant }
                      routes:
                        - match: { prefix: /v1/search }
                          route:
                            cluster: api
                            # Without it, Envoy applies the host's rate_limits to no route: this one has its own.
                            include_vh_rate_limits: true
                            rate_limits:
                              - actions: [{ generic_key: { descriptor_value: search } }]
`;

function imported(service: string, routes: string): ImportResult {
  const m = parseMapping([]);
  if ("error" in m) throw new Error(m.error);
  // The routes as `--envoy FILE` gives them: the file's documents' values.
  const result = importEnvoy(service, "ratelimit.yaml", m.mapping, load(routes, "envoy.yaml").value);
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

describe("descriptors read from route actions", () => {
  it("maps header_value_match (:method and :path as routes, other headers as match.header), request_headers and a route's generic_key", () => {
    const r = imported(SERVICE, ROUTES);
    expect(r.rules.map((x) => [x.id, x.match.route ?? "*", x.match.header ?? [], x.match.identity ?? x.key])).toEqual([
      ["edge-login-remote_address", "POST /v1/login", [], "ip"],
      // One counter for every request whose User-Agent contains "bot" (the descriptor's value is fixed).
      ["edge-bots", "*", ['{ name: user-agent, contains: "bot" }'], "global"],
      // expect_match: false over a presence test: the requests without the header.
      ["edge-no-key", "*", ["{ name: x-api-key, present: false }"], "global"],
      ["edge-tenant", "*", [], ["{ header: x-tenant }"]],
      ["edge-search", "* /v1/search**", [], "global"],
    ]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it("a query_parameter_value_match is match.query on its route", () => {
    const routes = ROUTES.replace(
      "- actions: [{ generic_key: { descriptor_value: search } }]",
      "- actions: [{ query_parameter_value_match: { descriptor_value: csv, query_parameters: [{ name: format, string_match: { exact: csv, ignore_case: true } }] } }]",
    );
    const r = imported(
      "domain: edge\ndescriptors:\n  - key: query_match\n    value: csv\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n",
      routes,
    );
    expect(r.rules.map((x) => [x.match.route, x.match.query, x.key])).toEqual([
      ["* /v1/search**", ['{ name: format, equals: "csv", ignore_case: true }'], "global"],
    ]);
  });

  it("a header_value_match that one rule cannot say is left out with why", () => {
    const routes = ROUTES.replace(
      "headers: [{ name: user-agent, string_match: { contains: bot } }]",
      "expect_match: false\n                                headers: [{ name: user-agent, string_match: { contains: bot } }, { name: x-b, present_match: true }]",
    ).replace(
      "headers: [{ name: x-api-key, present_match: true }]",
      "headers: [{ name: x-size, range_match: { start: 1, end: 9 } }]",
    );
    const r = imported(SERVICE, routes);
    expect(r.report.filter((i) => i.kind === "left out").map((i) => i.message)).toEqual([
      "header_match=bots: header_match=bots: its header_value_match has expect_match: false (requests whose headers do not all match: without one, or with another value), which one Sluice rule can say only for a single test",
      "header_match=no-key: header_match=no-key: its header_value_match tests the x-size header in a way a Sluice match.header cannot say (a pseudo-header, a range, or a regex JavaScript does not read)",
    ]);
  });

  it.each([
    // Envoy sends the descriptor for a request without the header (no match), and for one that fails the test:
    // the test's opposite reading a missing value as empty, which passes it.
    [
      "expect_match: false\n                                headers: [{ name: user-agent, string_match: { contains: bot } }]",
      '{ name: user-agent, contains: "bot", not: true, missing_as_empty: true }',
    ],
    // Envoy reads a missing header as "" here too: the test as it is, with missing_as_empty.
    [
      "headers: [{ name: user-agent, treat_missing_header_as_empty: true, string_match: { exact: bot, ignore_case: true } }]",
      '{ name: user-agent, equals: "bot", ignore_case: true, missing_as_empty: true }',
    ],
    [
      "expect_match: false\n                                headers: [{ name: user-agent, invert_match: true, treat_missing_header_as_empty: true, string_match: { prefix: curl } }]",
      '{ name: user-agent, prefix: "curl", missing_as_empty: true }',
    ],
  ])("expect_match: false and missing headers: %s", (headers, condition) => {
    const routes = ROUTES.replace("headers: [{ name: user-agent, string_match: { contains: bot } }]", headers);
    const r = imported(SERVICE, routes);
    expect(r.rules.find((x) => x.id === "edge-bots")?.match.header).toEqual([condition]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it.each([
    // The empty value passes the test, so its opposite fails a request without the header, which Envoy counts.
    [
      "expect_match: false\n                                headers: [{ name: user-agent, safe_regex_match: { regex: '.*' } }]",
      "for a single test whose opposite an empty value passes",
    ],
    [
      "headers: [{ name: user-agent, treat_missing_header_as_empty: true, present_match: true }]",
      "tests the user-agent header in a way",
    ],
  ])("left out: %s", (headers, why) => {
    const routes = ROUTES.replace("headers: [{ name: user-agent, string_match: { contains: bot } }]", headers);
    const r = imported(SERVICE, routes);
    expect(
      r.report
        .filter((i) => i.kind === "left out")
        .map((i) => i.message)
        .join("\n"),
    ).toContain(why);
  });

  it("without the routes, the same descriptors are left out asking for --map or --envoy", () => {
    const m = parseMapping([]);
    if ("error" in m) throw new Error(m.error);
    const r = importEnvoy(SERVICE, "ratelimit.yaml", m.mapping);
    expect(r.report.filter((i) => i.kind === "left out").length).toBe(4);
  });

  it("a value of a header's descriptor is a match.header; the key alone leaves that value to it", () => {
    const r = imported(
      "domain: d\ndescriptors:\n  - key: tenant\n    value: acme\n    rate_limit: { unit: second, requests_per_unit: 9 }\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 3 }\n",
      ROUTES,
    );
    expect(r.rules.map((x) => [x.id, x.match.header, x.key])).toEqual([
      ["d-acme", ['{ name: x-tenant, equals: "acme" }'], "global"],
      // The service looks up tenant=acme before tenant alone: acme's requests are never counted here.
      ["d-tenant", ['{ name: x-tenant, equals: "acme", not: true }'], ["{ header: x-tenant }"]],
    ]);
    expect(r.report.filter((i) => i.kind !== "note")).toEqual([]);
  });

  it("a value whose own limit denies every request is a deny rule, and the key's rule leaves that value to it", () => {
    const r = imported(
      "domain: d\ndescriptors:\n  - key: tenant\n    value: banned\n    rate_limit: { unit: second, requests_per_unit: 0 }\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 3 }\n",
      ROUTES,
    );
    expect(r.rules.map((x) => [x.id, x.match.header, x.key, x.fields])).toEqual([
      [
        "d-banned",
        ['{ name: x-tenant, equals: "banned" }'],
        undefined,
        [
          ["deny", true],
          ["status", 429],
        ],
      ],
      [
        "d-tenant",
        ['{ name: x-tenant, equals: "banned", not: true }'],
        ["{ header: x-tenant }"],
        [
          ["algorithm", "fixed_window"],
          ["limit", 3],
          ["window", "s"],
          ["key_missing", "skip"],
        ],
      ],
    ]);
    expect(r.report.filter((i) => i.kind !== "note")).toEqual([]);
  });

  it("a value of a caller's own key (the API key) is still left out: a rule would hold the key itself", () => {
    const routes = ROUTES.replace("header_name: X-Tenant", "header_name: X-Api-Key");
    const r = imported(
      "domain: d\ndescriptors:\n  - key: tenant\n    value: k-123\n    rate_limit: { unit: second, requests_per_unit: 9 }\n",
      routes,
    );
    expect(r.report.map((i) => i.message)).toEqual([
      "tenant=k-123: a limit for one tenant value (k-123): tenant is the caller's api_key, which a rule does not name by value (the rule file would hold it); give that caller its own limits with an account override (sluice accounts)",
    ]);
  });

  it("CF-Connecting-IP in request_headers is the address (a key may not name the header)", () => {
    const routes = ROUTES.replace("header_name: X-Tenant", "header_name: CF-Connecting-IP");
    const r = imported(
      "domain: d\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: second, requests_per_unit: 9 }\n",
      routes,
    );
    expect(r.rules.map((x) => x.match.identity)).toEqual(["ip"]);
  });
});

describe("the routes that send a descriptor", () => {
  // Envoy sends a descriptor on each route whose rate_limits have its actions, and a virtual host's rate_limits only on
  // routes without their own (RouteAction.include_vh_rate_limits). Before, the last route read won for a generic_key
  // (GET /v1/search was not limited by "heavy" at all) and an address or header action on one route limited every
  // request.
  const routes = `virtual_hosts:
  - name: api
    rate_limits:
      - actions: [{ request_headers: { header_name: x-plan, descriptor_key: plan } }]
    routes:
      - match: { prefix: /v1/search }
        route:
          cluster: api
          rate_limits:
            - actions: [{ generic_key: { descriptor_value: heavy } }]
            - actions: [{ remote_address: {} }]
            - actions: [{ masked_remote_address: { v4_prefix_mask_len: 24, v6_prefix_mask_len: 48 } }]
      - match: { prefix: /v1/export }
        route:
          cluster: api
          rate_limits:
            - actions: [{ generic_key: { descriptor_value: heavy } }]
            - actions: [{ request_headers: { header_name: x-tenant, descriptor_key: tenant } }]
      - match: { path: /v1/upload }
        route:
          cluster: api
          rate_limits:
            - actions: [{ request_headers: { header_name: x-tenant, descriptor_key: tenant } }]
`;
  const service = `domain: d
descriptors:
  - key: generic_key
    value: heavy
    rate_limit: { unit: second, requests_per_unit: 100 }
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: masked_remote_address
    rate_limit: { unit: minute, requests_per_unit: 500 }
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: plan
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

  it("a limit applies on every route that sends its descriptor, and only there", () => {
    const m = parseMapping([]);
    if ("error" in m) throw new Error(m.error);
    const r = importEnvoy(service, "ratelimit.yaml", m.mapping, load(routes, "envoy.yaml").value);
    expect(r.rules.map((x) => [x.id, x.match.route ?? "*", x.match.identity ?? x.key])).toEqual([
      ["d-heavy", ["* /v1/search**", "* /v1/export**"], "global"],
      ["d-remote_address", "* /v1/search**", "ip"],
      ["d-masked_remote_address", "* /v1/search**", ["{ ip: { v4: 24, v6: 48 } }"]],
      ["d-tenant", ["* /v1/export**", "* /v1/upload"], ["{ header: x-tenant }"]],
    ]);
    // Envoy's remote_address is the whole address; identity: ip groups IPv6 by /64: the report says so (it did not).
    expect(r.report.filter((i) => i.kind === "note").map((i) => i.message)).toContain(
      "remote_address: counted by client address (CF-Connecting-IP); Envoy counts each IPv6 address apart, Sluice's identity: ip one budget per /64 unless IPV6_PREFIX=128",
    );
    // Every route has limits of its own, so the host's x-plan action is sent on none.
    expect(r.report.filter((i) => i.kind === "left out").map((i) => i.message)).toEqual([
      "plan: no rate_limits entry of the Envoy configuration given sends a descriptor of exactly these keys (plan), and the service applies a limit only to a descriptor as deep as its chain, so this limit never applies (give --map to say what it means anyway)",
    ]);
  });
});

describe("Envoy gives a request to its first matching route", () => {
  // A `prefix: /` route after /v1/search gets only the other requests; its limit became one on every request, without
  // a word. Routes cannot say "all but the earlier routes' paths", so the report lists it.
  it("a catch-all route's limit is listed as applying to the earlier routes' requests too", () => {
    const routes = `virtual_hosts:
  - name: api
    routes:
      - match: { prefix: /v1/search }
        route: { cluster: api }
      - match: { prefix: / }
        route:
          cluster: api
          rate_limits:
            - actions: [{ generic_key: { descriptor_value: rest } }]
`;
    const service =
      "domain: d\ndescriptors:\n  - key: generic_key\n    value: rest\n    rate_limit: { unit: second, requests_per_unit: 50 }\n";
    const m = parseMapping([]);
    if ("error" in m) throw new Error(m.error);
    const r = importEnvoy(service, "ratelimit.yaml", m.mapping, load(routes, "envoy.yaml").value);
    expect(r.rules.map((x) => [x.id, x.match.route ?? "*", x.key])).toEqual([["d-rest", "*", "global"]]);
    expect(r.report.filter((i) => i.kind === "approximate").map((i) => i.message)).toEqual([
      "generic_key=rest: Envoy sends it on /** only for requests no earlier route (/v1/search**) takes; the rule also applies to those",
    ]);
  });
});

describe("a chain is limited only by descriptors exactly as deep", () => {
  // envoyproxy/ratelimit's GetLimit takes a limit only at the descriptor's last entry: with every action list sending
  // client_id together with path, client_id's own limit never applies. It was imported for every request.
  it("client_id alone is left out when Envoy always sends client_id with path", () => {
    const routes = `virtual_hosts:
  - name: api
    routes:
      - match: { prefix: /v1/search }
        route:
          cluster: api
          rate_limits:
            - actions:
                - request_headers: { header_name: x-client-id, descriptor_key: client_id }
                - header_value_match: { descriptor_value: search, descriptor_key: path, headers: [{ name: ":path", string_match: { prefix: /v1/search } }] }
`;
    const service = `domain: d
descriptors:
  - key: client_id
    rate_limit: { unit: month, requests_per_unit: 100000 }
    descriptors:
      - key: path
        value: search
        rate_limit: { unit: second, requests_per_unit: 5 }
`;
    const m = parseMapping([]);
    if ("error" in m) throw new Error(m.error);
    const r = importEnvoy(service, "ratelimit.yaml", m.mapping, load(routes, "envoy.yaml").value);
    expect(r.rules.map((x) => [x.id, x.match.route, x.key])).toEqual([
      ["d-client_id-search", "* /v1/search**", ["{ header: x-client-id }"]],
    ]);
    expect(r.report.filter((i) => i.kind === "left out").map((i) => i.message)).toEqual([
      "client_id: no rate_limits entry of the Envoy configuration given sends a descriptor of exactly these keys (client_id), and the service applies a limit only to a descriptor as deep as its chain, so this limit never applies (give --map to say what it means anyway)",
    ]);
  });
});

describe("Kubernetes manifests", () => {
  it("a ConfigMap holding config.yaml, among other documents", () => {
    const m = parseMapping(["tenant=header:x-tenant"]);
    if ("error" in m) throw new Error(m.error);
    const manifest = `apiVersion: v1
kind: Service
metadata: { name: ratelimit }
---
apiVersion: v1
kind: ConfigMap
metadata: { name: ratelimit-config }
data:
  config.yaml: |
    domain: d
    descriptors:
      - key: tenant
        rate_limit: { unit: second, requests_per_unit: 9 }
`;
    const r = importEnvoy(manifest, "k8s.yaml", m.mapping);
    expect(r.rules.map((x) => [x.key, x.source.split(":")[0]])).toEqual([
      [["{ header: x-tenant }"], "k8s.yaml (ConfigMap data config.yaml)"],
    ]);
  });

  it("an Envoy configuration with the global filter only says to import the service's file with --envoy", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-actions-"));
    writeFileSync(
      join(dir, "envoy.yaml"),
      `${ROUTES}          http_filters:\n            - name: envoy.filters.http.ratelimit\n`,
    );
    writeFileSync(join(dir, "ratelimit.yaml"), SERVICE);
    const alone = await runCli(["import", "envoy", join(dir, "envoy.yaml")]);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toMatch(/global rate limit filter .* sluice import envoy ratelimit\.yaml --envoy /);
    const both = await runCli([
      "import",
      "envoy",
      join(dir, "ratelimit.yaml"),
      "--envoy",
      join(dir, "envoy.yaml"),
      "--allow-partial",
    ]);
    expect(both.code).toBe(0);
    expect(both.stdout).toMatch(/route: "POST \/v1\/login"/);
  });
});

/**
 * An Envoy bootstrap with one virtual host whose `rate_limits` are `entries` (YAML list items, indented as given), and
 * `filters` (YAML list items) as its http_filters.
 */
function listener(entries: string, filters = ""): string {
  const indent = (text: string, by: number) => text.replace(/^/gm, " ".repeat(by));
  return `static_resources:
  listeners:
    - filter_chains:
        - filters:
            - typed_config:
${filters === "" ? "" : `                http_filters:\n${indent(filters, 18)}\n`}                route_config:
                  virtual_hosts:
                    - name: api
                      rate_limits:
${indent(entries, 24)}
`;
}

describe("skip_if_absent: an entry dropped, not the descriptor", () => {
  const routes = (skip: boolean) =>
    listener(
      `- actions:\n    - remote_address: {}\n    - request_headers: { header_name: X-Tenant, descriptor_key: tenant${skip ? ", skip_if_absent: true" : ""} }`,
    );
  const service = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
    descriptors:
      - key: tenant
        rate_limit: { unit: second, requests_per_unit: 10 }
`;

  it("without it, a request without the header sends nothing: the address alone is never limited", () => {
    const r = imported(service, routes(false));
    expect(r.rules.map((x) => x.id)).toEqual(["edge-remote_address-tenant"]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      expect.stringMatching(/^left out: remote_address: no rate_limits entry of the Envoy configuration given sends/),
    );
  });

  it("with it, the address alone is limited for requests without the header, which the report says", () => {
    const r = imported(service, routes(true));
    expect(r.rules.map((x) => [x.id, x.match.identity ?? x.key])).toEqual([
      ["edge-remote_address", "ip"],
      ["edge-remote_address-tenant", ["ip", "{ header: x-tenant }"]],
    ]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "approximate: remote_address: Envoy sends a descriptor of exactly these keys only for requests without the header X-Tenant (skip_if_absent drops that entry); Sluice's rule counts the requests with it too",
    );
  });
});

describe("what a rate_limits entry adds: hits_addend, a limit from metadata, counting when done", () => {
  const routes = (entry: string) => listener(`- actions: [{ remote_address: {} }]\n${entry.replace(/^/gm, "  ")}`);
  const service =
    "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n";
  const items = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`);

  it("hits_addend { number: 5 }: each request costs 5", () => {
    const r = imported(service, routes("hits_addend: { number: 5 }"));
    expect(r.rules[0]!.fields).toContainEqual(["cost", 5]);
  });

  it("hits_addend above the limit, or 0: left out with the reason", () => {
    expect(items(imported(service, routes("hits_addend: { number: 500 }")))).toContainEqual(
      expect.stringMatching(
        /^left out: remote_address: each request adds 500 hits \(hits_addend\), more than the limit of 100/,
      ),
    );
    expect(items(imported(service, routes("hits_addend: { number: 0 }")))).toContainEqual(
      expect.stringMatching(/^left out: remote_address: hits_addend 0/),
    );
  });

  it("a hits_addend format, a limit override, apply_on_stream_done: imported, each said", () => {
    const r = imported(
      service,
      routes(
        'hits_addend: { format: "%REQ(x-cost)%" }\nlimit: { dynamic_metadata: { metadata_key: { key: k, path: [{ key: p }] } } }\napply_on_stream_done: true',
      ),
    );
    expect(r.rules).toHaveLength(1);
    expect(r.rules[0]!.fields.some(([k]) => k === "cost")).toBe(false);
    const said = items(r);
    expect(said).toContainEqual(
      expect.stringMatching(/^approximate: remote_address: the rate_limits entries that send it add other hits/),
    );
    expect(said).toContainEqual(
      expect.stringMatching(
        /^approximate: remote_address: its rate_limits entry takes the limit from the request's dynamic metadata/,
      ),
    );
    expect(said).toContainEqual(
      expect.stringMatching(/^approximate: remote_address: its rate_limits entry counts when the response is done/),
    );
  });
});

describe("the global rate limit filter: its domain, failure_mode_deny and rate_limited_status", () => {
  const envoy = (filter: string) =>
    listener(
      "- actions: [{ remote_address: {} }]",
      `- name: envoy.filters.http.ratelimit\n  typed_config:\n    "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit\n${filter.replace(/^/gm, "    ")}`,
    );
  const service =
    "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n";

  it("failure_mode_deny: true is on_error: closed; rate_limited_status its status", () => {
    const r = imported(
      service,
      envoy("domain: edge\nfailure_mode_deny: true\nrate_limited_status: { code: ServiceUnavailable }"),
    );
    expect(r.rules[0]!.fields).toContainEqual(["on_error", "closed"]);
    expect(r.rules[0]!.fields).toContainEqual(["status", 503]);
  });

  it("by default: open, 429 (no fields)", () => {
    const r = imported(service, envoy("domain: edge"));
    expect(r.rules[0]!.fields.map(([k]) => k)).not.toContain("on_error");
    expect(r.rules[0]!.fields.map(([k]) => k)).not.toContain("status");
  });

  it("a domain no filter asks about: its limits never apply, left out", () => {
    const r = imported(service, envoy("domain: other"));
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "left out: domain edge: no envoy.filters.http.ratelimit of the Envoy configuration given asks about it (they ask about other), so none of its limits applies",
    );
  });
});
