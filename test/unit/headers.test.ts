import { describe, expect, it } from "vitest";
import { jitterSeconds } from "../../src/edge/hash.ts";
import { limitFields, policyWindowS, type RuleView, sfString } from "../../src/request/headers.ts";
import { rateOf } from "../../src/rules/duration.ts";

const view = (over: Partial<RuleView>): RuleView => ({
  ruleId: "r",
  quota: 20,
  windowS: 2,
  remaining: 19,
  resetAfterMs: 100,
  cost: 1,
  retryAfterMs: null,
  status: 429,
  jitterS: 0,
  ...over,
});

describe("limitFields", () => {
  it("no enforcing rule: no fields", () => {
    expect(limitFields([])).toEqual({ headers: [], denial: null });
  });

  it("one item per rule, in order; t rounds reset up to whole seconds", () => {
    const fields = limitFields([
      view({ ruleId: "free-global" }),
      view({ ruleId: "free-daily", quota: 10000, windowS: 86400, remaining: 9999, resetAfterMs: 43_200_001 }),
    ]);
    expect(fields).toEqual({
      headers: [
        ["RateLimit-Policy", `"free-global";q=20;w=2, "free-daily";q=10000;w=86400`],
        ["RateLimit", `"free-global";r=19;t=1, "free-daily";r=9999;t=43201`],
      ],
      denial: null,
    });
  });

  it("a denial: Retry-After rounds up, the longest (with jitter) wins, the body keeps the exact ms", () => {
    const fields = limitFields([
      view({ ruleId: "a", retryAfterMs: 1001, remaining: 0, status: 429 }),
      view({ ruleId: "b", retryAfterMs: 1500, remaining: 0, status: 503, jitterS: 0 }),
      view({ ruleId: "c", retryAfterMs: 900, remaining: 0, status: 418, jitterS: 2 }),
      view({ ruleId: "ok" }),
    ]);
    expect(fields.headers.find(([n]) => n === "Retry-After")).toEqual(["Retry-After", "3"]);
    expect(fields.denial).toEqual({
      status: 418,
      retryAfterS: 3,
      problem: {
        type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
        title: "Request cannot be satisfied as assigned quota has been exceeded",
        status: 418,
        detail: "Rate limit exceeded (a, b, c); retry in 1500 ms.",
        "violated-policies": ["a", "b", "c"],
        retry_after_ms: 1500,
      },
    });
  });

  it("a denial of a request costing more than 1 says what it costs and what was left, per denying rule", () => {
    // r counts requests of cost 1: a cost-5 request denied with r=3 had no room, and the body says so.
    const fields = limitFields([
      view({ ruleId: "free-global", retryAfterMs: null, remaining: 15, cost: 1 }),
      view({ ruleId: "labels-bulk", retryAfterMs: 700, remaining: 3, cost: 5 }),
      view({ ruleId: "free-daily", retryAfterMs: 2000, remaining: 0, cost: 1 }),
    ]);
    expect(fields.headers.find(([n]) => n === "RateLimit")).toEqual([
      "RateLimit",
      `"free-global";r=15;t=1, "labels-bulk";r=3;t=1, "free-daily";r=0;t=1`,
    ]);
    expect(fields.denial?.problem).toMatchObject({
      detail:
        "Rate limit exceeded (labels-bulk: this request costs 5, 3 left; free-daily: this request costs 1, 0 left); " +
        "retry in 2000 ms.",
      "violated-policies": ["labels-bulk", "free-daily"],
      costs: { "labels-bulk": 5, "free-daily": 1 },
    });
  });

  it("escapes sf-strings", () => {
    expect(sfString(`a"b\\c`)).toBe(`"a\\"b\\\\c"`);
  });
});

describe("policyWindowS", () => {
  it("rate algorithms: the time to refill the whole capacity; windows: the window; at least 1 s", () => {
    expect(policyWindowS({ algorithm: "token_bucket", rate: rateOf(10, 1000), burst: 20 }, 0)).toBe(2);
    expect(policyWindowS({ algorithm: "gcra", rate: rateOf(7, 3000), burst: 5 }, 0)).toBe(3);
    expect(policyWindowS({ algorithm: "leaky_queue", rate: rateOf(10, 1000), burst: 20, delay: 0 }, 0)).toBe(3);
    expect(policyWindowS({ algorithm: "token_bucket", rate: rateOf(1000, 1000), burst: 10 }, 0)).toBe(1);
    expect(policyWindowS({ algorithm: "sliding_log", limit: 5, windowMs: 60_000 }, 0)).toBe(60);
    expect(policyWindowS({ algorithm: "fixed_window", limit: 5, window: { kind: "ms", ms: 86_400_000 } }, 0)).toBe(
      86_400,
    );
    // A calendar month: February 2030 has 28 days, January 31.
    const month = { algorithm: "fixed_window", limit: 5, window: { kind: "month" } } as const;
    expect(policyWindowS(month, Date.UTC(2030, 1, 10))).toBe(28 * 86_400);
    expect(policyWindowS(month, Date.UTC(2030, 0, 10))).toBe(31 * 86_400);
  });
});

describe("jitterSeconds", () => {
  it("is deterministic, within [0, max], spread across keys, and 0 when off", () => {
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const key = i.toString(16).padStart(64, "0");
      const j = jitterSeconds(key, "rule", 5);
      expect(j).toBe(jitterSeconds(key, "rule", 5));
      expect(j).toBeGreaterThanOrEqual(0);
      expect(j).toBeLessThanOrEqual(5);
      seen.add(j);
      expect(jitterSeconds(key, "rule", 0)).toBe(0);
    }
    expect(seen.size).toBe(6);
  });
});
