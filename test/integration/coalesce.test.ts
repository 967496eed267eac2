/**
 * Coalescing under concurrency, in the Workers runtime through the gateway: many concurrent requests on one key (and
 * on several keys at once) get exactly the decisions that sequential calls of the pure core give, each request its own
 * decision, while `/_sluice/stats` counts far fewer object calls than requests (a batch is one call). Composition (two
 * enforcing rules on one request and the refund of the one that admitted), a shadow rule, the blocked-key cache and the
 * failure policy (a batch that fails fails each of its requests by its rule's `on_error`) all keep working.
 *
 * Time is frozen (`Date`, in the Worker and the objects alike), so the reference is the pure core run request by
 * request at one instant. Nothing waits on a timer: the requests simply run at once.
 *
 * What "the same decisions" means under concurrency: each object decides the requests in the order they reached its
 * key, exactly as the pure core would one by one, and a request's verdict is the sequential one. Which *other* rules
 * also denied a refused request may differ from a one-by-one run (a refund lands after its request, as it would with
 * one call per request), so that is not compared.
 *
 * A retried call (the same call id, after `retryable` or a reset) is not charged twice: test/unit/coalesce.test.ts
 * (the coalescer and the object's record) and test/integration/chaos.test.ts (answers lost after the object applied
 * them, through the gateway) cover it.
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { capacityOf, type Decision } from "../../src/algorithms/index.ts";
import { TEMPORARY_REDUCED_CAPACITY_TYPE } from "../../src/edge/refusals.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { RULES } from "../../src/generated/rules.ts";
import { createIsolate, type Isolate } from "../../src/isolate/isolate.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import type { CallInput, CallResult } from "../../src/protocol/store.ts";
import { type CompiledRule, compileRules } from "../../src/request/match.ts";
import { sequential } from "../support/sequential.ts";
import { bearer, freshIp, knownKey, limiterFor, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const ADMIN = { Authorization: "Bearer test-admin-token-0123456789abcdef" };

interface Sent {
  readonly key: string;
  readonly status: number;
  readonly rateLimit: string | null;
  readonly body: {
    readonly type?: string;
    readonly retry_after_ms?: number;
    readonly "violated-policies"?: string[];
    readonly decisions?: { rule: string; allowed?: boolean; remaining?: number; error?: string }[];
  };
}

async function sentOf(key: string, response: Response): Promise<Sent> {
  return { key, status: response.status, rateLimit: response.headers.get("RateLimit"), body: await response.json() };
}

/** The pure core's decisions for `n` cost-1 requests at T0 on a fresh key. */
function reference(rule: CompiledRule, n: number): Decision[] {
  return sequential(rule.params, null, Array(n).fill(1), T0).decisions.map((d) => {
    if (!("decision" in d)) throw new Error(`the core refused a cost-1 request: ${d.error}`);
    return d.decision;
  });
}

/** One rule's decision as a response shows it: `remaining` of an admission, or a denial. */
function shown(s: Sent, ruleId: string): string {
  if (s.status === 200) {
    const d = s.body.decisions?.find((x) => x.rule === ruleId);
    return d?.allowed === true ? `admit r=${d.remaining}` : `echo ${JSON.stringify(d)}`;
  }
  return s.body["violated-policies"]?.includes(ruleId) ? `deny retry=${s.body.retry_after_ms}` : `status ${s.status}`;
}
const expected = (decisions: readonly Decision[]) =>
  decisions.map((d) => (d.allowed ? `admit r=${d.remaining}` : `deny retry=${d.retryAfterMs}`)).sort();

/** What the key's object holds for the rule now (time is frozen: nothing refills). */
async function chargedBy(rule: CompiledRule, key: string): Promise<number> {
  const peek = await (await limiterFor(rule.rule.id, key)).peek({ rule: { id: rule.rule.id, params: rule.params } });
  return capacityOf(rule.params) - peek.remaining;
}

/** Send every request at once through the gateway, each with its own execution context, on `isolate`. */
async function flood(
  isolate: Isolate,
  rules: readonly CompiledRule[],
  requests: readonly { readonly key: string; readonly path: string }[],
): Promise<Sent[]> {
  return Promise.all(
    requests.map(async ({ key, path }) => {
      const ctx = createExecutionContext();
      const response = await handleRequest(req("GET", path, bearer(key)), env, ctx, rules, isolate);
      const sent = await sentOf(key, response);
      await waitOnExecutionContext(ctx);
      return sent;
    }),
  );
}

