/**
 * The client side of the service binding (src/client/), in plain Node: the Hono middleware inside Hono's own app, and
 * `withSluice` around a plain fetch handler, against a binding that answers as Sluice does (the binding itself, across
 * two Workers, is test/integration/binding.test.ts). A refusal is the gateway's answer; an admission gets the fields.
 */
import { Hono } from "hono";
import { describe, expect, it, vi } from "vitest";
import { sluice } from "../../src/client/hono.ts";
import type { CheckResult, LimitOptions, LimitResult, RequestLike, SluiceBinding } from "../../src/client/index.ts";
import { CHECK_BODY_MAX_BYTES, requestForCheck, requestLike, withSluice } from "../../src/client/index.ts";
import { BODY_READ_MAX_BYTES } from "../../src/request/upstream_profile.ts";

const ADMITTED: CheckResult = {
  success: true,
  status: 200,
  reason: null,
  headers: { "RateLimit-Policy": '"free-global";q=20;w=2', RateLimit: '"free-global";r=19;t=1' },
  problem: null,
  delayedMs: 0,
  retryAfterMs: null,
  rules: [],
};

const DENIED: CheckResult = {
  success: false,
  status: 429,
  reason: "denied",
  headers: {
    "RateLimit-Policy": '"free-global";q=20;w=2',
    RateLimit: '"free-global";r=0;t=2',
    "Retry-After": "1",
  },
  problem: {
    type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: 429,
    detail: "Rate limit exceeded (free-global); retry in 100 ms.",
    "violated-policies": ["free-global"],
    retry_after_ms: 100,
  },
  delayedMs: 0,
  retryAfterMs: 100,
  rules: [],
};

/** A binding that answers `answers` in turn and records what it was asked. */
function binding(...answers: CheckResult[]) {
  const calls: { readonly method: "check" | "limit"; readonly input: RequestLike | LimitOptions }[] = [];
  let next = 0;
  const answer = () => answers[Math.min(next++, answers.length - 1)]!;
  const b: SluiceBinding = {
    check: async (input) => {
      calls.push({ method: "check", input });
      return answer();
    },
    limit: async (input): Promise<LimitResult> => {
      calls.push({ method: "limit", input });
      return { ...answer(), rule: input.rule ?? "from-props", remaining: 0, resetAfterMs: 0 };
    },
    release: async () => ({ released: 0 }),
    renew: async () => ({ renewed: 0 }),
  };
  return { binding: b, calls };
}

describe("Hono middleware, in Hono's own app", () => {
  function app(b: SluiceBinding, options: Parameters<typeof sluice>[0] = {}) {
    let handled = 0;
    const a = new Hono<{ Bindings: { SLUICE: SluiceBinding } }>();
    a.use("/v1/*", sluice(options));
    a.get("/v1/quotes", (c) => {
      handled++;
      c.header("X-Handler", "yes");
      return c.json({ quotes: [] });
    });
    return {
      fetch: (path: string, init?: RequestInit) => a.request(path, init, { SLUICE: b }),
      handled: () => handled,
    };
  }

  it("admitted: the handler runs and its response gets the RateLimit fields", async () => {
    const { binding: b, calls } = binding(ADMITTED);
    const a = app(b);
    const r = await a.fetch("https://api.test/v1/quotes?x=1", { headers: { Authorization: "Bearer sk_1" } });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ quotes: [] });
    expect(r.headers.get("X-Handler")).toBe("yes");
    expect(r.headers.get("RateLimit")).toBe('"free-global";r=19;t=1');
    expect(r.headers.get("RateLimit-Policy")).toBe('"free-global";q=20;w=2');
    expect(calls).toEqual([
      {
        method: "check",
        input: { url: "https://api.test/v1/quotes?x=1", method: "GET", headers: { authorization: "Bearer sk_1" } },
      },
    ]);
    expect(a.handled()).toBe(1);
  });

  it("refused: the gateway's 429 problem+json with its fields, and the handler never runs", async () => {
    const a = app(binding(DENIED).binding);
    const r = await a.fetch("https://api.test/v1/quotes");
    expect(r.status).toBe(429);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    expect(r.headers.get("Cache-Control")).toBe("no-store");
    expect(r.headers.get("Retry-After")).toBe("1");
    expect(r.headers.get("RateLimit")).toBe('"free-global";r=0;t=2');
    expect(await r.json()).toEqual(DENIED.problem);
    expect(a.handled()).toBe(0);
  });

  it("by key: limit on the named rule with the key and cost the options compute", async () => {
    const { binding: b, calls } = binding(ADMITTED);
    const a = app(b, { rule: "login-per-ip", key: (c) => c.req.header("cf-connecting-ip") ?? "none", cost: 2 });
    await a.fetch("https://api.test/v1/quotes", { headers: { "CF-Connecting-IP": "192.0.2.1" } });
    expect(calls).toEqual([{ method: "limit", input: { key: "192.0.2.1", rule: "login-per-ip", cost: 2 } }]);
  });

  it("a missing binding is a clear error (Hono's 500 handler), naming the wrangler.toml lines to add", async () => {
    const a = new Hono();
    let seen: unknown = null;
    a.onError((error, c) => {
      seen = error;
      return c.text("error", 500);
    });
    a.use(sluice({ binding: "LIMITS" }));
    a.get("/", (c) => c.text("ok"));
    const r = await a.request("/", {}, {});
    expect(r.status).toBe(500);
    expect(String(seen)).toBe(
      'TypeError: Sluice: env.LIMITS is not bound; add to wrangler.toml: [[services]] binding = "LIMITS" service = "sluice" entrypoint = "RateLimiter"',
    );
  });

  it("the request body is never sent to Sluice, and the handler can still read it", async () => {
    const { binding: b, calls } = binding(ADMITTED);
    const a = new Hono<{ Bindings: { SLUICE: SluiceBinding } }>();
    a.use(sluice());
    a.post("/v1/labels", async (c) => c.json({ got: await c.req.json() }));
    const r = await a.request("/v1/labels", { method: "POST", body: JSON.stringify({ n: 1 }) }, { SLUICE: b });
    expect(await r.json()).toEqual({ got: { n: 1 } });
    expect(Object.keys(calls[0]!.input)).toEqual(["url", "method", "headers"]);
  });
});

