/**
 * The Durable Object's promises: state survives an object reset (no free allowance), the alarm deletes state once it
 * is as good as fresh (and only then), concurrent requests on one key are decided one at a time, and an object made
 * again from its storage answers every later call as the one that never restarted would (every algorithm, every kind
 * of call: the tests above restart only token_bucket, fixed_window and sliding_counter keys after checks).
 */
import { abortAllDurableObjects, env, runDurableObjectAlarm, runInDurableObject, SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { limiterRuleOf } from "../../src/edge/direct.ts";
import { ALARM_SPREAD_MS, alarmSpreadMs, SluiceLimiter } from "../../src/object/limiter.ts";
import type { LimiterRule } from "../../src/protocol/record.ts";
import {
  bearer,
  bodyOf,
  freshIp,
  freshKey,
  gatewayFetch,
  itemOf,
  knownKey,
  limiterFor,
  req,
  rulesFrom,
  seedAccount,
  setNow,
  T0,
} from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const storage = async (ruleId: string, key: string) =>
  runInDurableObject(await limiterFor(ruleId, key), async (_instance: SluiceLimiter, state) => ({
    record: state.storage.kv.get("record"),
    calls: [...state.storage.kv.list({ prefix: "call:" })],
    alarmAtMs: await state.storage.getAlarm(),
  }));

describe("persistence", () => {
  it("state survives abortAllDurableObjects: a spent burst stays spent", async () => {
    const key = await knownKey("sk_free");
    await seedAccount(key, "free");
    setNow(T0);
    for (let i = 0; i < 20; i++) expect((await SELF.fetch(req("GET", "/v1/quotes", bearer(key)))).status).toBe(200);
    await abortAllDurableObjects();
    const after = await SELF.fetch(req("GET", "/v1/quotes", bearer(key)));
    expect(after.status).toBe(429);
    expect(after.headers.get("RateLimit")).toBe(`"free-global";r=0;t=2, "free-daily";r=9980;t=43200`);
    expect((await bodyOf(after)).retry_after_ms).toBe(100);
  });

  it("is stored under the rule id and the key's SHA-256, with the parameters it was made under", async () => {
    const key = await knownKey("sk_free");
    setNow(T0);
    await SELF.fetch(req("GET", "/v1/quotes", bearer(key)));
    const { record, calls } = await storage("free-global", key);
    expect(record).toEqual({
      v: 1,
      params: { algorithm: "token_bucket", rate: { amount: 10, periodMs: 1000, tokens: 1, perMs: 100 }, burst: 20 },
      fingerprint: JSON.stringify({
        algorithm: "token_bucket",
        rate: { amount: 10, periodMs: 1000, tokens: 1, perMs: 100 },
        burst: 20,
      }),
      state: { tokensScaled: 1900, lastMs: T0 },
      // The rules version its parameters came from (the build's RULES_VERSION): the object obeys the newest.
      version: expect.any(Number),
      // The key's deficit just before its charge (full: none), which bounds what a later refund gives back.
      lows: { s: [[2 * T0, 0]], slack: 0, per: 100 },
    });
    // The call it applied, remembered so that a retry of it is not charged twice: an entry of its own (a call writes
    // its entry and the record, never the list of every call remembered).
    expect(calls).toEqual([
      ["call:0", { id: expect.any(String), atMs: T0, verdicts: "1", leaseUnits: 0, leaseForMs: 0 }],
    ]);
  });
});

describe("remembered calls", () => {
  it("a call applied before the object restarts is answered as remembered after it, not charged again", async () => {
    const key = await knownKey("sk_free");
    setNow(T0);
    const limiter = await limiterFor("free-daily", key);
    const window = { kind: "ms" as const, ms: 86_400_000 };
    const rule = { id: "free-daily", params: { algorithm: "fixed_window" as const, limit: 10, window } };
    const first = await limiter.check({ rule, id: "call-a", costs: [1] });
    expect(first.replayed).toBe(false);
    for (let i = 0; i < 2; i++) await limiter.check({ rule, id: `call-${i}`, costs: [1] });
    await abortAllDurableObjects();
    const again = await (await limiterFor("free-daily", key)).check({ rule, id: "call-a", costs: [1] });
    expect(again.replayed).toBe(true);
    expect(again.results[0]).toMatchObject({ ok: true, decision: { allowed: true, remaining: 7 } });
  });
});

describe("persistence of a sliding_counter with buckets: 4", () => {
  const rules = rulesFrom(`
- id: sub-windows
  match: { identity: api_key }
  algorithm: sliding_counter
  limit: 5
  window: 4s
  buckets: 4
`);
  it("keeps the index and the k + 1 counts, and a reset object continues exactly", async () => {
    const key = await knownKey();
    const call = async (t: number) => {
      setNow(t);
      const r = await gatewayFetch(rules, req("GET", "/x", bearer(key)));
      return { status: r.status, retryAfterMs: r.status === 429 ? (await bodyOf(r)).retry_after_ms : null };
    };
    for (const t of [T0, T0, T0 + 1000, T0 + 2000, T0 + 2500]) expect((await call(t)).status).toBe(200);
    const { record } = await storage("sub-windows", key);
    const s = T0 / 1000 + 2;
    expect((record as { state: unknown }).state).toEqual({ window: s, prev: 0, mid: [0, 2, 1], curr: 2 });
    await abortAllDurableObjects();
    // estimate 5: the 2 of T0 weigh whole until T0 + 4000 and fade over the next second: one fits at T0 + 4500
    expect(await call(T0 + 2600)).toEqual({ status: 429, retryAfterMs: 1900 });
    await abortAllDurableObjects();
    expect(await call(T0 + 4499)).toEqual({ status: 429, retryAfterMs: 1 });
    expect(await call(T0 + 4500)).toEqual({ status: 200, retryAfterMs: null });
  });
});

describe("the alarm", () => {
  it("re-arms while the key is not fresh, then deletes the state once it is", async () => {
    const ip = freshIp();
    setNow(T0);
    expect((await SELF.fetch(req("POST", "/v1/login", { "CF-Connecting-IP": ip }))).status).toBe(200);
    setNow(T0 + 10_000);
    expect((await SELF.fetch(req("POST", "/v1/login", { "CF-Connecting-IP": ip }))).status).toBe(200);
    // One alarm, set by the first write, at the time the first state would have been fresh.
    const stub = await limiterFor("login-per-ip", ip);
    const spread = alarmSpreadMs(stub.id.toString()); // each object's alarm put off by its own spread
    expect(spread).toBeLessThan(ALARM_SPREAD_MS);
    expect((await storage("login-per-ip", ip)).alarmAtMs).toBe(T0 + 60_000 + spread);

    setNow(T0 + 60_000);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const kept = await storage("login-per-ip", ip);
    expect(kept.record).toMatchObject({ state: { times: [T0, T0 + 10_000], costs: [1, 1] } });
    expect(kept.alarmAtMs).toBe(T0 + 70_000 + spread);

    setNow(T0 + 70_000);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await storage("login-per-ip", ip)).toEqual({ record: undefined, calls: [], alarmAtMs: null });

    // Deleted state is fresh state: the next attempt starts a new log.
    const next = await SELF.fetch(req("POST", "/v1/login", { "CF-Connecting-IP": ip }));
    expect(itemOf(next.headers.get("RateLimit"), "login-per-ip")).toBe(`"login-per-ip";r=4;t=60`);
  });
});

