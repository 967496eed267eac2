/**
 * The hot-key tier's late mechanisms, each of which the ablation (bench/ablation.ts, BENCHMARKS.md 8a) can switch off,
 * one per process; all are on in the Worker. docs/production.md "Tuning" says what each buys.
 */
export const MECHANISMS = [
  /** A grant's parts refill from half the ask's round trip (flight_credit.ts). */
  "flightCredit",
  /** A renewing delegate says how long it still uses its old rate share (`oldForMs`, delegate_demand.ts). */
  "oldShareFor",
  /** Units of the next window granted near a window's end (window_ahead.ts, delegate_ahead.ts). */
  "windowAhead",
  /** Delegates lend isolates part of their share (sublease.ts `subleaseFrom`). */
  "subleases",
  /** Admissions a late answer made of requests refused from last known state are given back (coalesce_calls.ts). */
  "lateRefunds",
  /** A short window split over what is left and what other delegates still hold (share_grant.ts `heldByOthers`). */
  "scarceWindowSplit",
  /** A direct call to a hot rate key takes a lease while the direct slice is over half full (share.ts). */
  "hotLease",
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
