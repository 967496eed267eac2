/**
 * Where admitted requests go (settings.ts `Origin`): on to the zone's origin under PASS_THROUGH (Sluice on a zone
 * route), to UPSTREAM_URL, to the echo origin only when ECHO_ORIGIN asks for it; with none set, a loud 500 that says
 * what to set, and nothing counted. The outgoing fetch is observed with a spy on `fetch`.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { bearer, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: tight
  match: { route: "GET /v1/**", identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 2
`);

/** The gateway with these vars instead of the test configuration's origin. */
async function send(vars: Partial<Env>, request: Request): Promise<Response> {
  const ctx = createExecutionContext();
  const withVars: Env = { ...env, ECHO_ORIGIN: undefined, UPSTREAM_URL: undefined, PASS_THROUGH: undefined, ...vars };
  const response = await handleRequest(request, withVars, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

/** Every request `fetch` was asked for, answered by a stand-in origin. */
function recordOrigin() {
  const seen: Request[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    seen.push(request);
    return new Response("from the origin", { status: 201, headers: { "X-Origin": "yes" } });
  });
  return seen;
}

describe("origin", () => {
  it("PASS_THROUGH: an admitted request goes on to its own URL, under the path it was matched as", async () => {
    setNow(T0);
    const seen = recordOrigin();
    const key = await knownKey("pass");
    const response = await send(
      { PASS_THROUGH: "true" },
      new Request("https://api.example.com/v1//Quotes/./a?x=1", { method: "GET", headers: bearer(key) }),
    );
    expect(response.status).toBe(201);
    expect(await response.text()).toBe("from the origin");
    expect(response.headers.get("X-Origin")).toBe("yes");
    expect(response.headers.get("RateLimit")).toBe('"tight";r=1;t=60');
    expect(seen.map((r) => [r.method, r.url, r.headers.get("authorization")])).toEqual([
      ["GET", "https://api.example.com/v1/Quotes/a?x=1", `Bearer ${key}`],
    ]);
  });

  it("PASS_THROUGH: a denied request never reaches the origin", async () => {
    setNow(T0);
    const seen = recordOrigin();
    const key = await knownKey("pass_denied");
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await send({ PASS_THROUGH: "true" }, req("GET", "/v1/a", bearer(key)))).status);
    expect(statuses).toEqual([201, 201, 429]);
    expect(seen).toHaveLength(2);
  });

  it("PASS_THROUGH on a workers.dev hostname: 500 saying it needs a zone route, the origin not asked", async () => {
    const seen = recordOrigin();
    const response = await send({ PASS_THROUGH: "true" }, new Request("https://sluice.acme.workers.dev/v1/a"));
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ title: "Sluice Has No Origin", detail: /zone route/ });
    expect(seen).toHaveLength(0);
  });

  it("UPSTREAM_URL: the upstream's base path, then the matched path and the query", async () => {
    setNow(T0);
    const seen = recordOrigin();
    const key = await knownKey("up");
    const response = await send({ UPSTREAM_URL: "https://backend.test/base/" }, req("GET", "/v1/a?b=2", bearer(key)));
    expect(response.status).toBe(201);
    expect(seen.map((r) => r.url)).toEqual(["https://backend.test/base/v1/a?b=2"]);
  });

  it("no origin set: every gateway request answers 500 with what to set, and nothing is counted", async () => {
    setNow(T0);
    const seen = recordOrigin();
    const key = await knownKey("none");
    for (let i = 0; i < 3; i++) {
      const response = await send({}, req("GET", "/v1/a", bearer(key)));
      expect(response.status).toBe(500);
      expect(response.headers.get("Content-Type")).toBe("application/problem+json");
      const body = await response.json<{ detail: string }>();
      expect(body.detail).toContain("Sluice has no origin for admitted requests: none is set;");
      expect(body.detail).toContain('PASS_THROUGH = "true"');
    }
    expect(seen).toHaveLength(0);
    // The budget is untouched: with an origin, the key still has its full burst.
    const echoed = await send({ ECHO_ORIGIN: "true" }, req("GET", "/v1/a", bearer(key)));
    expect(echoed.headers.get("RateLimit")).toBe('"tight";r=1;t=60');
    expect(await echoed.json()).toMatchObject({ echo: true });
  });
});
