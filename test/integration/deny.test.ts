/**
 * Deny rules (`deny: true`, src/rules/deny.ts) in the Workers runtime: a blocklist, as Envoy's `requests_per_unit:
 * 0` says it. A request a deny rule matches is refused with the rule's status (403 by default) and a problem+json body
 * naming it, without `Retry-After` or RateLimit fields (no retry is admitted), before any limiter is asked, so no rule
 * is charged for it; a shadow deny rule only logs. Through the gateway, the service binding's `check`, and the replay
 * engine, which decides as the gateway on a generated request stream.
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { checkRequest } from "../../src/edge/binding.ts";
import { settingsOf } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { Replayer } from "../../src/replay/engine.ts";
import { compileDenies, compileRules } from "../../src/request/match.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { bearer, gatewayFetch, getLine, isolate, knownKey, replayedStatus, req, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

let run = 0;
/** Two requests an hour per client under /v1; /v1/admin refused to all but the office; one address refused with 429. */
function parsed() {
  run++;
  const { rules, denies, errors } = parseRules(
    `
- id: per-client-${run}
  match: { route: "* /v1/**", identity: ip }
  algorithm: fixed_window
  limit: 2
  window: h
- id: admin-${run}
  deny: true
  match: { route: "* /v1/admin/**", except_address: 203.0.113.0/28 }
- id: banned-${run}
  deny: true
  status: 429
  match: { address: 198.51.100.9 }
- id: bots-${run}
  deny: true
  mode: shadow
  match: { header: { name: X-Bot, equals: "yes" } }
`,
    "deny.yaml",
  );
  if (errors.length > 0) throw new Error(errors.join("\n"));
  return { resolved: rules, denies, rules: compileRules(rules), compiledDenies: compileDenies(denies) };
}

const get = (address: string, path = "/v1/things", headers: Record<string, string> = {}) =>
  new Request(`https://api.example.com${path}`, { headers: { "CF-Connecting-IP": address, ...headers } });

describe("deny rules through the gateway", () => {
  it("refuse with the rule's status and a problem naming it, no Retry-After, no RateLimit fields", async () => {
    const { rules, compiledDenies, denies } = parsed();
    setNow(T0);
    const refused = await gatewayFetch(rules, get("192.0.2.9", "/v1/admin/users"), compiledDenies);
    expect(refused.status).toBe(403);
    expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(refused.headers.get("retry-after")).toBeNull();
    expect(refused.headers.get("ratelimit")).toBeNull();
    expect(await refused.json()).toMatchObject({ status: 403, title: "Forbidden", rule: denies[0]!.id });
    const banned = await gatewayFetch(rules, get("198.51.100.9", "/elsewhere"), compiledDenies);
    expect(banned.status).toBe(429);
    expect(await banned.clone().json()).toMatchObject({ title: "Too Many Requests", rule: denies[1]!.id });
    expect(banned.headers.get("retry-after")).toBeNull();
  });

  it("count nothing: a client refused three times still has its two requests an hour", async () => {
    const { rules, compiledDenies } = parsed();
    setNow(T0);
    for (let i = 0; i < 3; i++)
      expect((await gatewayFetch(rules, get("192.0.2.10", "/v1/admin/x"), compiledDenies)).status).toBe(403);
    const after = [];
    for (let i = 0; i < 3; i++) after.push((await gatewayFetch(rules, get("192.0.2.10"), compiledDenies)).status);
    expect(after).toEqual([200, 200, 429]);
  });

  it("apply only where their match holds: the office passes /v1/admin (and is counted there)", async () => {
    const { rules, compiledDenies } = parsed();
    setNow(T0);
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await gatewayFetch(rules, get("203.0.113.7", "/v1/admin/x"), compiledDenies)).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it("by plan: the caller's plan comes from its account record, as for any rule", async () => {
    const { rules } = parsed();
    const { denies, errors } = parseRules(
      "- id: legacy-off\n  deny: true\n  status: 410\n  match: { plan: legacy }\n",
      "p.yaml",
    );
    expect(errors).toEqual([]);
    setNow(T0);
    const legacy = await knownKey("sk_legacy", "legacy");
    const growth = await knownKey("sk_growth", "growth");
    const from = (key: string) =>
      gatewayFetch(
        rules,
        req("GET", "/v2/x", { ...bearer(key), "CF-Connecting-IP": "192.0.2.40" }),
        compileDenies(denies),
      );
    const refused = await from(legacy);
    expect(refused.status).toBe(410);
    expect(await refused.json()).toMatchObject({ title: "Gone", rule: "legacy-off" });
    expect((await from(growth)).status).toBe(200);
  });

  it("in shadow mode only count a would-be refusal", async () => {
    const { rules, compiledDenies } = parsed();
    setNow(T0);
    const before = isolate.stats.shadow_denials;
    const response = await gatewayFetch(rules, get("192.0.2.11", "/v1/things", { "X-Bot": "yes" }), compiledDenies);
    expect(response.status).toBe(200);
    expect(isolate.stats.shadow_denials).toBe(before + 1);
  });
});

describe("the deployed Worker (the shipped example's admin-office-only, compiled into DENY_RULES)", () => {
  it("refuses /v1/admin to every address but the office's, and serves the rest", async () => {
    const at = (address: string, path: string) =>
      SELF.fetch(`https://api.example.com${path}`, { headers: { "CF-Connecting-IP": address } });
    const refused = await at("192.0.2.31", "/v1/admin/users");
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ rule: "admin-office-only" });
    expect((await at("203.0.113.3", "/v1/admin/users")).status).toBe(200);
    expect((await at("192.0.2.31", "/v1/quotes")).status).toBe(200);
  });
});

