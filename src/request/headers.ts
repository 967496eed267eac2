/**
 * Decisions -> HTTP: the one place that writes RateLimit-Policy, RateLimit, Retry-After and problem+json bodies.
 * Fields follow draft-ietf-httpapi-ratelimit-headers-11, one item per enforcing rule that applied, named by its id:
 *
 *   RateLimit-Policy: "free-global";q=20;w=2, "labels-bulk";q=20;w=2
 *   RateLimit: "free-global";r=19;t=1, "labels-bulk";r=10;t=1
 *
 * `q` is the rule's capacity and `w` the seconds it describes (the window, or the time to refill the whole burst, so
 * q/w is the long-run rate); `r` is the decision's `remaining`, `t` its `reset_after_ms` in seconds, rounded up. A
 * denial answers the denying rule's status (429 by default) with `Retry-After` in whole seconds, rounded up, plus the
 * rule's per-client jitter; when several rules deny, the longest wait wins. The RFC 9457 body carries the exact
 * `retry_after_ms` (without jitter) and the ids of every rule that denied. `r` counts cost-1 requests, so a request
 * costing more than 1 that is denied says its cost and what was left, per denying rule (`detail`, `costs`).
 */
import { ceilDiv } from "../algorithms/arith.ts";
import { headerWindowMs } from "../algorithms/index.ts";
import type { AlgorithmParams } from "../rules/types.ts";

export const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";
export const PROBLEM_JSON = "application/problem+json";

/** One enforcing rule's view of the request, as the headers report it. */
export interface RuleView {
  readonly ruleId: string;
  /** `q`: the rule's capacity. */
  readonly quota: number;
  /** `w`: the seconds the quota describes. */
  readonly windowS: number;
  readonly remaining: number;
  readonly resetAfterMs: number;
  /** What this request costs under the rule (`cost_by_route`, or 1). */
  readonly cost: number;
  /** Set iff the rule denied the request. */
  readonly retryAfterMs: number | null;
  /** The rule's denial status. */
  readonly status: number;
  /** Extra whole seconds this client adds to `Retry-After` for this rule (0 = no jitter). */
  readonly jitterS: number;
}

export interface Denial {
  readonly status: number;
  readonly retryAfterS: number;
  readonly problem: QuotaProblem;
}

export interface QuotaProblem {
  readonly type: typeof QUOTA_EXCEEDED_TYPE;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly "violated-policies": readonly string[];
  readonly retry_after_ms: number;
  /** Only when the request costs more than 1 under a denying rule: its cost under each denying rule. */
  readonly costs?: Readonly<Record<string, number>>;
}

export interface LimitFields {
  /** Header fields to set on the response (empty when no enforcing rule applied). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Set iff some rule denied. */
  readonly denial: Denial | null;
}

/** The header fields (and, on a denial, the status and body) for a request's enforcing rules. */
export function limitFields(views: readonly RuleView[]): LimitFields {
  const headers: [string, string][] = [];
  if (views.length > 0) {
    headers.push(["RateLimit-Policy", rateLimitPolicy(views)]);
    headers.push([
      "RateLimit",
      views.map((v) => `${sfString(v.ruleId)};r=${v.remaining};t=${ceilDiv(v.resetAfterMs, 1000)}`).join(", "),
    ]);
  }
  const denied = views.filter((v) => v.retryAfterMs !== null);
  if (denied.length === 0) return { headers, denial: null };

  let longest = denied[0]!;
  let retryAfterS = 0;
  let retryAfterMs = 0;
  for (const v of denied) {
    const ms = v.retryAfterMs ?? 0;
    const s = ceilDiv(ms, 1000) + v.jitterS;
    if (s > retryAfterS) {
      retryAfterS = s;
      longest = v;
    }
    retryAfterMs = Math.max(retryAfterMs, ms);
  }
  headers.push(["Retry-After", String(retryAfterS)]);
  const ids = denied.map((v) => v.ruleId);
  const costly = denied.some((v) => v.cost > 1);
  const why = costly ? denied.map((v) => `${v.ruleId}: this request costs ${v.cost}, ${v.remaining} left`) : ids;
  const problem: QuotaProblem = {
    type: QUOTA_EXCEEDED_TYPE,
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: longest.status,
    detail: `Rate limit exceeded (${why.join(costly ? "; " : ", ")}); retry in ${retryAfterMs} ms.`,
    "violated-policies": ids,
    retry_after_ms: retryAfterMs,
    ...(costly ? { costs: Object.fromEntries(denied.map((v) => [v.ruleId, v.cost])) } : {}),
  };
  return { headers, denial: { status: longest.status, retryAfterS, problem } };
}

/** The `RateLimit-Policy` field value: one item per enforcing rule. */
export function rateLimitPolicy(
  policies: readonly { readonly ruleId: string; readonly quota: number; readonly windowS: number }[],
): string {
  return policies.map((v) => `${sfString(v.ruleId)};q=${v.quota};w=${v.windowS}`).join(", ");
}

/**
 * `w` for a rule, in whole seconds (at least 1): the window, or the time to refill the whole capacity from empty, as
 * the algorithm says (`headerWindowMs`).
 */
export function policyWindowS(params: AlgorithmParams, nowMs: number): number {
  return Math.max(1, ceilDiv(headerWindowMs(params, nowMs), 1000));
}

/** An RFC 8941 sf-string. */
export function sfString(text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** An RFC 9457 problem response. */
export function problemResponse(
  status: number,
  body: Record<string, unknown>,
  headers: ReadonlyArray<readonly [string, string]> = [],
): Response {
  const h = new Headers(headers as [string, string][]);
  h.set("Content-Type", PROBLEM_JSON);
  h.set("Cache-Control", "no-store");
  return new Response(JSON.stringify(body), { status, headers: h });
}
