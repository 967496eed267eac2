/**
 * The lease guarantee, over the real code: several isolates (src/isolate/coalesce.ts, each on its own simulated link)
 * ask one simulated object (src/sim/object.ts, store.ts `callRecord`) with random arrivals, costs and refunds, with
 * leases on. Whatever the timing, a window rule never admits more than `limit` in a window, and a rate rule never more
 * than `burst + rate × (t + ttl)` in any span `t` (each algorithm's `lease` entry states its bound).
 *
 * An admission counts at the time the request was let through: the object's clock for a decision the object made
 * (what an exact single writer promises), the isolate's clock for an answer from its lease.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { leasePolicy } from "../../src/algorithms/index.ts";
import { type Asked, type CoalesceCounters, Coalescer } from "../../src/isolate/coalesce.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import { type CallInput, callRecord, type LimiterRecord } from "../../src/protocol/store.ts";
import type { AlgorithmParams, LeaseSettings } from "../../src/rules/types.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { SimObject } from "../../src/sim/object.ts";
import { fixedWindow, gcraP, leakyBucket, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1, 0, 0, 58); // 2 s before a minute's end: windows turn over during a run

const leaseParams: fc.Arbitrary<AlgorithmParams> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1, max: 40 }), fc.constantFrom(1000, 3000, 60_000), fc.integer({ min: 1, max: 30 }))
    .chain(([a, p, b]) => fc.constantFrom(tokenBucket(a, p, b), gcraP(a, p, b), leakyBucket(a, p, b))),
  fc
    .tuple(fc.integer({ min: 1, max: 40 }), fc.constantFrom(500, 1000, 2000, 60_000))
    .map(([limit, windowMs]) => fixedWindow(limit, windowMs)),
);

interface Arrival {
  readonly dtMs: number;
  readonly isolate: number;
  readonly cost: number;
  /** Another rule denies it: an admission is refunded at once. */
  readonly refund: boolean;
}

const arrivals = fc.array(
  fc.record({
    // Mostly dense (a key over its limit), now and then a gap (leases end, windows turn over).
    dtMs: fc.oneof(
      { arbitrary: fc.constant(0), weight: 2 },
      { arbitrary: fc.integer({ min: 0, max: 30 }), weight: 6 },
      { arbitrary: fc.integer({ min: 0, max: 700 }), weight: 1 },
    ),
    // Uneven: one busy isolate, the others now and then (their leases outlive their own traffic).
    isolate: fc.oneof(
      { arbitrary: fc.constant(0), weight: 4 },
      { arbitrary: fc.integer({ min: 1, max: 4 }), weight: 1 },
    ),
    cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3 })),
    refund: fc.integer({ min: 0, max: 9 }).map((x) => x < 2),
  }),
  { minLength: 1, maxLength: 120 },
);

const settings: fc.Arbitrary<LeaseSettings> = fc.record({
  ttlMs: fc.constantFrom(1, 50, 300, 1000, 2500),
  units: fc.option(fc.integer({ min: 1, max: 12 }), { nil: null }),
  above: fc.constant(null),
});

function counters(): CoalesceCounters {
  return newStats();
}

/** Run the arrivals through isolates and one object; the admissions (time, cost) net of refunds. */
async function simulate(
  params: AlgorithmParams,
  lease: LeaseSettings,
  oneWayMs: readonly number[],
  list: readonly Arrival[],
): Promise<{ admitted: { atMs: number; cost: number }[]; leaseAnswers: number }> {
  const clock = new EventClock(T0);
  const object = new SimObject(clock, { serviceMs: 1, maxBacklog: Number.POSITIVE_INFINITY });
  const rule = { id: "r", params };
  let n = 0;
  const isolates = oneWayMs.map((ms, i) => {
    const c = counters();
    return {
      counters: c,
      coalescer: new Coalescer({ clock: clock.clock, sleep: clock.sleep, counters: c, newId: () => `i${i}-${n++}` }),
      transport: object.transportFrom(() => ms),
    };
  });
  const admitted: { atMs: number; cost: number }[] = [];
  const pending: Promise<void>[] = [];
  let t = T0;
  for (const a of list) {
    t += a.dtMs;
    await clock.runUntil(t);
    const iso = isolates[a.isolate % isolates.length]!;
    const asked = iso.coalescer.ask({
      transport: iso.transport,
      name: "r:hot",
      rule,
      cost: a.cost,
      timeoutMs: 250,
      lease,
    });
    pending.push(
      asked.then(async (answer: Asked) => {
        if (answer.kind !== "answered" || !answer.result.ok || !answer.result.decision.allowed) return;
        if (a.refund) {
          await answer.refund();
          return;
        }
        const atMs = answer.source === "lease" ? clock.nowMs() : answer.result.atMs;
        admitted.push({ atMs, cost: a.cost });
      }),
    );
  }
  // Long enough for every call, lease and hold to end (the longest ttl is 2.5 s; windows turn over meanwhile).
  await clock.runUntil(t + 10_000);
  await Promise.all(pending);
  return { admitted, leaseAnswers: isolates.reduce((s, i) => s + i.counters.lease_answers, 0) };
}