describe("the admin API lists them", () => {
  it("GET /_sluice/rules: the deny rules beside the limits, each with its status and what it matches", async () => {
    const { rules, compiledDenies, denies } = parsed();
    const ctx = createExecutionContext();
    const headers = { Authorization: "Bearer test-admin-token-0123456789abcdef" };
    const response = await handleRequest(
      req("GET", "/_sluice/rules", headers),
      env,
      ctx,
      rules,
      isolate,
      compiledDenies,
    );
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { rules: { id: string }[]; denies: { id: string; limits: string }[] };
    expect(body.rules.map((r) => r.id)).toEqual([rules[0]!.rule.id]);
    expect(body.denies.map((r) => [r.id, r.limits])).toEqual([
      [denies[0]!.id, "deny, status 403; except_address 203.0.113.0/28"],
      [denies[1]!.id, "deny, status 429; address 198.51.100.9"],
      [denies[2]!.id, 'deny, status 403; header { name: x-bot, equals: "yes" }'],
    ]);
  });
});

describe("the service binding's check refuses as the gateway", () => {
  it("with reason forbidden and the rule's status", async () => {
    const { rules, compiledDenies, denies } = parsed();
    setNow(T0);
    const ctx = createExecutionContext();
    const input = { url: "https://api.example.com/v1/admin/x", headers: { "CF-Connecting-IP": "192.0.2.12" } };
    const result = await checkRequest(input, { env, ctx, rules, denies: compiledDenies, isolate });
    await waitOnExecutionContext(ctx);
    expect(result).toMatchObject({ success: false, status: 403, reason: "forbidden", retryAfterMs: null });
    expect(result.problem).toMatchObject({ rule: denies[0]!.id });
  });
});

describe("the replay engine decides as the gateway", () => {
  it("on a generated request stream", async () => {
    const shot = fc.record({
      gapMs: fc.integer({ min: 0, max: 600_000 }),
      address: fc.constantFrom("192.0.2.1", "203.0.113.1", "198.51.100.9", "198.51.100.10"),
      path: fc.constantFrom("/v1/things", "/v1/admin/x", "/v2/x"),
    });
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(shot, { minLength: 8, maxLength: 24 }), async (shots) => {
        const { resolved, denies, rules, compiledDenies } = parsed();
        const replayer = new Replayer(resolved, { settings: settingsOf(env), accounts: null, denies });
        let tMs = T0;
        for (const s of shots) {
          tMs += s.gapMs;
          setNow(tMs);
          const edge = (await gatewayFetch(rules, get(s.address, s.path), compiledDenies)).status;
          const line = getLine(tMs, s.path, s.address);
          expect({ ...s, replayed: replayedStatus(replayer, line) }).toEqual({ ...s, replayed: edge });
          seen.set(edge, (seen.get(edge) ?? 0) + 1);
        }
      }),
      { numRuns: 12, seed: 36 },
    );
    // The stream saw admissions, limit denials and both deny rules' refusals.
    expect([...seen.keys()].sort()).toEqual([200, 403, 429]);
  });
});
