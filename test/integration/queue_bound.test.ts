/**
 * The coalescer's bound on requests waiting for one key, through the real gateway and Durable Object: while a key's
 * call hangs, `maxWaiting` requests wait for the next call and every one beyond them is refused at once (429 naming
 * the rule, with a Retry-After), as an overloaded object's request is, whatever the rule's `on_error`: a flood is never
 * admitted uncounted. None is queued, so a flood on one key cannot grow the isolate's memory; those that waited are
 * decided as usual once the call ends. (The unit test floods the same bound with 200,000 requests.)
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { TEMPORARY_REDUCED_CAPACITY_TYPE } from "../../src/edge/refusals.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import type { SluiceLimiter } from "../../src/object/limiter.ts";
import { bearer, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: bound-closed
  match: { route: "GET /closed", identity: api_key }
  algorithm: fixed_window
  limit: 3
  window: h
  on_error: closed
- id: bound-open
  match: { route: "GET /open", identity: api_key }
  algorithm: fixed_window
  limit: 3
  window: h
`);

const MAX_WAITING = 4;

/** The real namespace, with every `check` held until `release()` (a hung object), and a count of the calls made. */
function hangingNamespace(real: DurableObjectNamespace<SluiceLimiter>) {
  const held: (() => void)[] = [];
  let calls = 0;
  const namespace = {
    idFromName: (name: string) => real.idFromName(name),
    get(id: DurableObjectId) {
      const stub = real.get(id);
      return {
        check: (input: unknown) => {
          calls++;
          return new Promise<void>((go) => held.push(go)).then(() => stub.check(input as never));
        },
        refund: (input: unknown) => stub.refund(input as never),
      };
    },
  };
  return {
    namespace: namespace as unknown as DurableObjectNamespace<SluiceLimiter>,
    calls: () => calls,
    release: () => {
      for (const go of held.splice(0)) go();
    },
  };
}

/** Poll (on the runtime's own timer) until `done()`; the requests in flight move on meanwhile. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000 && !done(); i++) await scheduler.wait(1);
  expect(done()).toBe(true);
}

describe("requests waiting for one key are bounded", () => {
  for (const [path, rule, onError] of [
    ["/closed", "bound-closed", "closed"],
    ["/open", "bound-open", "open"],
  ] as const) {
    it(`beyond ${MAX_WAITING} waiting, a request is refused at once (on_error: ${onError} plays no part)`, async () => {
      setNow(T0);
      vi.spyOn(console, "error").mockImplementation(() => {});
      vi.spyOn(console, "log").mockImplementation(() => {});
      const key = await knownKey(`sk_bound_${onError}`);
      const hanging = hangingNamespace(env.LIMITER);
      const chaotic = { ...env, LIMITER: hanging.namespace };
      // A budget that never runs out: what is tested is the bound, not a timeout.
      const isolate = createIsolate({ sleep: () => new Promise(() => {}), maxWaiting: MAX_WAITING });
      const send = async () => {
        const ctx = createExecutionContext();
        const response = await handleRequest(req("GET", path, bearer(key)), chaotic, ctx, rules, isolate);
        const body = (await response.json()) as {
          type?: string;
          "violated-policies"?: string[];
          decisions?: { rule: string }[];
        };
        await waitOnExecutionContext(ctx);
        return { status: response.status, type: response.headers.get("content-type"), body };
      };
      const leader = send();
      await until(() => hanging.calls() === 1); // its call is in flight, and hangs
      const waiting = Array.from({ length: MAX_WAITING }, send);
      await until(() => isolate.calls.size.waiting === MAX_WAITING);
      const refused = await Promise.all(Array.from({ length: 3 }, send));
      expect(isolate.stats.queue_overflows).toBe(3);
      expect(isolate.calls.size.waiting).toBe(MAX_WAITING);
      for (const r of refused) {
        expect(r.status).toBe(429);
        expect(r.type).toContain("application/problem+json");
        expect(r.body).toMatchObject({ "violated-policies": [rule] });
        expect(r.body.type).not.toBe(TEMPORARY_REDUCED_CAPACITY_TYPE);
      }
      expect(isolate.stats.fail_open + isolate.stats.fail_closed).toBe(0);
      expect(hanging.calls()).toBe(1); // the refused requests cost the object nothing
      hanging.release();
      await until(() => hanging.calls() === 2); // the waiting ones go in the next call, together
      hanging.release();
      const decided = await Promise.all([leader, ...waiting]);
      // Limit 3: the leader and two of the waiting are admitted, the other two denied.
      expect(decided.map((r) => r.status).sort()).toEqual([200, 200, 200, 429, 429]);
    });
  }
});
