/**
 * Composition in the Workers runtime, with rules written for each test (YAML through the real parser) and the real
 * Durable Object binding: refunds, the longest retry, jitter, shadow rules, cost above capacity, limiter failures,
 * rule changes across a redeploy, local scope, and bad input.
 */
import { createExecutionContext, env, runInDurableObject, SELF, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jitterSeconds, sha256Hex } from "../../src/edge/hash.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import { RETURN_WAIT_MS } from "../../src/protocol/tunables.ts";
import { compileRules } from "../../src/request/match.ts";
import {
  bearer,
  bodyOf,
  freshKey,
  gatewayFetch,
  isolate,
  knownKey,
  limiterFor,
  manualSleep,
  req,
  resolvedFrom,
  rulesFrom,
  seedAccount,
  setNow,
  T0,
} from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const storedRecord = async (ruleId: string, key: string) =>
  runInDurableObject(await limiterFor(ruleId, key), (_instance: SluiceLimiter, state) =>
    state.storage.kv.get("record"),
  );

describe("composition", () => {
  const rules = rulesFrom(`
- id: wide
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
- id: narrow
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 2
`);

  it("admits only if every rule admits; the rules that admitted a denied request are refunded", async () => {
    const key = await knownKey();
    setNow(T0);
    const send = () => gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect((await send()).status).toBe(200);
    const second = await send();
    expect(second.headers.get("RateLimit")).toBe(`"wide";r=3;t=2, "narrow";r=0;t=2`);
    const before = await storedRecord("wide", key);

    const third = await send();
    expect(third.status).toBe(429);
    expect(third.headers.get("RateLimit-Policy")).toBe(`"wide";q=5;w=5, "narrow";q=2;w=2`);
    // wide admitted it, then got it back: it still has 3, and its stored state is exactly as before.
    expect(third.headers.get("RateLimit")).toBe(`"wide";r=3;t=2, "narrow";r=0;t=2`);
    // The state is as before; the record also remembers the applied call ids (so a retry is not charged twice) and
    // the key's least deficits lately (which bound what a later refund gives back: src/protocol/late_refund.ts).
    const { calls: _afterCalls, lows: _afterLows, ...after } = (await storedRecord("wide", key)) as LimiterRecord;
    const { calls: _beforeCalls, lows: _beforeLows, ...was } = before as LimiterRecord;
    expect(after).toEqual(was);

    setNow(T0 + 1000);
    const fourth = await send();
    expect(fourth.status).toBe(200);
    expect(fourth.headers.get("RateLimit")).toBe(`"wide";r=3;t=2, "narrow";r=0;t=2`);
  });

  it("when several rules deny, the longest retry wins (its status too) and every denying rule is listed", async () => {
    const both = rulesFrom(`
- id: short
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/s
  burst: 1
- id: long
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/10s
  burst: 1
  status: 503
`);
    const key = await knownKey();
    setNow(T0);
    expect((await gatewayFetch(both, req("GET", "/x", bearer(key)))).status).toBe(200);
    const denied = await gatewayFetch(both, req("GET", "/x", bearer(key)));
    expect(denied.status).toBe(503);
    expect(denied.headers.get("Retry-After")).toBe("10");
    expect(await bodyOf(denied)).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 503,
      detail: "Rate limit exceeded (short, long); retry in 10000 ms.",
      "violated-policies": ["short", "long"],
      retry_after_ms: 10000,
    });
  });

  it("retry_jitter_s lengthens Retry-After by a per-client amount in [0, J], the same on every denial", async () => {
    const jittered = rulesFrom(`
- id: minute-window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 1
  window: min
  retry_jitter_s: 5
`);
    // 30 s before the window ends: without jitter every client would be told 30.
    setNow(Date.UTC(2030, 0, 15, 12, 0, 30));
    const offsets = new Set<number>();
    for (let i = 0; i < 16; i++) {
      const key = await knownKey();
      await gatewayFetch(jittered, req("GET", "/x", bearer(key)));
      const expected = 30 + jitterSeconds(await sha256Hex(key), "minute-window", 5);
      for (let attempt = 0; attempt < 2; attempt++) {
        const denied = await gatewayFetch(jittered, req("GET", "/x", bearer(key)));
        expect(denied.status).toBe(429);
        expect(Number(denied.headers.get("Retry-After"))).toBe(expected);
        // The body keeps the exact time.
        expect((await bodyOf(denied)).retry_after_ms).toBe(30_000);
      }
      expect(expected).toBeGreaterThanOrEqual(30);
      expect(expected).toBeLessThanOrEqual(35);
      offsets.add(expected);
    }
    expect(offsets.size).toBeGreaterThan(1);
  });
});

