/**
 * A hot concurrency key in the cluster SIMULATION (bench/cluster_slots.ts): isolates in the 9 regions take a slot from
 * the key's object before forwarding (the real record protocol: record.ts `checkRecord`, slots.ts `releaseRecord`),
 * hold the request at the origin for a heavy-tailed time, and give the slot back in one call after it ends. Simulated:
 * time, the network of cluster.ts (lognormal one-way delays, 0.1% of messages lost), the object's service rate, a call
 * timeout, `on_error`. Measured: the requests truly in flight at the origin at every instant, against `limit`.
 */
import { mulberry32 } from "../cli/gen.ts";
import { RELEASE_RETRY_MS, releaseRecord } from "../protocol/slots.ts";
import { checkRecord, type LimiterRecord, type LimiterRule } from "../protocol/store.ts";
import { OVERLOAD_BACKOFF_MS } from "../protocol/tunables.ts";
import { arrivalsOf } from "./arrivals.ts";
import { OBJECT, REGION_RTT_MS } from "./cluster.ts";
import { EventClock } from "./event_clock.ts";
import { delaysOf, lossOf } from "./network.ts";
import { SimServer } from "./server.ts";

const TIMEOUT_MS = 250;
const TIMED_OUT = Object.assign(new Error("timeout"), { timeout: true });

/** A busy object's failure (src/isolate/key_state.ts `busyFailure`): overloaded, or no answer within the budget. */
function isBusy(error: unknown): boolean {
  const e = error as { overloaded?: unknown; timeout?: unknown };
  return e.overloaded === true || e.timeout === true;
}

export interface SlotRun {
  readonly limit: number;
  readonly slotTtlMs: number;
  readonly isolates: number;
  readonly loadPerS: number;
  readonly durationMs: number;
  /** The median time a request spends at the origin, ms (lognormal, 1% at 5x or more). */
  readonly holdMs: number;
  readonly onError: "open" | "closed";
  readonly seed: number;
}

export interface SlotOutcome {
  readonly requests: number;
  readonly admitted: number;
  readonly refused: number;
  /**
   * Take calls that failed: busy ones (overloaded, timed out, lost) are refused whatever `on_error` says, as at the
   * edge; an error or a reset (none in these runs) would be `on_error`'s: admitted uncounted with `open`.
   */
  readonly failed: number;
  /** Slots that late answers took for requests already refused, given back at once by their id. */
  readonly lateReleases: number;
  /** The most requests at the origin at once, those holding a slot among them, and the most beyond `limit`. */
  readonly maxInFlight: number;
  readonly maxInFlightWithSlot: number;
  readonly overLimit: number;
  /** The most slots the key's object held at once (never above `limit`). */
  readonly maxHeldAtObject: number;
  /** Releases that never reached the object (lost): those slots came back with their lease. */
  readonly releasesLost: number;
  readonly objectCalls: number;
  readonly overloaded: number;
}

