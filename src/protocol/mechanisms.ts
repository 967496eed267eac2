/**
 * The tier's late mechanisms the ablation (bench/ablation.ts, BENCHMARKS.md 8a) switches off one per process; all are
 * on in the Worker. docs/production.md "Tuning" says what each buys and where it lives.
 */
export const MECHANISMS = [
  "oldShareFor",
  "windowAhead",
  "subleases",
  "lateRefunds",
  "scarceWindowSplit",
  "rttTerms",
  "spread",
  "spareHome",
  "equalFirst",
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
