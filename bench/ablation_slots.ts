/**
 * The ablation's concurrency row (bench/ablation.ts, BENCHMARKS.md 8a): what late refunds weigh, which no rate or
 * window row can show. A hot `algorithm: concurrency` key in the cluster SIMULATION's world (src/sim: 1,000 isolates
 * in 9 regions, lognormal one-way delays, 0.1% of messages lost, the key's object at 1 ms a call); every request goes
 * through its isolate's real coalescer (src/isolate/coalesce.ts: batches, the 250 ms budget, last known refusals, and
 * `lateRefunds`, whose give-back is a release by slot id, slot_return.ts) to the key's object's real record operations
 * (share.ts `keyCall`, slots.ts `releaseRecord`); an admitted request holds its slot at the origin for a lognormal
 * time, then releases it (retried after a busy answer, as src/edge/slot_release.ts). Against an exact single writer:
 * every arrival decided at its arrival time, each admitted request holding for the same time. Unlike section 8e's
 * model (src/sim/slots.ts, which gives late slots back by hand), here the isolate's own code does or does not.
 * `node --import tsx bench/ablation_slots.ts [--seed N] [--ablate lateRefunds]` prints one `slots {json}` line.
 */
import type { ConcurrencyState } from "../src/algorithms/concurrency.ts";
import { mulberry32 } from "../src/cli/gen.ts";
import { Coalescer } from "../src/isolate/coalesce.ts";
import { newStats } from "../src/isolate/metrics.ts";
import { ablate } from "../src/protocol/mechanisms.ts";
import type { ObjectTransport } from "../src/protocol/object_call.ts";
import { RELEASE_RETRY_MS, releaseRecord } from "../src/protocol/slots.ts";
import type { LimiterRule } from "../src/protocol/store.ts";
import { arrivalsOf } from "../src/sim/arrivals.ts";
import { OBJECT, REGION_RTT_MS } from "../src/sim/cluster.ts";
import { EventClock } from "../src/sim/event_clock.ts";
import { delaysOf, lossOf } from "../src/sim/network.ts";
import { SimObject } from "../src/sim/object.ts";
import type { ClusterGoal } from "./cluster_rows.ts";
import { round } from "./common.ts";

/** The row: limit 100, slot_ttl 60 s (longer than the run: a slot never given back stays), ~1.3x the limit. */
export const SLOT_RUN = { limit: 100, slotTtlMs: 60_000, isolates: 1_000, loadPerS: 500, durationMs: 10_000 } as const;
/** The median time an admitted request spends at the origin, ms (lognormal, 1% at 5x or more). */
const HOLD_MS = 200;
const TIMEOUT_MS = 250;

export interface SlotRow {
  readonly label: string;
  readonly requests: number;
  readonly admitted: number;
  readonly exactAdmitted: number;
  readonly admittedVsExactPct: number;
  /** Requests refused from what their isolate last knew (a busy take: overloaded, past the budget, lost). */
  readonly lastKnown: number;
  /** Slots the key's object took for requests their isolate had refused, whose late answer reached the isolate. */
  readonly lateSlots: number;
  /**
   * Of them, not given back: no release sent, or still held when every request has ended (each try of its release
   * lost or refused): each held until `slot_ttl`, for a request that is not running.
   */
  readonly lateKept: number;
  /**
   * Slots still held at the object when every request has ended (before `slot_ttl`); of them, those whose release was
   * sent and never applied (lost, or refused as overloaded) or whose take's answer was lost (no isolate knew of it).
   */
  readonly heldAtEnd: number;
  readonly heldLost: number;
  /** The most requests at the origin at once, and the most beyond the limit (a bound: 0). */
  readonly maxInFlight: number;
  readonly overLimit: number;
  readonly failedOpen: number;
  readonly objectCalls: number;
}

export const SLOT_LABEL = `concurrency/${SLOT_RUN.isolates}/${SLOT_RUN.loadPerS}/steady`;

/** The exact single writer: each arrival admitted if fewer than `limit` admitted ones are still running. */
function exactAdmitted(arrivals: readonly { atMs: number }[], holds: readonly number[], limit: number): number {
  const ends: number[] = [];
  let admitted = 0;
  arrivals.forEach((a, i) => {
    for (let j = ends.length - 1; j >= 0; j--) if (ends[j]! <= a.atMs) ends.splice(j, 1);
    if (ends.length >= limit) return;
    ends.push(a.atMs + holds[i]!);
    admitted++;
  });
  return admitted;
}

