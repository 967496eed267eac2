/**
 * When an isolate lets a lease's admissions through, and how long it holds a lease (the two isolate-side gaps the
 * share-bound property found, issue 18): table tests on the real coalescer against a simulated object.
 * - A request answered from a lease that arrived while it waited goes at once, even when it was to lead the call for
 *   the requests behind it (that call is then led by the first of them).
 * - A lease's term counts from the call's send; when the isolate's clock reads earlier at the answer than at the
 *   send (it stepped back meanwhile, by an unknown amount), the call's whole budget counts as gone.
 */
import { describe, expect, it } from "vitest";
import { type Asked, Coalescer } from "../../src/isolate/coalesce.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import type { CallResult } from "../../src/protocol/store.ts";
import type { AlgorithmParams, LeaseSettings } from "../../src/rules/types.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { SimObject } from "../../src/sim/object.ts";
import { fixedWindow } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
const TIMEOUT_MS = 250;

function harness(params: AlgorithmParams, oneWayMs: number) {
  const clock = new EventClock(T0);
  const leases: { atMs: number; forMs: number }[] = [];
  const object = new SimObject(clock, { serviceMs: 1, maxBacklog: Number.POSITIVE_INFINITY }, (_in, r: CallResult) => {
    if (r.lease !== null) leases.push({ atMs: clock.nowMs(), forMs: r.lease.forMs });
  });
  const h = { offsetMs: 0 };
  let ids = 0;
  const coalescer = new Coalescer({
    clock: () => clock.nowMs() + h.offsetMs,
    sleep: clock.sleep,
    counters: newStats(),
    newId: () => `c${ids++}`,
  });
  const transport = object.transportFrom(() => oneWayMs);
  const rule = { id: "r", params };
  const ask = (lease: LeaseSettings): Promise<Asked> =>
    coalescer.ask({ transport, name: "r:k", rule, cost: 1, timeoutMs: TIMEOUT_MS, lease });
  return { clock, object, coalescer, ask, leases, h };
}

describe("a request answered from a lease that arrived while it waited", () => {
  // One request at T0 asks a lease of `units` (40 ms each way: it arrives at T0 + 81); `queued` more wait meanwhile.
  // The first `units` of them are answered from the lease when it arrives; the rest make the next call.
  const rows = [
    { units: 2, queued: 1 },
    { units: 2, queued: 2 },
    { units: 2, queued: 3 },
    { units: 2, queued: 5 },
    { units: 3, queued: 10 },
  ];
  for (const { units, queued } of rows) {
    it(`goes when the lease arrives: a lease of ${units}, ${queued} waiting`, async () => {
      const h = harness(fixedWindow(100, 60_000), 40);
      const lease = { ttlMs: 1000, units, above: null };
      const answeredAt: { source: string; atMs: number }[] = [];
      const track = (a: Promise<Asked>) =>
        a.then((got) => {
          if (got.kind === "answered") answeredAt.push({ source: got.source, atMs: h.clock.nowMs() });
        });
      const all = [track(h.ask(lease))];
      for (let i = 0; i < queued; i++) {
        await h.clock.runUntil(T0 + 1 + i);
        all.push(track(h.ask(lease)));
      }
      await h.clock.runUntil(T0 + 2000);
      await Promise.all(all);
      const arrivedAt = T0 + 81;
      const fromLease = answeredAt.filter((a) => a.source === "lease");
      expect(fromLease).toHaveLength(Math.min(units, queued));
      for (const a of fromLease) expect(a.atMs).toBe(arrivedAt);
      // The rest went in one call, sent at once, answered a round trip later.
      const fromObject = answeredAt.filter((a) => a.source === "object").map((a) => a.atMs);
      expect(fromObject).toEqual([arrivedAt, ...Array(Math.max(0, queued - units)).fill(arrivedAt + 81)]);
    });
  }
});

describe("a lease's term when the isolate's clock steps back while its call is in flight", () => {
  // 20 per 1 s window; the call is sent 200 ms before the window ends and asks a 1 s lease: the object cuts it at
  // the window's end (its `forMs`, counted from its apply time). In true time the isolate must stop using it by
  // `send + forMs` at the latest (the term counts from the send).
  const rows = [
    { oneWayMs: 13, backMs: 0, endsInMs: (forMs: number, rttMs: number) => forMs - rttMs },
    { oneWayMs: 40, backMs: 0, endsInMs: (forMs: number, rttMs: number) => forMs - rttMs },
    // A step larger than the round trip: seen (the clock reads earlier than at the send); the budget counts as gone.
    { oneWayMs: 13, backMs: 289, endsInMs: (forMs: number) => forMs - TIMEOUT_MS },
    { oneWayMs: 40, backMs: 100, endsInMs: (forMs: number) => forMs - TIMEOUT_MS },
    { oneWayMs: 1, backMs: 5, endsInMs: (forMs: number) => forMs - TIMEOUT_MS },
  ];
  for (const { oneWayMs, backMs, endsInMs } of rows) {
    it(`one way ${oneWayMs} ms, a step back of ${backMs} ms: the lease ends by send + forMs`, async () => {
      const h = harness(fixedWindow(20, 1000), oneWayMs);
      const sendAt = T0 + 800;
      await h.clock.runUntil(sendAt);
      const asked = h.ask({ ttlMs: 1000, units: 3, above: null });
      await h.clock.runUntil(sendAt + 2); // the call is in flight
      h.h.offsetMs -= backMs;
      const rttMs = 2 * oneWayMs + 1;
      await h.clock.runUntil(sendAt + rttMs);
      const got = await asked;
      expect(got.kind === "answered" && got.result.ok && got.result.decision.allowed).toBe(true);
      const forMs = h.leases[0]!.forMs;
      expect(forMs).toBe(200 - oneWayMs - 1); // cut at the window's end, counted from the object's apply time
      const held = h.coalescer.leaseOf("r:k");
      const want = endsInMs(forMs, rttMs);
      if (want <= 0) expect(held).toBeNull();
      else expect(held).toMatchObject({ unitsLeft: 3, endsInMs: want });
      // Whatever the step, the lease is not used past its window's end (true time): a request just after is refused
      // by the object, not admitted from the lease.
      await h.clock.runUntil(T0 + 1000);
      expect(h.coalescer.leaseOf("r:k")).toBeNull();
    });
  }
});
