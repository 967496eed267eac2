/** The requests of one cluster SIMULATION run (cluster.ts): when each arrives, and at which isolate. */

export interface Arrival {
  readonly atMs: number;
  readonly isolate: number;
}

/** How the load changes over a run: steady, a flash crowd, or growth. */
export type LoadShape = "steady" | "flash crowd" | "growth";

/** A flash crowd: 5% of the load until this share of the run, then all of it at once. */
export const FLASH_AT = 0.25;

/**
 * The share of `loadPerS` arriving `elapsedMs` into a run: a flash crowd is 5% of it until `FLASH_AT` of the run, then
 * all of it at once (a key no isolate knows is hot, suddenly the hottest); growth rises evenly from 0 to all of it.
 */
export function loadShare(shape: LoadShape, elapsedMs: number, durationMs: number): number {
  if (shape === "flash crowd") return elapsedMs < durationMs * FLASH_AT ? 0.05 : 1;
  if (shape === "growth") return Math.min(1, elapsedMs / durationMs);
  return 1;
}

/**
 * Poisson arrivals at `loadPerS` (times `loadShare`: a thinned Poisson process), spread unevenly over isolates
 * (isolate i's share is proportional to 1/(i + 10)).
 */
export function arrivalsOf(
  run: {
    readonly isolates: number;
    readonly loadPerS: number;
    readonly t0Ms: number;
    readonly durationMs: number;
    readonly shape?: LoadShape;
  },
  random: () => number,
): Arrival[] {
  const cumulative: number[] = [];
  let total = 0;
  for (let i = 0; i < run.isolates; i++) total += 1 / (i + 10);
  let acc = 0;
  for (let i = 0; i < run.isolates; i++) {
    acc += 1 / (i + 10) / total;
    cumulative.push(acc);
  }
  const arrivals: Arrival[] = [];
  let t = run.t0Ms;
  const end = run.t0Ms + run.durationMs;
  for (;;) {
    t += -Math.log(1 - random()) * (1000 / run.loadPerS);
    if (t >= end) break;
    const share = loadShare(run.shape ?? "steady", t - run.t0Ms, run.durationMs);
    // Steady runs draw no extra number: their arrivals stay those of every earlier run with the same seed.
    if (share < 1 && random() >= share) continue;
    const u = random();
    let lo = 0;
    let hi = run.isolates - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    arrivals.push({ atMs: Math.floor(t), isolate: lo });
  }
  return arrivals;
}
