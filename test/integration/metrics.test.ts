/**
 * Metrics and logs through the gateway: one Analytics Engine data point per decision (hashed keys only), one log line
 * per object denial, and a failing metrics binding never fails a request.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/edge/hash.ts";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { bearer, freshKey, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

async function fetchWith(e: Env, rules: ReturnType<typeof rulesFrom>, request: Request) {
  const ctx = createExecutionContext();
  const response = await handleRequest(request, e, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

describe("metrics and logs", () => {
  const rules = rulesFrom(`
- id: metered
  match: { route: "GET /v1/things/*", identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 1
`);

  it("one data point per decision (rule, outcome, plan, route pattern; hashed key as index), one log line per object denial", async () => {
    const points: AnalyticsEngineDataPoint[] = [];
    const metered = { ...env, METRICS: { writeDataPoint: (p?: AnalyticsEngineDataPoint) => points.push(p ?? {}) } };
    const key = await knownKey();
    const log = vi.spyOn(console, "log");
    setNow(T0);
    for (let i = 0; i < 3; i++) await fetchWith(metered as Env, rules, req("GET", `/v1/things/${key}`, bearer(key)));
    const hash = await sha256Hex(key);
    expect(points).toEqual([
      { blobs: ["metered", "allowed", "free", "GET /v1/things/*", "GET", "object"], doubles: [1, 0], indexes: [hash] },
      {
        blobs: ["metered", "denied", "free", "GET /v1/things/*", "GET", "object"],
        doubles: [1, 60_000],
        indexes: [hash],
      },
      {
        blobs: ["metered", "denied", "free", "GET /v1/things/*", "GET", "cache"],
        doubles: [1, 60_000],
        indexes: [hash],
      },
    ]);
    const denials = log.mock.calls.map((c) => JSON.parse(String(c[0]))).filter((l) => l.event === "deny");
    expect(denials).toEqual([
      {
        event: "deny",
        plan: "free",
        method: "GET",
        rules: [
          { rule: "metered", route: "GET /v1/things/*", key: hash, cost: 1, retry_after_ms: 60_000, source: "object" },
        ],
      },
    ]);
    // The third request was answered from the blocked-key cache: a data point, but no log line of its own.
    // The raw key (here also in the path) is in no log line and no data point.
    for (const call of log.mock.calls) expect(String(call[0])).not.toContain(key);
    expect(JSON.stringify(points)).not.toContain(key);
  });

  it("a failing metrics binding never fails the request", async () => {
    const broken = {
      ...env,
      METRICS: {
        writeDataPoint: () => {
          throw new Error("dataset gone");
        },
      },
    };
    vi.spyOn(console, "error");
    setNow(T0);
    const r = await fetchWith(broken as Env, rules, req("GET", "/v1/things/1", bearer(freshKey())));
    expect(r.status).toBe(200);
  });
});
