/**
 * Exact tables for what an isolate decides without its key's object (src/isolate/key_state.ts, coalesce_calls.ts):
 * whether the key is hot here, an overload teaching hot, last known refusals while the key is short (never an
 * admission: an ended share is not reused), the overload backoff, and a short key noted from a short grant.
 */
import { describe, expect, it } from "vitest";
import { Calls } from "../../src/isolate/coalesce_calls.ts";
import type { Asked, AskInput, HeldLease } from "../../src/isolate/coalesce_types.ts";
import { KeyState } from "../../src/isolate/key_state.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CheckResult } from "../../src/protocol/store.ts";
import { HOT_HOLD_MS, OVERLOAD_BACKOFF_MS } from "../../src/protocol/tunables.ts";
import { slidingLog, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const transport: ObjectTransport = {
  call: () => Promise.reject(new Error("unused")),
  refund: () => Promise.resolve(null),
};
const key = (over: Partial<AskInput> = {}, state: Partial<KeyState> = {}): KeyState =>
  Object.assign(
    new KeyState(
      {
        transport,
        name: "r:key",
        rule: { id: "r", params: tokenBucket(10, 1000, 20) },
        cost: 1,
        timeoutMs: 250,
        lease: { ttlMs: 2000, units: null, above: null },
        ...over,
      },
      T0,
    ),
    state,
  );
const ctxAt = (now: number, spread = 0) => {
  let clock = now;
  const counters = newStats();
  // The coalescer's calls, with a fixed `spread` (at most `spread` ms).
  const ctx = new (class extends Calls {
    override spread(range: number): number {
      return Math.min(range, spread);
    }
  })({ clock: () => clock, sleep: () => new Promise(() => {}), counters, newId: () => "id" });
  return { ctx, counters, set: (ms: number) => (clock = ms) };
};
// A lease of a 2000 ms term that ended at T0 + 100: the key counts as hot a term after it.
const grant = { grantHotUntilMs: T0 + 2100 };
const resultOf = (asked: Asked | null) => (asked?.kind === "answered" ? asked.result : null);
const held = (over: Partial<HeldLease> = {}): HeldLease => ({
  unitsLeft: 3,
  units: 5,
  atMs: T0 - 5,
  endsAtMs: T0 + 500,
  returned: false,
  ...over,
});

describe("isHot", () => {
  it("is hot while told hot, busy or overloaded, holding a lease, or within a term after its last grant", () => {
    expect(key().isHot(T0)).toBe(false);
    for (const field of ["hotUntilMs", "busyUntilMs", "overloadedUntilMs"] as const) {
      expect(key({}, { [field]: T0 + 1 }).isHot(T0)).toBe(true);
      expect(key({}, { [field]: T0 }).isHot(T0)).toBe(false);
    }
    expect(key({}, { lease: held() }).isHot(T0 + 10_000)).toBe(true);
    expect(key({}, grant).isHot(T0 + 2099)).toBe(true);
    expect(key({}, grant).isHot(T0 + 2100)).toBe(false);
  });
});

describe("last_known_answers", () => {
  it("counts each last known answer, from nothing", () => {
    const { ctx, counters } = ctxAt(T0);
    Reflect.deleteProperty(counters, "last_known_answers");
    const st = key();
    ctx.lastKnown(st, "overloaded", T0);
    expect(counters.last_known_answers).toBe(1);
    ctx.lastKnown(st, "timeout", T0);
    expect(counters.last_known_answers).toBe(2);
  });
});

describe("overloadTeachesHot", () => {
  const route = { transport, name: "r:key@weur.0" };
  it("sends a key with a delegate to it for HOT_HOLD_MS after an overloaded call", () => {
    const st = key({ delegate: route });
    expect(st.overloadTeachesHot("overloaded", T0)).toBe(true);
    expect(st.hotUntilMs).toBe(T0 + HOT_HOLD_MS);
    // Never shortens a longer hold.
    st.hotUntilMs = T0 + HOT_HOLD_MS + 10;
    expect(st.overloadTeachesHot("overloaded", T0)).toBe(true);
    expect(st.hotUntilMs).toBe(T0 + HOT_HOLD_MS + 10);
  });

  it("takes a timeout for a busy object, on a key not yet known hot too (the first second)", () => {
    const cold = key({ delegate: route });
    expect(cold.overloadTeachesHot("timeout", T0)).toBe(true);
    expect(cold.hotUntilMs).toBe(T0 + HOT_HOLD_MS);
    const busy = key({ delegate: route }, { busyUntilMs: T0 + 1 });
    expect(busy.overloadTeachesHot("timeout", T0)).toBe(true);
    expect(busy.hotUntilMs).toBe(T0 + HOT_HOLD_MS);
  });

  it("teaches nothing without a delegate, for a rule that takes no shares, or for another failure", () => {
    expect(key().overloadTeachesHot("overloaded", T0)).toBe(false);
    const log = key({
      delegate: route,
      rule: { id: "s", params: slidingLog(5, 1000) },
    });
    expect(log.overloadTeachesHot("overloaded", T0)).toBe(false);
    for (const failure of ["error", "retryable", "reset", "invalid"] as const) {
      const st = key({ delegate: route }, { busyUntilMs: T0 + 1 });
      expect(st.overloadTeachesHot(failure, T0)).toBe(false);
      expect(st.hotUntilMs).toBe(0);
    }
  });
});

describe("answers without the object", () => {
  it("refuses while short, telling the client when the key reopens here (at least a ms)", async () => {
    const asked = key({}, { lastKnownRetryAtMs: T0 + 300 }).lastKnownRefusal(T0 + 100);
    expect(asked).toMatchObject({
      kind: "answered",
      result: {
        ok: true,
        atMs: T0 + 100,
        decision: { allowed: false, remaining: 0, resetAfterMs: 200, retryAfterMs: 200, delayMs: 0 },
      },
      source: "lease",
      attempts: 0,
    });
    if (asked.kind === "answered") expect(await asked.refund()).toBeNull();
    expect(resultOf(key({}, { lastKnownRetryAtMs: T0 }).lastKnownRefusal(T0 + 100))).toMatchObject({
      decision: { retryAfterMs: 1, resetAfterMs: 1 },
    });
  });
});

describe("lastKnown", () => {
  it("leaves an error, a reset or an invalid call of a key known nothing of to its rule's on_error", () => {
    const { ctx, counters } = ctxAt(T0);
    for (const failure of ["error", "retryable", "reset", "invalid"] as const) {
      expect(ctx.lastKnown(key(), failure, T0)).toBeNull();
    }
    expect(counters.last_known_answers).toBe(0);
  });

  it("refuses a timeout (a busy object), a cold key's too, with a spread backoff: never on_error", () => {
    const { ctx, counters } = ctxAt(T0, 100);
    const st = key();
    expect(ctx.lastKnown(st, "timeout", T0)).toMatchObject({
      result: { decision: { allowed: false, retryAfterMs: OVERLOAD_BACKOFF_MS / 2 + 100 } },
    });
    expect(st.lastKnownUntilMs).toBe(T0 + OVERLOAD_BACKOFF_MS / 2 + 100);
    expect(st.overloadedUntilMs).toBe(0);
    expect(counters.last_known_answers).toBe(1);
  });

  it("never admits from a hot key's last share once it ended: an error is on_error, an overload refused", () => {
    const { ctx, counters } = ctxAt(T0);
    const st = key({}, grant);
    expect(ctx.lastKnown(st, "error", T0)).toBeNull();
    expect(counters.last_known_answers).toBe(0);
    expect(ctx.lastKnown(st, "overloaded", T0)).toMatchObject({ result: { decision: { allowed: false } } });
    expect(counters.last_known_answers).toBe(1);
  });

  it("refuses a hot key known short here", () => {
    const { ctx, counters } = ctxAt(T0);
    const st = key({}, { hotUntilMs: T0 + 10, lastKnownUntilMs: T0 + 1, lastKnownRetryAtMs: T0 + 40 });
    expect(ctx.lastKnown(st, "error", T0)).toMatchObject({
      result: { decision: { allowed: false, retryAfterMs: 40 } },
    });
    expect(counters.last_known_answers).toBe(1);
    expect(ctx.lastKnown(st, "error", T0 + 1)).toBeNull();
  });

  it("backs off an overloaded key for half to all of the backoff, spread", () => {
    const { ctx, counters } = ctxAt(T0, 100);
    const st = key();
    const asked = ctx.lastKnown(st, "overloaded", T0);
    expect(st.overloadedUntilMs).toBe(T0 + 2000);
    expect(st.lastKnownUntilMs).toBe(T0 + OVERLOAD_BACKOFF_MS / 2 + 100);
    expect(st.lastKnownRetryAtMs).toBe(T0 + OVERLOAD_BACKOFF_MS / 2 + 100);
    expect(asked).toMatchObject({ result: { decision: { allowed: false, retryAfterMs: 350 } } });
    expect(counters.last_known_answers).toBe(1);
    // While backing off: refused without a new backoff.
    expect(ctx.lastKnown(st, "overloaded", T0 + 349)).toMatchObject({ result: { decision: { retryAfterMs: 1 } } });
    expect(st.lastKnownUntilMs).toBe(T0 + 350);
    // A later retry time is kept.
    const later = key({}, { lastKnownRetryAtMs: T0 + 900 });
    ctx.lastKnown(later, "overloaded", T0);
    expect([later.lastKnownUntilMs, later.lastKnownRetryAtMs]).toEqual([T0 + 350, T0 + 900]);
    // Without a lease setting, the automatic lease's ttl marks the overload.
    const auto = key({ lease: null });
    ctx.lastKnown(auto, "overloaded", T0);
    expect(auto.overloadedUntilMs).toBe(T0 + 1000);
    // A rule that takes no leases at all: the automatic lease's ttl too.
    const none = key({ lease: null, rule: { id: "l", params: slidingLog(5, 1000) } });
    expect(none.leaseSettings).toBeNull();
    ctx.lastKnown(none, "overloaded", T0);
    expect(none.overloadedUntilMs).toBe(T0 + 1000);
  });

  it("refuses without a backoff when asked not to back off", () => {
    const { ctx, counters } = ctxAt(T0, 100);
    const st = key({}, { lastKnownRetryAtMs: T0 + 30 });
    expect(ctx.lastKnown(st, "overloaded", T0, false)).toMatchObject({
      result: { decision: { allowed: false, retryAfterMs: 30 } },
    });
    expect(st.lastKnownUntilMs).toBe(0);
    expect(counters.last_known_answers).toBe(1);
  });

  it("takes a hot key's timeout for a busy object: refused, backed off, not marked overloaded", () => {
    const { ctx } = ctxAt(T0);
    const hot = key({}, { busyUntilMs: T0 + 1 });
    expect(ctx.lastKnown(hot, "timeout", T0)).toMatchObject({ result: { decision: { allowed: false } } });
    expect(hot.lastKnownUntilMs).toBe(T0 + OVERLOAD_BACKOFF_MS / 2);
    expect(hot.overloadedUntilMs).toBe(0);
  });

  it("refuses an overload though a rate share was granted lately, and backs off", () => {
    const { ctx } = ctxAt(T0);
    const st = key({}, grant);
    expect(ctx.lastKnown(st, "overloaded", T0)).toMatchObject({ result: { decision: { allowed: false } } });
    expect(st.lastKnownUntilMs).toBe(T0 + OVERLOAD_BACKOFF_MS / 2);
  });
});

describe("noteLastKnown", () => {
  const denied = (retryAfterMs: number | null): CheckResult => ({
    ok: true,
    atMs: T0,
    decision: { allowed: false, remaining: 0, resetAfterMs: 5, retryAfterMs, delayMs: 0 },
  });
  const allowed: CheckResult = {
    ok: true,
    atMs: T0,
    decision: { allowed: true, remaining: 0, resetAfterMs: 5, retryAfterMs: 9_999, delayMs: 0 },
  };

  it("clears a short key for a grant that is not short", () => {
    const { ctx } = ctxAt(T0);
    const st = key({}, { lastKnownUntilMs: T0 + 5, lastKnownRetryAtMs: T0 + 9 });
    ctx.noteLastKnown(st, false, T0 + 100, [denied(500)]);
    expect([st.lastKnownUntilMs, st.lastKnownRetryAtMs]).toEqual([0, 0]);
  });

  it("is short until the lease's end, with a retry at the latest reopening a denial said", () => {
    const { ctx } = ctxAt(T0 + 10);
    const st = key();
    ctx.noteLastKnown(st, true, T0 + 100, [denied(50), allowed, { ok: false, error: "invalid_cost" }, denied(null)]);
    expect([st.lastKnownUntilMs, st.lastKnownRetryAtMs]).toEqual([T0 + 100, T0 + 100]);
    ctx.noteLastKnown(st, true, T0 + 100, [denied(50), denied(300), denied(200)]);
    expect([st.lastKnownUntilMs, st.lastKnownRetryAtMs]).toEqual([T0 + 100, T0 + 310]);
    ctx.noteLastKnown(st, true, T0 + 100, [denied(90)]);
    expect(st.lastKnownRetryAtMs).toBe(T0 + 100);
    ctx.noteLastKnown(st, true, T0 + 100, [denied(91)]);
    expect(st.lastKnownRetryAtMs).toBe(T0 + 101);
  });
});
