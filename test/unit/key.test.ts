/**
 * A `key:` rule's key for a request (src/request/key.ts), part by part: present, missing under each `key_missing`,
 * given twice, case and whitespace, IPv4 and IPv6 masks. Security tables as an attacker tries it: variants that must
 * count as one key, and different requests that must not.
 */
import { describe, expect, it } from "vitest";
import { type KeySource, type RuleKey, ruleKeyOf } from "../../src/request/key.ts";
import { compileRules, type RequestFacts } from "../../src/request/match.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ALGO = "  algorithm: gcra\n  rate: 10/s\n  burst: 20\n";

function compiledOf(key: string, extra = "", match = "{}") {
  const { rules, errors } = parseRules(
    `- id: r\n  match: ${match}\n  key: ${key}\n  key_client_chosen: accept\n${extra}${ALGO}`,
    "t.yaml",
  );
  expect(errors).toEqual([]);
  return compileRules(rules)[0]!;
}

interface Req {
  headers?: Record<string, string>;
  query?: Record<string, string[]>;
  host?: string | null;
  address?: string | null;
  cf?: Partial<Record<"asn" | "country" | "colo" | "ja4", string>>;
  method?: string;
  path?: string;
  apiKey?: string | null;
  user?: string | null;
}

function sourceOf(r: Req): KeySource {
  const headers = new Headers(r.headers ?? {});
  return {
    header: (n) => headers.get(n),
    cookie: (n) => {
      const c = headers.get("cookie");
      if (c === null) return [];
      return c
        .split(/[;,]/)
        .filter((p) => p.includes("=") && p.slice(0, p.indexOf("=")).trim() === n)
        .map((p) => p.slice(p.indexOf("=") + 1));
    },
    query: (n) => r.query?.[n] ?? [],
    host: r.host === undefined ? "api.example.com" : r.host,
    address: r.address === undefined ? "192.0.2.10" : r.address,
    cf: (f) => r.cf?.[f] ?? null,
  };
}

function factsOf(r: Req): RequestFacts {
  const verified = r.apiKey !== undefined && r.apiKey !== null;
  return {
    methods: [r.method ?? "GET"],
    paths: [r.path ?? "/v1/search"],
    foldCase: true,
    plan: "free",
    keyHashes: { api_key: verified ? r.apiKey! : null, ip: null, user: r.user ?? null },
    overrides: new Map(),
    unverified: verified ? null : { keyHash: "unverified:192.0.2.10" },
  };
}

const keyOf = (key: string, r: Req, extra = "", match = "{}"): RuleKey => {
  const compiled = compiledOf(key, extra, match);
  return ruleKeyOf(compiled, factsOf(r), sourceOf(r), { ipv6PrefixBits: 64 });
};
const text = (k: RuleKey) => (k.kind === "key" ? k.text : k.kind);

