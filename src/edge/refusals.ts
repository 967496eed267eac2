/**
 * Every refusal's status, problem+json body and fields: refused by a deny rule, too costly, unauthorized, bad request,
 * denied, failed closed.
 */
import { logEvent } from "../isolate/metrics.ts";
import { type limitFields, policyWindowS, rateLimitPolicy } from "../request/headers.ts";
import type { Applicable, CompiledDeny, CompiledRule } from "../request/match.ts";
import type { AskResult } from "./ask.ts";
import { type Judgement, type RequestContext, reportOf } from "./judgement.ts";
import { routeOf } from "./telemetry.ts";

export const TEMPORARY_REDUCED_CAPACITY_TYPE =
  "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/** A refusal's status, body and fields. */
export interface Refusal {
  readonly status: number;
  readonly problem: Readonly<Record<string, unknown>>;
  readonly headers: ReadonlyArray<readonly [string, string]>;
}

/** 400: this request costs more than an enforcing rule can ever admit. No state changes: only policies are sent. */
export function refuseTooCostly(
  cx: RequestContext,
  app: Applicable,
  matched: readonly Applicable[],
  nowMs: number,
): Judgement {
  const { rule } = app.compiled;
  cx.isolate.stats.denials++;
  logEvent("log", {
    event: "deny",
    plan: cx.plan,
    method: cx.method,
    rules: [{ rule: rule.id, route: routeOf(rule), key: app.keyHash, reason: "cost_exceeds_capacity" }],
  });
  const body = {
    type: "about:blank",
    title: "Bad Request",
    status: 400,
    detail: `This request costs ${app.cost}, more than rule ${rule.id} can ever admit (${app.compiled.capacity}).`,
    error: "cost_exceeds_capacity",
    rule: rule.id,
    cost: app.cost,
    capacity: app.compiled.capacity,
  };
  const rules = matched.map((a) => reportOf(a, a === app ? "cost_exceeds_capacity" : "not_asked", null, null));
  const headers = policyHeader(matched, nowMs);
  return { kind: "refused", reason: "cost_exceeds_capacity", status: 400, problem: body, headers, rules };
}

/** `RateLimit-Policy` alone, for the enforcing rules that applied (nothing was decided, so no `RateLimit`). */
function policyHeader(apps: readonly Applicable[], nowMs: number): [string, string][] {
  const policies = apps
    .filter((a) => a.compiled.rule.mode === "enforce")
    .map(({ compiled }) => ({
      ruleId: compiled.rule.id,
      quota: compiled.capacity,
      windowS: policyWindowS(compiled.params, nowMs),
    }));
  return policies.length === 0 ? [] : [["RateLimit-Policy", rateLimitPolicy(policies)]];
}

/** The reason phrases (RFC 9110) of the statuses a deny rule is likely to answer with. */
const REASON_PHRASES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  410: "Gone",
  429: "Too Many Requests",
  451: "Unavailable For Legal Reasons",
  503: "Service Unavailable",
};

/**
 * The deny rules that match a request (match.ts `denyingRules`): the shadow ones logged as would-be refusals, and the
 * enforcing one, the last, refusing it with its status. No `Retry-After` and no RateLimit fields: no later retry is
 * admitted. `null` when no enforcing deny rule matched.
 */
export function forbidden(cx: RequestContext, matched: readonly CompiledDeny[]): Judgement | null {
  let refusing: CompiledDeny | null = null;
  for (const compiled of matched) {
    const { rule } = compiled;
    const shadow = rule.mode === "shadow";
    if (shadow) cx.isolate.stats.shadow_denials++;
    else refusing = compiled;
    logEvent("log", {
      event: shadow ? "shadow_deny" : "deny",
      rule: rule.id,
      plan: cx.plan,
      method: cx.method,
      route: routeOf(rule),
      reason: "deny_rule",
    });
  }
  if (refusing === null) return null;
  const { rule } = refusing;
  cx.isolate.stats.denials++;
  const problem = {
    type: "about:blank",
    title: REASON_PHRASES[rule.status] ?? "Refused",
    status: rule.status,
    detail: `Rule ${rule.id} refuses every request it matches.`,
    rule: rule.id,
  };
  return { kind: "refused", reason: "forbidden", status: rule.status, problem, headers: [], rules: [] };
}

/** 401: a rule with `unverified: reject` applies, and the caller has no verified API key. Nothing is counted. */
export function unauthorized(cx: RequestContext, compiled: CompiledRule): Judgement {
  const { rule } = compiled;
  cx.isolate.stats.denials++;
  logEvent("log", {
    event: "unverified_rejected",
    plan: cx.plan,
    method: cx.method,
    rule: rule.id,
    route: routeOf(rule),
  });
  return {
    kind: "refused",
    reason: "unauthorized",
    status: 401,
    problem: {
      type: "about:blank",
      title: "Unauthorized",
      status: 401,
      detail: `Rule ${rule.id} needs a valid API key (Authorization: Bearer <key> or X-API-Key).`,
      rule: rule.id,
    },
    headers: [["WWW-Authenticate", 'Bearer realm="api"']],
    rules: [],
  };
}

/**
 * 400 problem+json for a request no rule can be asked about (an unreadable or ambiguous path, a bad method override);
 * `error` names the kind.
 */
export function badRequest(detail: string, error: string): Judgement {
  const problem = { type: "about:blank", title: "Bad Request", status: 400, detail, error };
  return { kind: "refused", reason: "bad_request", status: 400, problem, headers: [], rules: [] };
}

/** The denial, with its one log line. */
export function deny(
  cx: RequestContext,
  fields: ReturnType<typeof limitFields>,
  denials: readonly AskResult[],
): Refusal {
  cx.isolate.stats.denials++;
  logEvent("log", {
    event: "deny",
    plan: cx.plan,
    method: cx.method,
    rules: denials.flatMap((o) =>
      o.kind === "decided"
        ? [
            {
              rule: o.app.compiled.rule.id,
              route: routeOf(o.app.compiled.rule),
              key: o.app.keyHash,
              cost: o.app.cost,
              retry_after_ms: o.decision.retryAfterMs,
              source: o.source,
            },
          ]
        : [],
    ),
  });
  const denial = fields.denial!;
  return { status: denial.status, problem: { ...denial.problem }, headers: fields.headers };
}

/** 503 temporary-reduced-capacity: an enforcing rule with `on_error: closed` could not decide. */
export function failClosed(fields: ReturnType<typeof limitFields>, failed: readonly AskResult[]): Refusal {
  const ruleIds = failed.map((o) => o.app.compiled.rule.id);
  return {
    status: 503,
    problem: {
      type: TEMPORARY_REDUCED_CAPACITY_TYPE,
      title: "Temporary Reduced Capacity",
      status: 503,
      detail: `The rate limiter for ${ruleIds.join(", ")} is unavailable, and fails closed.`,
      "violated-policies": ruleIds,
    },
    headers: [...fields.headers, ["Retry-After", "1"]],
  };
}