describe("shadow rules", () => {
  const rules = rulesFrom(`
- id: enforced
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 1
- id: candidate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 2
  mode: shadow
`);

  it("never block: a would-be denial is one JSON log line with the hashed key, never the raw one", async () => {
    const key = await knownKey();
    const log = vi.spyOn(console, "log");
    setNow(T0);
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      setNow(T0 + i * 1000);
      const r = await gatewayFetch(rules, req("GET", "/v1/tracking/1", bearer(key)));
      statuses.push(r.status);
      // Shadow rules are not advertised.
      expect(r.headers.get("RateLimit-Policy")).toBe(`"enforced";q=1;w=1`);
    }
    expect(statuses).toEqual([200, 200, 200]);
    const lines = log.mock.calls.map((c) => String(c[0])).filter((l) => l.includes("shadow_deny"));
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      {
        event: "shadow_deny",
        rule: "candidate",
        plan: "free",
        method: "GET",
        // The rule's route pattern, never the request's path.
        route: "*",
        key: await sha256Hex(key),
        retry_after_ms: 58_000,
        reason: "would_deny",
        source: "object",
      },
    ]);
    for (const call of log.mock.calls) expect(String(call[0])).not.toContain(key);
  });

  it("are refunded too when an enforcing rule denies", async () => {
    const key = await knownKey();
    setNow(T0);
    const first = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect((await bodyOf(first)).decisions[1]).toMatchObject({ rule: "candidate", allowed: true, remaining: 1 });
    expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(429);
    setNow(T0 + 1000);
    const third = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect((await bodyOf(third)).decisions[1]).toMatchObject({ rule: "candidate", allowed: true, remaining: 0 });
  });
});

describe("cost above capacity", () => {
  // The validator rejects such a cost_by_route in a rules file, so build the rule by hand: the gateway must still
  // refuse it without touching any state (a defence in depth for rules that bypassed validation).
  const resolved = resolvedFrom(`
- id: small
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
  cost_by_route: { "POST /big": 5 }
- id: other
  match: { identity: api_key }
  algorithm: sliding_log
  limit: 100
  window: min
`);
  const small = resolved[0]!;
  const rules = compileRules([
    { ...small, costByRoute: small.costByRoute.map((entry) => ({ ...entry, cost: 10 })) },
    resolved[1]!,
  ]);

  it("answers 400 problem+json and changes no state anywhere", async () => {
    const key = await knownKey();
    setNow(T0);
    const r = await gatewayFetch(rules, req("POST", "/big", bearer(key)));
    expect(r.status).toBe(400);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    expect(r.headers.get("RateLimit-Policy")).toBe(`"small";q=5;w=5, "other";q=100;w=60`);
    expect(await r.json()).toEqual({
      type: "about:blank",
      title: "Bad Request",
      status: 400,
      detail: "This request costs 10, more than rule small can ever admit (5).",
      error: "cost_exceeds_capacity",
      rule: "small",
      cost: 10,
      capacity: 5,
    });
    expect(await storedRecord("small", key)).toBeUndefined();
    expect(await storedRecord("other", key)).toBeUndefined();
    const ok = await gatewayFetch(rules, req("POST", "/small", bearer(key)));
    expect(ok.headers.get("RateLimit")).toBe(`"small";r=4;t=1, "other";r=99;t=60`);
  });
});

describe("limiter failures are values", () => {
  const rules = rulesFrom(`
- id: lenient
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
- id: strict
  match: { route: "POST /v1/login", identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
  on_error: closed
`);

  it("on_error: open forwards without that rule; on_error: closed answers 503", async () => {
    const key = await knownKey();
    setNow(T0);
    const errors = vi.spyOn(console, "error");
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(() => {
      throw new Error("storage exploded");
    });
    const open = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect(open.status).toBe(200);
    expect(open.headers.get("RateLimit")).toBeNull();
    expect((await bodyOf(open)).decisions).toEqual([
      { rule: "lenient", mode: "enforce", cost: 1, key: await sha256Hex(key), error: "fail_open" },
    ]);
    const closed = await gatewayFetch(rules, req("POST", "/v1/login", bearer(key)));
    expect(closed.status).toBe(503);
    expect(closed.headers.get("Retry-After")).toBe("1");
    expect(await closed.json()).toMatchObject({ status: 503, "violated-policies": ["strict"] });
    const logged = errors.mock.calls.map((c) => JSON.parse(String(c[0])));
    expect(logged).toContainEqual({
      event: "limiter_failed",
      rule: "strict",
      mode: "enforce",
      route: "POST /v1/login",
      key: await sha256Hex(key),
      reason: "fail_closed",
      failure: "error",
      attempts: 1,
      error: "storage exploded",
    });
  });
});

