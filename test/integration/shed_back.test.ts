/**
 * Shed tokens over the real Durable Object RPC (src/object/limiter.ts `check`, as a delegate's `sendShed` calls it,
 * src/protocol/delegate_run.ts): the key's object takes what a smaller share's slice dropped from the instant its
 * freed parts are its own again (`atMs`), never before; and its `share` RPC says when that is (`freedAtMs`) on a
 * renewal with fewer parts. Stands for the wire a delegate uses in production: `freedAtMs`, the `shed` flag and `atMs`
 * cross the RPC as sent, and the object's clock (frozen here, moved by the test) decides.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ShareAsk } from "../../src/protocol/share.ts";
import type { LimiterRule } from "../../src/protocol/store.ts";
import { shareAskOf } from "../support/held_share.ts";
import { tokenBucket } from "../support/params.ts";
import { limiterFor, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

/** 1,000/s, burst 1,000. */
const rule: LimiterRule = { id: "shed-wire", params: tokenBucket(1000, 1000, 1000), version: 1 };

describe("a delegate's shed tokens at the key's object", () => {
  it("are not taken before their parts are freed, and all taken from then while the key lacked them", async () => {
    setNow(T0);
    const stub = await limiterFor(rule.id, `shed-${crypto.randomUUID()}`);
    const spent = await stub.check({ rule, id: "c0", costs: [400] });
    expect(spent.results.map((r) => r.ok && r.decision.allowed)).toEqual([true]);
    const early = await stub.check({ rule, id: "s0", costs: [], giveBack: [{ units: 300, atMs: T0 + 1, shed: true }] });
    expect(early.refunded?.remaining).toBe(600);
    const due = await stub.check({ rule, id: "s1", costs: [], giveBack: [{ units: 300, atMs: T0, shed: true }] });
    expect(due.refunded?.remaining).toBe(900);
  });

  it("a renewal with fewer parts than held says when the rest are freed (`freedAtMs`), over the share RPC", async () => {
    const stub = await limiterFor(rule.id, `shed-${crypto.randomUUID()}`);
    const ask = (holder: string, id: string, demand: number, over: Partial<ShareAsk> = {}): ShareAsk =>
      shareAskOf(rule, holder, id, demand, over);
    setNow(T0);
    expect((await stub.share(ask("weur.0", "a1", 600))).freedAtMs).toBeUndefined();
    setNow(T0 + 1);
    await stub.share(ask("enam.0", "b1", 600));
    setNow(T0 + 200);
    const grown = await stub.share(ask("weur.0", "a2", 600, { holding: "a1", oldForMs: 100 }));
    expect([grown.parts, grown.freedAtMs]).toEqual([500, undefined]);
    setNow(T0 + 400);
    const cut = await stub.share(ask("weur.0", "a3", 60, { holding: "a2", oldForMs: 400 }));
    // Its 500 parts stay promised until its old share's term ends (granted at T0 + 200 for 500 ms), before the 400 ms
    // it said it may still use them.
    expect([cut.parts, cut.freedAtMs]).toEqual([91, T0 + 700]);
  });
});
