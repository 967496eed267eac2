/**
 * What Sluice depends on failing at load: the plan lookup (KV) failing or slow, the upstream erroring or hanging.
 * None of it becomes a limiter 5xx or a free pass:
 * - KV fails: the caller is limited by the default plan (logged `plan_lookup_failed`);
 * - KV is slow: after `PLAN_LOOKUP_BUDGET_MS` the caller is limited by the default plan (logged `plan_lookup_slow`);
 *   the read goes on, and once it lands the account's own plan applies;
 * - the upstream is unreachable: an admitted request answers 502 (problem+json, with its RateLimit headers) and
 *   stays counted; an upstream 5xx is passed through as the upstream's answer;
 * - the upstream hangs: only the admitted requests wait for it; every other one is still decided and answered.
 * Time budgets run out when the test says (a sleeper it drives), never by racing a real timer.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { PLAN_LOOKUP_BUDGET_MS } from "../../src/isolate/account_cache.ts";
import { createIsolate, type Sleep } from "../../src/isolate/isolate.ts";
import { bearer, freshKey, knownKey, req, rulesFrom, seedAccount, setNow, T0 } from "./helpers.ts";

/** One client address (a key whose account cannot be read is counted by its address, under the default plan). */
let ADDRESS = "192.0.2.50";

/** The production budgets: LIMITER_TIMEOUT_MS unset (this test environment sets it, for slow machines). */
const defaults = { ...env, LIMITER_TIMEOUT_MS: "" };

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: dep-free
  match: { plan: free, identity: api_key }
  algorithm: fixed_window
  limit: 5
  window: h
- id: dep-pro
  match: { plan: pro, identity: api_key }
  algorithm: fixed_window
  limit: 60
  window: h
