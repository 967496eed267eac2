/**
 * Leases: a `scope: global` rule may let an isolate hold a slice of a hot key's budget and admit from it locally, so
 * the key's Durable Object is asked about once per slice instead of once per request (see docs/rules.md, `lease`).
 *
 * The object charges the slice up front with the algorithm itself (a charge of `units` at the grant time, exactly as
 * that many cost-1 requests at that instant), so nothing here does algorithm arithmetic; what is per algorithm is only
 * *whether* a slice can be used later than it was charged without loosening the rule, and for how long:
 *
 * - window (fixed_window): a unit charged in a window is used in that same window (the lease ends at the window's end
 *   at the latest), so no window ever admits more than `limit`.
 * - rate (token_bucket, gcra, leaky_bucket): a unit is used at most `ttl` after it was charged, so in any span `t` at
 *   most `burst + rate × (t + ttl)` is admitted (the object's own bound, over the span stretched back by the lease).
 * - none: leaky_queue (each request's place in the queue, and so its delay, is decided at its own arrival), and
 *   sliding_log and sliding_counter (a unit charged now leaves their sliding window before a request that used it
 *   later would, so the window could admit more than `limit`).
 */
import { windowIndex, windowStartMs } from "../algorithms/windows.ts";
import type { AlgorithmName, AlgorithmParams } from "./types.ts";

/** What a lease promises for an algorithm, or why it has none. */
export type LeaseKind =
  | { readonly kind: "window" }
  | { readonly kind: "rate" }
  | { readonly kind: "none"; readonly why: string };

const LEASE_KINDS: { readonly [K in AlgorithmName]: LeaseKind } = {
  token_bucket: { kind: "rate" },
  gcra: { kind: "rate" },
  leaky_bucket: { kind: "rate" },
  fixed_window: { kind: "window" },
  leaky_queue: { kind: "none", why: "each request's place in the queue is decided when it arrives" },
  sliding_log: { kind: "none", why: "a unit charged early would leave the sliding window before its request does" },
  sliding_counter: {
    kind: "none",
    why: "a unit charged early would leave the sliding window before its request does",
  },
};

export function leaseKindOf(algorithm: AlgorithmName): LeaseKind {
  return LEASE_KINDS[algorithm];
}

/** The longest lease, ms: the bound for rate rules loosens by `rate × ttl`, and an unused slice waits that long. */
export const MAX_LEASE_TTL_MS = 10_000;
/** The default lease time, ms. */
export const DEFAULT_LEASE_TTL_MS = 1_000;

/**
 * How long a lease charged at `atMs` may be used, ms: `ttlMs`, cut at the end of the window for window rules (so
 * every unit is used in the window it was charged in). 0 for algorithms that take no leases.
 */
export function leaseTermMs(params: AlgorithmParams, atMs: number, ttlMs: number): number {
  const lease = LEASE_KINDS[params.algorithm];
  switch (lease.kind) {
    case "rate":
      return ttlMs;
    case "window": {
      if (params.algorithm !== "fixed_window") return 0;
      const endMs = windowStartMs(params.window, windowIndex(params.window, atMs) + 1);
      return Math.max(0, Math.min(ttlMs, endMs - atMs));
    }
    case "none":
      return 0;
    default: {
      const never: never = lease;
      return never;
    }
  }
}