const delta = (before: Record<string, number>, after: Record<string, number>, name: string) =>
  after[name]! - before[name]!;

describe("through the Worker's own entry (each request in its own I/O context)", () => {
  const shipped = compileRules(RULES);
  const login = shipped.find((c) => c.rule.id === "login-per-ip")!;
  const stats = async () =>
    (await SELF.fetch("https://sluice.test/_sluice/stats", { headers: ADMIN })).json<Record<string, number>>();

  it("64 concurrent logins from one address: exactly the 5 the rule allows, each its own decision, in a few calls", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    setNow(T0);
    const ip = freshIp();
    const before = await stats();
    const sent = await Promise.all(
      Array.from({ length: 64 }, async () =>
        sentOf(
          ip,
          await SELF.fetch("https://sluice.test/v1/login", { method: "POST", headers: { "CF-Connecting-IP": ip } }),
        ),
      ),
    );
    const after = await stats();

    // login-per-ip's 64 decisions are the pure core's, one by one: 5 admissions (4, 3, 2, 1, 0 left) and 59 denials
    // with the same wait. (The anonymous caller is counted by free-global and free-daily too, by its address.)
    expect(sent.map((s) => shown(s, "login-per-ip")).sort()).toEqual(expected(reference(login, 64)));
    expect(sent.filter((s) => s.status === 200)).toHaveLength(5);
    expect(sent.filter((s) => s.status === 429)).toHaveLength(59);
    expect(await chargedBy(login, ip)).toBe(5);

    const requests = delta(before, after, "requests");
    const calls = delta(before, after, "object_calls");
    expect(requests).toBe(64);
    // Three coalesced rules per request: 192 decisions, one object call each without coalescing. The bound:
    // at most 0.25 calls per request (here about 5 in all: a lone first call per key, then a batch). A fourth rule,
    // failed-logins-per-ip (count_when), is never coalesced: it asks its key's object once per request it checks
    // (docs/rules.md, "Counting by the response"), so at most 64 calls more.
    expect(calls, "object calls for 64 requests x 3 coalesced rules + 1 direct").toBeLessThanOrEqual(64 + 64 / 4);
    expect(delta(before, after, "batched_requests")).toBeGreaterThan(0);
  });
});

describe("through the gateway, on several keys at once", () => {
  const rules = rulesFrom(`
- id: tight
  match: { route: "GET /pair", identity: api_key }
  algorithm: gcra
  rate: 1/h
  burst: 10
- id: wide
  match: { route: "GET /pair", identity: api_key }
  algorithm: token_bucket
  rate: 1/h
  burst: 25
- id: watch
  match: { route: "GET /pair", identity: api_key }
  algorithm: sliding_log
  limit: 4
  window: h
  mode: shadow
`);
  const [tight, wide, watch] = rules as [CompiledRule, CompiledRule, CompiledRule];

  it("3 keys x 40 concurrent requests, two enforcing rules and a shadow one: the core's decisions, refunds landed, then the cache answers", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const keys = [await knownKey("sk_co"), await knownKey("sk_co"), await knownKey("sk_co")];
    setNow(T0);
    const isolate = createIsolate();
    // Interleaved: key 0, key 1, key 2, key 0, ...
    const requests = Array.from({ length: 120 }, (_, i) => ({ key: keys[i % 3]!, path: "/pair" }));
    const sent = await flood(isolate, rules, requests);
    const stats = isolate.stats;

    for (const key of keys) {
      const mine = sent.filter((s) => s.key === key);
      // tight decides every request: the core's 40 decisions (10 admitted, each with its own remaining).
      expect(mine.map((s) => shown(s, "tight")).sort()).toEqual(expected(reference(tight, 40)));
      expect(mine.filter((s) => s.status === 200)).toHaveLength(10);
      for (const s of mine.filter((x) => x.status === 429)) {
        expect(s.body["violated-policies"]).toContain("tight");
        expect(s.rateLimit).toContain(`"tight";r=0;`);
      }
      // wide admitted the 10 admitted requests with its first 10 decisions (24 .. 15 left), and every other admission
      // it made was given back: it holds exactly 10, as the shadow rule holds its 4 (the first four requests).
      const wideRemaining = mine.filter((s) => s.status === 200).map((s) => shown(s, "wide"));
      expect(wideRemaining.sort()).toEqual(expected(reference(wide, 10)));
      expect(await chargedBy(tight, key)).toBe(10);
      expect(await chargedBy(wide, key)).toBe(10);
      expect(await chargedBy(watch, key)).toBe(4);
      const watched = mine.flatMap((s) => s.body.decisions?.filter((d) => d.rule === "watch") ?? []);
      expect(watched.filter((d) => d.allowed)).toHaveLength(4);
    }
    // The shadow rule would have denied 36 per key: logged, never enforced.
    expect(stats.shadow_denials).toBe(3 * 36);
    expect(stats.requests).toBe(120);
    expect(stats.batched_requests).toBeGreaterThan(0);
    // 360 rule decisions, one call each without coalescing (3 calls per request); at most 0.5 per request. About 9 in
    // all on an idle machine; the requests reach the coalescer as their keys' hashes resolve, so on a loaded one
    // (2 cores, two simulations beside the suite) more calls find no other request waiting: 31 seen once in 5 runs.
    expect(stats.object_calls, "object calls for 120 requests x 3 rules").toBeLessThanOrEqual(120 / 2);

    // Now every key is known to be spent: a second flood is refused from the cache, and no object is asked.
    const callsBefore = stats.object_calls;
    const cacheBefore = stats.cache_answers;
    const again = await flood(isolate, rules, requests);
    expect(again.every((s) => s.status === 429 && s.body["violated-policies"]?.includes("tight"))).toBe(true);
    expect(stats.object_calls).toBe(callsBefore);
    expect(stats.cache_answers - cacheBefore).toBe(120);
    for (const key of keys) expect(await chargedBy(wide, key)).toBe(10);
  });
});

