/**
 * The NGINX limit_req table (rate=10r/s burst=20, 25 requests at once; and burst=0, its default), through the
 * gateway with leaky-queue rules. The limiter's clock is frozen, so the decisions are exact; the shaping delays go
 * through the isolate's sleeper, which records what it was asked for and then really waits, so a test can check
 * that each admitted request was held for exactly its `delayed_ms` and never answered earlier. (No upper bound on
 * real elapsed time: that would be a timing assertion on a shared machine.)
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { settingsOf } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate, systemSleep } from "../../src/isolate/isolate.ts";
import { DEFAULT_TIMEOUT_MS } from "../../src/rules/types.ts";
import { bearer, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

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

/** The limiter's time budget in this test environment (LIMITER_TIMEOUT_MS, else the rules' default). */
const budgetMs = settingsOf(env).limiterTimeoutMs ?? DEFAULT_TIMEOUT_MS;
/** Every wait the gateway asked its sleeper for, apart from the limiter's time budget. */
let shapingSleepsMs: number[] = [];
const isolate = createIsolate({
  sleep: (ms) => {
    if (ms !== budgetMs) shapingSleepsMs.push(ms);
    return systemSleep(ms);
  },
});

async function burst(rules: ReturnType<typeof queue>, n: number) {
  const key = await knownKey();
  setNow(T0);
  shapingSleepsMs = [];
  return Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      const ctx = createExecutionContext();
      const response = await handleRequest(req("POST", "/sync", bearer(key)), env, ctx, rules, isolate);
      await waitOnExecutionContext(ctx);
      const body = await response.json<{ delayed_ms?: number; retry_after_ms?: number }>();
      return { status: response.status, body, elapsedMs: performance.now() - started };
    }),
  );
}

const byValue = (a: number, b: number) => a - b;

describe("NGINX limit_req table", () => {
  it("default (queue): #1 now, #2..#21 released every 100 ms up to 2.0 s, #22..#25 rejected", async () => {
    const results = await burst(queue(""), 25);
    const admitted = results.filter((r) => r.status === 200);
    const denied = results.filter((r) => r.status === 429);
    expect(admitted.map((r) => r.body.delayed_ms).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
      Array.from({ length: 21 }, (_, i) => i * 100),
    );
    for (const r of admitted) expect(r.elapsedMs).toBeGreaterThanOrEqual((r.body.delayed_ms ?? 0) - 1);
    expect(shapingSleepsMs.sort(byValue)).toEqual(Array.from({ length: 20 }, (_, i) => (i + 1) * 100));
    expect(denied).toHaveLength(4);
    for (const r of denied) expect(r.body.retry_after_ms).toBe(100);
  });

  it("nodelay: #1..#21 served at once, #22..#25 rejected", async () => {
    const results = await burst(queue("  nodelay: true"), 25);
    const admitted = results.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(21);
    for (const r of admitted) expect(r.body.delayed_ms).toBe(0);
    expect(shapingSleepsMs).toEqual([]);
    expect(results.filter((r) => r.status === 429)).toHaveLength(4);
  });

  it("burst 0 (NGINX's default `limit_req zone=one;`): #1 now, #2..#5 rejected with retry_after 100, none delayed", async () => {
    const results = await burst(queue("", 0), 5);
    const admitted = results.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]?.body.delayed_ms ?? 0).toBe(0);
    expect(shapingSleepsMs).toEqual([]);
    const denied = results.filter((r) => r.status === 429);
    expect(denied).toHaveLength(4);
    for (const r of denied) expect(r.body.retry_after_ms).toBe(100);
  });
});
