/**
 * The NGINX limit_req table (rate=10r/s burst=20, 25 requests at once; and burst=0, its default), through the
 * gateway with leaky-queue rules, with the shaping delays measured on the real clock (the limiter's clock is frozen, so the decisions are exact).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, freshKey, gatewayFetch, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const queue = (extra: string, burst = 20) =>
  rulesFrom(`
- id: nginx
  match: { identity: api_key }
  algorithm: leaky_queue
  rate: 10/s
  burst: ${burst}
${extra}
`);

async function burst(rules: ReturnType<typeof queue>, n: number) {
  const key = freshKey();
  setNow(T0);
  return Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      const response = await gatewayFetch(rules, req("POST", "/sync", bearer(key)));
      const body = await response.json<{ delayed_ms?: number; retry_after_ms?: number }>();
      return { status: response.status, body, elapsedMs: performance.now() - started };
    }),
  );
}

describe("NGINX limit_req table", () => {
  it("default (queue): #1 now, #2..#21 released every 100 ms up to 2.0 s, #22..#25 rejected", async () => {
    const results = await burst(queue(""), 25);
    const admitted = results.filter((r) => r.status === 200);
    const denied = results.filter((r) => r.status === 429);
    expect(admitted.map((r) => r.body.delayed_ms).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
      Array.from({ length: 21 }, (_, i) => i * 100),
    );
    for (const r of admitted) {
      const delay = r.body.delayed_ms ?? 0;
      expect(r.elapsedMs).toBeGreaterThanOrEqual(delay - 1);
      expect(r.elapsedMs).toBeLessThan(delay + 1000);
    }
    expect(denied).toHaveLength(4);
    for (const r of denied) expect(r.body.retry_after_ms).toBe(100);
  });

  it("nodelay: #1..#21 served at once, #22..#25 rejected", async () => {
    const results = await burst(queue("  nodelay: true"), 25);
    const admitted = results.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(21);
    for (const r of admitted) {
      expect(r.body.delayed_ms).toBe(0);
      expect(r.elapsedMs).toBeLessThan(1000);
    }
    expect(results.filter((r) => r.status === 429)).toHaveLength(4);
  });

  it("burst 0 (NGINX's default `limit_req zone=one;`): #1 now, #2..#5 rejected with retry_after 100, none delayed", async () => {
    const results = await burst(queue("", 0), 5);
    const admitted = results.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]?.body.delayed_ms ?? 0).toBe(0);
    const denied = results.filter((r) => r.status === 429);
    expect(denied).toHaveLength(4);
    for (const r of denied) expect(r.body.retry_after_ms).toBe(100);
  });
});
