/** The tier's mechanisms the ablation (bench/ablation.ts) turns off, one per process (docs/production.md, "Tuning"). */
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
  "lateAnswers",
  "shedBack",
  "resend",
] as const;

export type Mechanism = (typeof MECHANISMS)[number];

const off = new Set<Mechanism>();

/** Whether `mechanism` is on (always, but in an ablation run). */
export const uses = (mechanism: Mechanism): boolean => !off.has(mechanism);

/** The ablation bench only: this process runs with `mechanism` off. */
export function ablate(mechanism: Mechanism): void {
  off.add(mechanism);
}
