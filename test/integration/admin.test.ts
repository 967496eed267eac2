/**
 * The admin API under /_sluice/: the token (none, malformed, wrong, right, unset secret), the resolved rules, a key's
 * state without charging it, reset, stats, and keys hashed as the gateway hashes them (with KEY_HASH_SECRET too).
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hmacSha256Hex, sha256Hex } from "../../src/edge/hash.ts";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import {
  bearer,
  freshIp,
  freshKey,
  gatewayFetch,
  isolate,
  knownKey,
  req,
  rulesFrom,
  seedAccount,
  setNow,
  T0,
} from "./helpers.ts";

const TOKEN = "test-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
/** The admin token and a raw key: a raw key travels in a header, never in the URL. */
const withKey = (key: string) => ({ ...admin, "X-Sluice-Key": key });

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: per-key
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 3
- id: per-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 2
  window: min
- id: in-isolate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 4
  scope: local
`);

async function call(method: string, path: string, headers: Record<string, string> = admin, e: Env = env) {
  const ctx = createExecutionContext();
  const response = await handleRequest(req(method, path, headers), e, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

describe("authorization", () => {
  it.each([
    ["no Authorization", {}],
    ["a malformed Authorization", { Authorization: "Bearer" }],
    ["another scheme", { Authorization: `Basic ${btoa(`admin:${TOKEN}`)}` }],
    ["two tokens", { Authorization: `Bearer ${TOKEN} ${TOKEN}` }],
    ["a wrong token", { Authorization: "Bearer test-admin-token-0123456789abcdeX" }],
    ["a prefix of the token", { Authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ["the token with a suffix", { Authorization: `Bearer ${TOKEN}0` }],
  ])("%s: 401 with WWW-Authenticate, for every path", async (_name, headers) => {
    // From a fresh address each time: failed checks are limited per address (tested below).
    for (const path of ["/_sluice/stats", "/_sluice/rules", "/_sluice/denials", "/_sluice/nope"]) {
      const r = await call("GET", path, { ...(headers as Record<string, string>), "CF-Connecting-IP": freshIp() });
      expect(r.status).toBe(401);
      expect(r.headers.get("WWW-Authenticate")).toBe('Bearer realm="sluice-admin"');
      expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    }
  });

  it("the right token opens it; the scheme is case-insensitive", async () => {
    expect((await call("GET", "/_sluice/stats")).status).toBe(200);
    expect((await call("GET", "/_sluice/stats", { Authorization: `bearer ${TOKEN}` })).status).toBe(200);
  });

  it("with the secret unset (or too short to be safe), the whole surface is 404, token or not", async () => {
    for (const e of [
      { ...env, ADMIN_TOKEN: undefined },
      { ...env, ADMIN_TOKEN: "short" },
    ] as Env[]) {
      for (const [method, path] of [
        ["GET", "/_sluice/stats"],
        ["GET", "/_sluice/rules"],
        ["POST", "/_sluice/reset?rule=per-key&key_hash=x"],
      ] as const) {
        expect((await call(method, path, admin, e)).status).toBe(404);
        expect((await call(method, path, {}, e)).status).toBe(404);
      }
    }
  });

  it("through the Worker (SELF): 401 without the token, 200 with it", async () => {
    expect((await SELF.fetch(req("GET", "/_sluice/rules"))).status).toBe(401);
    const r = await SELF.fetch(req("GET", "/_sluice/rules", admin));
    expect(r.status).toBe(200);
    const body = await r.json<{ rules: { id: string; onError: string }[] }>();
    expect(body.rules.map((rule) => rule.id)).toContain("free-global");
    expect(body.rules.find((rule) => rule.id === "free-global")?.onError).toBe("open");
  });
});

describe("endpoints", () => {
  it("GET /_sluice/rules lists the resolved rules with every default filled in", async () => {
    const r = await call("GET", "/_sluice/rules");
    const body = await r.json<{ rules: Record<string, unknown>[] }>();
    expect(body.rules.map((rule) => rule.id)).toEqual(["per-key", "per-ip", "in-isolate"]);
    expect(body.rules[0]).toMatchObject({ mode: "enforce", scope: "global", onError: "open", timeoutMs: 250 });
  });

  it("GET /_sluice/rules gives each rule's limits in one line, from the algorithm table (the dashboard shows it)", async () => {
    const body = await (await call("GET", "/_sluice/rules")).json<{ rules: { algorithm: string; limits: string }[] }>();
    for (const rule of body.rules) expect(rule.limits).toMatch(new RegExp(`^${rule.algorithm} \\S`));
  });

  it("GET /_sluice/state reports remaining, reset and retry without charging the key", async () => {
    const key = await knownKey();
    setNow(T0);
    const state = async () =>
      (await call("GET", "/_sluice/state?rule=per-key", withKey(key))).json<Record<string, unknown>>();
    expect(await state()).toEqual({
      rule: "per-key",
      scope: "global",
      identity: "api_key",
      key: await sha256Hex(key),
      quota: 3,
      override: false,
      remaining: 3,
      reset_after_ms: 0,
      retry_after_ms: null,
      ban_ends_in_ms: null,
      lease: null,
    });
    for (let i = 0; i < 3; i++) await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    // Asking twice charges nothing.
    await state();
    expect(await state()).toMatchObject({ remaining: 0, reset_after_ms: 180_000, retry_after_ms: 60_000 });
    setNow(T0 + 60_000);
    expect(await state()).toMatchObject({ remaining: 1, reset_after_ms: 120_000, retry_after_ms: null });
  });

  it("state and reset for a local rule answer from this isolate's store", async () => {
    const key = await knownKey();
    setNow(T0);
    await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    const path = "/_sluice/state?rule=in-isolate";
    expect(await (await call("GET", path, withKey(key))).json()).toMatchObject({
      scope: "local",
      remaining: 3,
      reset_after_ms: 60_000,
    });
    const reset = await call("POST", "/_sluice/reset?rule=in-isolate", withKey(key));
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    expect(await (await call("GET", path, withKey(key))).json()).toMatchObject({ remaining: 4, reset_after_ms: 0 });
  });

  it("POST /_sluice/reset forgets a key: its next request starts fresh, in the object and in this isolate's cache", async () => {
    const key = await knownKey();
    setNow(T0);
    for (let i = 0; i < 3; i++) await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(429);
    const r = await call("POST", "/_sluice/reset?rule=per-key", withKey(key));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({
      rule: "per-key",
      scope: "global",
      identity: "api_key",
      key: await sha256Hex(key),
      reset: true,
      existed: true,
    });
    const after = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect(after.status).toBe(200);
    expect(after.headers.get("RateLimit")).toContain(`"per-key";r=2;t=60`);
    const again = await call("POST", "/_sluice/reset?rule=per-key", withKey(await knownKey()));
    expect(await again.json()).toMatchObject({ existed: false });
  });

  it("addresses are normalised as the gateway does: an IPv6 /64 is one key, IPv4-mapped IPv6 is IPv4", async () => {
    setNow(T0);
    const ip = freshIp();
    await gatewayFetch(rules, req("GET", "/x", { "CF-Connecting-IP": ip }));
    const v4 = await (await call("GET", "/_sluice/state?rule=per-ip", withKey(ip))).json();
    const mapped = await (await call("GET", "/_sluice/state?rule=per-ip", withKey(`::ffff:${ip}`))).json();
    expect(v4).toMatchObject({ remaining: 1, key: await sha256Hex(ip) });
    expect(mapped).toEqual(v4);
    await gatewayFetch(rules, req("GET", "/x", { "CF-Connecting-IP": "2001:db8:aa:bb::1" }));
    const other = await (await call("GET", "/_sluice/state?rule=per-ip", withKey("2001:DB8:AA:BB:ffff:1:2:3"))).json();
    expect(other).toMatchObject({ remaining: 1, key: await sha256Hex("2001:db8:aa:bb::/64") });
  });

  it("GET /_sluice/stats counts this isolate's decisions", async () => {
    const key = await knownKey();
    setNow(T0);
    const before = await (await call("GET", "/_sluice/stats")).json<Record<string, number>>();
    for (let i = 0; i < 6; i++) await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    const after = await (await call("GET", "/_sluice/stats")).json<Record<string, number>>();
    expect(Object.keys(after).sort()).toEqual(
      [
        "requests",
        "object_calls",
        "object_retries",
        "cache_answers",
        "denials",
        "fail_open",
        "fail_closed",
        "shadow_denials",
        "plan_cache_hits",
        "kv_reads",
        "key_lookups_refused",
        "charges",
        "local_keys",
        "local_bytes",
        "local_evictions",
        "max_keys",
        "cache_entries",
        "cache_max_entries",
        "batched_requests",
        "lease_answers",
        "leases",
        "lease_units_returned",
        "leases_held",
        "queue_overflows",
        "last_known_answers",
        "late_answers",
      ].sort(),
    );
    // 3 admitted (one call each), the 4th denied by the object, the 5th and 6th answered by the cache.
    expect(after.requests! - before.requests!).toBe(6);
    expect(after.object_calls! - before.object_calls!).toBe(4);
    expect(after.cache_answers! - before.cache_answers!).toBe(2);
    expect(after.denials! - before.denials!).toBe(3);
    expect(after.local_keys! - before.local_keys!).toBe(1);
    expect(after.max_keys).toBe(100_000);
  });

  it.each([
    ["GET", "/_sluice/reset?rule=per-key", 405, "POST", "k"],
    ["POST", "/_sluice/state?rule=per-key", 405, "GET", "k"],
    ["DELETE", "/_sluice/rules", 405, "GET"],
    ["GET", "/_sluice/state?rule=per-key", 400, null],
    ["GET", "/_sluice/state", 400, null, "k"],
    ["GET", "/_sluice/state?rule=nope", 404, null, "k"],
    ["GET", "/_sluice/state?rule=per-key", 400, null, "k".repeat(600)],
    ["GET", "/_sluice/state?rule=per-key", 400, null, ""],
    ["GET", "/_sluice/state?rule=per-ip", 400, null, "not-an-ip"],
    ["GET", "/_sluice/account", 400, null],
    ["GET", "/_sluice/other", 404, null],
  ] as [string, string, number, string | null, string?][])("%s %s: %i", async (method, path, status, allow, key) => {
    const r = await call(method, path, key === undefined ? admin : withKey(key));
    expect(r.status).toBe(status);
    expect(r.headers.get("Allow")).toBe(allow);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
  });
});

describe("raw keys stay out of URLs (URLs reach request logs), as the token does", () => {
  it.each([
    ["GET", "/_sluice/state?rule=per-key&key=sk_in_url"],
    ["POST", "/_sluice/reset?rule=per-key&key=sk_in_url"],
    ["GET", "/_sluice/account?key=sk_in_url"],
  ])("%s %s: 400 naming the X-Sluice-Key header, nothing done", async (method, path) => {
    const r = await call(method, path);
    expect(r.status).toBe(400);
    const detail = (await r.json<{ detail: string }>()).detail;
    expect(detail).toContain("send the raw key in the X-Sluice-Key header");
    expect(detail).not.toContain("sk_in_url");
  });

  it("the header carries the key to /state, /reset and /account", async () => {
    const key = await knownKey();
    await seedAccount(key, "growth");
    const account = await call("GET", "/_sluice/account", withKey(key));
    expect(await account.json()).toMatchObject({ account: await sha256Hex(key), found: true, plan: "growth" });
    expect((await call("GET", "/_sluice/state?rule=per-key", withKey(key))).status).toBe(200);
    expect((await call("POST", "/_sluice/reset?rule=per-key", withKey(key))).status).toBe(200);
  });
});

describe("failed token checks are limited per client address", () => {
  it("5 wrong tokens a minute are compared; the 6th answers 429; then even the right token waits; other addresses are not affected", async () => {
    setNow(T0);
    const ip = "192.0.2.201";
    const wrong = { Authorization: "Bearer not-the-token-0123456789abcdef", "CF-Connecting-IP": ip };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await call("GET", "/_sluice/stats", wrong)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    const locked = await call("GET", "/_sluice/stats", { ...admin, "CF-Connecting-IP": ip });
    expect(locked.status).toBe(429);
    expect(locked.headers.get("Content-Type")).toBe("application/problem+json");
    expect(Number(locked.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect(Number(locked.headers.get("Retry-After"))).toBeLessThanOrEqual(12);
    expect((await call("GET", "/_sluice/stats", { ...admin, "CF-Connecting-IP": "192.0.2.202" })).status).toBe(200);
    // One failure's worth refills in 12 s (5 per minute).
    setNow(T0 + 12_000);
    expect((await call("GET", "/_sluice/stats", { ...admin, "CF-Connecting-IP": ip })).status).toBe(200);
  });
});

describe("the guard cannot be turned against its operator (issue 23)", () => {
  it("tokenless requests (CORS preflights, cross-site GETs, a malformed header) count nothing: the right token still opens it", async () => {
    setNow(T0);
    const ip = "192.0.2.211";
    const from = { "CF-Connecting-IP": ip };
    const tokenless: [string, Record<string, string>][] = [
      ["OPTIONS", { ...from, "Access-Control-Request-Method": "GET", Origin: "https://evil.example" }],
      ["OPTIONS", { ...from, "Access-Control-Request-Method": "POST", Origin: "https://evil.example" }],
      ["OPTIONS", { ...from, "Access-Control-Request-Headers": "authorization", Origin: "https://evil.example" }],
      ["GET", from],
      ["GET", { ...from, Origin: "https://evil.example" }],
      ["POST", from],
      ["GET", { ...from, Authorization: "Bearer" }],
      ["GET", { ...from, Authorization: `Basic ${btoa("admin:guess")}` }],
    ];
    for (let round = 0; round < 3; round++) {
      for (const [method, headers] of tokenless) {
        const r = await call(method, "/_sluice/stats", headers);
        expect(r.status, `${method} ${JSON.stringify(headers)}`).toBe(401);
      }
    }
    expect((await call("GET", "/_sluice/stats", { ...admin, ...from })).status).toBe(200);
  });

  it("40 wrong tokens at once: at most 5 compared (401), every other one refused before comparing (429)", async () => {
    setNow(T0);
    const headers = { Authorization: "Bearer wrong-token-0123456789abcdef", "CF-Connecting-IP": "192.0.2.212" };
    const statuses = await Promise.all(Array.from({ length: 40 }, () => call("GET", "/_sluice/stats", headers)));
    const counts = statuses.map((r) => r.status);
    expect(counts.filter((s) => s === 401)).toHaveLength(5);
    expect(counts.filter((s) => s === 429)).toHaveLength(35);
  });

  it("the right token gives its charge back: 20 right tokens leave all 5 attempts for wrong ones", async () => {
    setNow(T0);
    const from = { "CF-Connecting-IP": "192.0.2.213" };
    for (let i = 0; i < 20; i++) expect((await call("GET", "/_sluice/stats", { ...admin, ...from })).status).toBe(200);
    const wrong = { Authorization: "Bearer wrong-token-0123456789abcdef", ...from };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await call("GET", "/_sluice/stats", wrong)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  });

  it("when the guard's object fails, admin answers 503 and compares nothing, right token or wrong", async () => {
    setNow(T0);
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(() => {
      throw new Error("injected guard failure");
    });
    const from = { "CF-Connecting-IP": "192.0.2.214" };
    for (const headers of [
      { ...admin, ...from },
      { Authorization: "Bearer wrong-token-0123456789abcdef", ...from },
    ]) {
      const r = await call("GET", "/_sluice/stats", headers);
      expect(r.status).toBe(503);
      expect(r.headers.get("Retry-After")).toBe("1");
      expect(r.headers.get("Content-Type")).toBe("application/problem+json");
      expect(((await r.json()) as { detail: string }).detail).toContain("nothing was compared");
    }
  });

  it.each(["//_sluice/stats", "/%5Fsluice/stats", "/_SLUICE/stats", "/_sluice;x/stats", "/x/..%2F_sluice/stats"])(
    "%s: another spelling of an admin path is refused with 400, never forwarded",
    async (path) => {
      const r = await call("GET", path);
      expect(r.status).toBe(400);
      expect(await r.json()).toMatchObject({ error: "admin_path_spelling" });
    },
  );

  it("an address that is not one address is refused before the guard", async () => {
    const r = await call("GET", "/_sluice/stats", { ...admin, "CF-Connecting-IP": "192.0.2.215:443" });
    expect(r.status).toBe(400);
  });
});

describe("state and reset use the identity the gateway counts by", () => {
  it("an api_key rule: a known key by itself; unverified callers by their address", async () => {
    setNow(T0);
    const ip = "198.51.100.201";
    const known = await knownKey();
    // (From another address: per-ip admits 2 a minute per address.)
    await gatewayFetch(rules, req("GET", "/x", { ...bearer(known), "CF-Connecting-IP": "198.51.100.202" }));
    await gatewayFetch(rules, req("GET", "/x", { ...bearer(freshKey("sk_made_up")), "CF-Connecting-IP": ip }));
    await gatewayFetch(rules, req("GET", "/x", { ...bearer(freshKey("sk_made_up")), "CF-Connecting-IP": ip }));
    const state = async (key: string) =>
      (await call("GET", "/_sluice/state?rule=per-key", withKey(key))).json<Record<string, unknown>>();
    expect(await state(known)).toMatchObject({ remaining: 2, key: await sha256Hex(known) });
    expect(await state(ip)).toMatchObject({ remaining: 1, key: await sha256Hex(`unverified:${ip}`) });
    const unknown = await call("GET", "/_sluice/state?rule=per-key", withKey(freshKey("sk_made_up")));
    expect(unknown.status).toBe(400);
    // The whole sentence an operator reads (it once showed a stray `" +` and a line break from a broken concatenation).
    expect(((await unknown.json()) as { detail: string }).detail).toBe(
      "X-Sluice-Key is not an API key with an account record, nor a client address: callers without a known key are " +
        "counted by their address, so pass that.",
    );
    const reset = await call("POST", "/_sluice/reset?rule=per-key", withKey(ip));
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    expect(await state(ip)).toMatchObject({ remaining: 3 });
  });
});

describe("KEY_HASH_SECRET", () => {
  it("hashes keys with HMAC-SHA256 for objects, logs and the admin API; plans stay keyed by plain SHA-256", async () => {
    const secret = "a-long-random-secret-for-the-test";
    const keyed = { ...env, KEY_HASH_SECRET: secret } as Env;
    const key = await knownKey();
    await seedAccount(key, "growth");
    setNow(T0);
    const ctx = createExecutionContext();
    const r = await handleRequest(req("GET", "/x", bearer(key)), keyed, ctx, rules, isolate);
    await waitOnExecutionContext(ctx);
    const body = await r.json<{ plan: string; decisions: { key: string }[] }>();
    expect(body.plan).toBe("growth");
    const hmac = await hmacSha256Hex(secret, key);
    expect(hmac).not.toBe(await sha256Hex(key));
    expect(body.decisions[0]?.key).toBe(hmac);
    const state = await call("GET", "/_sluice/state?rule=per-key", withKey(key), keyed);
    expect(await state.json()).toMatchObject({ key: hmac, remaining: 2 });
  });
});
