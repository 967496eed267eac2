/**
 * Concurrency rules through the gateway in the Workers runtime: a slot is held from the admission until the
 * response's body has been read to the end or cancelled, survives an object restart (`abortAllDurableObjects`), and
 * comes back after its lease. The echo origin answers; a body not yet read is a request still in flight.
 */
import {
  abortAllDurableObjects,
  createExecutionContext,
  env,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Slot } from "../../src/algorithms/concurrency.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import type { SluiceLimiter } from "../../src/object/limiter.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import { bearer, freshIp, isolate, knownKey, limiterFor, manualSleep, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const RULES = rulesFrom(`
- id: exports
  match: { route: "POST /v1/reports/export", identity: ip }
  algorithm: concurrency
  limit: 2
  slot_ttl: 10s
`);

/** One request through the gateway; `settled` waits for its background work (the release, once the body ended). */
async function send(ip: string, on = isolate) {
  const ctx = createExecutionContext();
  const request = req("POST", "/v1/reports/export", { "CF-Connecting-IP": ip });
  const response = await handleRequest(request, env, ctx, RULES, on);
  return { response, settled: () => waitOnExecutionContext(ctx) };
}

/** The (id, lease start) of each slot the key's object holds. */
async function slotsHeld(ip: string): Promise<[number, number][]> {
  return runInDurableObject(await limiterFor("exports", ip), (_instance: SluiceLimiter, state) => {
    const record = state.storage.kv.get<LimiterRecord>("record");
    return ((record?.state ?? { slots: [] }) as { slots: readonly Slot[] }).slots.map((s) => [s.id, s.atMs]);
  });
}

describe("concurrency through the gateway", () => {
  it("holds a slot until the body is read to the end", async () => {
    setNow(T0);
    const ip = freshIp();
    const a = await send(ip);
    const b = await send(ip);
    expect([a.response.status, b.response.status]).toEqual([200, 200]);
    const c = await send(ip);
    expect(c.response.status).toBe(429);
    expect(c.response.headers.get("Retry-After")).toBe("10");
    await c.response.text();
    await c.settled();
    await a.response.text();
    await a.settled();
    const d = await send(ip);
    expect(d.response.status).toBe(200);
    await Promise.all([b.response.text(), d.response.text()]);
    await Promise.all([b.settled(), d.settled()]);
  });

  it("gives the slot back when the client goes away (the body is cancelled)", async () => {
    setNow(T0);
    const ip = freshIp();
    const a = await send(ip);
    const b = await send(ip);
    expect((await send(ip)).response.status).toBe(429);
    await a.response.body!.cancel();
    await a.settled();
    const c = await send(ip);
    expect(c.response.status).toBe(200);
    for (const x of [b, c]) {
      await x.response.text();
      await x.settled();
    }
  });

  it("keeps the slots held across an object restart, and gives them back after it", async () => {
    setNow(T0);
    const ip = freshIp();
    const a = await send(ip);
    const b = await send(ip);
    await abortAllDurableObjects();
    expect((await send(ip)).response.status).toBe(429);
    await a.response.text();
    await a.settled();
    expect((await send(ip)).response.status).toBe(200);
    await b.response.text();
    await b.settled();
  });

  it("gives a slot that nobody released back when its lease ends", async () => {
    setNow(T0);
    const ip = freshIp();
    await send(ip);
    await send(ip);
    expect((await send(ip)).response.status).toBe(429);
    setNow(T0 + 10_000 - 1);
    expect((await send(ip)).response.status).toBe(429);
    setNow(T0 + 10_000);
    const late = await send(ip);
    expect(late.response.status).toBe(200);
  });
});

describe("slot renewal while a response streams", () => {
  it("a request running past slot_ttl keeps its slot: the gateway renews it every half slot_ttl", async () => {
    // The renewals wait on this isolate's sleeper, which only the test ends (`expire`): manual time, no real timers.
    const timers = manualSleep();
    const manual = createIsolate({ sleep: timers.sleep });
    setNow(T0);
    const ip = freshIp();
    const a = await send(ip, manual);
    const b = await send(ip, manual);
    expect([a.response.status, b.response.status]).toEqual([200, 200]);
    const [idA, idB] = (await slotsHeld(ip)).map(([id]) => id);
    setNow(T0 + 5_000);
    await timers.expire(5_000);
    for (let i = 0; i < 200 && (await slotsHeld(ip)).some(([, atMs]) => atMs !== T0 + 5_000); i++) {
      await scheduler.wait(5);
    }
    // Both renewed at the same ms (in whichever order their calls landed).
    expect((await slotsHeld(ip)).sort((x, y) => x[0] - y[0])).toEqual([
      [idA, T0 + 5_000],
      [idB, T0 + 5_000],
    ]);
    // Past the first leases' end (T0 + 10 s), within the renewed ones: still full.
    setNow(T0 + 12_000);
    const c = await send(ip, manual);
    expect(c.response.status).toBe(429);
    expect(c.response.headers.get("Retry-After")).toBe("3");
    await c.response.text();
    // The body read to the end gives the slot back, and its renewals stop.
    await a.response.text();
    await a.settled();
    expect(await slotsHeld(ip)).toEqual([[idB, T0 + 5_000]]);
    // b's isolate renews nothing more (as if it died): its slot comes back when its renewed lease ends.
    setNow(T0 + 15_000);
    const d = await send(ip, manual);
    const e = await send(ip, manual);
    expect([d.response.status, e.response.status]).toEqual([200, 200]);
  });
});

describe("concurrency through the service binding", () => {
  it("limit() hands out a slot; release() gives it back, once", async () => {
    setNow(T0);
    const key = `acct_${crypto.randomUUID()}`;
    const rule = "exports-per-account";
    const taken = [];
    for (let i = 0; i < 3; i++) taken.push(await env.SLUICE.limit({ key, rule }));
    expect(taken.map((r) => r.success)).toEqual([true, true, true]);
    expect(taken.map((r) => r.remaining)).toEqual([2, 1, 0]);
    const denied = await env.SLUICE.limit({ key, rule });
    expect(denied).toMatchObject({ success: false, status: 429, reason: "denied" });
    expect(denied.slot).toBeUndefined();
    const slot = taken[0]!.slot!;
    expect(slot).toMatch(/^exports-per-account:[0-9a-f]{64}:[0-9]+$/);
    expect(await env.SLUICE.release(slot)).toEqual({ released: 1 });
    expect(await env.SLUICE.release([slot])).toEqual({ released: 0 });
    expect((await env.SLUICE.limit({ key, rule })).success).toBe(true);
  });

  it("renew() starts a held slot's lease again; an ended lease is not revived", async () => {
    setNow(T0);
    const key = `acct_${crypto.randomUUID()}`;
    const rule = "exports-per-account"; // limit 3, slot_ttl 10 min
    const slots = [];
    for (let i = 0; i < 3; i++) slots.push((await env.SLUICE.limit({ key, rule })).slot!);
    setNow(T0 + 6 * 60_000);
    expect(await env.SLUICE.renew(slots[0]!)).toEqual({ renewed: 1 });
    // Past the first leases' end: the two not renewed are back, the renewed one still held.
    setNow(T0 + 10 * 60_000);
    const taken = [];
    for (let i = 0; i < 3; i++) taken.push(await env.SLUICE.limit({ key, rule }));
    expect(taken.map((r) => r.success)).toEqual([true, true, false]);
    expect(await env.SLUICE.renew([slots[1]!, slots[2]!])).toEqual({ renewed: 0 });
    expect(await env.SLUICE.release(slots[0]!)).toEqual({ released: 1 });
  });

  it("check() of a request a concurrency rule admits says which slots it holds", async () => {
    setNow(T0);
    const key = await knownKey("sk_growth", "growth");
    const result = await env.SLUICE.check({
      url: "https://sluice.test/v1/reports/export",
      method: "POST",
      headers: bearer(key),
    });
    expect(result.success).toBe(true);
    expect(result.slots).toHaveLength(1);
    // exports-per-account's slot_ttl is 10 min: renewed every 5 min while the work runs (withSluice and Hono do).
    expect(result.renewEveryMs).toBe(5 * 60_000);
    expect(await env.SLUICE.release(result.slots!)).toEqual({ released: 1 });
  });

  it("release() says what is wrong with what it was given", async () => {
    const failure = async (call: () => Promise<unknown>) => {
      try {
        await call();
      } catch (error) {
        return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      }
      return "no error";
    };
    expect(await failure(() => env.SLUICE.release("nope"))).toBe(
      'TypeError: Sluice release(): not a slot from limit() or check(): "nope"',
    );
    expect(await failure(() => env.SLUICE.renew(["nope"]))).toBe(
      'TypeError: Sluice renew(): not a slot from limit() or check(): "nope"',
    );
    expect(await failure(() => env.SLUICE.release(`login-per-ip:${"0".repeat(64)}:1`))).toBe(
      'RangeError: Sluice release(): rule "login-per-ip" holds no slots (sliding_log)',
    );
  });
});
