/**
 * `sluice import envoy` on where a local rate limit filter's configurations apply (src/migrate/envoy_local_scope.ts):
 * Envoy takes the most specific one a request's route has (the route's `typed_per_filter_config`, else its virtual
 * host's, else the filter's own in `http_filters`), each with its own buckets. A route's configuration was imported
 * as a limit on every request (the Envoy docs' "globally disabled, enabled for a specific route" example included).
 */
import { describe, expect, it } from "vitest";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { parseMapping } from "../../src/migrate/envoy_mapping.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ON = "filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }";
const config = (prefix: string, tokens: number) =>
  `{ "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit, stat_prefix: ${prefix}, token_bucket: { max_tokens: ${tokens}, tokens_per_fill: ${tokens}, fill_interval: 1s }, ${ON} }`;
const perFilter = (c: string) => `typed_per_filter_config: { envoy.filters.http.local_ratelimit: ${c} }`;

/** An Envoy bootstrap: one listener, the routes of one virtual host, and the local filter's own configuration. */
function envoy(opts: { routes: string[]; host?: string; domains?: string; filter?: string }): string {
  return `static_resources:
  listeners:
  - filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          route_config:
            virtual_hosts:
            - name: backend
              domains: ${opts.domains ?? '["*"]'}
              ${opts.host ?? ""}
              routes:
${opts.routes.map((r) => `              - ${r}`).join("\n")}
          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config: ${opts.filter ?? "{ stat_prefix: http_local_rate_limiter }"}
`;
}

function imported(yaml: string): ImportResult {
  const m = parseMapping([]);
  if ("error" in m) throw new Error(m.error);
  const result = importEnvoy(yaml, "envoy.yaml", m.mapping);
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const placed = (r: ImportResult) => r.rules.map((x) => [x.id, x.match.route ?? "*", x.match.except ?? []]);
const said = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`).join("\n");

describe("where a local rate limit configuration applies", () => {
  it("a route's own configuration beside an empty filter (Envoy's docs): a rule on that route only", () => {
    const r = imported(
      envoy({
        routes: [
          `{ match: { prefix: /search }, route: { cluster: s }, ${perFilter(config("search", 50))} }`,
          "{ match: { prefix: / }, route: { cluster: app } }",
        ],
      }),
    );
    expect(placed(r)).toEqual([["search", "* /search**", []]]);
  });

  it("the filter's own bucket on every route but those with their own", () => {
    const r = imported(
      envoy({
        routes: [
          `{ match: { path: /login }, route: { cluster: a }, ${perFilter(config("login", 5))} }`,
          "{ match: { prefix: / }, route: { cluster: app } }",
        ],
        filter: config("all", 1000),
      }),
    );
    expect(placed(r)).toEqual([
      ["login", "* /login", []],
      ["all", "*", ["* /login"]],
    ]);
  });

  it("a virtual host's configuration takes every route from the filter's own, which then never applies", () => {
    const r = imported(
      envoy({
        host: perFilter(config("host", 100)),
        routes: [
          `{ match: { prefix: /upload }, route: { cluster: u }, ${perFilter(config("upload", 2))} }`,
          "{ match: { prefix: / }, route: { cluster: app } }",
        ],
        filter: config("all", 1000),
      }),
    );
    expect(placed(r)).toEqual([
      ["host", "*", ["* /upload**"]],
      ["upload", "* /upload**", []],
    ]);
    expect(said(r)).toMatch(/note: all: every virtual host has a configuration of its own, .*never applies/);
  });

  it("what a rule cannot say is reported: a route matched by a regex, a host's domains, an earlier route", () => {
    const regex = imported(
      envoy({
        routes: [
          `{ match: { safe_regex: { regex: "^/v[0-9]+/x" } }, route: { cluster: a }, ${perFilter(config("rx", 5))} }`,
        ],
      }),
    );
    expect(regex.rules).toEqual([]);
    expect(said(regex)).toMatch(/left out: rx: its route matches requests by something other than a path pattern/);
    const hosted = imported(
      envoy({
        domains: '["api.example.com"]',
        routes: [
          "{ match: { prefix: /api }, route: { cluster: a } }",
          `{ match: { prefix: /api/v2 }, route: { cluster: b }, ${perFilter(config("v2", 5))} }`,
        ],
      }),
    );
    expect(placed(hosted)).toEqual([["v2", "* /api/v2**", []]]);
    expect(said(hosted)).toMatch(/approximate: v2: Envoy applies it to the virtual host api.example.com only/);
    expect(said(hosted)).toMatch(
      /approximate: v2: Envoy gives \/api\/v2\*\* only requests no earlier route \(\/api\*\*\) takes/,
    );
  });
});
