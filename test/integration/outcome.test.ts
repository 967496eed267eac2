/**
 * Counting by the response and bans in the Workers runtime, through the gateway with the real Durable Object binding
 * and two isolates: failed logins per address charged after the origin answers 401, a ban that lasts exactly
 * `block_for` in every isolate and survives a restarted object, an admin reset that lifts it, and the origin's cost
 * from a response header (a bad value charged as the rule's cost).
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { limitKey } from "../../src/edge/binding.ts";
import { sha256Hex } from "../../src/edge/hash.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate, type Isolate } from "../../src/isolate/isolate.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import type { CompiledRule } from "../../src/request/match.ts";
import { freshIp, limiterFor, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const ADMIN_TOKEN = "outcome-test-admin-token-0123456789";
const upstreamEnv = { ...env, UPSTREAM_URL: "https://origin.example", ADMIN_TOKEN };

/** The origin: answers each forwarded request as its `X-Answer` header says (`401`, `200;cost=4`, ...), and counts. */
function recordingOrigin() {
  const seen: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
    const request = input as Request;
    const answer = request.headers.get("X-Answer") ?? "200";
    seen.push(answer);
    const [status, cost] = answer.split(";cost=");
    const headers: Record<string, string> = cost === undefined ? {} : { "X-Cost": cost };
    return new Response(`answered ${answer}`, { status: Number(status), headers });
  });
  return seen;
}

async function send(rules: readonly CompiledRule[], iso: Isolate, ip: string, answer: string): Promise<Response> {
  const ctx = createExecutionContext();
  const request = req("POST", "/v1/login", { "CF-Connecting-IP": ip, "X-Answer": answer });
  const response = await handleRequest(request, upstreamEnv, ctx, rules, iso);
  // The charge runs after the response, in waitUntil: wait for it as the runtime would keep it alive.
  await waitOnExecutionContext(ctx);
  return response;
}

const record = async (ruleId: string, ip: string) =>
  runInDurableObject(await limiterFor(ruleId, ip), (_o: SluiceLimiter, state) =>
    state.storage.kv.get<LimiterRecord>("record"),
  );

describe("failed logins per address, with a ban", () => {
  const rules = rulesFrom(`
- id: failed-logins
  match: { route: "POST /v1/login", identity: ip }
  algorithm: sliding_log
  limit: 3
  window: 10min
  count_when: { status: [401, 403] }
  block_for: h
`);

  it("counts only the 401s, refuses the next attempt for exactly an hour in every isolate, and keeps the ban stored", async () => {
    const seen = recordingOrigin();
    const ip = freshIp();
    const [a, b] = [createIsolate(), createIsolate()];
    setNow(T0);
    for (let i = 0; i < 5; i++) expect((await send(rules, i % 2 === 0 ? a : b, ip, "200")).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await send(rules, i % 2 === 0 ? a : b, ip, "401")).status).toBe(401);
    expect(seen).toHaveLength(8);

    setNow(T0 + 1000);
    const refused = await send(rules, a, ip, "200");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("Retry-After")).toBe("3600");
    expect(refused.headers.get("RateLimit")).toBe(`"failed-logins";r=0;t=3600`);
    expect(seen).toHaveLength(8);
    expect((await record("failed-logins", ip))?.ban).toEqual({ sinceMs: T0 + 1000, untilMs: T0 + 3_601_000 });

    // The other isolate, long after the log emptied: still refused, with the ban's end.
    setNow(T0 + 3_600_999);
    const late = await send(rules, b, ip, "200");
    expect(late.status).toBe(429);
    expect(late.headers.get("Retry-After")).toBe("1");

    // A restarted object reloads the record from storage, ban included.
    const restarted = await runInDurableObject(await limiterFor("failed-logins", ip), (_o: SluiceLimiter, state) =>
      new SluiceLimiter(state, env).peek({ rule: { id: "failed-logins", params: rules[0]!.params } }),
    );
    expect(restarted).toMatchObject({ remaining: 0, retryAfterMs: 1, banUntilMs: T0 + 3_601_000 });

    setNow(T0 + 3_601_000);
    expect((await send(rules, b, ip, "200")).status).toBe(200);
    expect(seen).toHaveLength(9);
  });

  it("an admin reset lifts the ban at once, and takes it off the list of active bans", async () => {
    recordingOrigin();
    const ip = freshIp();
    const iso = createIsolate();
    setNow(T0);
    for (let i = 0; i < 3; i++) await send(rules, iso, ip, "403");
    expect((await send(rules, iso, ip, "200")).status).toBe(429);
    const state = await handleRequest(
      new Request("https://sluice.test/_sluice/state?rule=failed-logins", {
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "X-Sluice-Key": ip },
      }),
      upstreamEnv,
      createExecutionContext(),
      rules,
      iso,
    );
    expect(await state.json()).toMatchObject({ remaining: 0, ban_ends_in_ms: 3_600_000 });
    const keyHash = await sha256Hex(ip);
    const listed = async () => {
      const r = await handleRequest(
        new Request("https://sluice.test/_sluice/bans", { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } }),
        upstreamEnv,
        createExecutionContext(),
        rules,
        iso,
      );
      const body = (await r.json()) as { max: number; bans: { rule: string; key_hash: string; ends_in_ms: number }[] };
      expect(body.max).toBe(1000);
      return body.bans.filter((b) => b.rule === "failed-logins" && b.key_hash === keyHash);
    };
    expect(await listed()).toEqual([
      { rule: "failed-logins", key_hash: keyHash, until_ms: T0 + 3_600_000, ends_in_ms: 3_600_000 },
    ]);
    const reset = await handleRequest(
      new Request("https://sluice.test/_sluice/reset?rule=failed-logins", {
        method: "POST",
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, "X-Sluice-Key": ip },
      }),
      upstreamEnv,
      createExecutionContext(),
      rules,
      iso,
    );
    expect(reset.status).toBe(200);
    expect(await listed()).toEqual([]);
    expect((await send(rules, iso, ip, "200")).status).toBe(200);
  });
});