describe("each part, present", () => {
  it.each<[string, Req, string]>([
    ["global", {}, "[]"],
    ["[api_key]", { apiKey: "sk_a" }, "sk_a"],
    ["[ip]", { address: "192.0.2.10" }, "192.0.2.10"],
    ["[ip]", { address: "2001:db8:1:2:3:4:5:6" }, "2001:db8:1:2::/64"],
    ["[user]", { user: "u-1" }, "u-1"],
    ["[{ header: X-Tenant-Id }]", { headers: { "x-tenant-id": "acme" } }, "acme"],
    ["[{ cookie: session }]", { headers: { cookie: "a=1; session=s9; b=2" } }, "s9"],
    ["[{ query: tenant }]", { query: { tenant: ["acme"] } }, "acme"],
    ["[method]", { method: "POST" }, "POST"],
    ["[path]", { path: "/v1/labels/42" }, "/v1/labels/42"],
    ["[host]", { host: "API.Example.COM." }, "api.example.com"],
    ["[asn]", { cf: { asn: "64496" } }, "64496"],
    ["[country]", { cf: { country: "de" } }, "DE"],
    ["[colo]", { cf: { colo: "fra" } }, "FRA"],
    ["[ja4]", { cf: { ja4: "t13d1516h2_8daaf6152771_02713d6af862" } }, "t13d1516h2_8daaf6152771_02713d6af862"],
    ["[{ const: checkout }]", {}, "checkout"],
    ["[ip, { header: X-T }]", { headers: { "x-t": "a" } }, '["192.0.2.10","a"]'],
  ])("%s of %j is %s", (key, req, expected) => {
    expect(text(keyOf(key, req))).toBe(expected);
  });

  it("route: the matched cost_by_route entry, else the matched match.route, else *", () => {
    const match = '{ route: ["GET /v1/search", "GET /v1/find/**"] }';
    const costs = '  cost_by_route: { "GET /v1/find/deep/**": 2 }\n';
    expect(text(keyOf("[route]", { path: "/v1/search" }, costs, match))).toBe("GET /v1/search");
    expect(text(keyOf("[route]", { path: "/v1/find/x" }, costs, match))).toBe("GET /v1/find/**");
    expect(text(keyOf("[route]", { path: "/v1/find/deep/x" }, costs, match))).toBe("GET /v1/find/deep/**");
    expect(text(keyOf("[route]", { path: "/anything" }))).toBe("*");
  });
});

describe("IPv4 and IPv6 masks", () => {
  it.each<[string, string, string]>([
    ["{ v4: 24 }", "192.0.2.10", "192.0.2.0/24"],
    ["{ v4: 16 }", "198.51.100.77", "198.51.0.0/16"],
    ["{ v4: 32 }", "203.0.113.9", "203.0.113.9"],
    ["{ v4: 1 }", "203.0.113.9", "128.0.0.0/1"],
    ["{ v4: 24 }", "::ffff:192.0.2.200", "192.0.2.0/24"],
    ["{ v6: 48 }", "2001:db8:1:2::5", "2001:db8:1::/48"],
    ["{ v6: 56 }", "2001:db8:1:2ff::5", "2001:db8:1:200::/56"],
    ["{ v6: 128 }", "2001:db8::1", "2001:db8::1/128"],
    ["{ v4: 24 }", "2001:db8:1:2:3::1", "2001:db8:1:2::/64"],
    ["{ v6: 32 }", " 2001:DB8:ffff::1 ", "2001:db8::/32"],
  ])("ip: %s of %s is %s", (mask, address, expected) => {
    expect(text(keyOf(`[{ ip: ${mask} }]`, { address }))).toBe(expected);
  });

  it("two addresses in one prefix share a key; one bit out does not", () => {
    const k = (a: string) => text(keyOf("[{ ip: { v4: 24, v6: 48 } }]", { address: a }));
    expect(k("192.0.2.1")).toBe(k("192.0.2.254"));
    expect(k("192.0.2.1")).not.toBe(k("192.0.3.1"));
    expect(k("2001:db8:5::1")).toBe(k("2001:db8:5:ffff::9"));
    expect(k("2001:db8:5::1")).not.toBe(k("2001:db8:6::1"));
  });
});

describe("missing: key_missing decides", () => {
  const missing: [string, Req][] = [
    ["[{ header: X-T }]", {}],
    ["[{ header: X-T }]", { headers: { "x-t": "   " } }],
    ["[{ cookie: s }]", { headers: { cookie: "other=1" } }],
    ["[{ query: t }]", { query: { t: [""] } }],
    ["[user]", {}],
    ["[ip]", { address: null }],
    ["[host]", { host: null }],
    ["[asn]", {}],
    ["[country]", {}],
    ["[colo]", {}],
    ["[ja4]", {}],
  ];
  it.each(missing)("%s of %j: empty (the default) counts it as the empty value", (key, req) => {
    expect(keyOf(key, req)).toEqual({ kind: "key", text: "" });
  });
  it.each(missing)("%s of %j: skip", (key, req) => {
    expect(keyOf(key, req, "  key_missing: skip\n")).toEqual({ kind: "skip" });
  });
  it.each(missing)("%s of %j: refuse names the rule and the part", (key, req) => {
    const k = keyOf(key, req, "  key_missing: refuse\n");
    expect(k.kind).toBe("refuse");
    expect(k.kind === "refuse" && k.error).toBe("key_part_missing");
    expect(k.kind === "refuse" && k.detail).toMatch(/^Rule r counts by \S+, which this request does not carry\.$/);
  });

  it("a missing part among several: its place counts as empty", () => {
    expect(text(keyOf("[ip, { header: X-T }]", {}))).toBe('["192.0.2.10",""]');
  });

  it("an api_key part follows unverified, not key_missing", () => {
    expect(text(keyOf("[api_key]", {}, "  key_missing: refuse\n"))).toBe("unverified:192.0.2.10");
    expect(keyOf("[api_key]", {}, "  unverified: skip\n")).toEqual({ kind: "skip" });
  });
});

