/**
 * Hot marks in the Workers runtime (src/isolate/hot_marks.ts, src/edge/hot_mark_cache.ts): the Cache API's
 * `caches.default` keeps a mark; an isolate that finds a key hot through the real gateway marks it; a new isolate
 * (a redeploy) that finds the mark sends its first batch to the region's delegate, not to the key's object; so does
 * every isolate for a key of a fast rule, whatever its key (hot by construction).
 *
 * Time is frozen (`Date`, in the Worker and both objects), as in tier.test.ts.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/edge/hash.ts";
import { cacheMarks } from "../../src/edge/hot_mark_cache.ts";
import { adminKeyHash } from "../../src/edge/rule_keys.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { delegateNameOf, delegateStub, objectNameOf } from "../../src/object/names.ts";
import type { DelegateRecord } from "../../src/protocol/delegate.ts";
import { BUSY_CALLS_PER_S, HOT_EARLY_MS } from "../../src/protocol/tunables.ts";
import { compileRules } from "../../src/request/match.ts";
import { bearer, knownKey, req, resolvedFrom, setNow, T0 } from "./helpers.ts";

/** Calls at one instant (time is frozen) from which the key's object says hot: the busy pace over `HOT_EARLY_MS`. */
const HOT_AFTER = Math.ceil((BUSY_CALLS_PER_S * HOT_EARLY_MS) / 1000);

afterEach(() => {
  vi.useRealTimers();
});

const RULES = compileRules(
  resolvedFrom(`
- id: markwin
  match: { route: "GET /hot", identity: api_key }
  algorithm: fixed_window
  limit: 100000
  window: h
`),
  1,
);

async function send(iso: ReturnType<typeof createIsolate>, key: string, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    const ctx = createExecutionContext();
    const response = await handleRequest(req("GET", "/hot", bearer(key)), env, ctx, RULES, iso);
    await waitOnExecutionContext(ctx);
    await response.arrayBuffer();
    if (response.status === 200) admitted++;
  }
  return admitted;
}