describe("the origin's cost from a response header", () => {
  const rules = rulesFrom(`
- id: query-cost
  match: { route: "POST /v1/login", identity: ip }
  algorithm: fixed_window
  limit: 10
  window: h
  cost_header: X-Cost
`);

  it("charges what the origin says; a bad value is logged and charged as the rule's cost; a full key refuses first", async () => {
    const seen = recordingOrigin();
    const logged = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const ip = freshIp();
    const iso = createIsolate();
    setNow(T0);
    expect((await send(rules, iso, ip, "200;cost=4")).status).toBe(200);
    expect((await send(rules, iso, ip, "200;cost=lots")).status).toBe(200);
    expect(JSON.stringify(logged.mock.calls)).toContain("bad_cost_header");
    expect((await send(rules, iso, ip, "200;cost=11")).status).toBe(200);
    const after = await record("query-cost", ip);
    // 4, then 1 for "lots", then 1 for 11 (above the capacity 10: a bad value too).
    expect(after?.state).toMatchObject({ count: 6 });
    expect((await send(rules, iso, ip, "200;cost=9")).status).toBe(200);
    // 6 + 9 does not fit: it filled the key to its limit; the next request is refused before the origin.
    expect((await record("query-cost", ip))?.state).toMatchObject({ count: 10 });
    expect((await send(rules, iso, ip, "200;cost=1")).status).toBe(429);
    expect(seen).toHaveLength(4);
  });
});

describe("the service binding reports outcomes: limit({ key, rule, outcome })", () => {
  const rules = rulesFrom(`
- id: failed-logins
  match: { identity: user }
  algorithm: fixed_window
  limit: 2
  window: h
  count_when: { status: 401 }
  block_for: 10min
- id: plain
  match: { identity: user }
  algorithm: fixed_window
  limit: 2
  window: h
`);
  const bx = () => ({ env, ctx: createExecutionContext(), rules, isolate: createIsolate() });

  it("checks without charging, charges the matching outcomes, and refuses with the ban once the limit is crossed", async () => {
    setNow(T0);
    const key = `user-${crypto.randomUUID()}`;
    const rule = "failed-logins";
    const check = () => limitKey({ key, rule }, undefined, bx());
    expect((await check()).success).toBe(true);
    expect((await check()).success).toBe(true);
    expect(await limitKey({ key, rule, outcome: { status: 200 } }, undefined, bx())).toMatchObject({
      success: true,
      charged: 0,
    });
    expect(await limitKey({ key, rule, outcome: { status: 401 } }, undefined, bx())).toMatchObject({
      success: true,
      charged: 1,
      remaining: 1,
    });
    expect((await limitKey({ key, rule, outcome: { status: 401 } }, undefined, bx())).remaining).toBe(0);
    // A third failure that was in flight: it does not fit, and starts the ban.
    const third = await limitKey({ key, rule, outcome: { status: 401, headers: {} } }, undefined, bx());
    // The ban ends in 10 minutes, but the hour's window (noon to 13:00) is full until its end: the retry is then.
    expect(third).toMatchObject({ success: false, charged: 0, retryAfterMs: 3_600_000 });
    const refused = await check();
    expect(refused).toMatchObject({ success: false, retryAfterMs: 3_600_000 });
  });

  it("an outcome for a rule that does not count by the response, or a malformed one, is an error that says so", async () => {
    const key = "user-x";
    await expect(limitKey({ key, rule: "plain", outcome: { status: 401 } }, undefined, bx())).rejects.toThrow(
      'rule "plain" has no count_when or cost_header',
    );
    await expect(limitKey({ key, rule: "failed-logins", outcome: { status: 42 } }, undefined, bx())).rejects.toThrow(
      "outcome.status must be an HTTP status from 100 to 599, got 42",
    );
  });
});
