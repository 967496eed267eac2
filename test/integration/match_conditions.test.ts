/**
 * `match.header`, `match.cookie` and `match.query` in the Workers runtime: a rule applies only to requests whose
 * headers, cookies and query values pass its conditions, through the gateway (src/edge/judge.ts gives the request's
 * values to src/request/match.ts), and the replay engine decides as the gateway on a generated request stream whose
 * trace lines carry the tested values (`header:NAME`, `cookie:NAME`, `query:NAME` columns).
 */
import { env } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { settingsOf } from "../../src/edge/settings.ts";
import { Replayer } from "../../src/replay/engine.ts";
import { columnsFor, type RequestLine } from "../../src/replay/request_trace.ts";
import { compileRules } from "../../src/request/match.ts";
import { gatewayFetch, getLine, replayedStatus, resolvedFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

let run = 0;
/**
 * Old SDKs (`X-Sdk` 1.x): one request an hour per address; requests without `X-Sdk`: one an hour per address too.
 * Under /v2, every request but a bot's, one without a User-Agent included (`missing_as_empty`): one an hour. Under
 * /v3, clients Cloudflare places in CN or RU, but for AS64496's (`match.cf`): one an hour.
 */
function yaml() {
  run++;
  return `
- id: old-sdk-${run}
  match: { route: "* /v1/**", header: { name: X-Sdk, prefix: "1." }, identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: no-sdk-${run}
  match: { route: "* /v1/**", header: { name: X-Sdk, present: false }, identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: csv-${run}
  match: { route: "GET /v1/**", query: { name: format, equals: csv }, cookie: { name: beta, present: false }, identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: humans-${run}
  match: { route: "* /v2/**", header: { name: User-Agent, matches: "bot", ignore_case: true, not: true, missing_as_empty: true }, identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: far-${run}
  match: { route: "* /v3/**", cf: [{ name: country, matches: "^(?:CN|RU)$" }, { name: asn, equals: "64496", not: true }], identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: bots-${run}
  match: { header: [{ name: User-Agent, matches: "bot", ignore_case: true }, { name: X-Sdk, equals: "2.0", not: true }], identity: ip }
  algorithm: fixed_window
  limit: 2
  window: h
`;
}

const get = (
  address: string,
  headers: Record<string, string> = {},
  query = "",
  path = "/v1/things",
  cf?: Record<string, unknown>,
) =>
  new Request(`https://api.example.com${path}${query}`, {
    headers: { "CF-Connecting-IP": address, ...headers },
    ...(cf === undefined ? {} : { cf }),
  });

describe("match.header through the gateway", () => {
  it.each<[string, Record<string, string>, Record<string, string>, number]>([
    ["an old SDK twice: its rule", { "X-Sdk": "1.4" }, { "X-Sdk": "1.9" }, 429],
    ["an old SDK, then a new one: no rule for the new", { "X-Sdk": "1.4" }, { "X-Sdk": "2.0" }, 200],
    ["no SDK twice: the present: false rule", {}, {}, 429],
    ["no SDK, then an old one: another rule", {}, { "X-Sdk": "1.0" }, 200],
    [
      "a bot SDK 3.0 three times: 2 an hour",
      { "User-Agent": "FooBot/1", "X-Sdk": "3.0" },
      { "User-Agent": "foobot", "X-Sdk": "3.0" },
      200,
    ],
  ])("%s", async (_name, first, second, status) => {
    const rules = compileRules(resolvedFrom(yaml()));
    const address = `192.0.2.${run}`;
    setNow(T0);
    expect((await gatewayFetch(rules, get(address, first))).status).toBe(200);
    expect((await gatewayFetch(rules, get(address, second))).status).toBe(status);
  });

  it.each<[string, Record<string, string>, number]>([
    ["no User-Agent is read as empty, not a bot's: counted", {}, 429],
    ["a human's User-Agent: counted", { "User-Agent": "Mozilla/5.0" }, 429],
    ["a bot's: not this rule's", { "User-Agent": "SomeBot/1" }, 200],
  ])("missing_as_empty under /v2: %s", async (_name, headers, status) => {
    const rules = compileRules(resolvedFrom(yaml()));
    const address = `192.0.2.${100 + run}`;
    setNow(T0);
    expect((await gatewayFetch(rules, get(address, headers, "", "/v2/x"))).status).toBe(200);
    expect((await gatewayFetch(rules, get(address, headers, "", "/v2/x"))).status).toBe(status);
  });

  it.each<[string, Record<string, unknown> | undefined, number]>([
    ["a client in CN (as request.cf gives it, any case): counted", { country: "cn", asn: 4134 }, 429],
    ["a client in RU: counted", { country: "RU", asn: 12389 }, 429],
    ["a client in CN on AS64496: not this rule's", { country: "CN", asn: 64496 }, 200],
    ["a client in DE: not this rule's", { country: "DE", asn: 3320 }, 200],
    ["no request.cf (a service binding's check): no value, no match", undefined, 200],
  ])("match.cf under /v3: %s", async (_name, cf, status) => {
    const rules = compileRules(resolvedFrom(yaml()));
    const address = `192.0.2.${150 + run}`;
    setNow(T0);
    expect((await gatewayFetch(rules, get(address, {}, "", "/v3/x", cf))).status).toBe(200);
    expect((await gatewayFetch(rules, get(address, {}, "", "/v3/x", cf))).status).toBe(status);
  });

  it("a query value and a cookie's absence: the first format value counts; a beta cookie steps out of the rule", async () => {
    const rules = compileRules(resolvedFrom(yaml()));
    setNow(T0);
    const sdk = { "X-Sdk": "2.0" };
    expect((await gatewayFetch(rules, get("192.0.2.210", sdk, "?format=csv"))).status).toBe(200);
    expect((await gatewayFetch(rules, get("192.0.2.210", sdk, "?format=csv&format=json"))).status).toBe(429);
    expect((await gatewayFetch(rules, get("192.0.2.210", sdk, "?format=json&format=csv"))).status).toBe(200);
    const beta = { ...sdk, Cookie: "beta=1" };
    expect((await gatewayFetch(rules, get("192.0.2.210", beta, "?format=csv"))).status).toBe(200);
  });

  it("the bots rule: the third request of a bot not on SDK 2.0 is refused, one on 2.0 never counted", async () => {
    const rules = compileRules(resolvedFrom(yaml()));
    setNow(T0);
    const bot = { "User-Agent": "FooBot/1", "X-Sdk": "3.0" };
    for (let i = 0; i < 2; i++) expect((await gatewayFetch(rules, get("192.0.2.200", bot))).status).toBe(200);
    const refused = await gatewayFetch(rules, get("192.0.2.200", bot));
    expect(refused.status).toBe(429);
    expect(refused.headers.get("RateLimit-Policy") ?? refused.headers.get("ratelimit-policy")).toContain("bots-");
    const onTwo = { "User-Agent": "FooBot/1", "X-Sdk": "2.0" };
    for (let i = 0; i < 3; i++) expect((await gatewayFetch(rules, get("192.0.2.201", onTwo))).status).toBe(200);
  });
});

describe("the replay engine decides as the gateway (trace lines carry the tested headers)", () => {
  it("on a generated request stream", async () => {
    const shot = fc.record({
      gapMs: fc.integer({ min: 0, max: 400_000 }),
      address: fc.constantFrom("192.0.2.1", "192.0.2.2"),
      sdk: fc.constantFrom(null, "1.0", "1.9", "2.0", "3.1"),
      agent: fc.constantFrom(null, "curl/8", "GoogleBot/2", "somebot"),
      format: fc.constantFrom(null, "csv", "json"),
      beta: fc.boolean(),
      path: fc.constantFrom("/v1/things", "/v2/things", "/v3/things"),
      country: fc.constantFrom(null, "CN", "ru", "DE"),
      asn: fc.constantFrom(null, "64496", "4134"),
    });
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(shot, { minLength: 8, maxLength: 24 }), async (shots) => {
        const resolved = resolvedFrom(yaml());
        expect(columnsFor(resolved).extras).toEqual([
          "cookie:beta",
          "header:user-agent",
          "header:x-sdk",
          "query:format",
        ]);
        const rules = compileRules(resolved);
        const replayer = new Replayer(resolved, { settings: settingsOf(env), accounts: null });
        let tMs = T0;
        for (const s of shots) {
          tMs += s.gapMs;
          setNow(tMs);
          const headers: Record<string, string> = {};
          const fields = new Map<string, readonly string[]>();
          if (s.sdk !== null) {
            headers["X-Sdk"] = s.sdk;
            fields.set("header:x-sdk", [s.sdk]);
          }
          if (s.agent !== null) {
            headers["User-Agent"] = s.agent;
            fields.set("header:user-agent", [s.agent]);
          }
          if (s.beta) {
            headers.Cookie = "beta=1";
            fields.set("cookie:beta", ["1"]);
          }
          if (s.format !== null) fields.set("query:format", [s.format]);
          const query = s.format === null ? "" : `?format=${s.format}`;
          const cf = {
            ...(s.country === null ? {} : { country: s.country }),
            ...(s.asn === null ? {} : { asn: Number(s.asn) }),
          };
          const edge = (await gatewayFetch(rules, get(s.address, headers, query, s.path, cf))).status;
          const line: RequestLine = {
            ...getLine(tMs, s.path, s.address),
            fields,
            country: s.country,
            asn: s.asn,
          };
          const replayed = replayedStatus(replayer, line);
          expect({ tMs: tMs - T0, ...s, replayed }).toEqual({ tMs: tMs - T0, ...s, replayed: edge });
          seen.set(edge, (seen.get(edge) ?? 0) + 1);
        }
      }),
      { numRuns: 6, seed: 36 },
    );
    expect([...seen.keys()].sort()).toEqual([200, 429]);
  });
});