describe("rule changes across a redeploy", () => {
  const version = (params: string) =>
    rulesFrom(`
- id: evolving
  match: { identity: api_key }
${params}
`);

  it("keeps tokens capped at the new burst; another algorithm starts fresh", async () => {
    const key = await knownKey();
    setNow(T0);
    const v1 = version("  algorithm: token_bucket\n  rate: 1/min\n  burst: 10");
    let last: Response | undefined;
    for (let i = 0; i < 8; i++) last = await gatewayFetch(v1, req("GET", "/x", bearer(key)));
    expect(last?.headers.get("RateLimit")).toBe(`"evolving";r=2;t=480`);

    const v2 = version("  algorithm: token_bucket\n  rate: 1/min\n  burst: 5");
    const r2 = await gatewayFetch(v2, req("GET", "/x", bearer(key)));
    expect(r2.headers.get("RateLimit")).toBe(`"evolving";r=1;t=240`);

    const v3 = version("  algorithm: token_bucket\n  rate: 1/min\n  burst: 1");
    const r3 = await gatewayFetch(v3, req("GET", "/x", bearer(key)));
    expect(r3.status).toBe(200);
    expect(r3.headers.get("RateLimit")).toBe(`"evolving";r=0;t=60`);
    expect((await gatewayFetch(v3, req("GET", "/x", bearer(key)))).status).toBe(429);

    const v4 = version("  algorithm: sliding_log\n  limit: 3\n  window: min");
    const r4 = await gatewayFetch(v4, req("GET", "/x", bearer(key)));
    expect(r4.status).toBe(200);
    expect(r4.headers.get("RateLimit")).toBe(`"evolving";r=2;t=60`);
    expect(await storedRecord("evolving", key)).toMatchObject({ params: { algorithm: "sliding_log" } });
  });
});

describe("scope: local", () => {
  it("runs the same core in the isolate's memory, without a Durable Object", async () => {
    const rules = rulesFrom(`
- id: in-isolate
  match: { identity: api_key }
  algorithm: gcra
  rate: 1/min
  burst: 2
  scope: local
`);
    const key = await knownKey();
    setNow(T0);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect(await storedRecord("in-isolate", key)).toBeUndefined();
  });
});

describe("bad input never produces a 500", () => {
  const rules = rulesFrom(`
- id: by-key
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
- id: by-user
  match: { identity: user }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
`);

  it.each([
    ["no headers", {}],
    ["Basic auth", { Authorization: "Basic dXNlcjpwYXNz" }],
    ["empty bearer", { Authorization: "Bearer " }],
    ["bearer with spaces", { Authorization: "Bearer a b c" }],
    ["oversized key", { "X-API-Key": "k".repeat(5000) }],
    ["control characters in the user header", { "X-User-Id": "a\u0001b" }],
  ])("%s: no rule keyed on the missing identity applies", async (_name, headers) => {
    setNow(T0);
    const r = await gatewayFetch(rules, req("GET", "/x", headers as Record<string, string>));
    expect(r.status).toBe(200);
    expect(r.headers.get("RateLimit")).toBeNull();
  });

  it("a garbage address is refused (400), never read as no address", async () => {
    setNow(T0);
    const r = await gatewayFetch(rules, req("GET", "/x", { "CF-Connecting-IP": "::ffff:999.1.1.1" }));
    expect(r.status).toBe(400);
    expect(r.headers.get("RateLimit")).toBeNull();
  });

  it("a user rule applies with the trusted header; X-API-Key works like a bearer token", async () => {
    setNow(T0);
    const user = await gatewayFetch(rules, req("GET", "/x", { "X-User-Id": `user-${freshKey()}` }));
    expect(user.headers.get("RateLimit")).toBe(`"by-user";r=4;t=1`);
    const key = await knownKey();
    await gatewayFetch(rules, req("GET", "/x", { "X-API-Key": key }));
    const viaBearer = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect(viaBearer.headers.get("RateLimit")).toBe(`"by-key";r=3;t=2`);
  });
});