/** One run: every request's take, hold and release over simulated time. */
// long: one event loop's setup, the request's three steps, and the tally, read together
export async function runSlots(run: SlotRun): Promise<SlotOutcome> {
  const t0Ms = 1_800_000_000_000;
  const random = mulberry32(run.seed);
  const clock = new EventClock(t0Ms);
  const server = new SimServer(clock, { ...OBJECT, lose: lossOf(random) });
  const rule: LimiterRule = {
    id: "hot-slots",
    params: { algorithm: "concurrency", limit: run.limit, slotTtlMs: run.slotTtlMs },
  };
  let record: LimiterRecord | null = null;
  const links = REGION_RTT_MS.map((rtt) => delaysOf(rtt, random));
  const holds = delaysOf(run.holdMs * 2, random);
  const tally = {
    ...{ admitted: 0, refused: 0, failed: 0, lateReleases: 0 },
    ...{ inFlight: 0, withSlot: 0, maxInFlight: 0, maxWithSlot: 0 },
  };
  let maxHeld = 0;
  let releasesSent = 0;
  let releasesApplied = 0;
  const heldNow = () => (record === null ? 0 : (record.state as { slots: readonly { cost: number }[] }).slots.length);
  const withTimeout = <T>(p: Promise<T>) =>
    Promise.race([p, new Promise<never>((_, reject) => clock.after(TIMEOUT_MS, () => reject(TIMED_OUT)))]);
  // A release the object refuses as overloaded is retried after a jittered pause (RELEASE_RETRY_MS), as at the edge.
  const release = (link: () => number, slot: number, attempt = 0) => {
    if (attempt === 0) releasesSent++;
    server
      .serve(
        link,
        () => 100,
        () => {
          releasesApplied++;
          record = releaseRecord(record, { rule, slots: [slot] }, clock.nowMs()).record;
        },
      )
      .catch((error: unknown) => {
        const waitMs = RELEASE_RETRY_MS[attempt];
        // Given up (or lost): the slot comes back with its lease, as at the edge.
        if (waitMs === undefined || !isBusy(error) || error === TIMED_OUT) return;
        clock.after(waitMs / 2 + Math.floor((random() * waitMs) / 2), () => release(link, slot, attempt + 1));
      });
  };
  const take = (link: () => number) =>
    server.serve(
      link,
      () => 200,
      () => {
        const out = checkRecord(record, { rule, cost: 1 }, clock.nowMs());
        record = out.record;
        maxHeld = Math.max(maxHeld, heldNow());
        return out.result;
      },
    );
  // After a busy answer an isolate refuses the key without asking for 250-500 ms (key_state.ts `lastKnown`, the backoff).
  const quietUntilMs = new Map<number, number>();
  const request = async (isolate: number) => {
    const link = links[isolate % links.length]!;
    if (clock.nowMs() < (quietUntilMs.get(isolate) ?? 0)) {
      tally.refused++;
      return;
    }
    let slot: number | undefined;
    const call = take(link);
    try {
      const result = await withTimeout(call);
      if (!result.ok || !result.decision.allowed) {
        tally.refused++;
        return;
      }
      slot = result.slot;
    } catch (error) {
      tally.failed++;
      // Busy (overloaded, or no answer in time, a lost message included): refused, whatever on_error says, and a
      // slot a late answer took is given back at once by its id (src/isolate/slot_return.ts).
      if (isBusy(error)) {
        quietUntilMs.set(isolate, clock.nowMs() + OVERLOAD_BACKOFF_MS / 2 + random() * (OVERLOAD_BACKOFF_MS / 2));
        call.then(
          (r) => {
            if (!r.ok || !r.decision.allowed || r.slot === undefined) return;
            tally.lateReleases++;
            release(link, r.slot);
          },
          () => undefined,
        );
        tally.refused++;
        return;
      }
      if (run.onError === "closed") return;
    }
    tally.admitted++;
    tally.inFlight++;
    if (slot !== undefined) tally.withSlot++;
    tally.maxInFlight = Math.max(tally.maxInFlight, tally.inFlight);
    tally.maxWithSlot = Math.max(tally.maxWithSlot, tally.withSlot);
    await clock.sleep(holds());
    tally.inFlight--;
    if (slot === undefined) return;
    tally.withSlot--;
    release(link, slot);
  };
  const arrivals = arrivalsOf({ ...run, t0Ms }, random);
  for (const a of arrivals) clock.after(a.atMs - t0Ms, () => void request(a.isolate));
  await clock.runUntil(t0Ms + run.durationMs + run.slotTtlMs + 10_000);
  return {
    requests: arrivals.length,
    admitted: tally.admitted,
    refused: tally.refused,
    failed: tally.failed,
    lateReleases: tally.lateReleases,
    maxInFlight: tally.maxInFlight,
    maxInFlightWithSlot: tally.maxWithSlot,
    overLimit: Math.max(0, tally.maxInFlight - run.limit),
    maxHeldAtObject: maxHeld,
    releasesLost: releasesSent - releasesApplied,
    objectCalls: server.counters.calls,
    overloaded: server.counters.overloaded,
  };
}