/** One run of the row on `seed` (`SLUICE_SIM_SEED` of the cluster rows), with the mechanisms this process has on. */
// long: the world's setup, a request's take, hold and release, and the tally read together
export async function slotRow(seed: number): Promise<SlotRow> {
  const t0Ms = 1_800_000_000_000;
  const random = mulberry32(seed + 36);
  const clock = new EventClock(t0Ms);
  const rule: LimiterRule = {
    id: "hot-slots",
    params: { algorithm: "concurrency", limit: SLOT_RUN.limit, slotTtlMs: SLOT_RUN.slotTtlMs },
  };
  const taken = new Set<number>();
  const object = new SimObject(clock, { ...OBJECT, lose: lossOf(random) }, (_input, result) => {
    for (const r of result.results) if (r.ok && r.decision.allowed && r.slot !== undefined) taken.add(r.slot);
  });
  const arrived = new Set<number>();
  const admittedSlots = new Set<number>();
  const releaseSent = new Set<number>();
  const transports = REGION_RTT_MS.map((rtt): ObjectTransport => {
    const link = delaysOf(rtt, random);
    const inner = object.transportFrom(link);
    return {
      call: (name, input) =>
        inner.call(name, input).then((result) => {
          for (const r of result.results) if (r.ok && r.slot !== undefined) arrived.add(r.slot);
          return result;
        }),
      refund: inner.refund,
      release: (_name, input) => {
        for (const s of input.slots) releaseSent.add(s);
        return object.server.serve(
          link,
          () => 100,
          () => {
            const out = releaseRecord(object.record, input, clock.nowMs());
            object.record = out.record;
            return out.result;
          },
        );
      },
    };
  });
  const counters = Array.from({ length: SLOT_RUN.isolates }, () => newStats());
  let ids = 0;
  const newId = () => `c${ids++}`;
  const coalescers = counters.map((c) => new Coalescer({ clock: clock.clock, sleep: clock.sleep, counters: c, newId }));
  const counted = { admitted: 0, failedOpen: 0, inFlight: 0, maxInFlight: 0 };
  // A release the object is too busy for is tried again after a jittered pause (src/edge/slot_release.ts).
  const release = (transport: ObjectTransport, slot: number, attempt = 0): void => {
    transport.release!("slots", { rule, slots: [slot] }).catch(() => {
      const waitMs = RELEASE_RETRY_MS[attempt];
      if (waitMs !== undefined)
        clock.after(waitMs / 2 + random() * (waitMs / 2), () => release(transport, slot, attempt + 1));
    });
  };
  const request = async (isolate: number, holdMs: number) => {
    const transport = transports[isolate % transports.length]!;
    const input = { transport, name: "slots", rule, cost: 1, timeoutMs: TIMEOUT_MS, lease: null, delegate: null };
    const asked = await coalescers[isolate]!.ask(input);
    if (asked.kind === "failed") counted.failedOpen++; // on_error: open, uncounted (none expected: busy is refused)
    const slot =
      asked.kind === "answered" && asked.result.ok && asked.result.decision.allowed ? asked.result.slot : null;
    if (asked.kind === "answered" && slot === null) return;
    counted.admitted++;
    counted.inFlight++;
    counted.maxInFlight = Math.max(counted.maxInFlight, counted.inFlight);
    if (slot !== null && slot !== undefined) admittedSlots.add(slot);
    await clock.sleep(holdMs);
    counted.inFlight--;
    if (slot !== null && slot !== undefined) release(transport, slot);
  };
  const arrivals = arrivalsOf({ ...SLOT_RUN, t0Ms }, random);
  const holdOf = delaysOf(2 * HOLD_MS, mulberry32(seed + 37));
  const holds = arrivals.map(() => holdOf());
  const pending: Promise<void>[] = [];
  arrivals.forEach((a, i) => {
    clock.after(a.atMs - t0Ms, () => void pending.push(request(a.isolate, holds[i]!)));
  });
  // Every request ended and its release (retries included) settled; well before `slot_ttl`.
  await clock.runUntil(t0Ms + SLOT_RUN.durationMs + 15_000);
  await Promise.all(pending);
  const state = object.record?.state as ConcurrencyState | undefined;
  const held = state?.slots.map((s) => s.id) ?? [];
  const late = [...taken].filter((s) => arrived.has(s) && !admittedSlots.has(s));
  const exact = exactAdmitted(arrivals, holds, SLOT_RUN.limit);
  const lastKnown = counters.reduce((n, c) => n + (c.last_known_answers ?? 0), 0);
  return {
    label: SLOT_LABEL,
    requests: arrivals.length,
    admitted: counted.admitted,
    exactAdmitted: exact,
    admittedVsExactPct: round((100 * (counted.admitted - exact)) / Math.max(1, exact), 2),
    lastKnown,
    lateSlots: late.length,
    lateKept: late.filter((s) => !releaseSent.has(s) || held.includes(s)).length,
    heldAtEnd: held.length,
    heldLost: held.filter((s) => releaseSent.has(s) || !arrived.has(s)).length,
    maxInFlight: counted.maxInFlight,
    overLimit: Math.max(0, counted.maxInFlight - SLOT_RUN.limit),
    failedOpen: counted.failedOpen,
    objectCalls: object.counters.calls,
  };
}

/**
 * The row's goals: the Decision contract's "a late slot goes back" (every slot a late answer took for a request
 * refused here is released, none left to `slot_ttl`: one whose release was sent but never applied counts as kept;
 * slots whose take's answer a lost message never delivered are not late slots, no isolate knowing of them), and the
 * limit at the origin (a bound).
 */
export function slotGoals(rows: readonly SlotRow[]): Record<string, ClusterGoal> {
  const goal = (ok: (r: SlotRow) => boolean, figure: (r: SlotRow) => string) => {
    const missed = rows.filter((r) => !ok(r));
    return { met: missed.length === 0, misses: missed.map((r) => `${r.label}: ${figure(r)}`).join(", ") };
  };
  return {
    lateSlotsBack: goal(
      (r) => r.lateKept === 0,
      (r) => `${r.lateKept} of ${r.lateSlots} late slots kept`,
    ),
    concurrencyLimit: goal(
      (r) => r.overLimit === 0,
      (r) => `${r.overLimit} over the limit`,
    ),
  };
}

if (process.argv[1]?.endsWith("ablation_slots.ts")) {
  const at = process.argv.indexOf("--ablate");
  if (at >= 0) {
    if (process.argv[at + 1] !== "lateRefunds") throw new Error("ablation_slots: only --ablate lateRefunds acts here");
    ablate("lateRefunds");
  }
  const seedAt = process.argv.indexOf("--seed");
  const seed = seedAt >= 0 ? Number(process.argv[seedAt + 1]) : Number(process.env.SLUICE_SIM_SEED ?? 0);
  process.stdout.write(`slots ${JSON.stringify(await slotRow(seed))}\n`);
}
