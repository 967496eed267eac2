/**
 * `key:` rules in the Workers runtime (src/request/key.ts, src/edge/rule_keys.ts): each part through the gateway
 * (present, missing under each key_missing, given twice, case, whitespace, IPv4/IPv6 masks), a global budget shared by
 * every caller, the binding's `check` answering as the gateway, the admin API's state of a `key:` rule, and the
 * replay engine deciding as the gateway on a generated request stream.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { checkRequest } from "../../src/edge/binding.ts";
import { settingsOf } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { Replayer } from "../../src/replay/engine.ts";
import type { RequestLine } from "../../src/replay/request_trace.ts";
import { compileRules } from "../../src/request/match.ts";
import { gatewayFetch, isolate, replayedStatus, resolvedFrom, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

let run = 0;
/** One rule keyed by `key`, admitting one request per key an hour; a fresh id so no earlier test's state is seen. */
function oneRule(key: string, extra = "") {
  run++;
  const id = `k${run}`;
  const rules = rulesFrom(`
- id: ${id}
  match: { route: "* /v1/**" }
  key: ${key}
  key_client_chosen: accept
${extra}  algorithm: fixed_window
  limit: 1
  window: h
`);
  return { id, rules };
}

interface Shot {
  readonly path?: string;
  readonly method?: string;
  readonly host?: string;
  readonly headers?: Record<string, string>;
  /** `request.cf` as Cloudflare would give it (`asn`, `country`, `colo`, `botManagement.ja4`). */
  readonly cf?: Record<string, unknown>;
}

function requestOf(s: Shot): Request {
  const headers = new Headers({ "CF-Connecting-IP": "192.0.2.10", ...(s.headers ?? {}) });
  return new Request(`https://${s.host ?? "api.example.com"}${s.path ?? "/v1/a"}`, {
    method: s.method ?? "GET",
    headers,
    ...(s.cf === undefined ? {} : { cf: s.cf }),
  });
}

/** The status of `second` after `first` was admitted: 429 means one key, 200 two keys. */
async function afterFirst(key: string, first: Shot, second: Shot, extra = ""): Promise<number> {
  const { rules } = oneRule(key, extra);
  setNow(T0);
  expect((await gatewayFetch(rules, requestOf(first))).status).toBe(200);
  return (await gatewayFetch(rules, requestOf(second))).status;
}

const ip = (a: string) => ({ headers: { "CF-Connecting-IP": a } });
const h = (name: string, value: string) => ({ headers: { [name]: value } });
const cf = (fields: Record<string, unknown>): Shot => ({ cf: fields });
const JA4 = "t13d1516h2_8daaf6152771_02713d6af862";