describe("a failing object, under concurrency", () => {
  const rules = rulesFrom(`
- id: sturdy
  match: { route: "GET /mixed", identity: api_key }
  algorithm: fixed_window
  limit: 6
  window: h
- id: flaky-open
  match: { route: "GET /mixed", identity: api_key }
  algorithm: token_bucket
  rate: 1/h
  burst: 100
  on_error: open
- id: flaky-closed
  match: { route: "GET /strict", identity: api_key }
  algorithm: token_bucket
  rate: 1/h
  burst: 100
  on_error: closed
`);
  const sturdy = rules[0]!;

  it("fails each request of a failed batch by its rule's on_error; the other rule still decides exactly", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const original = SluiceLimiter.prototype.check;
    const failedCosts: number[] = [];
    const check = vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async function (
      this: SluiceLimiter,
      input: CallInput,
    ): Promise<CallResult> {
      if (input.rule.id.startsWith("flaky")) {
        failedCosts.push(input.costs.length);
        // A plain error: a real failure, never retried (an overloaded object is never `on_error`: failure_policy.test.ts).
        throw new Error("storage exploded");
      }
      return original.call(this, input);
    });
    const key = await knownKey("sk_flaky");
    setNow(T0);
    const isolate = createIsolate();
    const requests = Array.from({ length: 64 }, (_, i) => ({ key, path: i % 2 === 0 ? "/mixed" : "/strict" }));
    const sent = await flood(isolate, rules, requests);
    const mixed = sent.filter((_, i) => i % 2 === 0);
    const strict = sent.filter((_, i) => i % 2 === 1);

    // on_error: open: flaky-open is skipped on every request; sturdy still admits exactly its 6, each its own decision.
    expect(mixed.map((s) => shown(s, "sturdy")).sort()).toEqual(expected(reference(sturdy, 32)));
    for (const s of mixed.filter((x) => x.status === 200)) {
      expect(s.body.decisions?.find((d) => d.rule === "flaky-open")).toMatchObject({ error: "fail_open" });
    }
    expect(await chargedBy(sturdy, key)).toBe(6);
    // on_error: closed: every request refused with 503 temporary-reduced-capacity, naming the rule.
    for (const s of strict) {
      expect(s.status).toBe(503);
      expect(s.body.type).toBe(TEMPORARY_REDUCED_CAPACITY_TYPE);
      expect(s.body["violated-policies"]).toEqual(["flaky-closed"]);
    }
    const { stats } = isolate;
    expect(stats.fail_open).toBe(32);
    expect(stats.fail_closed).toBe(32);
    // Each request went in exactly one failed call (a plain error: never retried), and the calls were batches.
    expect(failedCosts.reduce((a, b) => a + b, 0)).toBe(64);
    expect(failedCosts.length).toBeLessThan(64 / 4);
    expect(stats.object_retries).toBe(0);
    expect(stats.object_calls).toBe(check.mock.calls.length);
  });
});
