/**
 * Per-account overrides in the Workers runtime: an account record's `limits` replace a rule's parameters for that
 * account's key only; the headers show the limit that applied; a key's state carries over when its override changes
 * exactly as it does when the rule itself changes on a redeploy (the object sees the parameters, not where they came
 * from); a stale blocked-key cache entry does not outlive an override; an invalid stored override is logged and the
 * rule's own parameters apply (never a 5xx).
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/edge/hash.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import type { SluiceLimiter } from "../../src/object/limiter.ts";
import type { CompiledRule } from "../../src/request/match.ts";
import { bearer, freshKey, gatewayFetch, isolate, limiterFor, req, rulesFrom, setNow, T0 } from "./helpers.ts";

/** PLAN_CACHE_TTL_MS's default: a changed record is read once the cached one expires. */
const PLAN_TTL_MS = 30_000;

const ruleYaml = (burst: number) => `
- id: growth-global
  match: { plan: growth, identity: api_key }
  algorithm: token_bucket
  rate: 1/h
  burst: ${burst}
- id: per-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 1000
  window: h
`;
const rules = rulesFrom(ruleYaml(3));
/** The same rule set after a redeploy that raised growth-global's burst to 10. */
const redeployed = rulesFrom(ruleYaml(10));

async function putAccount(key: string, record: unknown): Promise<void> {
  await env.ACCOUNTS.put(await sha256Hex(key), JSON.stringify(record));
}

const call = (set: readonly CompiledRule[], key: string) =>
  gatewayFetch(set, req("GET", "/v1/quotes", { ...bearer(key), "CF-Connecting-IP": "192.0.2.10" }));

async function statuses(set: readonly CompiledRule[], key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await call(set, key);
    await r.arrayBuffer();
    out.push(r.status);
  }
  return out;
}

