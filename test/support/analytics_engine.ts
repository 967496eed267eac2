/**
 * The Analytics Engine SQL API, played back from test/fixtures/analytics_engine: a request is answered only when it
 * is exactly what the fleet view must send (POST, `Authorization: Bearer <token>`, the body one of fleet_sql.ts's
 * queries for the period `1h` followed by `FORMAT JSON`); anything else gets the API's own 403 or 422 text. Used by
 * the Workers-runtime tests (as a `fetch`) and the browser test (as a local HTTP server that `AE_API_BASE` points
 * at). Imports no Node API, so it also runs inside workerd.
 */
import { FLEET_PERIODS, fleetQueries } from "../../src/edge/admin/fleet_sql.ts";
import denialsOverTime from "../fixtures/analytics_engine/denials_over_time.json" with { type: "json" };
import recorded from "../fixtures/analytics_engine/recorded.json" with { type: "json" };
import ruleTotals from "../fixtures/analytics_engine/rule_totals.json" with { type: "json" };
import topDeniedKeys from "../fixtures/analytics_engine/top_denied_keys.json" with { type: "json" };

export const AE_ACCOUNT_ID = "0123456789abcdef0123456789abcdef";
export const AE_API_TOKEN = "ae-token-for-tests-only";
export const AE_DATASET = "sluice_decisions";

/** What the fake API saw, for assertions. */
export interface AeCall {
  readonly url: string;
  readonly authorization: string | null;
  readonly body: string;
}

/**
 * The answer to one request; `nowS`, when given, shifts the over-time rows by whole buckets so their last bucket is
 * the one holding `nowS` (the data then reads as the last hour's).
 */
export function aeAnswer(url: string, authorization: string | null, body: string, nowS?: number): Response {
  const period = FLEET_PERIODS.find((p) => p.name === recorded.period)!;
  const queries = fleetQueries(AE_DATASET, period);
  if (!url.endsWith(`/accounts/${AE_ACCOUNT_ID}/analytics_engine/sql`) || authorization !== `Bearer ${AE_API_TOKEN}`) {
    return new Response("Authorization error", { status: 403, headers: { "Content-Type": "text/plain" } });
  }
  const answers: [string, unknown][] = [
    [queries.denialsOverTime, shifted(denialsOverTime, period.bucketS, nowS)],
    [queries.topDeniedKeys, topDeniedKeys],
    [queries.ruleTotals, ruleTotals],
  ];
  const hit = answers.find(([sql]) => body === `${sql}\nFORMAT JSON`);
  if (hit === undefined) {
    return new Response("Input was invalid: not a query these recordings answer", {
      status: 422,
      headers: { "Content-Type": "text/plain" },
    });
  }
  return new Response(JSON.stringify(hit[1]), { headers: { "Content-Type": "application/json" } });
}

function shifted(response: typeof denialsOverTime, bucketS: number, nowS: number | undefined) {
  if (nowS === undefined) return response;
  const offsetS = Math.floor(nowS / bucketS) * bucketS - Math.floor(recorded.recorded_at_s / bucketS) * bucketS;
  return { ...response, data: response.data.map((r) => ({ ...r, t: r.t + offsetS })) };
}

/** A `fetch` that answers like the SQL API from the recordings, and the calls it saw. */
export function aeFetcher(nowS?: number): { readonly fetcher: typeof fetch; readonly calls: AeCall[] } {
  const calls: AeCall[] = [];
  const fetcher = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const body = await request.text();
    const authorization = request.headers.get("authorization");
    calls.push({ url: request.url, authorization, body });
    if (request.method !== "POST") return new Response("Content type error", { status: 400 });
    return aeAnswer(request.url, authorization, body, nowS);
  }) as typeof fetch;
  return { fetcher, calls };
}
