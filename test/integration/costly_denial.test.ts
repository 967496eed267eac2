/**
 * Issue 24: "a cost-5 request denied with r=3 reads as room to spare". `r` is the spec's `remaining` (requests of
 * cost 1), so it stays; the 429's body says what the request cost and what was left, per denying rule, whether the
 * object or the blocked-key cache answers. Through the Worker (SELF) on the shipped rules: a bulk label batch costs 10
 * of `labels-bulk` (10/s, burst 20).
 */
import { SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, knownKey, req, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

describe("a denied request that costs more than 1", () => {
  it("says its cost and what was left, next to r", async () => {
    setNow(T0);
    const key = await knownKey();
    const batch = () => SELF.fetch(req("POST", "/v1/labels:batch", bearer(key)));
    for (let i = 0; i < 2; i++) {
      const ok = await batch();
      expect(ok.status).toBe(200);
      await ok.arrayBuffer();
    }
    // 300 ms later, 3 of the 10 units a batch needs are back.
    setNow(T0 + 300);
    const denied = await batch();
    expect(denied.status).toBe(429);
    expect(denied.headers.get("RateLimit")).toContain(`"labels-bulk";r=3;`);
    const body = await denied.json<Record<string, unknown>>();
    expect(body).toMatchObject({
      detail: "Rate limit exceeded (labels-bulk: this request costs 10, 3 left); retry in 700 ms.",
      "violated-policies": ["labels-bulk"],
      retry_after_ms: 700,
      costs: { "labels-bulk": 10 },
    });
    // The next one, answered from the blocked-key cache, says the same.
    const again = await batch();
    expect(again.status).toBe(429);
    expect(await again.json()).toEqual(body);
  });
});
