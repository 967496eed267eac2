/**
 * The delegate tier in the Workers runtime, through the real gateway (src/edge/gateway.ts, the coalescer, the key's
 * `SluiceLimiter` and the region's `SluiceDelegate`): a key made hot (its object busy) switches its isolate's batches
 * to the delegate, which holds a share of the key's window durably; every admission stays exact for a window rule
 * across a restart of every object and a rules version change (the newer, smaller limit obeyed from then on).
 *
 * Time is frozen (`Date`, in the Worker and both objects), so the window never rolls over and no share term ends by
 * itself: every renewal here is one the delegate needed (out of units, or a newer rules version).
 */
import { abortAllDurableObjects, env, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { pinIsolateShard } from "../../src/edge/ask.ts";
import { sha256Hex } from "../../src/edge/hash.ts";
import { delegateNameOf, delegateStub, objectNameOf } from "../../src/object/names.ts";
import { DELEGATE_BUSY_CALLS_PER_S, type DelegateRecord } from "../../src/protocol/delegate.ts";
import { BUSY_CALLS_PER_S } from "../../src/protocol/store.ts";
import { compileRules } from "../../src/request/match.ts";
import { bearer, gatewayFetch, isolate, knownKey, req, resolvedFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

const RULES_YAML = (limit: number) => `
- id: hotwin
  match: { route: "GET /hot", identity: api_key }
  algorithm: fixed_window
  limit: ${limit}
  window: h
`;

async function send(rules: ReturnType<typeof compileRules>, key: string, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    const response = await gatewayFetch(rules, req("GET", "/hot", bearer(key)));
    await response.arrayBuffer();
    if (response.status === 200) admitted++;
    else expect(response.status).toBe(429);
  }
  return admitted;
}

async function delegateRecord(key: string, shard = 0): Promise<DelegateRecord | undefined> {
  const object = objectNameOf("hotwin", await sha256Hex(key));
  const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, shard), null);
  return runInDurableObject(stub, (_instance, state) => state.storage.kv.get<DelegateRecord>("delegate"));
}

describe("the delegate tier", () => {
  it("a hot key switches to its region's delegate, and stays exact across a restart and a version change", async () => {
    setNow(T0);
    const key = await knownKey();
    const v1 = compileRules(resolvedFrom(RULES_YAML(300)), 1);
    // Cold: one call per request to the key's object, and no delegate.
    expect(await send(v1, key, BUSY_CALLS_PER_S - 1)).toBe(BUSY_CALLS_PER_S - 1);
    expect(await delegateRecord(key)).toBeUndefined();
    // The call that makes the object busy answers `hot`: the next batches go to the delegate.
    const callsBefore = isolate.stats.object_calls;
    expect(await send(v1, key, 101)).toBe(101);
    const held = await delegateRecord(key);
    expect(held?.share?.kind).toBe("window");
    expect(held?.calls.length).toBeGreaterThan(0);
    expect(isolate.stats.object_calls - callsBefore).toBeGreaterThan(0);

    // Every object restarts (storage survives): the delegate's share is still there, and nothing is admitted twice.
    await abortAllDurableObjects();
    expect((await delegateRecord(key))?.share).toEqual(held?.share ?? null);
    expect(await send(v1, key, 50)).toBe(50);

    // A newer rules version with a smaller limit: the delegate renews under it; the window's count carries over.
    const v2 = compileRules(resolvedFrom(RULES_YAML(280)), 2);
    expect(await send(v2, key, 60)).toBe(280 - 250);
    expect((await delegateRecord(key))?.share?.rule.version).toBe(2);
    // An isolate still on the older version is decided under the newer one: nothing more in this window.
    expect(await send(v1, key, 20)).toBe(0);
  });

  it("a busy delegate spreads its isolates to their own shard, each with its own share, and the window stays exact", async () => {
    setNow(T0);
    pinIsolateShard(2);
    const key = await knownKey();
    const limit = 700;
    const rules = compileRules(resolvedFrom(RULES_YAML(limit)), 1);
    // Hot after BUSY_CALLS_PER_S calls; then the first delegate says busy after DELEGATE_BUSY_CALLS_PER_S calls in a
    // second (time is frozen: all of them), and this isolate's batches go to its own shard, 2.
    const first = BUSY_CALLS_PER_S + DELEGATE_BUSY_CALLS_PER_S + 10;
    expect(await send(rules, key, first)).toBe(first);
    expect((await delegateRecord(key, 2))?.share?.kind).toBe("window");
    const before = (await delegateRecord(key, 2))?.calls.length ?? 0;
    const rest = await send(rules, key, limit);
    expect((await delegateRecord(key, 2))?.calls.length).toBeGreaterThan(before);
    // Exact: never more than the limit; what is not admitted is held (unused) by a shard's share in this window.
    const held = [await delegateRecord(key, 0), await delegateRecord(key, 2)]
      .map((r) => (r?.share?.kind === "window" ? r.share.unitsLeft : 0))
      .reduce((a, b) => a + b, 0);
    expect(first + rest).toBeLessThanOrEqual(limit);
    expect(first + rest + held).toBe(limit);
    pinIsolateShard(0);
  });
});