describe("given twice, case and whitespace (an attacker's variants)", () => {
  it.each<[string, Req, Req]>([
    ["[{ header: X-T }]", { headers: { "x-t": "acme" } }, { headers: { "x-t": "  acme\t" } }],
    ["[{ header: X-T }]", { headers: { "x-t": "acme" } }, { headers: { "X-T": "acme, acme" } }],
    ["[{ cookie: s }]", { headers: { cookie: "s=v" } }, { headers: { cookie: "s= v ; s=v" } }],
    ["[{ query: t }]", { query: { t: ["v"] } }, { query: { t: ["v", " v"] } }],
    ["[host]", { host: "api.example.com" }, { host: "API.EXAMPLE.COM." }],
    ["[ip]", { address: "2001:db8::1" }, { address: "2001:DB8:0:0::ffff" }],
    ["[ip]", { address: "192.0.2.10" }, { address: "::ffff:192.0.2.10" }],
    ["[country]", { cf: { country: "US" } }, { cf: { country: "us" } }],
  ])("%s: %j and %j count as one key", (key, a, b) => {
    expect(text(keyOf(key, a))).toBe(text(keyOf(key, b)));
  });

  it.each<[string, Req, Req]>([
    ["[{ header: X-T }]", { headers: { "x-t": "acme" } }, { headers: { "x-t": "ACME" } }],
    ["[{ cookie: s }]", { headers: { cookie: "s=v" } }, { headers: { cookie: "S=v" } }],
    ["[{ query: t }]", { query: { t: ["a"] } }, { query: { t: ["b"] } }],
    ["[ip, { header: X-T }]", { headers: { "x-t": "a" } }, { headers: { "x-t": "b" } }],
    [
      "[ip, { header: X-T }]",
      { address: "192.0.2.1", headers: { "x-t": "a" } },
      { address: "192.0.2.2", headers: { "x-t": "a" } },
    ],
  ])("%s: %j and %j are different keys", (key, a, b) => {
    expect(text(keyOf(key, a))).not.toBe(text(keyOf(key, b)));
  });

  it.each<[string, Req]>([
    ["[{ header: X-T }]", { headers: { "x-t": "acme, other" } }],
    ["[{ cookie: s }]", { headers: { cookie: "s=a; s=b" } }],
    ["[{ query: t }]", { query: { t: ["a", "b"] } }],
  ])("%s given twice with different values (%j) is refused", (key, req) => {
    const k = keyOf(key, req, "  key_missing: skip\n");
    expect(k).toMatchObject({ kind: "refuse", error: "two_values" });
  });

  it("User-Agent is read whole: its one value holds commas", () => {
    const ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)";
    expect(text(keyOf("[{ header: User-Agent }]", { headers: { "user-agent": ua } }))).toBe(ua);
  });

  it("values that could join ambiguously stay apart (a JSON list, not a separator)", () => {
    const a = keyOf("[{ header: A }, { header: B }]", { headers: { a: 'x"|"y', b: "z" } });
    const b = keyOf("[{ header: A }, { header: B }]", { headers: { a: "x", b: 'y"|"z' } });
    expect(text(a)).not.toBe(text(b));
  });
});