/** The largest excess over the lease bound, or null when none. */
function violation(
  params: AlgorithmParams,
  ttlMs: number,
  admitted: readonly { atMs: number; cost: number }[],
): string | null {
  const policy = leasePolicy(params.algorithm);
  const sorted = [...admitted].sort((a, b) => a.atMs - b.atMs);
  if (policy.kind === "window") {
    const perWindow = new Map<number, number>();
    for (const a of sorted) {
      const w = policy.windowOf(params, a.atMs);
      perWindow.set(w, (perWindow.get(w) ?? 0) + a.cost);
    }
    for (const [w, count] of perWindow) {
      if (count > policy.limit(params)) return `window ${w}: ${count} > ${policy.limit(params)}`;
    }
    return null;
  }
  if (policy.kind === "rate") {
    // Every span that starts and ends at an admission (the worst spans are those).
    for (let i = 0; i < sorted.length; i++) {
      let count = 0;
      for (let j = i; j < sorted.length; j++) {
        count += sorted[j]!.cost;
        const spanMs = sorted[j]!.atMs - sorted[i]!.atMs;
        if (!policy.withinBound(params, count, spanMs, ttlMs)) return `${count} within ${spanMs} ms`;
      }
    }
    return null;
  }
  return `${params.algorithm} takes no lease`;
}

describe("leases keep the algorithm's promise", () => {
  it("window: never more than limit per window; rate: never more than burst + rate × (t + ttl) (property)", async () => {
    let leased = 0;
    await fc.assert(
      fc.asyncProperty(
        leaseParams,
        settings,
        fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 2, maxLength: 5 }),
        arrivals,
        async (params, lease, oneWayMs, list) => {
          const { admitted, leaseAnswers } = await simulate(params, lease, oneWayMs, list);
          leased += leaseAnswers;
          expect(violation(params, lease.ttlMs, admitted)).toBeNull();
        },
      ),
      { numRuns: 100 },
    );
    // The property is about leases: make sure many runs did answer from them.
    expect(leased).toBeGreaterThan(100);
  });

  it("a slice charged before a window's end is not used after it", async () => {
    const params = fixedWindow(10, 1000); // a window ends at T0 + 2000
    const list: Arrival[] = [
      { dtMs: 1900, isolate: 0, cost: 1, refund: false }, // A: admitted, and a slice of 8 (its term cut at the end)
      { dtMs: 20, isolate: 0, cost: 1, refund: false }, // A: from its slice
      { dtMs: 90, isolate: 1, cost: 10, refund: false }, // B, in the next window: its whole limit
      { dtMs: 5, isolate: 0, cost: 1, refund: false }, // A: its old slice must not answer this one
    ];
    const { admitted, leaseAnswers } = await simulate(params, { ttlMs: 1000, units: 8, above: null }, [1, 1], list);
    expect(leaseAnswers).toBeGreaterThanOrEqual(1);
    expect(admitted.map((a) => [a.atMs - T0 >= 2000, a.cost])).toEqual([
      [false, 1],
      [false, 1],
      [true, 10],
    ]);
    expect(violation(params, 1000, admitted)).toBeNull();
  });

  it("the bound is tight: the check itself catches one unit too many", () => {
    const tb = tokenBucket(10, 1000, 5);
    // burst 5 + 10/s × (0 + 1 s) = 15 at one instant with a 1 s lease; 16 is one too many.
    expect(
      violation(
        tb,
        1000,
        Array.from({ length: 15 }, () => ({ atMs: T0, cost: 1 })),
      ),
    ).toBeNull();
    expect(
      violation(
        tb,
        1000,
        Array.from({ length: 16 }, () => ({ atMs: T0, cost: 1 })),
      ),
    ).not.toBeNull();
    const fw = fixedWindow(3, 1000);
    expect(violation(fw, 1000, [{ atMs: T0, cost: 3 }])).toBeNull();
    expect(
      violation(fw, 1000, [
        { atMs: T0, cost: 3 },
        { atMs: T0 + 999, cost: 1 },
      ]),
    ).not.toBeNull();
    expect(
      violation(fw, 1000, [
        { atMs: T0, cost: 3 },
        { atMs: T0 + 1000, cost: 3 },
      ]),
    ).toBeNull();
  });
});

describe("a short key is shared by demand", () => {
  const rule = { id: "r", params: tokenBucket(100, 1000, 100) };
  const ask = (id: string, units: number): CallInput => ({ rule, id, costs: [], lease: { units, ttlMs: 1000 } });

  it("grants each ask units × supply / demand, supply = what the key holds + its refill over the ttl", () => {
    // Asks of 300 and 100 within one ttl: demand 400; supply = 100 held + 100 refilled over 1 s = 200.
    let record: LimiterRecord | null = null;
    const first = callRecord(record, ask("a", 300), T0);
    record = first.record;
    // Alone so far: demand 300 > supply 200, share 200, but only 100 are held now.
    expect(first.result.lease).toMatchObject({ units: 100 });
    // Its term is cut in proportion (100 of a share of 200), so it asks again when the refill has come.
    expect(first.result.lease!.forMs).toBe(500);
    const second = callRecord(record, ask("b", 100), T0 + 500);
    // Demand 400 within the ttl; supply 50 held + 100 refill = 150; share 100 × 150 / 400 = 37.5, rounded up.
    expect(second.result.lease).toMatchObject({ units: 38, forMs: 1000 });
  });

  it("grants the whole ask while demand is within supply", () => {
    const out = callRecord(null, ask("a", 60), T0);
    expect(out.result.lease).toMatchObject({ units: 60, forMs: 1000 });
  });
});
