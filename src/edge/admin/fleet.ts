/**
 * The fleet view (`GET /_sluice/fleet?period=1h`): what every isolate of the Worker decided, read back from Workers
 * Analytics Engine through its SQL API (one HTTP API: `POST <base>/accounts/<id>/analytics_engine/sql`, the query as
 * the body, `Authorization: Bearer <token>`; with `FORMAT JSON` it answers `{ meta, data, rows }`). Analytics Engine
 * cannot be queried locally, so without its settings the answer says how to enable the view instead, and the page
 * falls back to this isolate's counters.
 *
 * Three queries run at once (fleet_sql.ts): denials per rule over time, the most denied keys (hashed) and each rule's
 * decisions by outcome. Their rows are checked field by field, so a changed API answers a clear 502, not a broken
 * page.
 */
import type { FleetSettings } from "../settings.ts";
import { FLEET_PERIODS, type FleetPeriod, fleetQueries } from "./fleet_sql.ts";

/**
 * How long the fleet view waits for the SQL API, ms: under the page's own wait for the Worker (dashboard_script.ts),
 * so a hung API is reported by name rather than as a page that never fills.
 */
export const FLEET_TIMEOUT_MS = 10_000;

/** How the page is told to enable the fleet view when it is off. */
export const FLEET_HOW_TO = {
  summary:
    "The fleet view reads Workers Analytics Engine. Enable the METRICS dataset in wrangler.toml, then give the " +
    "Worker the account id, the dataset and an API token with Account Analytics: Read.",
  steps: [
    "In wrangler.toml, uncomment [[analytics_engine_datasets]] (binding METRICS, dataset sluice_decisions)",
    'In wrangler.toml [vars]: AE_ACCOUNT_ID = "<your account id>" (and AE_DATASET if not sluice_decisions)',
    "npx wrangler secret put AE_API_TOKEN   (a token with Account Analytics: Read)",
    "npx wrangler deploy",
  ],
} as const;

export interface DenialPoint {
  /** The bucket's start, ms since the epoch. */
  readonly t_ms: number;
  readonly rule: string;
  readonly denials: number;
}

export interface DeniedKey {
  readonly key_hash: string;
  readonly rule: string;
  readonly plan: string;
  readonly denials: number;
  readonly mean_retry_after_ms: number;
}

export interface RuleTotals {
  readonly rule: string;
  readonly decisions: number;
  readonly allowed: number;
  readonly denied: number;
  readonly shadow_denied: number;
  readonly fail_open: number;
  readonly fail_closed: number;
}

export type FleetAnswer =
  | { readonly configured: false; readonly how_to: typeof FLEET_HOW_TO }
  | {
      readonly configured: true;
      readonly dataset: string;
      readonly period: string;
      readonly bucket_s: number;
      /** When the queries ran, ms since the epoch (the data is as fresh as Analytics Engine's ingestion). */
      readonly as_of_ms: number;
      readonly denials_over_time: readonly DenialPoint[];
      readonly top_denied_keys: readonly DeniedKey[];
      readonly rules: readonly RuleTotals[];
    };

/** A failure of the SQL API, said plainly for the page (its status and the first line of its text). */
export class FleetError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

export function fleetPeriodOf(name: string | null): FleetPeriod | null {
  return FLEET_PERIODS.find((p) => p.name === (name ?? "1h")) ?? null;
}

