/**
 * The delegate tier in the Workers runtime, through the real gateway (src/edge/gateway.ts, the coalescer, the key's
 * `SluiceLimiter` and the region's `SluiceDelegate`): a key made hot (its object busy) switches its isolate's batches
 * to the delegate, which holds a share of the key's window durably; every admission stays exact for a window rule
 * across a restart of every object and a rules version change (the newer, smaller limit obeyed from then on).
 *
 * Time is frozen (`Date`, in the Worker and both objects), so the window never rolls over and no share term ends by
 * itself: every renewal here is one the delegate needed (out of units, or a newer rules version). Once hot, the
 * isolate answers most requests from the sub-leases its delegate grants it (src/protocol/sublease.ts); their terms end
 * only when the test says (`manualSleep`), so nothing runs between the test's steps.
 */
import {
  abortAllDurableObjects,
  createExecutionContext,
  env,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { pinIsolateShard } from "../../src/edge/ask.ts";
import { sha256Hex } from "../../src/edge/hash.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { delegateNameOf, delegateStub, objectNameOf } from "../../src/object/names.ts";
import type { DelegateRecord } from "../../src/protocol/delegate.ts";
import { BUSY_CALLS_PER_S, DELEGATE_BUSY_CALLS_PER_S, HOT_EARLY_MS } from "../../src/protocol/tunables.ts";
import { compileRules } from "../../src/request/match.ts";
import { bearer, knownKey, manualSleep, req, resolvedFrom, setNow, T0 } from "./helpers.ts";

/** Calls at one instant (time is frozen) from which the key's object says hot: the busy pace over `HOT_EARLY_MS`. */
const HOT_AFTER = Math.ceil((BUSY_CALLS_PER_S * HOT_EARLY_MS) / 1000);

/** This file's isolate: its sleeps (call budgets, lease terms) end only when `manual.expire()` says. */
const manual = manualSleep();
const isolate = createIsolate({ sleep: manual.sleep });
/** The requests' contexts, waited for at the end of each test (a lease's end is background work of its request). */
const contexts: ExecutionContext[] = [];

async function gatewayFetch(rules: ReturnType<typeof compileRules>, request: Request): Promise<Response> {
  const ctx = createExecutionContext();
  contexts.push(ctx);
  return handleRequest(request, env, ctx, rules, isolate);
}

/**
 * End every lease term and budget (time frozen: an unused sub-lease is given back, not renewed) until the requests'
 * background work is done. A term's end may start a call whose own sleep registers only after that call's round trip
 * (an object's RPC, slower on a loaded machine): five rounds of `expire` were not always enough, and the test hung.
 */
async function settle(): Promise<void> {
  let done = false;
  const all = Promise.all(contexts.splice(0).map((ctx) => waitOnExecutionContext(ctx))).finally(() => {
    done = true;
  });
  for (let i = 0; i < 2_000 && !done; i++) await manual.expire();
  await all;
}

afterEach(async () => {
  await settle();
  vi.useRealTimers();
});

const RULES_YAML = (limit: number) => `
- id: hotwin
  match: { route: "GET /hot", identity: api_key }
  algorithm: fixed_window
  limit: ${limit}
  window: h
`;

/** The test's clock: it moves `STEP_MS` per request (the window, an hour, never rolls over). */
const STEP_MS = 5;
let nowMs = T0;

async function send(rules: ReturnType<typeof compileRules>, key: string, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    nowMs += STEP_MS;
    setNow(nowMs);
    const response = await gatewayFetch(rules, req("GET", "/hot", bearer(key)));
    await response.arrayBuffer();
    if (response.status === 200) admitted++;
    else expect(response.status).toBe(429);
  }
  return admitted;
}

async function delegateRecord(key: string, shard = 0, rule = "hotwin"): Promise<DelegateRecord | undefined> {
  const object = objectNameOf(rule, await sha256Hex(key));
  const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, shard), null);
  return runInDurableObject(stub, (_instance, state) => state.storage.kv.get<DelegateRecord>("delegate"));
}

/** Make a delegate busy: `DELEGATE_BUSY_CALLS_PER_S` calls decided in this second, in its record and its instance. */
async function markBusy(key: string, shard: number): Promise<void> {
  const object = objectNameOf("hotwin", await sha256Hex(key));
  const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, shard), null);
  await runInDurableObject(stub, (instance, state) => {
    const record = state.storage.kv.get<DelegateRecord>("delegate")!;
    const load = { second: Math.floor(Date.now() / 1000), curr: DELEGATE_BUSY_CALLS_PER_S, prev: 0 };
    const busy: DelegateRecord = { ...record, load };
    state.storage.kv.put("delegate", busy);
    (instance as unknown as { record: DelegateRecord }).record = busy;
  });
}