describe("forwarding", () => {
  it("sends admitted requests to UPSTREAM_URL with path and query, and adds the RateLimit fields", async () => {
    const rules = rulesFrom(`
- id: fwd
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 5
`);
    const upstream = vi
      .spyOn(globalThis, "fetch")
      .mockImplementation(async () => new Response("created", { status: 201, headers: { "X-Origin": "yes" } }));
    const key = await knownKey();
    setNow(T0);
    const forwardingEnv = { ...env, UPSTREAM_URL: "https://origin.example/api/" };
    const r = await handleRequest(
      req("POST", "/v1/labels?x=1", bearer(key)),
      forwardingEnv,
      createExecutionContext(),
      rules,
      isolate,
    );
    expect(r.status).toBe(201);
    expect(await r.text()).toBe("created");
    expect(r.headers.get("X-Origin")).toBe("yes");
    expect(r.headers.get("RateLimit")).toBe(`"fwd";r=4;t=1`);
    const sent = upstream.mock.calls[0]?.[0] as Request;
    expect(sent.url).toBe("https://origin.example/api/v1/labels?x=1");
    expect(sent.method).toBe("POST");
    expect(sent.headers.get("Authorization")).toBe(`Bearer ${key}`);
  });
});

describe("a limiter that answers too late", () => {
  it("is refused past two timeout_ms as a busy object, and its late admission is given back", async () => {
    const rules = rulesFrom(`
- id: slow
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 5
  timeout_ms: 20
- id: gate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
`);
    const key = await knownKey();
    setNow(T0);
    expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(200);
    const original = SluiceLimiter.prototype.check;
    let slowCalls = 0;
    let outlasted = false;
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async function (this: SluiceLimiter, input) {
      // slow's 20 ms budget runs out while it decides the request (gate's 250 ms budget does not), then the 10 ms a
      // late answer of a key not known busy gets before the same call is sent again, and the resend's 20 ms
      // (`awaitLate`); the resend waits as long, and both answer afterwards (the call id applied once). The call that
      // gives the late admission back (costs: [], giveBack) answers in time.
      if (input.rule.id === "slow" && input.costs.length > 0 && ++slowCalls === 1) {
        await timers.expire(20);
        await timers.expire(10);
        await timers.expire(20);
        outlasted = true;
      } else if (input.rule.id === "slow" && input.costs.length > 0) {
        while (!outlasted) await scheduler.wait(1);
      }
      return original.call(this, input);
    });
    const ctx = createExecutionContext();
    // Each rule's own timeout_ms, and a time budget that runs out only when the test says so.
    const impatient = { ...env, LIMITER_TIMEOUT_MS: "" };
    const timers = manualSleep();
    const denied = await handleRequest(
      req("GET", "/x", bearer(key)),
      impatient,
      ctx,
      rules,
      createIsolate({ sleep: timers.sleep }),
    );
    expect(denied.status).toBe(429);
    // slow is refused from what the isolate knows (a busy object: never on_error), with a short retry.
    expect(denied.headers.get("RateLimit")).toBe(`"slow";r=0;t=1, "gate";r=0;t=60`);
    // The key is known busy now, so the late admission goes back with its next call, or in a call of its own after
    // RETURN_WAIT_MS (a timer of the test's: expired until the request's background work is done).
    let done = false;
    const ended = waitOnExecutionContext(ctx).then(() => {
      done = true;
    });
    while (!done) await timers.expire(RETURN_WAIT_MS);
    await ended;
    // slow admitted the request after the gateway stopped waiting, then got it back: 4 tokens, as after request 1.
    // The give-back went to the key's delegate (the key is hot now), which sends an admission given back on to the
    // key's object with its next share ask: the delegate's own background work (delegate_run.ts), which the request's
    // waitUntil does not hold, so the record is read until it lands (on a loaded machine the read came first: 3 tokens).
    const backAt = 4 * 60_000;
    const tokensOf = async () =>
      ((await storedRecord("slow", key)) as { state?: { tokensScaled?: number } } | undefined)?.state?.tokensScaled;
    for (let i = 0; i < 300 && (await tokensOf()) !== backAt; i++) await scheduler.wait(10);
    expect(await storedRecord("slow", key)).toMatchObject({ state: { tokensScaled: backAt } });
  });
});

describe("plans", () => {
  it("come from the account record, cached in the isolate for PLAN_CACHE_TTL_MS", async () => {
    const key = await knownKey();
    await seedAccount(key, "growth");
    setNow(T0);
    const planOf = async () => (await bodyOf(await SELF.fetch(req("GET", "/v1/quotes", bearer(key))))).plan;
    expect(await planOf()).toBe("growth");
    await seedAccount(key, "scale");
    expect(await planOf()).toBe("growth");
    setNow(T0 + 30_000);
    expect(await planOf()).toBe("scale");
    // A malformed record is no record: the default plan.
    await env.ACCOUNTS.put(await sha256Hex(key), "{not json");
    setNow(T0 + 60_000);
    expect(await planOf()).toBe("free");
  });
});
