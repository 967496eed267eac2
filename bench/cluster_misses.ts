/**
 * Why the cluster simulation's misses happen (BENCHMARKS.md section 8), written from the published run's figures and
 * its per-second traces; bench/cluster.ts prints the figures, this the causes.
 */
export const CLUSTER_MISSES: readonly string[] = ["Why the misses (causes): not yet written for this run."];