describe("the delegate tier", () => {
  it("a hot key switches to its region's delegate, and stays exact across a restart and a version change", async () => {
    nowMs = T0;
    setNow(T0);
    const key = await knownKey();
    const v1 = compileRules(resolvedFrom(RULES_YAML(300)), 1);
    // Cold: one call per request to the key's object, and no delegate.
    expect(await send(v1, key, HOT_AFTER - 1)).toBe(HOT_AFTER - 1);
    expect(await delegateRecord(key)).toBeUndefined();
    // The call that makes the object busy (at its pace: `HOT_EARLY_MS`) answers `hot`: the next batches go to the
    // delegate.
    const callsBefore = isolate.stats.object_calls;
    const leaseAnswersBefore = isolate.stats.lease_answers;
    expect(await send(v1, key, 101)).toBe(101);
    const held = await delegateRecord(key);
    expect(held?.share?.kind).toBe("window");
    expect(held?.calls.length).toBeGreaterThan(0);
    expect(isolate.stats.object_calls - callsBefore).toBeGreaterThan(0);
    // The delegate granted this isolate a sub-lease out of its share, and the isolate answered from it: most of the
    // 101 requests never left the isolate (a quarter of the limit at most per sub-lease: 75 units).
    expect(held?.calls.some((c) => c.leaseUnits > 0)).toBe(true);
    expect(isolate.stats.lease_answers - leaseAnswersBefore).toBeGreaterThan(50);
    expect(held?.calls.length).toBeLessThan(20);

    // Every object restarts (storage survives): the delegate's share is still there, and nothing is admitted twice.
    await abortAllDurableObjects();
    expect((await delegateRecord(key))?.share).toEqual(held?.share ?? null);
    expect(await send(v1, key, 50)).toBe(50);

    // A newer rules version with a smaller limit: the delegate renews under it; the window's count carries over.
    const v2 = compileRules(resolvedFrom(RULES_YAML(280)), 2);
    const sent = HOT_AFTER - 1 + 101 + 50;
    expect(await send(v2, key, 280 - sent + 30)).toBe(280 - sent);
    expect((await delegateRecord(key))?.share?.rule.version).toBe(2);
    // An isolate still on the older version is decided under the newer one: nothing more in this window.
    expect(await send(v1, key, 20)).toBe(0);
  });

  it("a busy delegate spreads its isolates to their own shard, each with its own share, and the window stays exact", async () => {
    nowMs = T0;
    setNow(T0);
    pinIsolateShard(2);
    const key = await knownKey();
    const limit = 700;
    const rules = compileRules(resolvedFrom(RULES_YAML(limit)), 1);
    // Hot after HOT_AFTER calls: the delegate, shard 0, decides from here (and grants sub-leases).
    const first = HOT_AFTER + 10;
    expect(await send(rules, key, first)).toBe(first);
    expect((await delegateRecord(key, 0))?.share?.kind).toBe("window");
    // Shard 0 has decided DELEGATE_BUSY_CALLS_PER_S calls in this second (other isolates' batches, as one isolate
    // answering from its sub-leases makes few): its next answer says busy, and this isolate goes to its own shard, 2.
    await markBusy(key, 0);
    // Its next call (its sub-lease used up or ended: 100 units, 500 ms at 5 ms a request) is answered busy.
    const second = await send(rules, key, 250);
    expect((await delegateRecord(key, 2))?.share?.kind).toBe("window");
    const before = (await delegateRecord(key, 2))?.calls.length ?? 0;
    const rest = await send(rules, key, limit);
    expect((await delegateRecord(key, 2))?.calls.length).toBeGreaterThan(before);
    // Exact: never more than the limit; what is not admitted is held (unused) by a shard's share in this window, by
    // units a shard keeps to give back to the key's object, or by the isolate's sub-lease.
    const object = objectNameOf("hotwin", await sha256Hex(key));
    const subleased = isolate.calls.leaseOf(object)?.unitsLeft ?? 0;
    const held = [await delegateRecord(key, 0), await delegateRecord(key, 2)]
      .map(
        (r) =>
          (r?.share?.kind === "window" ? r.share.unitsLeft : 0) + (r?.giveBack ?? []).reduce((a, b) => a + b.units, 0),
      )
      .reduce((a, b) => a + b, subleased);
    expect(first + second + rest).toBeLessThanOrEqual(limit);
    expect(first + second + rest + held).toBe(limit);
    pinIsolateShard(0);
  });

  it("an admin reset of a hot key forgets its delegates' shares too, not only the key's object", async () => {
    nowMs = T0;
    setNow(T0);
    const key = await knownKey();
    const rules = compileRules(resolvedFrom(RULES_YAML(300)), 1);
    expect(await send(rules, key, HOT_AFTER + 10)).toBe(HOT_AFTER + 10);
    expect((await delegateRecord(key))?.share?.kind).toBe("window");
    const admin = { Authorization: "Bearer test-admin-token-0123456789abcdef" };
    const reset = await gatewayFetch(
      rules,
      req("POST", "/_sluice/reset?rule=hotwin", { ...admin, "X-Sluice-Key": key }),
    );
    expect(reset.status).toBe(200);
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    // The delegate's share (units the forgotten record had charged) is gone with it: it admits nothing from it.
    expect(await delegateRecord(key)).toBeUndefined();
    // The window starts again from the key's fresh object: never more than the limit from here.
    const after = await send(rules, key, 320);
    expect(after).toBeLessThanOrEqual(300);
    expect(after).toBeGreaterThan(200);
  });

  it("a slow rate rule below its rate keeps its spare home: the delegate's durable share says so", async () => {
    // share_grant.ts `rateGrant`'s spare and delegate_run.ts `passRefused` through the real objects: the grant's
    // `spare` crosses the RPC to the delegate and is stored with its share, so a restarted delegate still passes
    // refusals on.
    nowMs = T0;
    setNow(T0);
    const slowKey = await knownKey();
    const yaml = `
- id: slowrate
  match: { route: "GET /hot", identity: api_key }
  algorithm: gcra
  rate: 900/s
  burst: 900
`;
    const slow = compileRules(resolvedFrom(yaml), 1);
    // 200 requests a second (5 ms apart) against 900/s: hot after HOT_AFTER calls, every one admitted.
    expect(await send(slow, slowKey, HOT_AFTER + 40)).toBe(HOT_AFTER + 40);
    const held = (await delegateRecord(slowKey, 0, "slowrate"))?.share;
    expect(held?.kind).toBe("rate");
    expect(held?.spare).toBe(true);
    expect(held?.parts).toBeLessThan(1000); // the rest of the rate stays in the key's object's direct slice
    await abortAllDurableObjects();
    expect((await delegateRecord(slowKey, 0, "slowrate"))?.share?.spare).toBe(true);
    expect(await send(slow, slowKey, 40)).toBe(40);
  });
  it("a cold key's delegate sends what a passed batch gives back on with it: the key's object counts it once", async () => {
    // delegate_run.ts's pass-through through the real objects. A quiet key's delegate asks for no share after the key's
    // object said cold, so a unit given back must go with the batch: kept for an ask, it was lost (chaos.test.ts, seed
    // 38: a key charged 1 with none of its requests let through).
    nowMs = T0;
    setNow(T0);
    const key = await knownKey();
    const object = objectNameOf("hotwin", await sha256Hex(key));
    const rule = { id: "hotwin", params: compileRules(resolvedFrom(RULES_YAML(10)), 1)[0]!.params, version: 1 };
    const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, 0), null);
    const holder = "weur.0";
    const first = await stub.check({ object, holder, rule, id: "b1", costs: [1] });
    const admitted = first.results[0]!;
    if (!admitted.ok) throw new Error("the first request was not decided");
    expect(admitted.decision.allowed).toBe(true);
    const atMs = admitted.atMs;
    setNow(T0 + STEP_MS);
    // Another rule refused the first request: its unit comes back with the isolate's next batch.
    const second = await stub.check({ object, holder, rule, id: "b2", costs: [1], giveBack: [{ units: 1, atMs }] });
    expect(second.results[0]).toMatchObject({ ok: true, decision: { allowed: true } });
    const limiter = env.LIMITER.get(env.LIMITER.idFromName(object));
    expect((await limiter.peek({ rule })).remaining).toBe(9);
    expect((await delegateRecord(key))?.giveBack).toEqual([]);
  });
});