describe("each part through the gateway: the same key (429) or another key (200)", () => {
  it.each<[string, Shot, Shot, number]>([
    ["global", ip("192.0.2.1"), ip("2001:db8::1"), 429],
    ["[ip]", ip("192.0.2.1"), ip("192.0.2.2"), 200],
    ["[ip]", ip("2001:db8:1:2::1"), ip("2001:db8:1:2::ffff"), 429],
    ["[{ ip: { v4: 24 } }]", ip("192.0.2.1"), ip("192.0.2.200"), 429],
    ["[{ ip: { v4: 24 } }]", ip("192.0.2.1"), ip("192.0.3.1"), 200],
    ["[{ ip: { v6: 48 } }]", ip("2001:db8:5:1::1"), ip("2001:db8:5:ff::1"), 429],
    ["[{ ip: { v6: 48 } }]", ip("2001:db8:5::1"), ip("2001:db8:6::1"), 200],
    ["[{ ip: { v4: 32, v6: 128 } }]", ip("2001:db8::1"), ip("2001:db8::2"), 200],
    ["[{ header: X-Tenant-Id }]", h("X-Tenant-Id", "acme"), h("x-tenant-id", "  acme "), 429],
    ["[{ header: X-Tenant-Id }]", h("X-Tenant-Id", "acme"), h("X-Tenant-Id", "ACME"), 200],
    ["[{ header: X-Tenant-Id }]", h("X-Tenant-Id", "acme"), h("X-Tenant-Id", "acme, acme"), 429],
    ["[{ cookie: session }]", h("Cookie", "session=s1"), h("Cookie", "a=1; session= s1 "), 429],
    ["[{ cookie: session }]", h("Cookie", "session=s1"), h("Cookie", "session=s2"), 200],
    ["[{ query: t }]", { path: "/v1/a?t=x" }, { path: "/v1/b?t=%20x&t=x" }, 429],
    ["[{ query: t }]", { path: "/v1/a?t=x" }, { path: "/v1/a?t=y" }, 200],
    ["[method]", { method: "GET" }, { method: "get" }, 429],
    ["[method]", { method: "GET" }, { method: "POST" }, 200],
    ["[path]", { path: "/v1/a" }, { path: "/v1//A/" }, 429],
    ["[path]", { path: "/v1/a" }, { path: "/v1/b" }, 200],
    ["[route]", { path: "/v1/a" }, { path: "/v1/b" }, 429],
    ["[host]", { host: "api.example.com" }, { host: "API.example.COM" }, 429],
    ["[host]", { host: "api.example.com" }, { host: "eu.example.com" }, 200],
    ["[{ const: c }]", ip("192.0.2.1"), ip("198.51.100.1"), 429],
    ["[user]", h("X-User-Id", "u-1"), h("X-User-Id", " u-1 "), 429],
    ["[user]", h("X-User-Id", "u-1"), h("X-User-Id", "u-2"), 200],
    // An api_key part of a caller without a verified key is its address (unverified: by_address).
    ["[api_key]", h("X-API-Key", "sk_unknown_1"), h("X-API-Key", "sk_unknown_2"), 429],
    ["[api_key]", h("X-API-Key", "sk_unknown_1"), { headers: { "CF-Connecting-IP": "192.0.2.11" } }, 200],
    ["[asn]", cf({ asn: 64496 }), cf({ asn: 64496 }), 429],
    ["[asn]", cf({ asn: 64496 }), cf({ asn: 64497 }), 200],
    ["[country]", cf({ country: "DE" }), cf({ country: "de" }), 429],
    ["[country]", cf({ country: "DE" }), cf({ country: "FR" }), 200],
    ["[colo]", cf({ colo: "FRA" }), cf({ colo: "FRA" }), 429],
    ["[colo]", cf({ colo: "FRA" }), cf({ colo: "AMS" }), 200],
    ["[ja4]", cf({ botManagement: { ja4: JA4 } }), cf({ botManagement: { ja4: ` ${JA4}` } }), 429],
    ["[ja4]", cf({ botManagement: { ja4: JA4 } }), cf({ botManagement: { ja4: `${JA4}0` } }), 200],
    ["[ip, country]", cf({ country: "DE" }), { ...ip("192.0.2.11"), ...cf({ country: "DE" }) }, 200],
    ["[ip, { header: X-T }]", h("X-T", "a"), h("X-T", "b"), 200],
    ["[ip, { header: X-T }]", h("X-T", "a"), { headers: { "X-T": "a", "CF-Connecting-IP": "192.0.2.11" } }, 200],
  ])("%s: %j then %j -> %i", async (key, first, second, status) => {
    expect(await afterFirst(key, first, second)).toBe(status);
  });
});

