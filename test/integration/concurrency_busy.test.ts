/**
 * A concurrency rule whose key's object is busy (overloaded, or no answer within the time budget), injected with
 * `vi.spyOn` on the object's prototype as in failure_policy.test.ts: the take is refused (429 with Retry-After) with
 * the default `on_error: open`, never forwarded without a slot; a slot that a late answer took for a request already
 * refused is given back by its id at once, not held until `slot_ttl`, and never another request's slot; and a release
 * the object refuses as overloaded is retried.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Slot } from "../../src/algorithms/concurrency.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { SluiceLimiter } from "../../src/object/limiter.ts";
import type { CallInput, CallResult, LimiterRecord } from "../../src/protocol/store.ts";
import { bodyOf, freshIp, limiterFor, manualSleep, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const RULES = rulesFrom(`
- id: exports
  match: { route: "POST /v1/reports/export", identity: ip }
  algorithm: concurrency
  limit: 2
  slot_ttl: 10s
`);

const original = SluiceLimiter.prototype.check;

/** Each isolate's time budget ends only when the test says so (`drive`), never by a race with a real timer. */
const timers = manualSleep();
const isolate = createIsolate({ sleep: timers.sleep });
const otherTimers = manualSleep();
const otherIsolate = createIsolate({ sleep: otherTimers.sleep });

/**
 * Set from inside the object, read by the test: the object never resolves a promise the test awaits (its
 * continuation would run in the object's I/O context: "Cannot perform I/O on behalf of a different Durable Object").
 */
const flags = { endBudget: false, budgetEnded: false, answer: true };

/** Wait for `work`, ending the manual sleeps of `t` when the object asks (`flags.endBudget`) or, with `always`, often. */
async function drive<T>(t: ReturnType<typeof manualSleep>, work: Promise<T>, always: boolean): Promise<T> {
  let result: { value: T } | undefined;
  const finished = work.then((value) => (result = { value }));
  while (!(await Promise.race([finished.then(() => true), scheduler.wait(2).then(() => false)]))) {
    if (always || (flags.endBudget && !flags.budgetEnded)) {
      await t.expire();
      flags.budgetEnded = flags.endBudget;
    }
  }
  return result!.value;
}

/** The object's first `check` takes its slot, then answers only after two of the caller's budgets ended and `answer` is set (three waits). */
function lateFirstTake(): void {
  let attempt = 0;
  vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async function (this: SluiceLimiter, input: CallInput) {
    attempt += 1;
    const result: CallResult = await original.call(this, input);
    if (attempt === 1) {
      // Past the budget and the one more a late answer of a key not known busy gets (`awaitLate`: its two halves; a
      // take of a slot is not sent again).
      for (let waits = 0; waits < 3; waits++) {
        Object.assign(flags, { endBudget: true, budgetEnded: false });
        while (!flags.budgetEnded) await scheduler.wait(1);
      }
      while (!flags.answer) await scheduler.wait(1);
    }
    return result;
  });
}

/** One request through the gateway of `on` (its isolate and timers); `settle` runs its background work to its end. */
async function send(ip: string, on = { isolate, timers }) {
  const ctx = createExecutionContext();
  const impatient = { ...env, LIMITER_TIMEOUT_MS: "40" };
  const request = req("POST", "/v1/reports/export", { "CF-Connecting-IP": ip });
  const response = await drive(on.timers, handleRequest(request, impatient, ctx, RULES, on.isolate), false);
  return { response, settle: () => drive(on.timers, waitOnExecutionContext(ctx), true) };
}

/** The slots the key's object holds. */
async function slotsHeld(ip: string): Promise<readonly Slot[]> {
  return runInDurableObject(await limiterFor("exports", ip), (_instance: SluiceLimiter, state) => {
    const record = state.storage.kv.get<LimiterRecord>("record");
    return ((record?.state ?? { slots: [] }) as { slots: readonly Slot[] }).slots;
  });
}

function reset(): void {
  Object.assign(flags, { endBudget: false, budgetEnded: false, answer: true });
}

describe("a concurrency take at a busy object (on_error: open, the default)", () => {
  it("no answer within two budgets: refused with Retry-After, and the slot the late answer took is given back", async () => {
    reset();
    setNow(T0);
    const ip = freshIp();
    lateFirstTake();
    const refused = await send(ip);
    expect(refused.response.status).toBe(429);
    expect(Number(refused.response.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    expect((await bodyOf(refused.response))["violated-policies"]).toEqual(["exports"]);
    await refused.settle();
    // Released by its id when the late answer came: nothing held, long before slot_ttl.
    expect(await slotsHeld(ip)).toEqual([]);
  });

  it("an overloaded object: refused with Retry-After, never forwarded without a slot", async () => {
    reset();
    setNow(T0);
    const ip = freshIp();
    vi.spyOn(console, "error");
    vi.spyOn(SluiceLimiter.prototype, "check").mockImplementation(async () => {
      throw Object.assign(new Error("too many requests queued"), { overloaded: true });
    });
    const before = isolate.stats.fail_open;
    const refused = await send(ip);
    expect(refused.response.status).toBe(429);
    expect(Number(refused.response.headers.get("Retry-After"))).toBeGreaterThanOrEqual(1);
    await refused.settle();
    expect(isolate.stats.fail_open - before).toBe(0);
    expect(await slotsHeld(ip)).toEqual([]);
  });

  it("the late give-back frees its own slot, not another request's taken in the same ms", async () => {
    reset();
    setNow(T0);
    const ip = freshIp();
    lateFirstTake();
    flags.answer = false;
    const refused = await send(ip);
    expect(refused.response.status).toBe(429);
    // While the late answer is still on its way, another isolate's request takes the second slot, in the same ms.
    const admitted = await send(ip, { isolate: otherIsolate, timers: otherTimers });
    expect(admitted.response.status).toBe(200);
    expect((await slotsHeld(ip)).map((s) => s.atMs)).toEqual([T0, T0]);
    const [, secondSlot] = await slotsHeld(ip);
    flags.answer = true;
    await refused.settle();
    // The refused request's slot is gone; the admitted one's is still held, until its body ends.
    expect(await slotsHeld(ip)).toEqual([secondSlot]);
    await admitted.response.text();
    await admitted.settle();
    expect(await slotsHeld(ip)).toEqual([]);
  });

  it("a release the object refuses as overloaded is retried after a pause, not left to the lease", async () => {
    reset();
    setNow(T0);
    const ip = freshIp();
    const admitted = await send(ip);
    expect(admitted.response.status).toBe(200);
    vi.spyOn(console, "error");
    const release = SluiceLimiter.prototype.release;
    let attempts = 0;
    vi.spyOn(SluiceLimiter.prototype, "release").mockImplementation(async function (this: SluiceLimiter, input) {
      attempts += 1;
      if (attempts === 1) throw Object.assign(new Error("too many requests queued"), { overloaded: true });
      return release.call(this, input);
    });
    await admitted.response.text();
    await admitted.settle();
    expect(attempts).toBe(2);
    expect(await slotsHeld(ip)).toEqual([]);
  });
});
