/**
 * Shed tokens over the real Durable Object RPC (src/object/limiter.ts `check`, as a delegate's `sendShed` calls it,
 * src/protocol/delegate_run.ts): the key's object takes what a smaller share's slice dropped from the instant its
 * freed parts are its own again (`atMs`), never before. Stands for the wire a delegate uses in production: the
 * `shed` flag and `atMs` cross the RPC as sent, and the object's clock (frozen here) decides.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LimiterRule } from "../../src/protocol/store.ts";
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
});
