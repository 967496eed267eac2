/** `scope: local` through the gateway: bounded by MAX_KEYS in least-recently-used order, and refunded like any rule. */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import { bearer, gatewayFetch, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

async function fetchWith(e: Env, rules: ReturnType<typeof rulesFrom>, request: Request) {
  const ctx = createExecutionContext();
  const response = await handleRequest(request, e, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

describe("scope: local", () => {
  const local = rulesFrom(`
- id: bulk
  match: { identity: ip }
  algorithm: gcra
  rate: 1/min
  burst: 1
  scope: local
`);
  const small = { ...env, MAX_KEYS: "3" } as Env;
  const from = (ip: string) => req("GET", "/x", { "CF-Connecting-IP": ip });

  it("stays within MAX_KEYS and evicts the least recently used key, which starts fresh", async () => {
    setNow(T0);
    const checks = vi.spyOn(SluiceLimiter.prototype, "check");
    const ips = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];
    for (const ip of ips) expect((await fetchWith(small, local, from(ip))).status).toBe(200);
    for (const ip of ips) expect((await fetchWith(small, local, from(ip))).status).toBe(429);
    // Touch .1 again, so .2 is now the least recently used.
    expect((await fetchWith(small, local, from(ips[0]!))).status).toBe(429);
    // A fourth key evicts .2 (the least recently used), not .1.
    expect((await fetchWith(small, local, from("198.51.100.4"))).status).toBe(200);
    expect((await fetchWith(small, local, from(ips[1]!))).status).toBe(200); // evicted: starts fresh
    expect((await fetchWith(small, local, from(ips[0]!))).status).toBe(429); // kept
    expect(checks).not.toHaveBeenCalled();
    const admin = { Authorization: "Bearer test-admin-token-0123456789abcdef" };
    const s = await (await fetchWith(small, local, req("GET", "/_sluice/stats", admin))).json<Record<string, number>>();
    expect(s.max_keys).toBe(3);
    expect(s.local_evictions).toBeGreaterThanOrEqual(2);
  });

  it("a local rule that admitted a request another rule denied is refunded", async () => {
    const mixed = rulesFrom(`
- id: roomy
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 5
  scope: local
- id: gate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
`);
    const key = await knownKey();
    setNow(T0);
    expect((await gatewayFetch(mixed, req("GET", "/x", bearer(key)))).headers.get("RateLimit")).toBe(
      `"roomy";r=4;t=60, "gate";r=0;t=60`,
    );
    const denied = await gatewayFetch(mixed, req("GET", "/x", bearer(key)));
    expect(denied.status).toBe(429);
    expect(denied.headers.get("RateLimit")).toBe(`"roomy";r=4;t=60, "gate";r=0;t=60`);
  });
});