describe("withSluice(handler)", () => {
  const handler = async (request: Request) => new Response(`hello ${new URL(request.url).pathname}`);

  it("admitted: the handler's response, with the fields", async () => {
    const fetch = withSluice(handler);
    const r = await fetch(new Request("https://api.test/a"), { SLUICE: binding(ADMITTED).binding }, {});
    expect(await r.text()).toBe("hello /a");
    expect(r.headers.get("RateLimit")).toBe('"free-global";r=19;t=1');
  });

  it("wraps a non-async handler, and is itself a Promise-returning fetch (no cast in a non-async caller)", async () => {
    const fetch = withSluice((request: Request) => new Response(`sync ${new URL(request.url).pathname}`));
    // Typed Promise<Response> (typecheck runs on the tests): `.then` needs no cast.
    const answered: Promise<Response> = fetch(
      new Request("https://api.test/s"),
      { SLUICE: binding(ADMITTED).binding },
      {},
    );
    const text = await answered.then((r) => r.text());
    expect(text).toBe("sync /s");
  });

  it("adds the fields to a response whose headers are immutable (as a fetch's are)", async () => {
    const fetch = withSluice(async () => {
      const r = Response.redirect("https://api.test/elsewhere", 302);
      expect(() => r.headers.set("x", "y")).toThrow(TypeError);
      return r;
    });
    const r = await fetch(new Request("https://api.test/a"), { SLUICE: binding(ADMITTED).binding }, {});
    expect(r.status).toBe(302);
    expect(r.headers.get("Location")).toBe("https://api.test/elsewhere");
    expect(r.headers.get("RateLimit-Policy")).toBe('"free-global";q=20;w=2');
  });

  it("refused: the gateway's answer; a binding found by function; limit by key", async () => {
    const { binding: b, calls } = binding(DENIED);
    const fetch = withSluice(handler, { binding: (env: { LIMITER: SluiceBinding }) => env.LIMITER, key: () => "k" });
    const r = await fetch(new Request("https://api.test/a"), { LIMITER: b }, {});
    expect(r.status).toBe(429);
    expect(await r.json()).toEqual(DENIED.problem);
    expect(calls).toEqual([{ method: "limit", input: { key: "k" } }]);
  });

  it("sends Sluice the start of a JSON POST's body (for `_method`), from a copy: the handler reads all of it", async () => {
    const { binding: b, calls } = binding(ADMITTED);
    const text = JSON.stringify({ _method: "DELETE", pad: "x".repeat(200_000) });
    const fetch = withSluice(async (request: Request) => new Response(String((await request.text()).length)));
    const request = new Request("https://api.test/v1/labels/1", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: text,
    });
    const r = await fetch(request, { SLUICE: b }, {});
    expect(await r.text()).toBe(String(text.length));
    const sent = (calls[0]!.input as RequestLike).body as Uint8Array;
    expect(sent.byteLength).toBe(CHECK_BODY_MAX_BYTES);
    expect(new TextDecoder().decode(sent)).toBe(text.slice(0, CHECK_BODY_MAX_BYTES));
  });

  it("requestForCheck: the whole of a short form body, nothing for a GET, a text body or a PUT", async () => {
    const form = new Request("https://api.test/x", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "_method=PUT",
    });
    expect(new TextDecoder().decode((await requestForCheck(form)).body as Uint8Array)).toBe("_method=PUT");
    expect(await form.text()).toBe("_method=PUT");
    for (const [method, type] of [
      ["POST", "text/plain"],
      ["PUT", "application/json"],
    ] as const) {
      const request = new Request("https://api.test/x", { method, headers: { "Content-Type": type }, body: "{}" });
      expect((await requestForCheck(request)).body).toBeUndefined();
    }
    expect((await requestForCheck(new Request("https://api.test/x"))).body).toBeUndefined();
    // One byte over what Sluice reads tells it the body is larger.
    expect(CHECK_BODY_MAX_BYTES).toBe(BODY_READ_MAX_BYTES + 1);
  });

  it("requestLike keeps the url, method and headers, and leaves the body unread", async () => {
    const request = new Request("https://api.test/x?q=1", {
      method: "PUT",
      headers: { "X-API-Key": "sk", "CF-Connecting-IP": "203.0.113.4" },
      body: "payload",
    });
    expect(requestLike(request)).toEqual({
      url: "https://api.test/x?q=1",
      method: "PUT",
      headers: { "content-type": "text/plain;charset=UTF-8", "x-api-key": "sk", "cf-connecting-ip": "203.0.113.4" },
    });
    expect(await request.text()).toBe("payload");
  });
});

