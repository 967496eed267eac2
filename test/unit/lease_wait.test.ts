/**
 * An isolate whose sub-lease ask found its delegate's rate slice empty (src/protocol/sublease.ts `refillWaitMs`, sent
 * as `CallResult.leaseWaitMs`): it refuses from what it knows only until the slice could grant its ask again, then
 * calls its delegate, instead of refusing for the ask's whole term while the slice refills for nobody. Real coalescer
 * (src/isolate/coalesce.ts) over simulated time; the key's object and the delegate are scripted.
 */
import { describe, expect, it } from "vitest";
import { type Asked, type CoalesceCounters, Coalescer, type DelegateRoute } from "../../src/isolate/coalesce.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CallInput, CallResult, CheckResult } from "../../src/protocol/store.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);
const HOP_MS = 5;
const params = tokenBucket(1000, 1000, 1000);

function decided(allowed: boolean, nowMs: number): CheckResult {
  const decision = allowed
    ? { allowed, remaining: 1, resetAfterMs: 1, retryAfterMs: null, delayMs: 0 }
    : { allowed, remaining: 0, resetAfterMs: 400, retryAfterMs: 400, delayMs: 0 };
  return { ok: true, atMs: nowMs, decision };
}

function world(waitMs: number | undefined) {
  const clock = new EventClock(T0);
  const hop = async <T>(work: () => T): Promise<T> => {
    await clock.sleep(HOP_MS);
    const out = work();
    await clock.sleep(HOP_MS);
    return out;
  };
  // The key's object: admits, and says the key is hot.
  const key: ObjectTransport = {
    call: (_name, input) =>
      hop(
        (): CallResult => ({
          atMs: clock.nowMs(),
          results: input.costs.map(() => decided(true, clock.nowMs())),
          lease: null,
          replayed: false,
          hot: true,
        }),
      ),
    refund: () => Promise.resolve(null),
  };
  // The delegate: its slice is empty from `emptyFromMs` on (refuses, lends nothing, and says when it will hold the ask).
  const calls: { atMs: number; input: CallInput }[] = [];
  let emptyFromMs = Number.POSITIVE_INFINITY;
  const delegate: ObjectTransport = {
    call: (_name, input) =>
      hop((): CallResult => {
        calls.push({ atMs: clock.nowMs(), input });
        const empty = clock.nowMs() >= emptyFromMs;
        const ask = input.lease;
        return {
          atMs: clock.nowMs(),
          results: input.costs.map(() => decided(!empty, clock.nowMs())),
          lease: !empty && ask != null ? { units: ask.units, atMs: clock.nowMs(), forMs: ask.ttlMs } : null,
          ...(empty && ask != null && waitMs !== undefined ? { leaseWaitMs: waitMs } : {}),
          replayed: false,
          hot: true,
        };
      }),
    refund: () => Promise.resolve(null),
  };
  const counters: CoalesceCounters = newStats();
  let ids = 0;
  const coalescer = new Coalescer({ clock: clock.clock, sleep: clock.sleep, counters, newId: () => `n${ids++}` });
  const route: DelegateRoute = { transport: delegate, name: "r:key@weur.0" };
  const ask = (): Promise<Asked> =>
    coalescer.ask({
      transport: key,
      name: "r:key",
      rule: { id: "r", params, version: 1 },
      cost: 1,
      timeoutMs: 250,
      lease: null,
      delegate: route,
    });
  return {
    clock,
    calls,
    ask,
    empty: (atMs: number) => {
      emptyFromMs = atMs;
    },
  };
}

/** A request every `gapMs` from now until `untilMs`. */
async function steady(w: ReturnType<typeof world>, gapMs: number, untilMs: number): Promise<void> {
  const pending: Promise<Asked>[] = [];
  while (w.clock.nowMs() < untilMs) {
    pending.push(w.ask());
    await w.clock.runUntil(w.clock.nowMs() + gapMs);
  }
  await w.clock.runUntil(untilMs + 100);
  await Promise.all(pending);
}

describe("a sub-lease ask that found its delegate's slice empty", () => {
  for (const waitMs of [40, undefined]) {
    const what =
      waitMs === undefined ? "without leaseWaitMs, only after the ask's term" : "once the slice could grant it";
    it(`asks its delegate again ${what}`, async () => {
      const w = world(waitMs);
      // Hot, then sub-leases from the delegate: 100 requests a second.
      await steady(w, 10, T0 + 1500);
      expect(w.calls.some((c) => c.input.lease != null)).toBe(true);
      const emptyAt = w.clock.nowMs();
      w.empty(emptyAt);
      await steady(w, 10, emptyAt + 1000);
      // The first ask the empty slice answered, then the next delegate call.
      const refused = w.calls.findIndex((c) => c.atMs >= emptyAt && c.input.lease != null);
      expect(refused).toBeGreaterThanOrEqual(0);
      const gapMs = w.calls[refused + 1]!.atMs - w.calls[refused]!.atMs;
      if (waitMs === undefined) expect(gapMs).toBeGreaterThan(200);
      else {
        expect(gapMs).toBeGreaterThanOrEqual(waitMs);
        expect(gapMs).toBeLessThan(waitMs + 40);
      }
    });
  }
});
