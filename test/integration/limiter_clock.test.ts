/**
 * The limiter object reads time only from its injected clock. Built on an object's own storage with a clock the test
 * holds (the runtime builds it with the system clock), it decides, refills, arms its alarm and forgets an idle key by
 * that clock, while the real clock stands wherever it is: no fake timers, no waiting.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { alarmSpreadMs, SluiceLimiter } from "../../src/object/limiter.ts";
import { CALL_MEMORY_MS } from "../../src/protocol/store.ts";
import { freshKey, limiterFor, rulesFrom, T0 } from "./helpers.ts";

const [compiled] = rulesFrom(`
- id: clocked
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/s
  burst: 2
`);
const rule = { id: compiled!.rule.id, params: compiled!.params };

describe("the limiter object's clock", () => {
  it("decides, refills, arms its alarm and expires by the injected clock, not Date.now()", async () => {
    let nowMs = T0; // 2030: far from the real clock, so a stray Date.now() would show
    const stub = await limiterFor("clocked", freshKey());
    await runInDurableObject(stub, async (_runtimeInstance: SluiceLimiter, state) => {
      const limiter = new SluiceLimiter(state, env, () => nowMs);
      const burst = await limiter.check({ rule, id: "call-1", costs: [1, 1, 1] });
      expect(burst.atMs).toBe(T0);
      expect(burst.results.map((r) => r.ok && r.decision.allowed)).toEqual([true, true, false]);
      expect(limiter.peek({ rule })).toMatchObject({ remaining: 0, retryAfterMs: 1000 });

      // The record is as good as none once the bucket is full (T0 + 2 s) and the call is forgotten: the alarm's time.
      // (Put off by the object's own spread, so that the keys of a window do not all wake at its end.)
      const spread = alarmSpreadMs(state.id.toString());
      expect(await state.storage.getAlarm()).toBe(T0 + CALL_MEMORY_MS + spread);

      nowMs = T0 + 1000;
      const refilled = await limiter.check({ rule, id: "call-2", costs: [1] });
      expect(refilled.atMs).toBe(T0 + 1000);
      expect(refilled.results.map((r) => r.ok && r.decision.allowed)).toEqual([true]);

      // The alarm fires as scheduled, but by this clock the key was used since: it re-arms for the second call.
      nowMs = T0 + CALL_MEMORY_MS;
      await limiter.alarm();
      expect(state.storage.kv.get("record")).toBeDefined();
      expect(await state.storage.getAlarm()).toBe(T0 + 1000 + CALL_MEMORY_MS + spread);

      nowMs = T0 + 1000 + CALL_MEMORY_MS;
      await limiter.alarm();
      expect(state.storage.kv.get("record")).toBeUndefined();
      expect(limiter.peek({ rule })).toMatchObject({ remaining: 2, retryAfterMs: null });
    });
  });
});
