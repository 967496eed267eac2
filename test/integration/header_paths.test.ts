/**
 * Every response carries the same RateLimit items for the same enforcing rules, whether the gateway asked the
 * Durable Objects or answered a denial from its blocked-key cache (docs/rules.md: one item per enforcing rule).
 * Property: random traffic of a few keys over overlapping rules, replayed twice through the gateway on the same clock,
 * once by an isolate that keeps its blocked-key cache and once by a new isolate for every request (so every
 * request reaches the objects); each pair of responses must agree on the status, the rules named in `RateLimit`
 * and in `RateLimit-Policy`, and `RateLimit-Policy` itself.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate, type Isolate } from "../../src/isolate/isolate.ts";
import { bearer, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const RULES = rulesFrom(`
- id: per-key
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 5/s
  burst: 4
- id: per-minute
  match: { identity: api_key }
  algorithm: fixed_window
  limit: 12
  window: min
- id: search
  match: { route: "GET /v1/search/**", identity: api_key }
  algorithm: gcra
  rate: 2/s
  burst: 3
  cost_by_route: { "GET /v1/search/bulk": 2 }
- id: search-log
  match: { route: "GET /v1/search/**", identity: api_key }
  algorithm: sliding_log
  limit: 5
  window: 10s
- id: watching
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/s
  burst: 2
  mode: shadow
`);

const PATHS = ["/v1/quotes", "/v1/search/labels", "/v1/search/bulk"];

interface Shown {
  readonly status: number;
  readonly limited: string[];
  readonly policy: string | null;
}

const idsOf = (field: string | null) => (field ?? "").split(", ").map((item) => item.split(";")[0] ?? "");

async function send(isolate: Isolate, key: string, path: string): Promise<Shown> {
  const ctx = createExecutionContext();
  const response = await handleRequest(req("GET", path, bearer(key)), env, ctx, RULES, isolate);
  await response.arrayBuffer();
  await waitOnExecutionContext(ctx);
  const policy = response.headers.get("RateLimit-Policy");
  expect(idsOf(policy)).toEqual(idsOf(response.headers.get("RateLimit")));
  return { status: response.status, limited: idsOf(response.headers.get("RateLimit")), policy };
}

describe("RateLimit items: the object's answer and the blocked-key cache's agree", () => {
  it("random traffic through the gateway, with and without the cache (property)", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    let run = 0;
    let cacheAnswers = 0;
    const step = fc.record({
      key: fc.integer({ min: 0, max: 2 }),
      path: fc.constantFrom(...PATHS),
      afterMs: fc.constantFrom(0, 0, 0, 50, 120, 400, 1500),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 30 }), async (steps) => {
        run++;
        const cached = createIsolate();
        const keys = await Promise.all([0, 1, 2].map(() => Promise.all([knownKey("sk_c"), knownKey("sk_u")])));
        let nowMs = T0 + run * 3_600_000;
        for (const { key, path, afterMs } of steps) {
          nowMs += afterMs;
          setNow(nowMs);
          const [cachedKey, uncachedKey] = keys[key]!;
          const viaCache = await send(cached, cachedKey, path);
          // A new isolate for each request: nothing remembered, every rule asked.
          const viaObjects = await send(createIsolate(), uncachedKey, path);
          expect(viaCache).toEqual(viaObjects);
        }
        cacheAnswers += cached.stats.cache_answers;
      }),
      {
        numRuns: 8,
        endOnFailure: true,
        // The case first: a burst past the per-key limit, its denials then answered from the cache.
        examples: [[Array.from({ length: 7 }, () => ({ key: 0, path: "/v1/search/labels", afterMs: 0 }))]],
      },
    );
    // The property says something only if the cache did answer.
    expect(cacheAnswers).toBeGreaterThan(0);
  }, 180_000);
});
