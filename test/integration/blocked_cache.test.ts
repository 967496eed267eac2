/**
 * The blocked-key cache through the gateway: a flood from a blocked key costs one object call per retry period, its
 * answers match the object's; refunds make it forget, count_denied is not cached, shadow denials are answered too.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import { bearer, freshKey, gatewayFetch, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

async function _fetchWith(e: Env, rules: ReturnType<typeof rulesFrom>, request: Request) {
  const ctx = createExecutionContext();
  const response = await handleRequest(request, e, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

/** Two rules of one unit a minute, `outer` by API key and `gate` by user, with `gate` already spent for `user`. */
async function outerAndGate() {
  const both = rulesFrom(`
- id: outer
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
- id: gate
  match: { identity: user }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
`);
  const key = await knownKey();
  const user = { "X-User-Id": `u-${freshKey()}` };
  setNow(T0);
  // Spend gate alone (outer needs an API key).
  expect((await gatewayFetch(both, req("GET", "/x", user))).status).toBe(200);
  return { both, key, user };
}

describe("blocked-key cache", () => {
  const rules = rulesFrom(`
- id: tight
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 10/s
  burst: 2
- id: daily
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 1000
  window: d
`);

  it("a flood from a blocked key costs one object call per retry period; answers match the object's", async () => {
    const key = await knownKey();
    const checks = vi.spyOn(SluiceLimiter.prototype, "check");
    setNow(T0);
    const send = () => gatewayFetch(rules, req("GET", "/x", bearer(key)));
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(200);
    const fromObject = await send();
    expect(fromObject.status).toBe(429);
    // 2 rules × 3 requests, and one call that gives the denied request's daily unit back.
    expect(checks).toHaveBeenCalledTimes(7);
    expect(checks.mock.calls.at(-1)![0]).toMatchObject({ costs: [], giveBack: [{ units: 1 }] });

    const cacheBefore = isolate.stats.cache_answers;
    setNow(T0 + 40);
    const fromCache = await send();
    expect(fromCache.status).toBe(429);
    // Nobody asked: not the denying rule, not the daily quota it would have charged and refunded.
    expect(checks).toHaveBeenCalledTimes(7);
    expect(isolate.stats.cache_answers - cacheBefore).toBe(1);
    expect(fromCache.headers.get("Retry-After")).toBe("1");
    // The same items as the object's denial: the daily quota's figures are those that denial reported (refunded).
    expect(fromCache.headers.get("RateLimit")).toBe(`"tight";r=0;t=1, "daily";r=998;t=43200`);
    expect(fromCache.headers.get("RateLimit")).toBe(fromObject.headers.get("RateLimit"));
    expect(fromCache.headers.get("RateLimit-Policy")).toBe(fromObject.headers.get("RateLimit-Policy"));
    expect(await fromCache.json()).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: "Rate limit exceeded (tight); retry in 60 ms.",
      "violated-policies": ["tight"],
      retry_after_ms: 60,
    });

    // 1000 more requests inside the retry period: still no call.
    for (let i = 0; i < 20; i++) {
      setNow(T0 + 40 + i);
      expect((await send()).status).toBe(429);
    }
    expect(checks).toHaveBeenCalledTimes(7);
    // At the retry time the object is asked again, and admits.
    setNow(T0 + 100);
    expect((await send()).status).toBe(200);
    expect(checks).toHaveBeenCalledTimes(9);
  });

  it("forgets a denial when this isolate refunds the rule (the object may have become more generous)", async () => {
    const { both, key, user } = await outerAndGate();
    const original = SluiceLimiter.prototype.check;
    // The order made certain, not raced against real time (a 20 ms wait for A's first answer lost on a loaded
    // machine): gate's answer to A waits until B has been answered; B goes once outer has answered A.
    let outerAnswered!: () => void;
    const outerAdmittedA = new Promise<void>((resolve) => {
      outerAnswered = resolve;
    });
    let releaseGate!: () => void;
    const gateHeld = new Promise<void>((resolve) => {
      releaseGate = resolve;
    });
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async function (this: SluiceLimiter, input) {
      if (input.rule.id === "gate") await gateHeld;
      const answer = await original.call(this, input);
      if (input.rule.id === "outer") outerAnswered();
      return answer;
    });
    // A: outer admits at once; gate answers late, and denies, so outer is refunded.
    const a = gatewayFetch(both, req("GET", "/x", { ...bearer(key), ...user }));
    await outerAdmittedA;
    // B, while A waits: outer is empty and denies; this isolate remembers the denial.
    expect((await gatewayFetch(both, req("GET", "/x", bearer(key)))).status).toBe(429);
    releaseGate();
    expect((await a).status).toBe(429);
    // C: outer has its token back. The cache forgot the denial when A's refund went out, so the object is asked.
    expect((await gatewayFetch(both, req("GET", "/x", bearer(key)))).status).toBe(200);
  });

  it("does not remember a denial that was in flight when this isolate refunded the key", async () => {
    // The order the test above can fall into on a loaded machine, made certain: B's call for outer is still in flight
    // when A's refund of outer goes out, and B's denial arrives after it. The object decided B without that token;
    // remembering the denial would refuse C, which the object admits.
    const { both, key, user } = await outerAndGate();
    const original = SluiceLimiter.prototype.check;
    // Ordered by promises, not by waits of real time (they lost the race on a loaded machine): B goes once outer has
    // answered A; gate answers A once the object has decided B; B's answer comes back once A's refund has gone out.
    const signal = () => {
      let fire!: () => void;
      const fired = new Promise<void>((resolve) => {
        fire = resolve;
      });
      return { fire, fired };
    };
    const outerAnsweredA = signal();
    const bDecided = signal();
    const refunded = signal();
    const forget = isolate.blocked.forgetRefunded.bind(isolate.blocked);
    vi.spyOn(isolate.blocked, "forgetRefunded").mockImplementation((id, nowMs) => {
      forget(id, nowMs);
      refunded.fire();
    });
    let outerCalls = 0;
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async function (this: SluiceLimiter, input) {
      if (input.rule.id === "gate") await bDecided.fired;
      const answer = await original.call(this, input);
      if (input.rule.id === "outer" && ++outerCalls === 1) outerAnsweredA.fire();
      // B's call (outer's second): answered only after A's refund went out.
      if (input.rule.id === "outer" && outerCalls === 2) {
        bDecided.fire();
        await refunded.fired;
      }
      return answer;
    });
    const a = gatewayFetch(both, req("GET", "/x", { ...bearer(key), ...user }));
    await outerAnsweredA.fired;
    const b = gatewayFetch(both, req("GET", "/x", bearer(key)));
    expect((await a).status).toBe(429);
    expect((await b).status).toBe(429);
    expect((await gatewayFetch(both, req("GET", "/x", bearer(key)))).status).toBe(200);
  });

  it("does not cache sliding_counter with count_denied: every denial reaches the object and extends the lock", async () => {
    const counting = rulesFrom(`
- id: hammer
  match: { identity: api_key }
  algorithm: sliding_counter
  limit: 1
  window: s
  count_denied: true
`);
    const key = await knownKey();
    const checks = vi.spyOn(SluiceLimiter.prototype, "check");
    setNow(T0);
    for (let i = 0; i < 4; i++) await gatewayFetch(counting, req("GET", "/x", bearer(key)));
    expect(checks).toHaveBeenCalledTimes(4);
  });

  it("shadow rules' would-be denials are answered from the cache too, and still logged", async () => {
    const shadow = rulesFrom(`
- id: candidate
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
  mode: shadow
`);
    const key = await knownKey();
    const checks = vi.spyOn(SluiceLimiter.prototype, "check");
    const log = vi.spyOn(console, "log");
    setNow(T0);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await gatewayFetch(shadow, req("GET", "/x", bearer(key)))).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
    expect(checks).toHaveBeenCalledTimes(2);
    const lines = log.mock.calls.map((c) => JSON.parse(String(c[0])));
    expect(lines.filter((l) => l.event === "shadow_deny").map((l) => l.source)).toEqual(["object", "cache", "cache"]);
  });
});
