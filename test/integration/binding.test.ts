/**
 * The service binding (entrypoint.ts, `RateLimiter`) as another Worker sees it: called through real service bindings
 * (this Worker's own entrypoint, and the example consumers in examples/ running as auxiliary Workers), it gives the
 * same decisions, header fields, refunds and problem bodies as the gateway on the same rules and traffic (a table on
 * the shipped rules, and a property over random traffic on rules written here), and bad inputs get their errors.
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type CheckResult, type LimitOptions, requestForCheck, requestLike } from "../../src/client/types.ts";
import { checkRequest, limitKey } from "../../src/edge/binding.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import type { CompiledRule } from "../../src/request/match.ts";
import { bearer, freshIp, freshKey, gatewayFetch, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** The header fields a decision sets, by name; `null` when absent. */
const FIELDS = ["RateLimit-Policy", "RateLimit", "Retry-After", "WWW-Authenticate", "Sluice-Lease"] as const;

interface Seen {
  readonly status: number;
  readonly fields: Readonly<Record<string, string | null>>;
  readonly problem: unknown;
}

/** What the gateway answered, in the terms both sides share. */
async function seenFromGateway(response: Response): Promise<Seen> {
  const fields = Object.fromEntries(FIELDS.map((name) => [name, response.headers.get(name)]));
  const body = await response.json();
  return { status: response.status, fields, problem: response.status === 200 ? null : body };
}

/** What the binding answered, in the same terms. */
function seenFromBinding(result: CheckResult): Seen {
  const headers = new Headers(result.headers);
  const fields = Object.fromEntries(FIELDS.map((name) => [name, headers.get(name)]));
  return { status: result.status, fields, problem: result.problem };
}

/** The rejection of `promise` (it must reject). */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Error) return error;
    throw new Error(`rejected with a non-Error: ${String(error)}`);
  }
  throw new Error("expected a rejection, got an answer");
}

describe("limit through the service binding: the native binding's shape, and more", () => {
  it("admits the rule's limit, then { success: false } with the gateway's headers and problem body", async () => {
    const key = freshKey("login");
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await env.SLUICE_LOGIN.limit({ key }));
    expect(results.map((r) => r.success)).toEqual([true, true, true, true, true, false]);
    expect(results.map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0, 0]);
    const first = results[0]!;
    expect(first).toMatchObject({ rule: "login-per-ip", status: 200, reason: null, problem: null, retryAfterMs: null });
    expect(first.headers).toEqual({
      "RateLimit-Policy": '"login-per-ip";q=5;w=60',
      RateLimit: `"login-per-ip";r=4;t=${Math.ceil(first.resetAfterMs! / 1000)}`,
    });
    const denied = results[5]!;
    expect(denied).toMatchObject({ rule: "login-per-ip", status: 429, reason: "denied" });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.headers["Retry-After"]).toBe(String(Math.ceil(denied.retryAfterMs! / 1000)));
    expect(denied.problem).toMatchObject({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      status: 429,
      "violated-policies": ["login-per-ip"],
      retry_after_ms: denied.retryAfterMs,
    });
    expect(denied.rules).toEqual([
      {
        rule: "login-per-ip",
        mode: "enforce",
        outcome: "denied",
        remaining: 0,
        resetAfterMs: denied.resetAfterMs,
        retryAfterMs: denied.retryAfterMs,
      },
    ]);
  });

  it("names its rule per call over the binding's props, and counts the call's cost", async () => {
    const key = freshKey("cost");
    const a = await env.SLUICE_LOGIN.limit({ key, rule: "free-global", cost: 15 });
    expect(a).toMatchObject({ success: true, rule: "free-global", remaining: 5 });
    // Cost 20 needs 15 more tokens: 1.5 s of refill at 10/s, far more than any pause between two calls here
    // (a cost of 6 turned into a 200 when the machine paused 100 ms between the calls).
    const b = await env.SLUICE.limit({ key, rule: "free-global", cost: 20 });
    expect(b).toMatchObject({ success: false, rule: "free-global", status: 429 });
    expect(b.remaining).toBeGreaterThanOrEqual(5);
    expect(b.remaining).toBeLessThan(20);
    // More than the rule can ever admit: the gateway's 400, and nothing counted.
    const c = await env.SLUICE.limit({ key, rule: "free-global", cost: 21 });
    expect(c).toMatchObject({ success: false, status: 400, reason: "cost_exceeds_capacity", remaining: null });
    expect(c.problem).toMatchObject({ error: "cost_exceeds_capacity", rule: "free-global", cost: 21, capacity: 20 });
    expect(c.headers).toEqual({ "RateLimit-Policy": '"free-global";q=20;w=2' });
  });

  it("a shadow rule never refuses: its would-be denial is reported, with no header fields", async () => {
    const key = freshKey("shadow");
    const results: Awaited<ReturnType<typeof env.SLUICE.limit>>[] = [];
    // Burst 30 at 100/min: the bucket refills one token every 600 ms, so on a slow machine 31 calls may not be
    // enough; call until the would-be denial comes (at most 200 calls).
    const shadowDenied = (r: (typeof results)[number]) => r.rules[0]!.outcome === "shadow_denied";
    while (results.length < 200 && !results.some(shadowDenied)) {
      results.push(await env.SLUICE.limit({ key, rule: "free-tracking-shadow" }));
    }
    expect(results.every((r) => r.success)).toBe(true);
    expect(results.length).toBeGreaterThanOrEqual(31);
    const denied = results.find(shadowDenied);
    expect(denied?.headers).toEqual({});
  });
});

