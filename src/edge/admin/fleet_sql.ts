/**
 * The fleet view's SQL: the Analytics Engine queries the dashboard runs, the same ones docs/operations.md prints
 * (test/unit/docs_operations.test.ts renders each with the values the doc uses and finds it there, word for word).
 * Pure text: the dataset name and the period are the only inputs, and both come from fixed tables or a checked
 * setting, never from a request.
 */

/** A period the page may ask for: how far back, and the width of one time bucket of the chart. */
export interface FleetPeriod {
  /** As the page and the API name it: `1h`, `6h`, `24h`, `7d`. */
  readonly name: string;
  /** The SQL interval: `'1' HOUR`. */
  readonly interval: string;
  readonly spanS: number;
  readonly bucketS: number;
}

export const FLEET_PERIODS: readonly FleetPeriod[] = [
  { name: "1h", interval: "'1' HOUR", spanS: 3_600, bucketS: 60 },
  { name: "6h", interval: "'6' HOUR", spanS: 21_600, bucketS: 300 },
  { name: "24h", interval: "'1' DAY", spanS: 86_400, bucketS: 900 },
  { name: "7d", interval: "'7' DAY", spanS: 604_800, bucketS: 3_600 },
];

/** A dataset name as Analytics Engine takes it, and safe to put into SQL text unquoted. */
export const DATASET_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The queries of the fleet view, by what they answer. */
export interface FleetQueries {
  /** One row per (time bucket, rule): `t` (seconds since the epoch, the bucket's start), `rule`, `denials`. */
  readonly denialsOverTime: string;
  /** The most denied keys: `key_hash`, `rule`, `plan`, `denials`, `mean_retry_after_ms`. */
  readonly topDeniedKeys: string;
  /**
   * One row per rule: `rule`, `decisions`, `allowed`, `denied`, `shadow_denied`, `fail_open`, `fail_closed` (counts
   * over the period, sampling weighted).
   */
  readonly ruleTotals: string;
}

/** The fleet view's queries over `dataset` for `period`. */
export function fleetQueries(dataset: string, period: FleetPeriod): FleetQueries {
  if (!DATASET_RE.test(dataset)) throw new RangeError(`not a dataset name: ${JSON.stringify(dataset)}`);
  return {
    denialsOverTime: `SELECT
  intDiv(toUInt32(timestamp), ${period.bucketS}) * ${period.bucketS} AS t,
  blob1 AS rule,
  SUM(_sample_interval) AS denials
FROM ${dataset}
WHERE blob2 = 'denied'
  AND timestamp > NOW() - INTERVAL ${period.interval}
GROUP BY t, rule
ORDER BY t, rule`,
    topDeniedKeys: `SELECT
  index1 AS key_hash,
  blob1 AS rule,
  blob3 AS plan,
  SUM(_sample_interval) AS denials,
  SUM(_sample_interval * double2) / SUM(_sample_interval) AS mean_retry_after_ms
FROM ${dataset}
WHERE blob2 = 'denied'
  AND timestamp > NOW() - INTERVAL ${period.interval}
GROUP BY key_hash, rule, plan
ORDER BY denials DESC
LIMIT 20`,
    ruleTotals: `SELECT
  blob1 AS rule,
  SUM(_sample_interval) AS decisions,
  sumIf(_sample_interval, blob2 IN ('allowed', 'refunded')) AS allowed,
  sumIf(_sample_interval, blob2 = 'denied') AS denied,
  sumIf(_sample_interval, blob2 = 'shadow_denied') AS shadow_denied,
  sumIf(_sample_interval, blob2 = 'fail_open') AS fail_open,
  sumIf(_sample_interval, blob2 = 'fail_closed') AS fail_closed
FROM ${dataset}
WHERE blob2 NOT IN ('not_asked', 'cost_exceeds_capacity')
  AND timestamp > NOW() - INTERVAL ${period.interval}
GROUP BY rule
ORDER BY decisions DESC`,
  };
}