describe("a missing part", () => {
  const missing: [string, Shot][] = [
    ["[{ header: X-T }]", {}],
    ["[{ header: X-T }]", h("X-T", "   ")],
    ["[{ cookie: s }]", h("Cookie", "other=1")],
    ["[{ query: t }]", { path: "/v1/a?t=" }],
    ["[user]", {}],
    ["[asn]", {}],
    ["[country]", {}],
    ["[colo]", {}],
    ["[ja4]", {}],
  ];

  it.each(missing)("%s (%j): key_missing: empty shares one budget", async (key, shot) => {
    expect(await afterFirst(key, shot, shot)).toBe(429);
  });

  it.each(missing)("%s (%j): key_missing: skip leaves the request to other rules", async (key, shot) => {
    const { id, rules } = oneRule(key, "  key_missing: skip\n");
    setNow(T0);
    for (let i = 0; i < 3; i++) {
      const r = await gatewayFetch(rules, requestOf(shot));
      expect(r.status).toBe(200);
      expect(r.headers.get("RateLimit-Policy") ?? "").not.toContain(id);
    }
  });

  it.each(missing)("%s (%j): key_missing: refuse answers 400 naming the rule and the part", async (key, shot) => {
    const { id, rules } = oneRule(key, "  key_missing: refuse\n");
    const r = await gatewayFetch(rules, requestOf(shot));
    expect(r.status).toBe(400);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    const body = await r.json<{ error: string; detail: string }>();
    expect(body.error).toBe("key_part_missing");
    expect(body.detail).toMatch(new RegExp(`^Rule ${id} counts by \\S+, which this request does not carry\\.$`));
  });

  it("a shadow rule that cannot key a request skips it: it never blocks", async () => {
    const { rules } = oneRule("[{ header: X-T }]", "  key_missing: refuse\n  mode: shadow\n");
    expect((await gatewayFetch(rules, requestOf({}))).status).toBe(200);
  });
});

describe("given twice with different values: 400, nothing counted", () => {
  it.each<[string, Shot]>([
    ["[{ header: X-T }]", h("X-T", "a, b")],
    ["[{ cookie: s }]", h("Cookie", "s=a; s=b")],
    ["[{ query: t }]", { path: "/v1/a?t=a&t=b" }],
  ])("%s: %j", async (key, shot) => {
    const { rules } = oneRule(key);
    const r = await gatewayFetch(rules, requestOf(shot));
    expect(r.status).toBe(400);
    expect((await r.json<{ error: string }>()).error).toBe("two_values");
  });
});

