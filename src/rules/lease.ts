/**
 * Leases: a `scope: global` rule may let an isolate hold units of a hot key's budget and admit from them locally, so
 * the key's Durable Object is asked about once per lease instead of once per request (see docs/rules.md, `lease`).
 *
 * The object charges the lease up front with the algorithm itself (a charge of `units` at the grant time, exactly as
 * that many cost-1 requests at that instant), so nothing here does algorithm arithmetic. Whether an algorithm takes
 * leases, how long a lease may be used and what the algorithm then promises are the algorithm's own (its `lease`
 * entry, src/algorithms/types.ts `LeasePolicy`): window algorithms never admit more than `limit` per window; rate
 * algorithms never more than `burst + rate × (t + ttl)` in any span `t`. test/unit/lease.props.test.ts checks both
 * against the real isolate and object code. This file reads and prints the rule-file `lease` setting.
 */
import { type AlgorithmName, LEASE_ALGORITHMS, leasePolicy } from "../algorithms/index.ts";
import { DURATION_HINT, formatDurationUnit, parseDuration, parseRate } from "./duration.ts";
import { describe, type Raw } from "./raw.ts";
import { positiveInt, type RuleErrors, unknownKey } from "./read.ts";
import type { AlgorithmParams, LeaseSettings, Rate } from "./types.ts";

/** The longest lease, ms: the bound for rate rules loosens by `rate × ttl`, and an unused lease waits that long. */
export const MAX_LEASE_TTL_MS = 10_000;
/** The default lease time, ms. */
export const DEFAULT_LEASE_TTL_MS = 1_000;

/**
 * The most one lease takes of a key's budget, as a divisor of the rule's capacity: a quarter (at least 1 unit), so no
 * isolate holds most of a small window's budget while the others refuse (a `5 per minute` rule lends 1 unit at a
 * time). The validator refuses a `lease.units` above it; the object caps a window rule's grants at it
 * (src/protocol/store.ts `leaseCapOf`).
 */
export const LEASE_MAX_SHARE_DIVISOR = 4;

const LEASE_KEYS = ["ttl", "units", "above"] as const;

/** `lease`: the setting checked field by field, and against the rule's algorithm and scope. */
export function readLease(
  v: Raw | undefined,
  e: RuleErrors,
  algorithm: AlgorithmName | null,
  scope: string | undefined,
  capacity: number | null,
  params: AlgorithmParams | null = null,
): LeaseSettings | null | undefined {
  if (!(v instanceof Map)) {
    e.add("lease", `must be a mapping such as { ttl: 1s, units: 100, above: 200/s }, got ${describe(v)}`);
    return undefined;
  }
  const errorsBefore = e.count;
  for (const key of v.keys()) {
    if ((LEASE_KEYS as readonly string[]).includes(key)) continue;
    e.add(`lease.${key}`, unknownKey(key, LEASE_KEYS, "lease takes ttl, units and above"));
  }
  if (algorithm !== null) {
    const policy = leasePolicy(algorithm);
    if (policy.kind === "none") {
      const names = LEASE_ALGORITHMS.join(", ").replace(/, ([^,]*)$/, " and $1");
      e.add("lease", `${algorithm} takes no lease (${policy.why}); leases are for ${names}`);
    }
  }
  if (scope === "local") {
    e.add(
      "lease",
      "a lease is a slice of a global key's budget; a scope: local rule is already decided in the isolate",
    );
  }
  const ttlMs = v.has("ttl") ? leaseTtl(v.get("ttl"), e, params) : DEFAULT_LEASE_TTL_MS;
  const units = v.has("units") ? leaseUnits(v.get("units"), e, capacity) : null;
  const above = v.has("above") ? leaseAbove(v.get("above"), e) : null;
  if (e.count > errorsBefore || ttlMs === undefined || units === undefined || above === undefined) return undefined;
  return { ttlMs, units, above };
}

/** `lease.ttl`: a duration up to `MAX_LEASE_TTL_MS`, and no longer than a window rule's window. */
function leaseTtl(t: Raw | undefined, e: RuleErrors, params: AlgorithmParams | null): number | undefined {
  const d = typeof t === "string" ? parseDuration(t) : { error: `must be ${DURATION_HINT}, got ${describe(t)}` };
  if ("error" in d) {
    e.add("lease.ttl", d.error);
    return undefined;
  }
  if (d.ms > MAX_LEASE_TTL_MS) {
    e.add(
      "lease.ttl",
      `must be at most 10s (the bound for rate rules loosens by rate × ttl), got ${JSON.stringify(t)}`,
    );
    return undefined;
  }
  // A window algorithm cuts a lease at its window's end: from a window's start (the epoch starts one), a ttl longer
  // than the window is cut to the window.
  const policy = params === null ? null : leasePolicy(params.algorithm);
  const windowMs = params !== null && policy?.kind === "window" ? policy.termMs(params, 0, d.ms) : d.ms;
  if (windowMs < d.ms) {
    e.add(
      "lease.ttl",
      `must be at most the rule's window (${windowMs} ms): a lease is cut at its window's end, so a longer ttl cannot work, got ${JSON.stringify(t)}`,
    );
    return undefined;
  }
  return d.ms;
}

/**
 * `lease.units`: a positive integer of at most a quarter of the rule's capacity (`LEASE_MAX_SHARE_DIVISOR`): units
 * near the capacity would let one isolate hold most of the key's budget while every other refuses.
 */
function leaseUnits(u: Raw | undefined, e: RuleErrors, capacity: number | null): number | undefined {
  const n = positiveInt(e, "lease.units", u);
  const most = capacity === null ? null : Math.max(1, Math.floor(capacity / LEASE_MAX_SHARE_DIVISOR));
  if (n !== undefined && capacity !== null && most !== null && n > most) {
    e.add(
      "lease.units",
      `must be at most a quarter of the rule's capacity ${capacity} (${most}): one isolate would hold most of the key's budget while the others refuse, got ${n}`,
    );
    return undefined;
  }
  return n;
}

/** `lease.above`: a rate, as in rule files. */
function leaseAbove(a: Raw | undefined, e: RuleErrors): Rate | undefined {
  const rate =
    typeof a === "string"
      ? parseRate(a)
      : { error: `must be a rate "<amount>/<duration>" such as 200/s, got ${describe(a)}` };
  if ("error" in rate) {
    e.add("lease.above", rate.error);
    return undefined;
  }
  return rate;
}

/** A lease setting in rule-file terms: `ttl 1s, units 100, above 200/s` (`none`: no leases). */
export function printLease(lease: LeaseSettings | null): string {
  if (lease === null) return "none";
  const parts = [`ttl ${formatDurationUnit(lease.ttlMs)}`];
  if (lease.units !== null) parts.push(`units ${lease.units}`);
  if (lease.above !== null) parts.push(`above ${lease.above.amount}/${formatDurationUnit(lease.above.periodMs)}`);
  return parts.join(", ");
}