`);

/** A sleeper the test ends by duration; `waiting(ms)` says how many sleeps of `ms` are pending. */
function drivenSleep() {
  const pending: { ms: number; wake: () => void }[] = [];
  const sleep: Sleep = (ms) => new Promise<void>((wake) => pending.push({ ms, wake }));
  return {
    sleep,
    waiting: (ms: number) => pending.filter((p) => p.ms === ms).length,
    expire(ms: number) {
      for (const p of pending.filter((x) => x.ms === ms)) p.wake();
      pending.splice(0, pending.length, ...pending.filter((x) => x.ms !== ms));
    },
  };
}

/** Yield until `done()` holds (each turn a macrotask, so the requests in flight run on). */
async function until(done: () => boolean): Promise<void> {
  for (let turn = 0; !done(); turn++) {
    if (turn > 10_000) throw new Error("the condition never held");
    await scheduler.wait(1);
  }
}

async function sendAll(environment: Env, sleep: Sleep, key: string, count: number, path = "/v1/quotes") {
  const isolate = createIsolate({ sleep });
  return {
    isolate,
    responses: Array.from({ length: count }, async () => {
      const ctx = createExecutionContext();
      const r = await handleRequest(
        req("GET", path, { ...bearer(key), "CF-Connecting-IP": ADDRESS }),
        environment,
        ctx,
        rules,
        isolate,
      );
      await waitOnExecutionContext(ctx);
      return r;
    }),
  };
}

const statusCounts = (statuses: readonly number[]) =>
  statuses.reduce<Record<number, number>>((m, s) => Object.assign(m, { [s]: (m[s] ?? 0) + 1 }), {});

describe("the plan lookup (KV) at load", () => {
  it("failing: 100 concurrent requests of a pro key are limited by the default plan, no 5xx", async () => {
    setNow(T0);
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const key = freshKey("sk_pro");
    await seedAccount(key, "pro");
    const broken = {
      ...defaults,
      ACCOUNTS: { get: () => Promise.reject(new Error("KV unavailable")) } as unknown as KVNamespace,
    };
    const { responses } = await sendAll(broken, drivenSleep().sleep, key, 100);
    const statuses = await Promise.all(responses.map(async (r) => (await r).status));
    expect(statusCounts(statuses)).toEqual({ 200: 5, 429: 95 }); // dep-free's limit
    expect(errors.mock.calls.some((c) => String(c[0]).includes('"event":"plan_lookup_failed"'))).toBe(true);
  });

  it("slow: after the budget the default plan applies; once the read lands, the account's own", async () => {
    setNow(T0);
    ADDRESS = "192.0.2.51"; // a budget of its own: the test before spent 192.0.2.50's default-plan budget
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const key = freshKey("sk_pro");
    await seedAccount(key, "pro");
    let release: () => void = () => {};
    const gate = new Promise<void>((go) => {
      release = go;
    });
    let reads = 0;
    const slow = {
      ...defaults,
      ACCOUNTS: {
        get: async (name: string, type: "text") => {
          reads++;
          await gate;
          return env.ACCOUNTS.get(name, type);
        },
      } as unknown as KVNamespace,
    };
    const timers = drivenSleep();
    const { responses, isolate } = await sendAll(slow, timers.sleep, key, 100);
    await until(() => timers.waiting(PLAN_LOOKUP_BUDGET_MS) === 100);
    expect(reads).toBe(1); // concurrent requests share one read
    timers.expire(PLAN_LOOKUP_BUDGET_MS);
    const statuses = await Promise.all(responses.map(async (r) => (await r).status));
    expect(statusCounts(statuses)).toEqual({ 200: 5, 429: 95 });
    expect(errors.mock.calls.some((c) => String(c[0]).includes('"event":"plan_lookup_slow"'))).toBe(true);

    release();
    await until(() => isolate.accounts.size === 1);
    const ctx = createExecutionContext();
    const later = await handleRequest(
      req("GET", "/v1/quotes", { ...bearer(key), "CF-Connecting-IP": ADDRESS }),
      slow,
      ctx,
      rules,
      isolate,
    );
    await waitOnExecutionContext(ctx);
    expect(later.status).toBe(200);
    expect(later.headers.get("RateLimit")).toBe(`"dep-pro";r=59;t=3600`);
    expect(reads).toBe(1);
  });
});

describe("the upstream at load", () => {
  const upstreamEnv = { ...env, UPSTREAM_URL: "https://upstream.example" };

  it("unreachable: admitted requests answer 502 with their RateLimit headers and stay counted; the rest 429", async () => {
    setNow(T0);
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    vi.spyOn(globalThis, "fetch").mockRejectedValue(new Error("connection refused"));
    const key = await knownKey("sk_free");
    const { responses } = await sendAll(upstreamEnv, drivenSleep().sleep, key, 60);
    const all = await Promise.all(responses);
    expect(statusCounts(all.map((r) => r.status))).toEqual({ 429: 55, 502: 5 });
    const bad = all.find((r) => r.status === 502)!;
    expect(bad.headers.get("Content-Type")).toBe("application/problem+json");
    expect(bad.headers.get("RateLimit-Policy")).toBe(`"dep-free";q=5;w=3600`);
    expect(await bad.json()).toMatchObject({ title: "Bad Gateway", status: 502 });
  });

  it("answering 503: passed through as the upstream's answer, limits unchanged", async () => {
    setNow(T0);
    vi.spyOn(console, "log").mockImplementation(() => {});
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => new Response("upstream overloaded", { status: 503 }));
    const key = await knownKey("sk_free");
    const { responses } = await sendAll(upstreamEnv, drivenSleep().sleep, key, 60);
    const all = await Promise.all(responses);
    expect(statusCounts(all.map((r) => r.status))).toEqual({ 429: 55, 503: 5 });
    const passed = all.find((r) => r.status === 503)!;
    expect(await passed.text()).toBe("upstream overloaded");
    expect(passed.headers.get("RateLimit")).toMatch(/^"dep-free";r=\d;t=3600$/);
  });

  it("hanging: only the admitted requests wait; every other one is decided and answered meanwhile", async () => {
    setNow(T0);
    vi.spyOn(console, "log").mockImplementation(() => {});
    let release: () => void = () => {};
    const gate = new Promise<void>((go) => {
      release = go;
    });
    let forwarded = 0;
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
      forwarded++;
      await gate;
      return new Response("ok");
    });
    const key = await knownKey("sk_free");
    const { responses } = await sendAll(upstreamEnv, drivenSleep().sleep, key, 60);
    const answered: number[] = [];
    for (const r of responses) void r.then((x) => answered.push(x.status));
    await until(() => answered.length === 55 && forwarded === 5);
    expect(statusCounts(answered)).toEqual({ 429: 55 });
    release();
    const all = await Promise.all(responses);
    expect(statusCounts(all.map((r) => r.status))).toEqual({ 200: 5, 429: 55 });
  });
});
