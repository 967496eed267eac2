/** The requests of one cluster SIMULATION run (cluster.ts): when each arrives, and at which isolate. */

export interface Arrival {
  readonly atMs: number;
  readonly isolate: number;
}

/** Poisson arrivals at `loadPerS`, spread unevenly over isolates (isolate i's share is proportional to 1/(i + 10)). */
export function arrivalsOf(
  run: { readonly isolates: number; readonly loadPerS: number; readonly t0Ms: number; readonly durationMs: number },
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
