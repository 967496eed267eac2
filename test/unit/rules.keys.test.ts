/** `key:`, `key_missing`, `key_client_chosen` (src/rules/key.ts): what each spelling resolves to, each mistake's message. */
import { describe, expect, it } from "vitest";
import { printRule } from "../../src/rules/fields.ts";
import { loadRules } from "../../src/rules/load.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ALGO = "  algorithm: gcra\n  rate: 10/s\n  burst: 20\n";
const rule = (body: string) => parseRules(`- id: r\n${body}${ALGO}`, "k.yaml");

describe("key: what each spelling resolves to", () => {
  it.each([
    ["key: global", []],
    ["key: ip", [{ kind: "ip", v4: 32, v6: null }]],
    ["key: [api_key, user]", [{ kind: "api_key" }, { kind: "user" }]],
    ["key: [{ ip: { v4: 24, v6: 56 } }]", [{ kind: "ip", v4: 24, v6: 56 }]],
    ["key: [{ ip: { v6: 48 } }]", [{ kind: "ip", v4: 32, v6: 48 }]],
    [
      "key: [{ header: X-Tenant-Id }, ip]",
      [
        { kind: "header", name: "x-tenant-id" },
        { kind: "ip", v4: 32, v6: null },
      ],
    ],
    [
      "key: [{ cookie: Session }, { query: t }, ip]",
      [
        { kind: "cookie", name: "Session" },
        { kind: "query", name: "t" },
        { kind: "ip", v4: 32, v6: null },
      ],
    ],
    ["key: [method, route, host]", [{ kind: "method" }, { kind: "route" }, { kind: "host" }]],
    ["key: [asn, country, colo, ja4]", [{ kind: "asn" }, { kind: "country" }, { kind: "colo" }, { kind: "ja4" }]],
    ["key: [{ const: checkout }]", [{ kind: "const", value: "checkout" }]],
    ["key: [{ const: 42 }]", [{ kind: "const", value: "42" }]],
  ])("%s", (yaml, parts) => {
    const { rules, errors, warnings } = rule(`  match: {}\n  ${yaml}\n`);
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(rules[0]!.key).toEqual(parts);
    expect(rules[0]!.match.identity).toBeNull();
    expect(rules[0]!.keyMissing).toBe("empty");
  });

  it("match.identity stays the short form: no key, identity kept", () => {
    const { rules } = rule("  match: { identity: user }\n");
    expect(rules[0]!.key).toBeNull();
    expect(rules[0]!.match.identity).toBe("user");
  });

  it("prints in rule-file terms for sluice plan", () => {
    const { rules } = rule("  match: {}\n  key: [{ ip: { v4: 24, v6: 56 } }, { header: X-T }]\n  key_missing: skip\n");
    expect(Object.fromEntries(printRule(rules[0]!))).toMatchObject({
      "match.identity": "none (key)",
      key: "ip/24/56, header:x-t",
      key_missing: "skip",
    });
    expect(Object.fromEntries(printRule(rule("  match: {}\n  key: global\n").rules[0]!)).key).toBe("global");
  });
});

describe("key: each mistake, its message", () => {
  it.each([
    [
      "  match: { identity: ip }\n  key: global\n",
      "k.yaml:2:22: r.match.identity: give match.identity or key, not both (match.identity: X is the short form of key: [X])",
    ],
    [
      "  match: {}\n",
      "k.yaml:2:10: r.match.identity: required: one of api_key, ip, user (or a key: at the rule's top level)",
    ],
    [
      "  match: { key: global }\n",
      "k.yaml:2:17: r.match.key: key belongs at the rule's top level (key: ..., beside match)",
    ],
    [
      "  match: {}\n  key: [contry]\n",
      'k.yaml:3:9: r.key[0]: unknown key part "contry"; did you mean "country"? (parts: api_key, ip, user, method, route, path, host, asn, country, colo, ja4, header, cookie, query, const)',
    ],
    [
      "  match: {}\n  key: [{ haeder: X-T }]\n",
      'k.yaml:3:9: r.key[0]: unknown key part "haeder"; did you mean "header"? (parts: api_key, ip, user, method, route, path, host, asn, country, colo, ja4, header, cookie, query, const)',
    ],
    [
      "  match: {}\n  key: []\n",
      "k.yaml:3:8: r.key: must name at least one part, or be global (one budget for every caller)",
    ],
    [
      "  match: {}\n  key: [global]\n",
      "k.yaml:3:9: r.key[0]: global is the whole key (key: global), not a part of one",
    ],
    ["  match: {}\n  key: [header]\n", "k.yaml:3:9: r.key[0]: header needs a value: { header: NAME }"],
    [
      "  match: {}\n  key: [{ method: GET }]\n",
      "k.yaml:3:9: r.key[0]: method takes no value: write it as a bare word (- method)",
    ],
    ["  match: {}\n  key: [{ header: 'X T' }]\n", 'k.yaml:3:19: r.key[0].header: must be a header name, got "X T"'],
    [
      "  match: {}\n  key: [{ header: Authorization }]\n",
      "k.yaml:3:19: r.key[0].header: Authorization is read by the gateway; key on api_key (the verified key) instead",
    ],
    [
      "  match: {}\n  key: [{ ip: { v4: 33 } }]\n",
      "k.yaml:3:21: r.key[0].ip.v4: must be a prefix length from 1 to 32, got 33",
    ],
    ["  match: {}\n  key: [{ ip: { v5: 3 } }]\n", 'k.yaml:3:17: r.key[0].ip.v5: unknown key; did you mean "v4"?'],
    ["  match: {}\n  key: [ip, ip]\n", "k.yaml:3:13: r.key[1]: ip is already a part of this key"],
    ["  match: {}\n  key: [{ const: '' }]\n", 'k.yaml:3:18: r.key[0].const: must be 1 to 64 characters, got ""'],
    [
      "  match: {}\n  key: global\n  key_missing: drop\n",
      'k.yaml:4:16: r.key_missing: must be one of skip, empty, refuse, got "drop"',
    ],
    [
      "  match: { identity: ip }\n  key_missing: skip\n",
      "k.yaml:3:16: r.key_missing: only rules with key: take it (a match.identity rule skips a request without its identity)",
    ],
    [
      "  match: {}\n  key: ip\n  unverified: skip\n",
      "k.yaml:4:15: r.unverified: only rules whose key has an api_key part have unverified callers; this key has none",
    ],
    [
      "  match: {}\n  key: global\n  key_client_chosen: yes\n",
      'k.yaml:4:22: r.key_client_chosen: must be one of accept, got "yes"',
    ],
  ])("%#: %s", (body, message) => {
    const { rules, errors } = rule(body);
    expect(rules).toEqual([]);
    expect(errors).toEqual([message]);
  });

  it("an api_key part takes unverified, as identity: api_key does", () => {
    const { rules, errors } = rule("  match: {}\n  key: [api_key, { header: X-Region }]\n  unverified: reject\n");
    expect(errors).toEqual([]);
    expect(rules[0]!.unverified).toBe("reject");
  });
});

