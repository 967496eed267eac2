/**
 * What the gateway reports: per-isolate counters (the admin API's `/_sluice/stats`), one Workers Analytics Engine
 * data point per rule decision when the `METRICS` binding is configured, and one JSON log line per denial, shadow
 * denial and limiter failure. Keys appear only as their hash (SHA-256, or HMAC-SHA256 under `KEY_HASH_SECRET`);
 * routes appear as the rule's route pattern, never the request's path (which a client can fill with anything).
 */
import type { RuleOutcome } from "../request/compose.ts";

/** An isolate's counters since it started (one set per isolate, see isolate.ts). */
export function newStats() {
  return {
    /** Requests through the gateway (admin requests excluded). */
    requests: 0,
    /** Durable Object `check` calls, retries included: a coalesced batch of requests is one call. */
    object_calls: 0,
    /** Retries after a retryable error. */
    object_retries: 0,
    /** Requests that went to the object in a batch of 2 or more (coalesced while a call was in flight). */
    batched_requests: 0,
    /** Rule decisions answered from this isolate's lease, without a call. */
    lease_answers: 0,
    /** Leases granted to this isolate. */
    leases: 0,
    /** Units given back to objects from leases that ended unused. */
    lease_units_returned: 0,
    /** Requests refused at once because COALESCE_MAX_WAITING requests already waited for their key (overloaded). */
    queue_overflows: 0,
    /** Rule decisions made from what the isolate last knew, because the object could not decide (overloaded, ...). */
    last_known_answers: 0,
    /** Calls past their budget on a key not known busy whose late answer, within one more budget, decided. */
    late_answers: 0,
    /** Rule decisions answered by the blocked-key cache, without a call. */
    cache_answers: 0,
    /** Requests denied (by any enforcing rule, from any source). */
    denials: 0,
    /** Rule decisions that failed and were skipped (`on_error: open`). */
    fail_open: 0,
    /** Rule decisions that failed and refused the request (`on_error: closed`). */
    fail_closed: 0,
    /** Would-be denials of shadow rules. */
    shadow_denials: 0,
    /** API keys answered by the account cache (no KV read). */
    plan_cache_hits: 0,
    /** Account lookups sent to KV. */
    kv_reads: 0,
    /** Account lookups not made: the client address had used up its KEY_LOOKUPS_PER_MIN (the key counts as unverified). */
    key_lookups_refused: 0,
    /** Charges sent after the origin answered (rules with `count_when` or `cost_header`). */
    charges: 0,
  };
}

export type Stats = ReturnType<typeof newStats>;

/** Where a decision came from. */
export type Source = "object" | "cache" | "local" | "lease";

export interface DataPoint {
  readonly rule: string;
  readonly outcome: RuleOutcome;
  readonly source: Source | "none";
  readonly plan: string;
  /** The rule's route pattern, `*` when it names none. */
  readonly route: string;
  readonly method: string;
  readonly keyHash: string;
  readonly cost: number;
  readonly retryAfterMs: number | null;
}

/** Where data points go: the `METRICS` Analytics Engine binding in the Worker (this is the part of it used here). */
export interface DataPointSink {
  writeDataPoint(point: { blobs: string[]; doubles: number[]; indexes: string[] }): void;
}

/**
 * One data point: blobs (rule, outcome, plan, route, method, source), doubles (cost, retry_after_ms or 0),
 * index the key hash (so sampling keeps a key's points together). Never throws: metrics must not fail a request.
 */
export function writeDataPoint(dataset: DataPointSink | undefined, p: DataPoint): void {
  if (dataset === undefined) return;
  try {
    dataset.writeDataPoint({
      blobs: [p.rule, p.outcome, p.plan, p.route, p.method, p.source],
      doubles: [p.cost, p.retryAfterMs ?? 0],
      indexes: [p.keyHash],
    });
  } catch (error) {
    console.error(JSON.stringify({ event: "metrics_failed", error: String(error) }));
  }
}

/** One structured log line. */
export function logEvent(level: "log" | "warn" | "error", fields: Record<string, unknown>): void {
  console[level](JSON.stringify(fields));
}
