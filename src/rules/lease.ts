/**
 * Leases: a `scope: global` rule may let an isolate hold a slice of a hot key's budget and admit from it locally, so
 * the key's Durable Object is asked about once per slice instead of once per request (see docs/rules.md, `lease`).
 *
 * The object charges the slice up front with the algorithm itself (a charge of `units` at the grant time, exactly as
 * that many cost-1 requests at that instant), so nothing here does algorithm arithmetic. Whether an algorithm takes
 * leases, how long a slice may be used and what the algorithm then promises are the algorithm's own (its `lease`
 * entry, src/algorithms/types.ts `LeasePolicy`): window algorithms never admit more than `limit` per window; rate
 * algorithms never more than `burst + rate × (t + ttl)` in any span `t`. test/unit/lease.props.test.ts checks both
 * against the real isolate and object code. This file holds the rule-file limits of the `lease` setting.
 */

/** The longest lease, ms: the bound for rate rules loosens by `rate × ttl`, and an unused slice waits that long. */
export const MAX_LEASE_TTL_MS = 10_000;
/** The default lease time, ms. */
export const DEFAULT_LEASE_TTL_MS = 1_000;
