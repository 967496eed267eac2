/**
 * The hot-key tier's late mechanisms, each of which can be switched off for the ablation (bench/ablation.ts, issue
 * 36): BENCHMARKS.md "Ablation" shows what each one buys, the simulation's goals with and without it. All are on in
 * the Worker; nothing but the ablation bench switches one off (one per process). docs/production.md "Tuning" names
 * each and what the ablation says of it.
 */
export const MECHANISMS = [
  /** A grant's parts refill from half the ask's round trip (flight_credit.ts). */
  "flightCredit",
  /** A renewing delegate says how long it still uses its old rate share (`oldForMs`, delegate_demand.ts). */
  "oldShareFor",
  /** Units of the next window granted ahead near a window's end (window_ahead.ts, delegate_ahead.ts). */
  "windowAhead",
  /** Delegates lend isolates part of their share (sublease.ts `subleaseFrom`). */
  "subleases",
  /** Admissions a late answer made of requests refused from last known state are given back (coalesce_calls.ts). */
  "lateRefunds",
  /** A scarce window split over what is left and what other holders still hold (share_grant.ts `heldByOthers`). */
  "scarceWindowSplit",
  /** A direct call to a hot rate key takes a lease while its slice is over half full (share.ts `withHotLease`). */
  "hotLease",
  /** Delegate rate slices hold `SLICE_EXTRA_MS` of their rate more burst (sublease.ts). */
  "sliceExtra",
] as const;

export type Mechanism = (typeof MECHANISMS)[number];

const off = new Set<Mechanism>();

/** Whether `mechanism` is on (always, but in an ablation run). */
export function uses(mechanism: Mechanism): boolean {
  return !off.has(mechanism);
}

/** The ablation bench only: this process runs with `mechanism` off. */
export function ablate(mechanism: Mechanism): void {
  off.add(mechanism);
}