describe("bad input from another Worker: a clear error, never a 500 or a default", () => {
  const rule = "free-global";
  const cases: [string, () => Promise<unknown>, RegExp, "TypeError" | "RangeError"][] = [
    [
      "no rule, none in props",
      () => env.SLUICE.limit({ key: "k" }),
      /no rule: pass \{ rule \} or set props = \{ rule = "\.\.\." \} on the binding in wrangler\.toml$/,
      "TypeError",
    ],
    [
      "an unknown rule",
      () => env.SLUICE.limit({ key: "k", rule: "nope" }),
      /^Sluice limit\(\): unknown rule "nope"$/,
      "RangeError",
    ],
    [
      "a near miss: named, and the rule set not listed",
      () => env.SLUICE.limit({ key: "k", rule: "free-globl" }),
      /^Sluice limit\(\): unknown rule "free-globl"; did you mean "free-global"\?$/,
      "RangeError",
    ],
    [
      "no options at all",
      () => (env.SLUICE.limit as (options?: unknown) => Promise<unknown>)(),
      /expects \{ key, rule\?, cost\?, outcome\? \}, got nothing$/,
      "TypeError",
    ],
    [
      "check of a Request with a body (which the binding would take from the caller's handler)",
      () => env.SLUICE.check(new Request("https://a.test/v1/labels", { method: "POST", body: "{}" }) as never),
      /got a Request with a body, .* pass await requestForCheck\(request\) from sluice\/client/,
      "TypeError",
    ],
    [
      "an unknown rule over props",
      () => env.SLUICE_LOGIN.limit({ key: "k", rule: "nope" }),
      /unknown rule "nope"/,
      "RangeError",
    ],
    ["an empty key", () => env.SLUICE.limit({ key: "", rule }), /key must not be empty/, "RangeError"],
    [
      "a 100 KB key",
      () => env.SLUICE.limit({ key: "k".repeat(100 * 1024), rule }),
      /key must be at most 1024 characters, got 102400/,
      "RangeError",
    ],
    [
      "a key that is not a string",
      () => env.SLUICE.limit({ key: 42 } as unknown as LimitOptions),
      /key must be a string, got number 42/,
      "TypeError",
    ],
    [
      "a negative cost",
      () => env.SLUICE.limit({ key: "k", rule, cost: -1 }),
      /cost must be a positive whole number, got -1/,
      "RangeError",
    ],
    [
      "a fractional cost",
      () => env.SLUICE.limit({ key: "k", rule, cost: 1.5 }),
      /cost must be a positive whole number, got 1.5/,
      "RangeError",
    ],
    [
      "a zero cost",
      () => env.SLUICE.limit({ key: "k", rule, cost: 0 }),
      /cost must be a positive whole number, got 0/,
      "RangeError",
    ],
    ["a NaN cost", () => env.SLUICE.limit({ key: "k", rule, cost: Number.NaN }), /got NaN/, "RangeError"],
    [
      "a cost as text",
      () => env.SLUICE.limit({ key: "k", rule, cost: "2" } as unknown as LimitOptions),
      /cost must be a number, got "2"/,
      "TypeError",
    ],
    [
      "a misspelt option",
      () => env.SLUICE.limit({ key: "k", rules: rule } as unknown as LimitOptions),
      /unknown option "rules"/,
      "TypeError",
    ],
    [
      "no options",
      () => env.SLUICE.limit(null as unknown as LimitOptions),
      /expects \{ key, rule\?, cost\?, outcome\? \}, got null/,
      "TypeError",
    ],
    ["check without a url", () => env.SLUICE.check({} as never), /url must be a string, got nothing$/, "TypeError"],
    [
      "check with a relative url",
      () => env.SLUICE.check({ url: "/v1/quotes" }),
      /url must be an absolute URL, got "\/v1\/quotes"/,
      "TypeError",
    ],
    [
      "check with a bad method",
      () => env.SLUICE.check({ url: "https://a.test/", method: "GET /" }),
      /method must be an HTTP method name/,
      "TypeError",
    ],
    [
      "check with a header that is not text",
      () => env.SLUICE.check({ url: "https://a.test/", headers: { "x-n": 1 } as never }),
      /headers must map names to strings/,
      "TypeError",
    ],
  ];
  it.each(cases)("%s", async (_name, call, message, type) => {
    const error = await rejectionOf(call());
    expect(error.message).toMatch(message);
    expect(error.name).toBe(type);
  });
});