describe("a global budget", () => {
  it("every caller spends the one budget; the admin API reads it without key=", async () => {
    setNow(T0);
    const rules = rulesFrom(`
- id: origin-g
  match: { route: "GET /v1/search/**" }
  key: global
  algorithm: gcra
  rate: 2/s
  burst: 3
`);
    const statuses: number[] = [];
    for (const a of ["192.0.2.1", "198.51.100.2", "203.0.113.3", "2001:db8::4"]) {
      statuses.push((await gatewayFetch(rules, requestOf({ path: "/v1/search/x", ...ip(a) }))).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    const ctx = createExecutionContext();
    const state = await handleRequest(
      new Request("https://sluice.test/_sluice/state?rule=origin-g", {
        headers: { Authorization: "Bearer test-admin-token-0123456789abcdef" },
      }),
      env,
      ctx,
      rules,
      isolate,
    );
    await waitOnExecutionContext(ctx);
    expect(state.status).toBe(200);
    const body = await state.json<Record<string, unknown>>();
    expect(body).toMatchObject({ rule: "origin-g", identity: "key: global", remaining: 0 });
    expect(JSON.stringify(body)).not.toContain("192.0.2");
  });
});

describe("the binding's check answers as the gateway", () => {
  it.each<[string, Shot, number]>([
    ["[{ header: X-T }]", {}, 400],
    ["[{ header: X-T }]", h("X-T", "a, b"), 400],
    ["[{ header: X-T }]", h("X-T", "a"), 200],
  ])("%s with key_missing: refuse, %j -> %i", async (key, shot, status) => {
    const { rules } = oneRule(key, "  key_missing: refuse\n");
    const request = requestOf(shot);
    const ctx = createExecutionContext();
    const result = await checkRequest(
      { url: request.url, method: request.method, headers: Object.fromEntries(request.headers) },
      { env, ctx, rules, isolate },
    );
    await waitOnExecutionContext(ctx);
    expect(result.status).toBe(status);
  });
});

describe("the replay engine decides as the gateway (property, generated request streams)", () => {
  const shot = fc.record({
    gapMs: fc.constantFrom(0, 0, 50, 120, 400),
    method: fc.constantFrom("GET", "POST"),
    path: fc.constantFrom("/v1/search/a", "/v1/search/b", "/v1/labels"),
    address: fc.constantFrom("192.0.2.10", "192.0.2.77", "198.51.100.1", "2001:db8:1::1", "2001:db8:2::1"),
    tenant: fc.constantFrom(null, "a", "b", " a ", "a, b", "a, a"),
    cookie: fc.constantFrom(null, "s=x", "s=y", "s=x; s=y", "other=1"),
    query: fc.constantFrom("", "?t=1", "?t=2", "?t=1&t=2", "?t="),
    host: fc.constantFrom("api.example.com", "EU.example.com"),
    country: fc.constantFrom(null, "DE", "de", "FR"),
    user: fc.constantFrom(null, "u-1", " u-1", "u-2"),
  });

  it("same status for every request: admitted, denied (429) or refused (400)", async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(shot, { minLength: 10, maxLength: 30 }), async (shots) => {
        run++;
        const resolved = resolvedFrom(`
- id: p${run}-global
  match: { route: "GET /v1/search/**" }
  key: global
  algorithm: gcra
  rate: 10/s
  burst: 4
- id: p${run}-tenant
  match: { route: "* /v1/**" }
  key: [{ ip: { v4: 24, v6: 48 } }, { header: X-Tenant }]
  algorithm: fixed_window
  limit: 3
  window: h
- id: p${run}-cookie
  match: { route: "* /v1/**" }
  key: [{ cookie: s }, method, host]
  key_missing: skip
  key_client_chosen: accept
  algorithm: token_bucket
  rate: 5/s
  burst: 2
- id: p${run}-query
  match: { route: "POST /v1/**" }
  key: [{ query: t }, ip, route]
  key_missing: refuse
  algorithm: sliding_log
  limit: 2
  window: min
- id: p${run}-country-user
  match: { route: "GET /v1/**" }
  key: [country, user, { ip: { v4: 16, v6: 32 } }]
  algorithm: gcra
  rate: 2/s
  burst: 3
`);
        const rules = compileRules(resolved);
        const replayer = new Replayer(resolved, { settings: settingsOf(env), accounts: null });
        let tMs = T0;
        for (const s of shots) {
          tMs += s.gapMs;
          setNow(tMs);
          const headers: Record<string, string> = { "CF-Connecting-IP": s.address };
          if (s.tenant !== null) headers["X-Tenant"] = s.tenant;
          if (s.cookie !== null) headers.Cookie = s.cookie;
          if (s.user !== null) headers["X-User-Id"] = s.user;
          const url = `https://${s.host}${s.path}${s.query}`;
          const cfInit = s.country === null ? {} : { cf: { country: s.country } };
          const request = new Request(url, { method: s.method, headers, ...cfInit });
          const edge = (await gatewayFetch(rules, request)).status;
          const query = new URL(url).searchParams.getAll("t");
          const fields = new Map<string, readonly string[]>();
          if (s.tenant !== null) fields.set("header:x-tenant", [s.tenant]);
          const cookies = (s.cookie ?? "").split(";").filter((p) => p.trim().startsWith("s="));
          if (cookies.length > 0)
            fields.set(
              "cookie:s",
              cookies.map((p) => p.slice(p.indexOf("=") + 1)),
            );
          if (query.length > 0) fields.set("query:t", query);
          const line: RequestLine = {
            tMs,
            method: s.method,
            path: s.path,
            address: s.address,
            key: null,
            user: s.user,
            cost: null,
            answered: null,
            host: s.host,
            country: s.country,
            fields,
          };
          const replayed = replayedStatus(replayer, line);
          expect({ tMs: tMs - T0, ...s, replayed }).toEqual({ tMs: tMs - T0, ...s, replayed: edge });
          seen.set(edge, (seen.get(edge) ?? 0) + 1);
        }
      }),
      { numRuns: 6, seed: 33 },
    );
    // The streams reach every answer, so the property compares more than admissions.
    expect([...seen.keys()].sort()).toEqual([200, 400, 429]);
  });
});