describe("concurrency", () => {
  it("50 concurrent requests on a burst of 20 admit exactly 20, and the 30 denials cost nothing", async () => {
    const key = await knownKey("sk_free");
    await seedAccount(key, "free");
    setNow(T0);
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => SELF.fetch(req("GET", "/v1/quotes", bearer(key)))),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    // free-daily admitted all 50 at first; the 30 refunds leave exactly 20 charged.
    expect((await storage("free-daily", key)).record).toMatchObject({ state: { count: 20 } });
  });

  it("group commit loses nothing: every answered admission of a concurrent burst is stored before an object reset", async () => {
    const key = await knownKey("sk_free");
    await seedAccount(key, "free");
    setNow(T0);
    const responses = await Promise.all(
      Array.from({ length: 25 }, () => SELF.fetch(req("GET", "/v1/quotes", bearer(key)))),
    );
    expect(responses.filter((r) => r.status === 200)).toHaveLength(20);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    expect((await storage("free-global", key)).record).toMatchObject({ state: { tokensScaled: 0, lastMs: T0 } });
    await abortAllDurableObjects();
    const after = await SELF.fetch(req("GET", "/v1/quotes", bearer(key)));
    expect(after.status).toBe(429);
    expect((await bodyOf(after)).retry_after_ms).toBe(100);
  });
});

