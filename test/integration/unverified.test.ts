/**
 * Unverified API keys (issue 9): a key with no account record is not an identity of its own. Made-up keys from one
 * address share that address's budget; known keys keep their own, even behind one address; `unverified: skip` and
 * `reject` do what they say; and a flood of made-up keys costs a bounded number of KV reads, without pushing real
 * accounts out of the account cache (measured with a counting ACCOUNTS binding).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { bearer, bodyOf, freshKey, gatewayFetch, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const rules = rulesFrom(`
- id: per-key
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 5
- id: members-only
  match: { route: "POST /v1/members/**", identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 5
  unverified: reject
- id: keyed-only
  match: { route: "GET /v1/keyed/**", identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
  unverified: skip
`);

const from = (ip: string, key: string | null) => ({ "CF-Connecting-IP": ip, ...(key === null ? {} : bearer(key)) });

describe("unverified callers are counted by their address", () => {
  it("30 made-up keys from one address: 5 admitted, then 429 (rotation does not open new budgets)", async () => {
    setNow(T0);
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) {
      statuses.push((await gatewayFetch(rules, req("GET", "/x", from("192.0.2.10", freshKey("sk_rot"))))).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
    // No key at all from that address: the same, spent budget.
    expect((await gatewayFetch(rules, req("GET", "/x", from("192.0.2.10", null)))).status).toBe(429);
    // An IPv6 caller rotating inside its /64 is one caller too.
    const v6: number[] = [];
    for (let i = 1; i <= 7; i++) {
      v6.push((await gatewayFetch(rules, req("GET", "/x", from(`2001:db8:7:7::${i}`, freshKey("sk_rot"))))).status);
    }
    expect(v6).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it("two known keys behind one address keep separate budgets, apart from that address's unverified budget", async () => {
    setNow(T0);
    const ip = "192.0.2.11";
    const [a, b] = [await knownKey(), await knownKey()];
    const spend = async (key: string | null, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await gatewayFetch(rules, req("GET", "/x", from(ip, key)))).status);
      return out;
    };
    expect(await spend(a, 6)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(await spend(b, 6)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(await spend(freshKey("sk_made_up"), 6)).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it("unverified: reject answers 401 problem+json; a known key passes", async () => {
    setNow(T0);
    for (const key of [freshKey("sk_made_up"), null]) {
      const r = await gatewayFetch(rules, req("POST", "/v1/members/x", from("192.0.2.12", key)));
      expect(r.status).toBe(401);
      expect(r.headers.get("Content-Type")).toBe("application/problem+json");
      expect(r.headers.get("WWW-Authenticate")).toBe('Bearer realm="api"');
      expect(await r.json()).toMatchObject({ status: 401, title: "Unauthorized", rule: "members-only" });
    }
    const known = await gatewayFetch(rules, req("POST", "/v1/members/x", from("192.0.2.12", await knownKey())));
    expect(known.status).toBe(200);
  });

  it("unverified: skip does not apply to unverified callers", async () => {
    setNow(T0);
    const r = await gatewayFetch(rules, req("GET", "/v1/keyed/a", from("192.0.2.13", freshKey("sk_made_up"))));
    expect((await bodyOf(r)).decisions.map((d) => d.rule)).toEqual(["per-key"]);
    const known = await gatewayFetch(rules, req("GET", "/v1/keyed/a", from("192.0.2.13", await knownKey())));
    expect((await bodyOf(known)).decisions.map((d) => d.rule)).toEqual(["per-key", "keyed-only"]);
  });
});

describe("a flood of made-up keys costs nothing extra", () => {
  it("KV reads stay bounded per address, and known keys are answered from the account cache", async () => {
    // Local scope, so the measurement is about accounts, not Durable Object calls.
    const local = rulesFrom(`
- id: per-key-local
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/s
  burst: 1000
  scope: local
`);
    let kvReads = 0;
    const counting = new Proxy(env.ACCOUNTS, {
      get(target, prop, receiver) {
        if (prop === "get") {
          return (...args: Parameters<KVNamespace["get"]>) => {
            kvReads += 1;
            return (target.get as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    // The production budget (30 lookups per address per minute), not the tests' generous one.
    const e = { ...env, ACCOUNTS: counting, KEY_LOOKUPS_PER_MIN: "30" } as Env;
    const isolate = createIsolate();
    const send = async (ip: string, key: string) => {
      const ctx = createExecutionContext();
      const r = await handleRequest(req("GET", "/x", from(ip, key)), e, ctx, local, isolate);
      await waitOnExecutionContext(ctx);
      return bodyOf(r);
    };
    const known = await Promise.all(Array.from({ length: 10 }, () => knownKey("sk_real", "growth")));
    setNow(T0);
    let knownAnswers = 0;
    for (let i = 0; i < 1000; i++) {
      await send("203.0.113.250", freshKey("sk_flood"));
      if (i % 10 === 0) {
        const k = (i / 10) % known.length;
        const body = await send(`198.51.100.${10 + k}`, known[k]!);
        if (body.plan === "growth") knownAnswers += 1;
      }
    }
    const s = isolate.stats;
    console.log(
      JSON.stringify({
        measured: "1000 made-up keys from one address, 100 requests of 10 known keys from 10 others, one isolate",
        kv_reads: kvReads,
        plan_cache_hits: s.plan_cache_hits,
        key_lookups_refused: s.key_lookups_refused,
        known_answered_as_known: knownAnswers,
      }),
    );
    // 30 reads for the flooding address (its per-minute budget), one per known key; the rest answered without KV.
    expect(kvReads).toBe(30 + known.length);
    expect(s.key_lookups_refused).toBe(1000 - 30);
    expect(knownAnswers).toBe(100);
    // Every known key's requests after its first read came from the cache.
    expect(s.plan_cache_hits).toBe(100 - known.length);
  });
});
