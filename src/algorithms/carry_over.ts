/**
 * Rule changes across a redeploy. State is kept per (rule id, key); when the rule's parameters change, the state
 * carries over where it still means something, and never in the client's favour beyond what the new rule allows.
 * Each algorithm says how in its own file (`carryOver`); in short:
 *
 * - another algorithm: the state is discarded (the key starts fresh under the new rule);
 * - token_bucket, gcra, leaky_bucket: the key keeps its tokens at the moment of the change (rounded down), capped at
 *   the new burst, and refills at the new rate from then on;
 * - leaky_queue: the queued work (requests still waiting, rounded up) is kept, capped at the new capacity, and drains
 *   at the new rate;
 * - fixed_window, sliding_counter: the count is kept when the window is unchanged (a lower limit then simply denies),
 *   discarded when the window changed (old counts belong to other windows); a sliding_counter whose `buckets` changed
 *   (same window) moves each count to the new sub-window holding the latest moment its old one allows, so the key
 *   is judged as if those requests came as late as possible;
 * - sliding_log: the accepted entries are kept and judged by the new window and limit.
 *
 * Conversions multiply numbers that may pass 2^53 together, so they use BigInt; this runs once per key per change.
 */
export { carryOver } from "./index.ts";
