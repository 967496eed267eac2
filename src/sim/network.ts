/**
 * The world of the cluster SIMULATION (cluster.ts), made no kinder than production where the hot-key tier is weakest
 * (issue 36): a heavy-tailed network, lost messages, data centers that share hot marks only among their own isolates
 * and only after a propagation delay, and requests whose client is in another region than the isolate's usual one (so
 * the isolate's batches move between delegates). Every figure of bench/cluster.ts is reported with all of it on.
 */

/** Data centers per region; each has its own hot marks (the Cache API is per data center). */
export const DATA_CENTERS_PER_REGION = 3;
/** How long a written hot mark takes to be seen by the other isolates of its data center, ms. */
export const MARK_PROPAGATION_MS = 100;
/** Share of messages (a call or its answer, each way) lost on the way: the sender's own timeout must notice. */
export const LOST_MESSAGE_RATE = 0.001;
/**
 * The spread of a one-way delay: lognormal around half the link's round trip, with 1% of delays at 5x that or more
 * (sigma = ln 5 / z(0.99)).
 */
export const DELAY_SIGMA = Math.log(5) / 2.3263;
/** Share of an isolate's requests whose client is in the next region: they go to that region's delegate. */
export const MOVED_REQUEST_RATE = 0.05;

/** A standard normal draw from two uniform ones (Box-Muller). */
function normal(random: () => number): number {
  const u = 1 - random(); // (0, 1]: log(u) is finite
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/** One-way delays of a link with this median round trip: lognormal, the 99th percentile at 5x the median, >= 1 ms. */
export function delaysOf(rttMs: number, random: () => number): () => number {
  return () => Math.max(1, Math.round((rttMs / 2) * Math.exp(DELAY_SIGMA * normal(random))));
}

/** Whether the next message is lost. */
export function lossOf(random: () => number): () => boolean {
  return () => random() < LOST_MESSAGE_RATE;
}

/** A link: each draw is a one-way delay, ms; `lost` draws whether a message on it is lost (absent: the server's). */
export interface Link {
  (): number;
  readonly lost?: () => boolean;
}

/**
 * The link named `name` in the run of `seed`, with this median round trip: its delays and losses come from a stream
 * of its own (common random numbers), so two runs on the same arrivals (the tier and one call per request) see the
 * same network on the same link whatever the other links carried; no kinder, only the same draws.
 */
export function linkOf(seed: number, name: string, rttMs: number, random: (seed: number) => () => number): Link {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  const stream = random(h >>> 0);
  return Object.assign(delaysOf(rttMs, stream), { lost: lossOf(stream) });
}