describe("check leaves the caller's request whole", () => {
  it("check(requestLike(request)) as the README shows it: the handler still reads the POST body", async () => {
    const request = new Request("https://api.test/v1/labels", {
      method: "POST",
      headers: { "CF-Connecting-IP": "192.0.2.44" },
      body: '{"to":"x"}',
    });
    const result = await env.SLUICE.check(requestLike(request));
    expect(result.success).toBe(true);
    expect(await request.text()).toBe('{"to":"x"}');
  });
});

// Issue 35: an upstream that routes a POST by `_method` in its body (Laravel, Express with method-override's body
// getter) ran the GET handler for a POST the binding's `check` had counted as a POST only: the body never reached it.
describe("check reads `_method` from a POST's body as the gateway does, and the handler still reads all of it", () => {
  /** Whether `anon-per-ip` (`GET /v1/public/**`) counted a check of `like`. */
  const countedAsGet = async (like: Parameters<typeof env.SLUICE.check>[0]) =>
    (await env.SLUICE.check(like)).rules.some((r) => r.rule === "anon-per-ip");
  const post = (body: string | Uint8Array, headers: Record<string, string>) =>
    new Request("https://api.test/v1/public/q", {
      method: "POST",
      headers: { "CF-Connecting-IP": freshIp(), ...headers },
      body,
    });
  const json = { "Content-Type": "application/json" };

  it.each([
    ["a JSON `_method`", '{"_method":"GET"}', json, true],
    ["a urlencoded `_method`", "a=1&_method=get", { "Content-Type": "application/x-www-form-urlencoded" }, true],
    ["a JSON body without `_method`", '{"a":1}', json, false],
    ["a body of another type", '{"_method":"GET"}', { "Content-Type": "text/plain" }, false],
  ])("%s: counted as GET %s", async (_name, body, headers, expected) => {
    const request = post(body, headers);
    expect(await countedAsGet(await requestForCheck(request))).toBe(expected);
    expect(await request.text()).toBe(body);
  });

  it("a gzip JSON body: read encoded, inflated by Sluice", async () => {
    const gz = new Uint8Array(
      await new Response(
        new Blob(['{"_method":"GET"}']).stream().pipeThrough(new CompressionStream("gzip")),
      ).arrayBuffer(),
    );
    const request = post(gz, { ...json, "Content-Encoding": "gzip" });
    expect(await countedAsGet(await requestForCheck(request))).toBe(true);
    expect(new Uint8Array(await request.arrayBuffer())).toEqual(gz);
  });

  it("a 100 KB body: only its first 65,537 bytes go to Sluice, which counts it against every method", async () => {
    const text = `{"a":"${"x".repeat(100_000)}","_method":"DELETE"}`;
    const request = post(text, json);
    const like = await requestForCheck(request);
    expect((like.body as Uint8Array).byteLength).toBe(65_537);
    expect(await countedAsGet(like)).toBe(true);
    expect(await request.text()).toBe(text);
  });

  it("without the body (requestLike): a JSON POST counts against every method; Content-Length: 0 does not", async () => {
    expect(await countedAsGet(requestLike(post('{"a":1}', json)))).toBe(true);
    expect(await countedAsGet({ ...requestLike(post("", json)), headers: { ...json, "content-length": "0" } })).toBe(
      false,
    );
  });

  it("a body over 65,537 bytes, or on a GET, is refused with what to send", async () => {
    const big = await rejectionOf(
      env.SLUICE.check({ url: "https://api.test/", method: "POST", body: "x".repeat(70_000) }),
    );
    expect(big.message).toMatch(/body must be at most the first 65537 bytes .* got 70000; requestForCheck/);
    const onGet = await rejectionOf(env.SLUICE.check({ url: "https://api.test/", body: "x" }));
    expect(onGet.message).toMatch(/a GET request has no body$/);
  });
});

