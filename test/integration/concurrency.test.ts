/**
 * Concurrency rules through the gateway in the Workers runtime: a slot is held from the admission until the
 * response's body has been read to the end or cancelled, survives an object restart (`abortAllDurableObjects`), and
 * comes back after its lease. The echo origin answers; a body not yet read is a request still in flight.
 */
import { abortAllDurableObjects, createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { handleRequest } from "../../src/edge/worker.ts";
import { freshIp, isolate, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const RULES = rulesFrom(`
- id: exports
  match: { route: "POST /v1/reports/export", identity: ip }
  algorithm: concurrency
  limit: 2
  slot_ttl: 10s
`);

/** One request through the gateway; `settled` waits for its background work (the release, once the body ended). */
async function send(ip: string) {
  const ctx = createExecutionContext();
  const response = await handleRequest(
    req("POST", "/v1/reports/export", { "CF-Connecting-IP": ip }),
    env,
    ctx,
    RULES,
    isolate,
  );
  return { response, settled: () => waitOnExecutionContext(ctx) };
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
