/**
 * `sluice import envoy --envoy FILE` on the route actions whose value is a fact of the route or of the Envoy
 * (src/migrate/envoy_route_actions.ts): `destination_cluster` as the routes to that cluster, `source_cluster` by the
 * bootstrap's `node.cluster`, route-entry `metadata` as the routes that carry each value; dynamic metadata,
 * descriptor extensions and a forwarded-address header said for what they are. Fixtures written for this test.
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

const limit = (key: string, value: string | null) =>
  `  - key: ${key}\n${value === null ? "" : `    value: ${value}\n`}    rate_limit: { unit: second, requests_per_unit: 10 }\n`;

const ENVOY = `node: { id: edge-1, cluster: edge }
static_resources:
  listeners:
    - filter_chains:
        - filters:
            - typed_config:
                route_config:
                  virtual_hosts:
                    - name: api
                      rate_limits:
                        - actions: [{ destination_cluster: {} }]
                        - actions: [{ source_cluster: {} }]
                        - actions: [{ request_headers: { header_name: X-Forwarded-For, descriptor_key: xff } }]
                        - actions:
                            - metadata:
                                descriptor_key: tenant_md
                                metadata_key: { key: envoy.filters.http.jwt_authn, path: [{ key: tenant }] }
                        - actions:
                            - extension:
                                name: envoy.rate_limit_descriptors.expr
                                typed_config: { descriptor_key: cel, text: "request.headers['x-a']" }
                        - actions: [{ masked_remote_address: { v4_prefix_mask_len: 0, v6_prefix_mask_len: 64 } }]
                      routes:
                        - match: { prefix: /v1/pay }
                          route: { cluster: payments }
                        - match: { prefix: /v2/pay }
                          route: { cluster: payments }
                        - match: { path: /v1/search }
                          metadata: { filter_metadata: { sluice: { plan: premium } } }
                          route:
                            cluster: search
                            rate_limits:
                              - actions:
                                  - metadata:
                                      descriptor_key: plan
                                      default_value: basic
                                      source: ROUTE_ENTRY
                                      metadata_key: { key: sluice, path: [{ key: plan }] }
                        - match: { prefix: /v1/items }
                          route:
                            cluster: items
                            rate_limits:
                              - actions:
                                  - metadata:
                                      descriptor_key: plan
                                      default_value: basic
                                      source: ROUTE_ENTRY
                                      metadata_key: { key: sluice, path: [{ key: plan }] }
                        - match: { prefix: /exp }
                          route: { weighted_clusters: { clusters: [{ name: canary, weight: 10 }, { name: payments2, weight: 90 }] } }
`;

function imported(descriptors: string, envoy = ENVOY): ImportResult {
  const m = parseMapping([]);
  if ("error" in m) throw new Error(m.error);
  const result = importEnvoy(
    `domain: mesh\ndescriptors:\n${descriptors}`,
    "ratelimit.yaml",
    m.mapping,
    load(envoy, "envoy.yaml").value,
  );
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const leftOut = (r: ImportResult) => r.report.filter((i) => i.kind === "left out").map((i) => i.message);

describe("route actions Sluice can say", () => {
  it.each([
    [
      "destination_cluster: the routes to that cluster",
      limit("destination_cluster", "payments"),
      ["* /v1/pay**", "* /v2/pay**"],
      "global",
    ],
    ["source_cluster: this Envoy's own cluster is every request", limit("source_cluster", "edge"), undefined, "global"],
    ["source_cluster without a value: one counter for this Envoy", limit("source_cluster", null), undefined, "global"],
    ["route-entry metadata: the route that carries the value", limit("plan", "premium"), "* /v1/search", "global"],
    ["route-entry metadata's default_value: the routes without it", limit("plan", "basic"), "* /v1/items**", "global"],
    // The host's rate_limits reach only the routes without their own (/v1/search and /v1/items have theirs).
    [
      "a forwarded-address header is the client address, on the routes the host's actions reach",
      limit("xff", null),
      ["* /v1/pay**", "* /v2/pay**", "* /exp**"],
      "ip",
    ],
  ])("%s", (_name, descriptors, route, counted) => {
    const r = imported(descriptors);
    expect(leftOut(r)).toEqual([]);
    expect(r.rules.map((x) => [x.match.route, x.match.identity ?? x.key])).toEqual([[route, counted]]);
  });

  it("says what differs for a forwarded-address header", () => {
    const r = imported(limit("xff", null));
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "approximate: xff: Envoy counts the x-forwarded-for header as sent, which a client can rotate; Sluice counts by the address Cloudflare saw (CF-Connecting-IP), which it cannot",
    );
  });

  it("masks of 0 bits on both families are one budget for every client", () => {
    const envoy = ENVOY.replace(
      "v4_prefix_mask_len: 0, v6_prefix_mask_len: 64",
      "v4_prefix_mask_len: 0, v6_prefix_mask_len: 0",
    );
    const r = imported(limit("masked_remote_address", null), envoy);
    expect(r.rules.map((x) => x.key)).toEqual(["global"]);
  });
});

describe("destination_cluster without a value: one counter per cluster", () => {
  const fixed = (extra: string) =>
    ENVOY.replace(
      "                        - match: { prefix: /exp }\n                          route: { weighted_clusters: { clusters: [{ name: canary, weight: 10 }, { name: payments2, weight: 90 }] } }\n",
      extra,
    );

  it("every route naming its cluster: the key is the route, on those routes", () => {
    const r = imported(limit("destination_cluster", null), fixed(""));
    expect(r.rules.map((x) => [x.match.route, x.key])).toEqual([[["* /v1/pay**", "* /v2/pay**"], ["route"]]]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "approximate: destination_cluster: Envoy keeps one counter per cluster, Sluice one per route: payments's routes * /v1/pay**, * /v2/pay** count apart",
    );
  });

  it("one route per cluster: exact", () => {
    const envoy = fixed("").replace(
      "prefix: /v2/pay }\n                          route: { cluster: payments }",
      "prefix: /v2/pay }\n                          route: { cluster: ledger }",
    );
    const r = imported(limit("destination_cluster", null), envoy);
    expect(r.rules.map((x) => [x.match.route, x.key])).toEqual([[["* /v1/pay**", "* /v2/pay**"], ["route"]]]);
    expect(r.report.filter((i) => i.kind !== "note")).toEqual([]);
  });
});

describe("route actions refused with their reason", () => {
  it.each([
    [
      "a cluster only reached by weight",
      limit("destination_cluster", "canary"),
      "destination_cluster=canary: destination_cluster=canary: the route /exp** picks this cluster by weight at request time, which a Sluice route cannot say",
    ],
    [
      "a cluster no route with the action sends to (the search route has its own limits, so the host's do not apply)",
      limit("destination_cluster", "search"),
      "destination_cluster=search: destination_cluster=search: no route with a destination_cluster action sends to this cluster by name (/exp** picks its cluster by weight (canary, payments2))",
    ],
    [
      "a counter per cluster",
      limit("destination_cluster", null),
      "destination_cluster: destination_cluster=*: one counter per cluster Envoy routes to, and a route picks its cluster at request time (/exp** picks its cluster by weight (canary, payments2)): give the service one descriptor per cluster (with its value), which imports as that cluster's routes",
    ],
    [
      "another Envoy's cluster",
      limit("source_cluster", "billing"),
      "source_cluster=billing: source_cluster=billing: this Envoy's cluster is edge (node.cluster), so it never sends another source_cluster value",
    ],
    [
      "dynamic metadata",
      limit("tenant_md", null),
      "tenant_md: tenant_md=*: its value is the request's dynamic metadata (envoy.filters.http.jwt_authn), which Envoy's filters set while they handle it and a Worker does not have",
    ],
    [
      "a value of route metadata no route carries",
      limit("plan", "gold"),
      "plan=gold: plan=gold: no route's metadata (nor the action's default_value) gives this value, so Envoy never sends it",
    ],
    [
      "a descriptor extension",
      limit("cel", null),
      "cel: cel=*: its value comes from the descriptor extension envoy.rate_limit_descriptors.expr (an expression Envoy evaluates), which Sluice does not evaluate",
    ],
    [
      "one address family in one counter, the other per /64",
      limit("masked_remote_address", null),
      "masked_remote_address: masked_remote_address=*: masked_remote_address with v4_prefix_mask_len 0 and v6_prefix_mask_len 64: a Sluice ip part masks to 1-32 and 1-128 bits, so one family in one counter and the other per address cannot be said",
    ],
  ])("%s", (_name, descriptors, message) => {
    const r = imported(descriptors);
    expect(r.rules).toEqual([]);
    expect(leftOut(r)).toEqual([message]);
  });

  it.each([
    ["a generic_key value", limit("generic_key", "bar"), "generic_key=bar: generic_key=bar"],
    ["remote_address", limit("remote_address", null), "remote_address: remote_address=*"],
    ["a header key", limit("tenant", null), "tenant: tenant=*"],
  ])("with the routes given, %s that no action sends never applies: left out", (_name, descriptors, at) => {
    const r = imported(descriptors);
    expect(leftOut(r)).toEqual([
      `${at}: no rate_limits action in the Envoy configuration given sends it, so Envoy never applies this limit (give --map to say what it means anyway)`,
    ]);
  });

  it("source_cluster without the bootstrap's node.cluster asks for --map", () => {
    const r = imported(limit("source_cluster", "edge"), ENVOY.replace("node: { id: edge-1, cluster: edge }\n", ""));
    expect(leftOut(r).join("\n")).toMatch(
      /which the configuration given does not set: give --map source_cluster:VALUE=any/,
    );
  });

  it("exits 1 with what was left out, 0 with --allow-partial", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-route-actions-"));
    writeFileSync(join(dir, "envoy.yaml"), ENVOY);
    writeFileSync(
      join(dir, "ratelimit.yaml"),
      `domain: mesh\ndescriptors:\n${limit("destination_cluster", "payments")}${limit("destination_cluster", "canary")}`,
    );
    const args = ["import", "envoy", join(dir, "ratelimit.yaml"), "--envoy", join(dir, "envoy.yaml")];
    const strict = await runCli(args);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toMatch(/picks this cluster by weight at request time/);
    const partial = await runCli([...args, "--allow-partial"]);
    expect(partial.code).toBe(0);
    expect(partial.stdout).toMatch(/route: \["\* \/v1\/pay\*\*", "\* \/v2\/pay\*\*"\]/);
  });
});