/**
 * "A restarted Durable Object continues exactly where it was", for every algorithm and every way a call changes a
 * key: two objects get the same calls at the same (injected) times, one held in memory throughout, the other made
 * again from its storage before every call (what the runtime does after an eviction or a crash). Every answer must be
 * the same: a change any call kind keeps only in memory (a check, a charge, a refund, a slot's release or renewal, a
 * ban, a remembered call id) shows up as a different answer after the next restart.
 */
describe("a restarted object continues exactly, for every algorithm and call kind", () => {
  const compiled = rulesFrom(`
- { id: r-token, match: { identity: api_key }, algorithm: token_bucket, rate: 1/s, burst: 3 }
- { id: r-gcra, match: { identity: api_key }, algorithm: gcra, rate: 1/s, burst: 3 }
- { id: r-fixed, match: { identity: api_key }, algorithm: fixed_window, limit: 3, window: 10s }
- { id: r-log, match: { identity: api_key }, algorithm: sliding_log, limit: 3, window: 10s }
- { id: r-counter, match: { identity: api_key }, algorithm: sliding_counter, limit: 3, window: 4s, buckets: 4 }
- { id: r-leaky, match: { identity: api_key }, algorithm: leaky_bucket, rate: 1/s, burst: 3 }
- { id: r-queue, match: { identity: api_key }, algorithm: leaky_queue, rate: 1/s, burst: 3, nodelay: true }
- { id: r-slots, match: { identity: api_key }, algorithm: concurrency, limit: 3, slot_ttl: 10s }
- { id: r-ban, match: { identity: api_key }, algorithm: fixed_window, limit: 2, window: 10s, block_for: 30s }
`);

  /** The calls, in order: what each answers (a restart's effect is only ever seen in an answer). */
  async function run(make: () => SluiceLimiter, setClock: (ms: number) => void, rule: LimiterRule) {
    const answers: unknown[] = [];
    let limiter = make();
    const at = (ms: number) => {
      setClock(T0 + ms);
      limiter = make();
    };
    const call = async (id: string, costs: number[], kind?: "charge" | "probe") => {
      const r = await limiter.check({ rule, id, costs, ...(kind === undefined ? {} : { kind }) });
      answers.push({ id, results: r.results, replayed: r.replayed });
      return r;
    };
    const slots = (r: { results: readonly { ok: boolean; slot?: number }[] }) =>
      r.results.flatMap((x) => (x.ok && x.slot !== undefined ? [x.slot] : []));
    at(0);
    const first = await call("a", [1, 1]);
    at(100);
    const second = await call("b", [1, 1]);
    at(200);
    answers.push(["peek", limiter.peek({ rule })]);
    answers.push(["refund", await limiter.refund({ rule, cost: 1, admittedAtMs: T0 })]);
    at(300);
    answers.push(["release", await limiter.release({ rule, slots: slots(first).slice(0, 1) })]);
    at(400);
    answers.push(["renew", await limiter.renew({ rule, slots: [...slots(first), ...slots(second)] })]);
    at(500);
    await call("c", [1], "charge");
    at(600);
    await call("d", [1], "probe");
    await call("b", [1, 1]); // a retry of an applied call: remembered, not charged again
    at(1_700);
    await call("e", [1, 1, 1]);
    at(6_000);
    answers.push(["peek", limiter.peek({ rule })]);
    await call("f", [1, 1]);
    at(10_200); // between the end of the second call's lease (10.1 s) and of its renewal (10.4 s)
    await call("h", [1, 1, 1]);
    at(12_000);
    await call("g", [1]);
    return answers;
  }

  it.each(compiled.map((c) => [c.rule.id, c] as const))("%s", async (_id, c) => {
    const rule = limiterRuleOf(c);
    let nowMs = T0;
    const setClock = (ms: number) => {
      nowMs = ms;
    };
    const held = await runInDurableObject(await limiterFor(c.rule.id, freshKey()), (_i: SluiceLimiter, state) => {
      const one = new SluiceLimiter(state, env, () => nowMs);
      return run(() => one, setClock, rule);
    });
    const restarted = await runInDurableObject(await limiterFor(c.rule.id, freshKey()), (_i: SluiceLimiter, state) =>
      run(() => new SluiceLimiter(state, env, () => nowMs), setClock, rule),
    );
    expect(restarted).toEqual(held);
    // The calls reach both sides of the rule: some admitted, some refused (else a lost change could hide).
    const allowed = JSON.stringify(held).match(/"allowed":(true|false)/g) ?? [];
    expect(new Set(allowed).size, JSON.stringify(held)).toBe(2);
  });
});