describe("check through the service binding = the gateway, on the shipped rules (table)", () => {
  /** One scenario: the requests one caller sends, given its identity headers. */
  const scenarios: Record<string, (who: Record<string, string>) => Request[]> = {
    "free plan burst: 20 admitted, then 429 from the object and from the blocked-key cache": (who) =>
      Array.from({ length: 24 }, () => req("GET", "/v1/quotes", who)),
    "bulk labels (cost 10): the third denied, free-global refunded": (who) =>
      Array.from({ length: 3 }, () => req("POST", "/v1/labels:batch", who)),
    "shadow rule on tracking: never refuses": (who) =>
      Array.from({ length: 32 }, () => req("GET", "/v1/tracking/1Z999", who)),
    "unreadable method override: 400 in both": (who) => [
      req("POST", "/v1/quotes", { ...who, "X-HTTP-Method-Override": "G3T" }),
    ],
  };

  it.each(Object.keys(scenarios))("%s", async (name) => {
    setNow(T0);
    const gatewayKey = await knownKey("table_gw");
    const bindingKey = await knownKey("table_bd");
    const ip = freshIp();
    const gatewayRequests = scenarios[name]!({ ...bearer(gatewayKey), "CF-Connecting-IP": ip });
    const bindingRequests = scenarios[name]!({ ...bearer(bindingKey), "CF-Connecting-IP": ip });
    for (let i = 0; i < gatewayRequests.length; i++) {
      const viaGateway = await seenFromGateway(await SELF.fetch(gatewayRequests[i]!));
      const viaBinding = seenFromBinding(await env.SLUICE.check(requestLike(bindingRequests[i]!)));
      expect(viaBinding, `request ${i + 1}`).toEqual(viaGateway);
    }
  });

  it("a refusal from the blocked-key cache reports each rule as its RateLimit item does", async () => {
    setNow(T0);
    const key = await knownKey("cached");
    const ask = () => env.SLUICE.check(requestLike(req("GET", "/v1/quotes", bearer(key))));
    for (let i = 0; i < 21; i++) await ask();
    const cached = await ask();
    expect(cached.status).toBe(429);
    expect(cached.rules.map((r) => [r.rule, r.outcome])).toEqual([
      ["free-global", "denied"],
      ["free-daily", "not_asked"],
    ]);
    const items = cached.headers.RateLimit!.split(", ");
    cached.rules.forEach((r, i) => {
      expect(items[i]).toMatch(new RegExp(`^"${r.rule}";r=${r.remaining};t=${Math.ceil(r.resetAfterMs! / 1000)}$`));
    });
  });

  it("a Request sent as it is (structured clone) is read like a request-like one", async () => {
    setNow(T0);
    const key = await knownKey("as_request");
    const viaRequest = await env.SLUICE.check(req("GET", "/v1/quotes", bearer(key)) as never);
    expect(viaRequest.rules.map((r) => [r.rule, r.outcome, r.remaining])).toEqual([
      ["free-global", "allowed", 19],
      ["free-daily", "allowed", 9999],
    ]);
  });

  it("a verified key's login attempts per address, and its refusal with the gateway's body", async () => {
    setNow(T0);
    const [a, b] = ["198.51.100.7", "198.51.100.8"];
    for (let i = 0; i < 6; i++) {
      const g = await seenFromGateway(await SELF.fetch(req("POST", "/v1/login", { "CF-Connecting-IP": a })));
      const c = seenFromBinding(
        await env.SLUICE.check({ url: "https://x.test/v1/login", method: "POST", headers: { "CF-Connecting-IP": b } }),
      );
      expect(c, `attempt ${i + 1}`).toEqual(g);
    }
  });
});