describe("client-chosen parts: a warning, not an error", () => {
  it.each([
    ["key: [{ header: X-Tenant-Id }]", "header:x-tenant-id"],
    ["key: [{ cookie: s }, { query: q }, method]", "cookie:s, query:q"],
    ["key: [path]", "path"],
    ["key: [ja4, route]", "ja4"],
  ])("%s warns", (yaml, named) => {
    const { rules, errors, warnings } = rule(`  match: {}\n  ${yaml}\n`);
    expect(errors).toEqual([]);
    expect(rules).toHaveLength(1);
    expect(warnings).toEqual([
      `k.yaml:3:8: r.key: warning: the client picks ${named} freely, so each new value opens a fresh budget; add a part it cannot rotate (api_key, ip, user, asn, country, colo) or say key_client_chosen: accept`,
    ]);
  });

  it.each([
    "key: [{ header: X-Tenant-Id }, ip]",
    "key: [path, api_key]",
    "key: [{ cookie: s }, country]",
    "key: [{ const: a }]",
    "key: global",
    "key: [{ header: X-T }]\n  key_client_chosen: accept",
  ])("%s does not", (yaml) => {
    expect(rule(`  match: {}\n  ${yaml}\n`).warnings).toEqual([]);
  });
});

describe("the shipped rules' key: global rule", () => {
  it("search-origin: one budget for every caller of GET /v1/search/**", () => {
    const { rules, errors, warnings } = loadRules(["test/fixtures/shipped/shiplane.yaml"]);
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(rules.find((r) => r.id === "search-origin")).toMatchObject({
      match: { plans: null, route: { source: "GET /v1/search/**" }, identity: null },
      key: [],
      keyMissing: "empty",
      algorithm: "gcra",
      rate: { amount: 200, periodMs: 1000 },
      burst: 200,
    });
  });
});

describe("key messages say where: file:line:col", () => {
  it("a block list: each part's line and column; an unknown key at the key, a bad value at the value", () => {
    const text = [
      "- id: tenant",
      '  match: { route: "GET /v1/**" }',
      "  key:",
      "    - ip: { v4: 40, v6s: 56 }",
      "    - heder: X-Tenant-Id",
      "    - adress",
      "  key_missing: sometimes",
      "  algorithm: gcra",
      "  rate: 10/s",
      "  burst: 20",
      "",
    ].join("\n");
    const { errors } = parseRules(text, "rules/t.yaml");
    expect(errors).toEqual([
      'rules/t.yaml:4:21: tenant.key[0].ip.v6s: unknown key; did you mean "v6"?',
      "rules/t.yaml:4:17: tenant.key[0].ip.v4: must be a prefix length from 1 to 32, got 40",
      'rules/t.yaml:5:7: tenant.key[1]: unknown key part "heder"; did you mean "header"? (parts: api_key, ip, user, method, route, path, host, asn, country, colo, ja4, header, cookie, query, const)',
      'rules/t.yaml:6:7: tenant.key[2]: unknown key part "adress" (parts: api_key, ip, user, method, route, path, host, asn, country, colo, ja4, header, cookie, query, const)',
      'rules/t.yaml:7:16: tenant.key_missing: must be one of skip, empty, refuse, got "sometimes"',
    ]);
  });

  it("key: glob points at its value and suggests global", () => {
    const { errors } = rule("  match: {}\n  key: glob\n");
    expect(errors[0]).toMatch(/^k\.yaml:3:8: r\.key: unknown key part "glob"; did you mean "global"\?/);
  });
});