describe("slots held through the binding: renewed while the work runs, given back when the body ends", () => {
  /** A binding that admits with one slot (renewed every `renewEveryMs`) and records renewals and releases. */
  function slotBinding(renewEveryMs: number) {
    const log: string[] = [];
    const b: SluiceBinding = {
      check: async () => ({ ...ADMITTED, slots: ["exports:abc:1"], renewEveryMs }),
      limit: async () => {
        throw new Error("not used");
      },
      release: async (slots) => {
        log.push(`release ${String(slots)}`);
        return { released: 1 };
      },
      renew: async (slots) => {
        log.push(`renew ${String(slots)}`);
        return { renewed: 1 };
      },
    };
    return { b, log };
  }

  it("withSluice renews from the admission on, through a slow handler and its body, and stops at the release", async () => {
    vi.useFakeTimers();
    try {
      const { b, log } = slotBinding(1_000);
      let finish: () => void = () => undefined;
      const slow = new Promise<void>((resolve) => {
        finish = resolve;
      });
      const pending: Promise<unknown>[] = [];
      const ctx = { waitUntil: (work: Promise<unknown>) => pending.push(work) };
      const fetch = withSluice(async () => {
        await slow;
        return new Response("export");
      });
      const answer = fetch(new Request("https://api.test/v1/reports/export"), { SLUICE: b }, ctx);
      await vi.advanceTimersByTimeAsync(2_500);
      // The handler still runs: two renewals so far.
      expect(log).toEqual(["renew exports:abc:1", "renew exports:abc:1"]);
      finish();
      const r = await answer;
      await vi.advanceTimersByTimeAsync(1_000);
      expect(log).toHaveLength(3);
      expect(await r.text()).toBe("export");
      await Promise.all(pending);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(log).toEqual([...Array(3).fill("renew exports:abc:1"), "release exports:abc:1"]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("the Hono middleware renews too, and releases once the response's body ends", async () => {
    vi.useFakeTimers();
    try {
      const { b, log } = slotBinding(500);
      const app = new Hono<{ Bindings: { SLUICE: SluiceBinding } }>();
      app.use(sluice());
      app.post("/x", async (c) => {
        await new Promise((resolve) => setTimeout(resolve, 1_200));
        return c.text("done");
      });
      const answer = app.request("/x", { method: "POST" }, { SLUICE: b });
      await vi.advanceTimersByTimeAsync(1_200);
      const r = await answer;
      expect(await r.text()).toBe("done");
      await vi.advanceTimersByTimeAsync(2_000);
      expect(log.filter((l) => l.startsWith("renew"))).toHaveLength(2);
      expect(log.at(-1)).toBe("release exports:abc:1");
    } finally {
      vi.useRealTimers();
    }
  });
});