/** Rules for the property: composition, refunds, a shadow rule, a local rule, costs by route, a closed failure. */
const PROPERTY_RULES = rulesFrom(`
- id: wide
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 2
  burst: 6
  cost_by_route: { "POST /bulk": 3 }
- id: bulk
  match: { route: "POST /bulk", identity: api_key }
  algorithm: sliding_log
  limit: 2
  window_s: 5
- id: window
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 8
  window_s: 10
- id: local
  match: { route: "GET /**", identity: api_key }
  algorithm: gcra
  rate: 3/s
  burst: 4
  scope: local
- id: watch
  match: { identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 3
  mode: shadow
- id: strict
  match: { route: "DELETE /**", identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 2
  on_error: closed
`);

async function gatewaySeen(rules: readonly CompiledRule[], request: Request): Promise<Seen> {
  return seenFromGateway(await gatewayFetch(rules, request));
}

async function checkSeen(rules: readonly CompiledRule[], request: Request): Promise<Seen> {
  const ctx = createExecutionContext();
  const result = await checkRequest(requestLike(request), { env, ctx, rules, isolate });
  await waitOnExecutionContext(ctx);
  return seenFromBinding(result);
}

async function limitResult(rules: readonly CompiledRule[], options: LimitOptions) {
  const ctx = createExecutionContext();
  const result = await limitKey(options, undefined, { env, ctx, rules, isolate });
  await waitOnExecutionContext(ctx);
  return result;
}

const step = fc.record({
  dtMs: fc.integer({ min: 0, max: 900 }),
  request: fc.constantFrom<[string, string]>(
    ["GET", "/a"],
    ["GET", "/b/c"],
    ["POST", "/bulk"],
    ["POST", "/x"],
    ["DELETE", "/d"],
  ),
  failing: fc.boolean(),
});