/** The fleet view for `period`, or `configured: false` with the steps to enable it. */
export async function fleetView(
  fleet: FleetSettings | null,
  period: FleetPeriod,
  nowMs: number,
  fetcher: typeof fetch = fetch,
  /** The signal that ends the wait (a test passes one it controls). */
  deadline: AbortSignal = AbortSignal.timeout(FLEET_TIMEOUT_MS),
): Promise<FleetAnswer> {
  if (fleet === null) return { configured: false, how_to: FLEET_HOW_TO };
  const queries = fleetQueries(fleet.dataset, period);
  const [overTime, topKeys, totals] = await Promise.all([
    runQuery(fleet, queries.denialsOverTime, fetcher, deadline),
    runQuery(fleet, queries.topDeniedKeys, fetcher, deadline),
    runQuery(fleet, queries.ruleTotals, fetcher, deadline),
  ]);
  return {
    configured: true,
    dataset: fleet.dataset,
    period: period.name,
    bucket_s: period.bucketS,
    as_of_ms: nowMs,
    denials_over_time: overTime.map((r) => ({
      t_ms: num(r, "t") * 1000,
      rule: text(r, "rule"),
      denials: num(r, "denials"),
    })),
    top_denied_keys: topKeys.map((r) => ({
      key_hash: text(r, "key_hash"),
      rule: text(r, "rule"),
      plan: text(r, "plan"),
      denials: num(r, "denials"),
      mean_retry_after_ms: Math.round(num(r, "mean_retry_after_ms")),
    })),
    rules: totals.map((r) => ({
      rule: text(r, "rule"),
      decisions: num(r, "decisions"),
      allowed: num(r, "allowed"),
      denied: num(r, "denied"),
      shadow_denied: num(r, "shadow_denied"),
      fail_open: num(r, "fail_open"),
      fail_closed: num(r, "fail_closed"),
    })),
  };
}

type Row = Record<string, unknown>;

/** One query through the SQL API: its `data` rows. */
async function runQuery(
  fleet: FleetSettings,
  sql: string,
  fetcher: typeof fetch,
  deadline: AbortSignal,
): Promise<Row[]> {
  const url = `${fleet.apiBase}/accounts/${encodeURIComponent(fleet.accountId)}/analytics_engine/sql`;
  let response: Response;
  let body: string;
  try {
    response = await fetcher(url, {
      method: "POST",
      headers: { Authorization: `Bearer ${fleet.apiToken}`, "Content-Type": "text/plain" },
      body: `${sql}\nFORMAT JSON`,
      signal: deadline,
    });
    body = await response.text();
  } catch (error) {
    if (deadline.aborted)
      throw new FleetError(`the Analytics Engine SQL API did not answer within ${FLEET_TIMEOUT_MS / 1000} s`, null);
    throw new FleetError(`the Analytics Engine SQL API did not answer: ${(error as Error).message}`, null);
  }
  if (!response.ok) {
    const first = body.trim().split("\n")[0]?.slice(0, 300) ?? "";
    throw new FleetError(
      `the Analytics Engine SQL API answered ${response.status}: ${first}${refusalHint(response.status, fleet)}`,
      response.status,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new FleetError("the Analytics Engine SQL API answered something that is not JSON", response.status);
  }
  const data = (parsed as { data?: unknown }).data;
  if (!Array.isArray(data) || !data.every((r) => typeof r === "object" && r !== null)) {
    throw new FleetError("the Analytics Engine SQL API answered JSON without a data array of rows", response.status);
  }
  return data as Row[];
}

/** What to check when the SQL API refuses the Worker's credentials (401, 403), in the settings' own names. */
function refusalHint(status: number, fleet: FleetSettings): string {
  if (status !== 401 && status !== 403) return "";
  return (
    ` (Analytics Engine refused the credentials: check that the secret AE_API_TOKEN is an API token with ` +
    `Account Analytics: Read, and that AE_ACCOUNT_ID, now ${fleet.accountId}, is the account it was made for)`
  );
}

/** A numeric column: JSON output quotes 64-bit integers as strings, so both are read. */
function num(row: Row, column: string): number {
  const v = row[column];
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : Number.NaN;
  if (!Number.isFinite(n)) throw new FleetError(`a row's ${column} is not a number: ${JSON.stringify(v)}`, 200);
  return n;
}

function text(row: Row, column: string): string {
  const v = row[column];
  if (typeof v !== "string") throw new FleetError(`a row's ${column} is not text: ${JSON.stringify(v)}`, 200);
  return v;
}