describe("hot marks", () => {
  it("caches.default keeps a mark for its ttl", async () => {
    const marks = cacheMarks();
    expect(marks).not.toBeNull();
    expect(await marks?.read("limiter:markwin:none")).toBeNull();
    await marks?.write("limiter:markwin:one", { spread: 0.5 });
    expect(await marks?.read("limiter:markwin:one")).toEqual({ spread: 0.5 });
    await marks?.write("limiter:markwin:one", { spread: 0.25, atMs: T0 });
    expect(await marks?.read("limiter:markwin:one")).toEqual({ spread: 0.25, atMs: T0 });
  });

  it("a key found hot is marked; a new isolate that finds the mark goes to the delegate from its first request", async () => {
    setNow(T0);
    const key = await knownKey();
    const object = objectNameOf("markwin", await sha256Hex(key));
    const first = createIsolate();
    // Cold, then hot: the call that makes the key's object busy (at its pace) answers `hot`, and the isolate marks the key (a
    // window rule's spread decays: with when it was written, key_state.ts `spreadDecays`).
    expect(await send(first, key, HOT_AFTER + 1)).toBe(HOT_AFTER + 1);
    expect(await cacheMarks()?.read(object)).toEqual({ spread: 0, atMs: T0 });
    const delegateCalls = async () => {
      const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, 0), null);
      const record = await runInDurableObject(stub, (_o, state) => state.storage.kv.get<DelegateRecord>("delegate"));
      return record?.calls.length ?? 0;
    };
    const before = await delegateCalls();
    // A new isolate (a redeploy): no call of its own to the key's object before it goes to the delegate.
    const second = createIsolate();
    expect(await send(second, key, 1)).toBe(1);
    expect(second.stats.object_calls).toBe(1);
    expect(await delegateCalls()).toBe(before + 1);
  });

  it("a fast `key: global` rule's key is hot by construction: a new isolate's first request goes to its delegate", async () => {
    setNow(T0);
    const rules = compileRules(
      resolvedFrom(`
- id: gfast
  match: { route: "GET /g/fast" }
  key: global
  algorithm: gcra
  rate: 5000/s
  burst: 1000
- id: gslow
  match: { route: "GET /g/slow" }
  key: global
  algorithm: gcra
  rate: 200/s
  burst: 200
`),
      1,
    );
    const objectOf = async (ruleId: string) => {
      const compiled = rules.find((c) => c.rule.id === ruleId)!;
      const hash = await adminKeyHash(compiled, null, { ipv6PrefixBits: 64, keyHashSecret: null });
      if (typeof hash !== "string") throw new Error(hash.error);
      return objectNameOf(ruleId, hash);
    };
    const delegateRecord = async (object: string) => {
      const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, 0), null);
      return runInDurableObject(stub, (_o, state) => state.storage.kv.get<DelegateRecord>("delegate"));
    };
    const iso = createIsolate();
    const get = async (path: string) => {
      const ctx = createExecutionContext();
      const response = await handleRequest(req("GET", path, { "CF-Connecting-IP": "192.0.2.7" }), env, ctx, rules, iso);
      await waitOnExecutionContext(ctx);
      await response.arrayBuffer();
      return response.status;
    };
    // The delegate passes a first batch on at once and asks for its share in the background (delegate_run.ts
    // `passFirst`): the request's context ends before that ask may be answered, and until it is, the record is a new
    // delegate's (`hot: true`). Read it once the ask is answered (its grant says hot or not), within 5 s of real time.
    const answered = async (object: string) => {
      for (let i = 0; i < 250; i++) {
        const record = await delegateRecord(object);
        if (record !== undefined && (record.share !== null || record.hot === false)) return record;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return delegateRecord(object);
    };
    const fast = await objectOf("gfast");
    expect(await get("/g/fast")).toBe(200);
    // Its delegate asked the key's object for a share, heard the key is cold (one caller), and passed the request on.
    expect(await answered(fast)).toMatchObject({ share: null, hot: false });
    // Told cold, this isolate sends the key's next batches to the key's object, and needs no mark for it.
    expect(iso.calls.tracks(fast)).toBe(true);
    expect(iso.calls.markOf(fast)).toBeNull();
    // A slower global rule's key is not hot by construction: its first request goes to the key's object.
    expect(await get("/g/slow")).toBe(200);
    expect(await delegateRecord(await objectOf("gslow"))).toBeUndefined();
  });

  it("a fast rule keyed per API key is hot by construction too: a key's first request goes to its delegate, a slow rule's not", async () => {
    setNow(T0);
    const rules = compileRules(
      resolvedFrom(`
- id: kfast
  match: { route: "GET /k/fast", identity: api_key }
  algorithm: token_bucket
  rate: 5000/s
  burst: 1000
- id: kslow
  match: { route: "GET /k/slow", identity: api_key }
  algorithm: token_bucket
  rate: 200/s
  burst: 200
`),
      1,
    );
    const key = await knownKey();
    const hash = await sha256Hex(key);
    const iso = createIsolate();
    const get = async (path: string) => {
      const ctx = createExecutionContext();
      const response = await handleRequest(req("GET", path, bearer(key)), env, ctx, rules, iso);
      await waitOnExecutionContext(ctx);
      await response.arrayBuffer();
      return response.status;
    };
    const delegateRecord = (object: string) => {
      const stub = delegateStub(env.DELEGATE!, delegateNameOf(object, null, 0), null);
      return runInDurableObject(stub, (_o, state) => state.storage.kv.get<DelegateRecord>("delegate"));
    };
    const fast = objectNameOf("kfast", hash);
    expect(await get("/k/fast")).toBe(200);
    // Through the delegate (it asked the key's object for a share, so its record exists), which passed the request on:
    // a quiet key gets no share, and this isolate, told cold, calls the key's object directly from now on.
    expect(await delegateRecord(fast)).toMatchObject({ share: null });
    expect(iso.calls.tracks(fast)).toBe(true);
    expect(iso.calls.markOf(fast)).toBeNull();
    // A slower rule's key is not hot by construction: its first request goes to the key's object, no delegate.
    expect(await get("/k/slow")).toBe(200);
    expect(await delegateRecord(objectNameOf("kslow", hash))).toBeUndefined();
  });
});
