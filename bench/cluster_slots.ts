/**
 * A hot concurrency key in the cluster SIMULATION (src/sim/slots.ts): isolates in 9 regions, one key's object, slots
 * taken before forwarding and given back after the response, over a lossy heavy-tailed network. Whether more than
 * `limit` requests are ever at the origin at once ("over N"), with `on_error` open and closed, at a load the object
 * serves and at one that overloads it. A simulation: its figures are the model's, not a deployment's.
 */
import { runSlots, type SlotRun } from "../src/sim/slots.ts";
import { log, QUICK, writeResult } from "./common.ts";

const BASE: Omit<SlotRun, "loadPerS" | "onError"> = {
  limit: 100,
  slotTtlMs: 60_000,
  isolates: 1000,
  durationMs: QUICK ? 5_000 : 20_000,
  holdMs: 200,
  seed: 34,
};

/** Demand of about twice the limit (500/s x 0.2 s is ~100 in flight, with a heavy tail), then an overloading one. */
const ROWS: SlotRun[] = [
  { ...BASE, loadPerS: 500, onError: "open" },
  { ...BASE, loadPerS: 500, onError: "closed" },
  { ...BASE, loadPerS: 2_000, onError: "open" },
  { ...BASE, loadPerS: 2_000, onError: "closed" },
];

const rows = [];
for (const run of ROWS) {
  const out = await runSlots(run);
  log(
    `slots: ${run.loadPerS}/s on_error ${run.onError}: ${out.requests} requests, ${out.admitted} admitted, ${out.failed} take calls failed; at most ${out.maxInFlight} in flight (${out.maxInFlightWithSlot} with a slot), ${out.overLimit} over ${run.limit}; object held at most ${out.maxHeldAtObject}; ${out.lateReleases} late slots released, ${out.releasesLost} releases lost`,
  );
  rows.push({ ...run, ...out });
}
writeResult("cluster_slots", `node --import tsx bench/cluster_slots.ts${QUICK ? " --quick" : ""}`, { rows });