beforeEach(() => setNow(T0));
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("per-account overrides", () => {
  it("replace the rule's parameters for that account only, and the headers show the limit that applied", async () => {
    const big = freshKey();
    const plain = freshKey();
    await putAccount(big, { plan: "growth", limits: { "growth-global": { rate: "1/h", burst: 5 } } });
    await putAccount(plain, { plan: "growth" });

    const first = await call(rules, big);
    expect(first.status).toBe(200);
    expect(first.headers.get("RateLimit-Policy")).toBe(`"growth-global";q=5;w=18000, "per-ip";q=1000;w=3600`);
    expect(first.headers.get("RateLimit")).toMatch(/^"growth-global";r=4;t=3600, /);
    expect(await statuses(rules, big, 5)).toEqual([200, 200, 200, 200, 429]);

    const other = await call(rules, plain);
    expect(other.headers.get("RateLimit-Policy")).toBe(`"growth-global";q=3;w=10800, "per-ip";q=1000;w=3600`);
    expect(await statuses(rules, plain, 3)).toEqual([200, 200, 429]);
  });

  it("a key's state carries over when its override changes, exactly as when the rule changes on a redeploy", async () => {
    const viaOverride = freshKey();
    const viaRedeploy = freshKey();
    await putAccount(viaOverride, { plan: "growth" });
    await putAccount(viaRedeploy, { plan: "growth" });
    expect(await statuses(rules, viaOverride, 4)).toEqual([200, 200, 200, 429]);
    expect(await statuses(rules, viaRedeploy, 4)).toEqual([200, 200, 200, 429]);

    // The account gets burst 10 for this rule; the other key's rule is redeployed with burst 10.
    await putAccount(viaOverride, { plan: "growth", limits: { "growth-global": { rate: "1/h", burst: 10 } } });
    setNow(T0 + PLAN_TTL_MS);
    const a = await call(rules, viaOverride);
    const b = await call(redeployed, viaRedeploy);
    expect(a.status).toBe(b.status);
    for (const name of ["RateLimit-Policy", "RateLimit", "Retry-After"]) {
      expect(a.headers.get(name), name).toBe(b.headers.get(name));
    }
    // Token buckets keep their (empty) tokens across a burst change: both are still denied, under q=10 now.
    expect(a.status).toBe(429);
    expect(a.headers.get("RateLimit-Policy")).toContain(`"growth-global";q=10;w=36000`);

    // Taking the override away is a change back, carried over the same way.
    await putAccount(viaOverride, { plan: "growth" });
    setNow(T0 + 2 * PLAN_TTL_MS);
    const back = await call(rules, viaOverride);
    const backRedeploy = await call(rules, viaRedeploy);
    expect(back.headers.get("RateLimit")).toBe(backRedeploy.headers.get("RateLimit"));
    expect(back.headers.get("RateLimit-Policy")).toContain(`"growth-global";q=3;w=10800`);
  });

  it("a raised override is not refused by a denial this isolate cached under the old parameters", async () => {
    const key = freshKey();
    await putAccount(key, { plan: "growth" });
    expect(await statuses(rules, key, 4)).toEqual([200, 200, 200, 429]);
    const cachedRetryS = Number((await call(rules, key)).headers.get("Retry-After"));
    expect(cachedRetryS).toBeGreaterThan(1000); // one token at 1/h
    await putAccount(key, { plan: "growth", limits: { "growth-global": { rate: "1/s", burst: 3 } } });
    setNow(T0 + PLAN_TTL_MS);
    // The object is asked (the cached denial was made under other parameters): the key kept its 0 tokens at the
    // change, and now waits for one at 1/s, not for the old hour.
    const denied = await call(rules, key);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Retry-After")).toBe("1");
    setNow(T0 + PLAN_TTL_MS + 1000);
    expect(await statuses(rules, key, 2)).toEqual([200, 429]);
  });

  it.each([
    [
      "a bad parameter",
      { "growth-global": { rate: "1/h", burst: "lots" } },
      'growth-global.burst: must be a positive integer, got "lots"',
    ],
    [
      "a rule that does not exist",
      { "growth-globl": { rate: "1/h", burst: 50 } },
      'growth-globl: no such rule is deployed; did you mean "growth-global"?',
    ],
    [
      "a rule not counted by api_key",
      { "per-ip": { limit: 5000, window: "h" } },
      "per-ip.limits: only scope: global rules counted by api_key",
    ],
    [
      "limits that are not an object",
      "everything",
      'limits: must be an object of rule id -> parameters, got "everything"',
    ],
  ])(
    "an invalid stored override (%s) is logged, and the rule's own parameters apply",
    async (_name, limits, message) => {
      const key = freshKey();
      const warn = vi.spyOn(console, "warn");
      await putAccount(key, { plan: "growth", limits });
      const r = await call(rules, key);
      expect(r.status).toBe(200);
      expect(r.headers.get("RateLimit-Policy")).toContain(`"growth-global";q=3;w=10800`);
      const hash = await sha256Hex(key);
      const lines = warn.mock.calls.map(
        (c) => JSON.parse(String(c[0])) as { event: string; key: string; errors: string[] },
      );
      const logged = lines.find((l) => l.event === "bad_override" && l.key === hash);
      expect(logged?.errors.join("\n")).toContain(`${hash}: ${message}`);
      expect(JSON.stringify(lines)).not.toContain(key);
      expect(await statuses(rules, key, 3)).toEqual([200, 200, 429]);
    },
  );

  it("the valid overrides of a record apply while its invalid ones are logged", async () => {
    const key = freshKey();
    const warn = vi.spyOn(console, "warn");
    await putAccount(key, {
      plan: "growth",
      limits: { "growth-global": { rate: "1/h", burst: 4 }, "per-ip": { limit: 1, window: "h" } },
    });
    expect(await statuses(rules, key, 5)).toEqual([200, 200, 200, 200, 429]);
    expect(warn.mock.calls.some((c) => String(c[0]).includes('"bad_override"'))).toBe(true);
  });

  it("the admin API's state of a key reports the limit that applies to it: its account's override", async () => {
    const key = freshKey();
    await putAccount(key, { plan: "growth", limits: { "growth-global": { rate: "1/h", burst: 5 } } });
    expect(await statuses(rules, key, 2)).toEqual([200, 200]);
    const state = async (k: string) => {
      const ctx = createExecutionContext();
      const path = "/_sluice/state?rule=growth-global";
      const headers = { Authorization: "Bearer test-admin-token-0123456789abcdef", "X-Sluice-Key": k };
      const r = await handleRequest(req("GET", path, headers), env, ctx, rules, isolate);
      await waitOnExecutionContext(ctx);
      return r.json<Record<string, unknown>>();
    };
    expect(await state(key)).toMatchObject({ quota: 5, override: true, remaining: 3 });
    // A known key without an override (an unknown key is counted by its address, not by itself).
    const plain = freshKey();
    await putAccount(plain, { plan: "growth" });
    expect(await state(plain)).toMatchObject({ quota: 3, override: false, remaining: 3 });
    // A versioned record without an override of this rule (its version is stamped on the rule): still the rule's own.
    const versioned = freshKey();
    await putAccount(versioned, { plan: "growth", version: 9_000_000_000_000 });
    expect(await state(versioned)).toMatchObject({ quota: 3, override: false, remaining: 3 });
  });
});

describe("an override change reaching isolates at different times (rules versions)", () => {
  it("the key's object obeys the account record's newest version; an isolate's stale override is decided under it", async () => {
    const key = freshKey();
    const headers = { ...bearer(key), "CF-Connecting-IP": "192.0.2.11" };
    const stale = createIsolate();
    const fresh = createIsolate();
    const send = async (iso: typeof stale) => {
      const ctx = createExecutionContext();
      const r = await handleRequest(req("GET", "/v1/quotes", headers), env, ctx, rules, iso);
      await r.arrayBuffer();
      await waitOnExecutionContext(ctx);
      return r.status;
    };
    await putAccount(key, { plan: "growth", limits: { "growth-global": { rate: "1/h", burst: 10 } }, version: 100 });
    expect([await send(stale), await send(stale)]).toEqual([200, 200]); // burst 10: 8 left; `stale` caches it
    // The override is removed (version 200). `fresh` reads the new record: burst 3, the 8 left carried over to 3.
    await putAccount(key, { plan: "growth", version: 200 });
    expect(await send(fresh)).toBe(200); // 2 left
    // `stale` still sends burst 10 (version 100): decided under burst 3, so 2 more and then denials; the object's
    // state stays on the newest parameters (no thrash back to burst 10).
    const later = [await send(stale), await send(stale), await send(stale), await send(stale)];
    expect(later).toEqual([200, 200, 429, 429]);
    const record = await runInDurableObject(
      await limiterFor("growth-global", key),
      (_o: SluiceLimiter, state) => state.storage.kv.get("record") as { fingerprint: string; version?: number },
    );
    expect(JSON.parse(record.fingerprint)).toMatchObject({ burst: 3 });
    expect(record.version).toBe(200);
  });
});