describe("check and limit = the gateway over random traffic (property)", () => {
  it("check: the same status, header fields and problem body as the gateway, request by request", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const gatewayKey = await knownKey("prop_gw");
        const bindingKey = await knownKey("prop_bd");
        let nowMs = T0;
        for (const [i, { dtMs, request, failing }] of steps.entries()) {
          nowMs += dtMs;
          setNow(nowMs);
          const [method, path] = request;
          // A limiter that fails for this request, on both paths alike (the DELETE rule fails closed, the rest open).
          const spy = failing
            ? vi.spyOn(SluiceLimiter.prototype, "check").mockRejectedValue(new Error("injected"))
            : null;
          const g = await gatewaySeen(PROPERTY_RULES, req(method, path, bearer(gatewayKey)));
          const c = await checkSeen(PROPERTY_RULES, req(method, path, bearer(bindingKey)));
          spy?.mockRestore();
          expect(c, `step ${i + 1}: ${method} ${path}${failing ? " (failing)" : ""}`).toEqual(g);
        }
      }),
      { numRuns: 12 },
    );
  });

  it("limit: the same decision, remaining, header fields and body as the gateway on a one-rule set", async () => {
    const oneRule = rulesFrom(`
- id: only
  match: { identity: api_key }
  algorithm: sliding_counter
  limit: 5
  window_s: 4
  cost_by_route: { "POST /bulk": 2 }
`);
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const gatewayKey = await knownKey("lim_gw");
        const limitKeyText = freshKey("lim_bd");
        let nowMs = T0;
        for (const [i, { dtMs, request }] of steps.entries()) {
          nowMs += dtMs;
          setNow(nowMs);
          const [method, path] = request;
          const g = await gatewaySeen(oneRule, req(method, path, bearer(gatewayKey)));
          const cost = method === "POST" && path === "/bulk" ? 2 : undefined;
          const l = await limitResult(oneRule, { key: limitKeyText, rule: "only", cost });
          expect(seenFromBinding(l), `step ${i + 1}`).toEqual(g);
          expect(l.success).toBe(g.status === 200);
        }
      }),
      { numRuns: 12 },
    );
  });
});

describe("the example consumers (examples/) through their service bindings", () => {
  it("plain Worker: code written for the native binding, unchanged, gets its 429 after the rule's limit", async () => {
    const path = `/native/${freshKey("path")}`;
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      const response = await env.PLAIN_WORKER.fetch(`https://consumer.test${path}`);
      statuses.push([response.status, await response.text()]);
    }
    expect(statuses.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => [200, "Success"]));
    expect(statuses[5]).toEqual([429, `429 Failure – rate limit exceeded for ${path}`]);
  });

  it("plain Worker behind withSluice: admitted with the RateLimit fields, then the gateway's 429", async () => {
    setNow(T0);
    const key = await knownKey("plain");
    const send = () =>
      env.PLAIN_WORKER.fetch("https://consumer.test/v1/labels:batch", { method: "POST", headers: bearer(key) });
    const first = await send();
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ ok: true, path: "/v1/labels:batch" });
    expect(first.headers.get("RateLimit")).toContain('"labels-bulk";r=10;');
    await send();
    const third = await send();
    expect(third.status).toBe(429);
    expect(third.headers.get("Content-Type")).toBe("application/problem+json");
    expect(third.headers.get("Retry-After")).toBe("1");
    expect(await third.json()).toMatchObject({
      status: 429,
      "violated-policies": ["labels-bulk"],
      retry_after_ms: 1000,
    });
  });

  it("Hono API: check on /v1/*, limit by address on /login, with the gateway's answers", async () => {
    const key = await knownKey("hono");
    const quotes = await env.HONO_API.fetch("https://consumer.test/v1/quotes", { headers: bearer(key) });
    expect(quotes.status).toBe(200);
    expect(await quotes.json()).toEqual({ quotes: [{ carrier: "acme", cents: 1250 }] });
    expect(quotes.headers.get("RateLimit-Policy")).toContain('"free-global";q=20;w=2');
    const ip = "192.0.2.77";
    const logins = [];
    for (let i = 0; i < 6; i++) {
      const r = await env.HONO_API.fetch("https://consumer.test/login", {
        method: "POST",
        headers: { "CF-Connecting-IP": ip },
      });
      logins.push(r.status);
      if (i === 5) {
        expect(r.headers.get("Retry-After")).not.toBeNull();
        expect(await r.json()).toMatchObject({ "violated-policies": ["login-per-ip"] });
      }
    }
    expect(logins).toEqual([200, 200, 200, 200, 200, 429]);
  });
});
