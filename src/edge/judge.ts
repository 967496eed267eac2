// long-file: the one request path, read top to bottom.
/**
 * The request path: identify the caller, find its plan, find every rule that applies, ask all of them at once,
 * compose their answers, then forward (after any shaping delay) or deny.
 *
 * One path for every way in: `judgeRequest` decides an HTTP request (the gateway's `handleRequest` and the service
 * binding's `check`, entrypoint.ts), `judgeApplicable` decides rules already chosen (the binding's `limit` enters
 * here with its one rule). Both end in a `Judgement`: refused (status, problem body, headers) or admitted (headers,
 * after any shaping delay). Only the gateway then asks an origin (origin.ts).
 *
 * The steps, each a short function below: who is calling (caller.ts) -> which rules apply (match.ts, and no cost
 * above a rule's capacity) -> what this isolate already knows (the blocked-key cache, looked up once) -> ask
 * (ask.ts) -> compose (compose.ts, pure) -> answer (refunds, logs and metrics, then forward, delay or deny). Time and
 * isolate state come in as one `Isolate` (isolate.ts).
 *
 * Composition: a request is admitted only if every enforcing rule admits it. When one denies, every rule that did
 * admit it (shadow rules too) is refunded, so a denied request costs nothing anywhere. Shadow rules never block: a
 * would-be denial is one structured JSON log line.
 *
 * Where a decision comes from: `scope: local` rules are decided in this isolate (local_scope.ts); `scope: global`
 * rules by their Durable Object, unless this isolate's blocked-key cache already knows the object would deny
 * (blocked_cache.ts). When an enforcing rule is known to deny, no object is asked at all: the request is refused
 * with that rule's answer, so a flood from a blocked key costs about one object call per retry period.
 *
 * Failure policy: a Durable Object call that throws, is overloaded, was reset or misses the rule's `timeout_ms` is a
 * value (object_call.ts): `fail_open` (the rule is skipped, logged) or `fail_closed` (503 problem+json of type
 * temporary-reduced-capacity), per the rule's `on_error` (default `open`).
 */

import type { Decision } from "../algorithms/index.ts";
import type { Companion } from "../isolate/blocked_cache.ts";
import type { Isolate } from "../isolate/isolate.ts";
import { logEvent, type Source, writeDataPoint } from "../isolate/metrics.ts";
import { objectNameOf } from "../object/names.ts";
import { messageOf } from "../protocol/object_call.ts";
import type { RefundResult } from "../protocol/store.ts";
import { adminReading, isAdminPath } from "../request/admin_path.ts";
import { type Answer, type Composition, compose, type RuleOutcome } from "../request/compose.ts";
import { limitFields, policyWindowS, problemResponse, type RuleView, rateLimitPolicy } from "../request/headers.ts";
import { type Applicable, applicableRules, type CompiledRule, rejectingRule } from "../request/match.ts";
import { shapeOf } from "../request/request_shape.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { handleAdmin, withoutAdminToken } from "./admin/admin.ts";
import { type AskContext, type AskResult, ask, fingerprintOfRule } from "./ask.ts";
import { whoIsCalling } from "./caller.ts";
import { jitterSeconds } from "./hash.ts";
import { noOrigin, originResponse, unreachableOrigin } from "./origin.ts";
import { type Env, settingsOf } from "./settings.ts";

export const TEMPORARY_REDUCED_CAPACITY_TYPE =
  "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/** Everything one request's steps share. */
export interface RequestContext extends AskContext {
  readonly ctx: ExecutionContext;
  /** The request's method, upper-case (`RPC` for the service binding's `limit`); for logs and metrics. */
  readonly method: string;
  /** The caller's plan (`none` for the service binding's `limit`, which names its rule). */
  readonly plan: string;
}

/** One rule's part in a judgement, as the service binding reports it. */
export interface RuleReport {
  readonly rule: string;
  readonly mode: "enforce" | "shadow";
  /** What the rule's answer counted as (metrics.ts). */
  readonly outcome: RuleOutcome;
  /** After any refund; `null` when the rule did not decide (failed, not asked, or costlier than its capacity). */
  readonly remaining: number | null;
  readonly resetAfterMs: number | null;
  /** Set iff the rule denied (or would have, for a shadow rule). */
  readonly retryAfterMs: number | null;
}

/** Why a request was not admitted. */
export type RefusalReason = "bad_request" | "unauthorized" | "cost_exceeds_capacity" | "denied" | "fail_closed";

/** What the request path decided, before any origin is asked. */
export type Judgement =
  | {
      readonly kind: "refused";
      readonly reason: RefusalReason;
      readonly status: number;
      /** The RFC 9457 body the gateway answers with. */
      readonly problem: Readonly<Record<string, unknown>>;
      readonly headers: ReadonlyArray<readonly [string, string]>;
      readonly rules: readonly RuleReport[];
    }
  | {
      readonly kind: "admitted";
      /** RateLimit fields (and the lease header) for the response. */
      readonly headers: ReadonlyArray<readonly [string, string]>;
      /** How long the request was held for shaping before this answer (leaky_queue), ms. */
      readonly delayedMs: number;
      readonly rules: readonly RuleReport[];
      /** Every rule's answer, for the echo origin. */
      readonly outcomes: readonly AskResult[];
    };

export async function handleRequest(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
  isolate: Isolate,
): Promise<Response> {
  try {
    const url = new URL(request.url);
    const settings = settingsOf(env);
    if (isAdminPath(url.pathname)) return await handleAdmin(request, url, env, settings, rules, isolate);
    // Another spelling of an admin path is never forwarded: an upstream may read it as /_sluice/... too.
    if (adminReading(url.pathname)) return problemResponse(400, ADMIN_SPELLING);
    return await gateway(request, url, { env, settings, isolate, ctx }, rules);
  } catch (error) {
    logEvent("error", { event: "gateway_error", error: messageOf(error) });
    return problemResponse(500, INTERNAL_ERROR);
  }
}

export const INTERNAL_ERROR = { type: "about:blank", title: "Internal Server Error", status: 500 } as const;

const ADMIN_SPELLING = {
  type: "about:blank",
  title: "Bad Request",
  status: 400,
  detail: "This path reads as the admin API (/_sluice/...) only in another spelling; it is not forwarded.",
  error: "admin_path_spelling",
} as const;

/** The gateway: judge the request, then answer the refusal or ask the origin and add the fields to its answer. */
async function gateway(
  request: Request,
  url: URL,
  base: AskContext & { readonly ctx: ExecutionContext },
  rules: readonly CompiledRule[],
): Promise<Response> {
  const origin = base.settings.origin;
  // Checked before anything is counted: a Sluice with nowhere to send admitted requests must not spend budgets.
  if (origin.kind === "none") return noOrigin(origin.problem);
  const unreachable = unreachableOrigin(origin, url);
  if (unreachable !== null) return noOrigin(unreachable);
  const judged = await judgeRequest(request, url, base, rules);
  if (judged.judgement.kind === "refused") {
    const { status, problem, headers } = judged.judgement;
    return problemResponse(status, { ...problem }, headers);
  }
  const outgoing = withoutAdminTokenIn(request, base.settings.adminToken);
  const response = await originResponse(origin, outgoing, url, judged.forwardPath, judged.plan, judged.judgement);
  for (const [name, value] of judged.judgement.headers) response.headers.set(name, value);
  return response;
}

/** `request`, or a copy without any header that carries the admin token: an upstream never receives it. */
function withoutAdminTokenIn(request: Request, adminToken: string | null): Request {
  if (adminToken === null) return request;
  const copy = new Request(request);
  if (withoutAdminToken(copy.headers, adminToken) === 0) return request;
  logEvent("warn", { event: "admin_token_stripped" });
  return copy;
}

/** The request path, step by step, for one HTTP request; with the request's forwarded path and the caller's plan. */
export async function judgeRequest(
  request: Request,
  url: URL,
  base: AskContext & { readonly ctx: ExecutionContext },
  rules: readonly CompiledRule[],
): Promise<{ readonly judgement: Judgement; readonly forwardPath: string; readonly plan: string | null }> {
  const { env, settings, isolate } = base;
  isolate.stats.requests++;
  const shape = await shapeOf(request, url, settings);
  if (!shape.ok) return { judgement: badRequest(shape.detail, shape.error), forwardPath: url.pathname, plan: null };
  const { method, methods, paths } = shape;
  const caller = await whoIsCalling(request, env, settings, isolate, rules);
  if ("refused" in caller) {
    const { status, body, headers } = caller.refused;
    const judgement: Judgement = { kind: "refused", reason: "bad_request", status, problem: body, headers, rules: [] };
    return { judgement, forwardPath: shape.forwardPath, plan: null };
  }
  const cx: RequestContext = { ...base, method, plan: caller.plan };
  const { plan, keyHashes, unverified, overrides } = caller;
  const facts = { methods, paths, foldCase: !settings.path.caseSensitive, plan, keyHashes, unverified, overrides };
  const rejecting = rejectingRule(rules, facts);
  const judgement =
    rejecting !== null ? unauthorized(cx, rejecting) : await judgeApplicable(cx, applicableRules(rules, facts));
  return { judgement, forwardPath: shape.forwardPath, plan };
}

/**
 * The steps after matching, for rules already chosen (by the request's facts, or named by the service binding's
 * `limit`): capacity, what this isolate already knows, ask, compose, report, refund, shape.
 */
export async function judgeApplicable(cx: RequestContext, matched: readonly Applicable[]): Promise<Judgement> {
  const nowMs = cx.isolate.clock();
  const { applicable, tooCostly } = withinCapacity(cx, matched);
  if (tooCostly !== null) return refuseTooCostly(cx, tooCostly, matched, nowMs);

  const known = knownDenials(cx.isolate, applicable, nowMs);
  const refusal = refuseFromCache(cx, applicable, known, nowMs);
  if (refusal !== null) return refusal;

  const outcomes = await Promise.all(applicable.map((app) => ask(cx, app, known.get(app) ?? null)));
  const composition = compose(outcomes.map(answerOf));
  report(cx, outcomes, composition);
  const refunded = await giveBack(cx, outcomes, composition);
  return settle(cx, outcomes, composition, refunded);
}

/**
 * The rules that can be asked, in order. A cost above a rule's capacity can never be admitted: a shadow rule logs it
 * and is skipped; the first enforcing one refuses the request (`tooCostly`) before any limiter is asked.
 */
function withinCapacity(
  cx: RequestContext,
  matched: readonly Applicable[],
): { readonly applicable: Applicable[]; readonly tooCostly: Applicable | null } {
  const applicable: Applicable[] = [];
  for (const app of matched) {
    if (app.cost <= app.compiled.capacity) {
      applicable.push(app);
      continue;
    }
    metric(cx, app, "cost_exceeds_capacity", "none", null);
    if (app.compiled.rule.mode === "enforce") return { applicable, tooCostly: app };
    cx.isolate.stats.shadow_denials++;
    logShadow(cx, app, null, "cost_exceeds_capacity", "none");
  }
  return { applicable, tooCostly: null };
}

/** 400: this request costs more than an enforcing rule can ever admit. No state changes: only policies are sent. */
function refuseTooCostly(
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

/** The denials this isolate already knows, for every `scope: global` rule: one cache lookup per rule and request. */
function knownDenials(isolate: Isolate, applicable: readonly Applicable[], nowMs: number): Map<Applicable, Decision> {
  const known = new Map<Applicable, Decision>();
  for (const app of applicable) {
    const { compiled, keyHash, cost } = app;
    if (compiled.rule.scope !== "global") continue;
    const id = objectNameOf(compiled.rule.id, keyHash);
    const decision = isolate.blocked.lookup(id, fingerprintOfRule(compiled), cost, nowMs);
    if (decision !== null) known.set(app, decision);
  }
  return known;
}

/**
 * An enforcing rule this isolate knows will deny: refuse with its answer and ask nobody. The response carries the
 * same RateLimit items as the object's denial did, one per enforcing rule: the other rules' figures are those that
 * denial reported (kept with it, aged); when one of them is not known (it did not apply then), the objects are asked.
 * Not logged one by one: a flood from a blocked key must not become a flood of log lines (each cache answer is still
 * counted in the stats and written as an Analytics Engine point); the object's denial was logged.
 */
function refuseFromCache(
  cx: RequestContext,
  applicable: readonly Applicable[],
  known: ReadonlyMap<Applicable, Decision>,
  nowMs: number,
): Judgement | null {
  const enforcing = applicable.filter((app) => app.compiled.rule.mode === "enforce");
  const denied = enforcing.filter((app) => known.has(app));
  if (denied.length === 0) return null;
  const deniedIds = denied.map(objectNameOfApp);
  const views: RuleView[] = [];
  const companions = new Map<Applicable, Decision>();
  for (const app of enforcing) {
    const decision = known.get(app) ?? companionDecision(cx.isolate, deniedIds, app, nowMs);
    if (decision === null) return null;
    if (!known.has(app)) companions.set(app, decision);
    views.push(viewOf(app, decision, nowMs, null));
  }
  for (const app of denied) metric(cx, app, "denied", "cache", known.get(app)!.retryAfterMs);
  const { stats } = cx.isolate;
  stats.cache_answers += denied.length;
  stats.denials++;
  const rules: RuleReport[] = [];
  for (const app of applicable) {
    const decision = known.get(app);
    if (decision !== undefined && app.compiled.rule.mode === "enforce") {
      rules.push(reportOf(app, "denied", decision, null));
      continue;
    }
    metric(cx, app, "not_asked", "none", null);
    // Not asked; an enforcing rule's figures are the ones its RateLimit item reports.
    rules.push(reportOf(app, "not_asked", companions.get(app) ?? null, null));
  }
  const fields = limitFields(views);
  const { status, problem } = fields.denial!;
  return { kind: "refused", reason: "denied", status, problem: { ...problem }, headers: fields.headers, rules };
}

const objectNameOfApp = (app: Applicable) => objectNameOf(app.compiled.rule.id, app.keyHash);

/** An admitting rule's figures as a cached denial's response reported them, or null when none did. */
function companionDecision(isolate: Isolate, deniedIds: readonly string[], app: Applicable, nowMs: number) {
  const otherId = objectNameOfApp(app);
  for (const id of deniedIds) {
    const figures = isolate.blocked.companion(id, otherId, nowMs);
    if (figures !== null) return { allowed: true, retryAfterMs: null, delayMs: 0, ...figures } satisfies Decision;
  }
  return null;
}

/** Keep, with each cached denial, what the other enforcing rules of this denied response said (`refuseFromCache`). */
function rememberCompanions(cx: RequestContext, outcomes: readonly AskResult[], views: readonly RuleView[]): void {
  const atMs = cx.isolate.clock();
  const companions = new Map<string, Companion>();
  for (const o of outcomes) {
    if (o.kind !== "decided" || o.app.compiled.rule.mode !== "enforce") continue;
    const view = views.find((v) => v.ruleId === o.app.compiled.rule.id);
    if (view === undefined) continue;
    companions.set(objectNameOfApp(o.app), {
      remaining: view.remaining,
      resetAfterMs: view.resetAfterMs,
      atMs,
    });
  }
  for (const o of outcomes) {
    if (o.kind === "decided" && !o.decision.allowed) cx.isolate.blocked.accompany(objectNameOfApp(o.app), companions);
  }
}

function answerOf(o: AskResult): Answer {
  const mode = o.app.compiled.rule.mode;
  return o.kind === "decided" ? { mode, kind: o.kind, decision: o.decision } : { mode, kind: o.kind, reason: o.reason };
}

/** Counters, metrics and log lines for every rule's answer. */
function report(cx: RequestContext, outcomes: readonly AskResult[], composition: Composition): void {
  const { stats } = cx.isolate;
  outcomes.forEach((o, i) => {
    const outcome = composition.outcomes[i]!;
    if (o.kind === "failed") {
      if (o.reason === "fail_open") stats.fail_open++;
      else stats.fail_closed++;
      metric(cx, o.app, outcome, "object", null);
      const rule = o.app.compiled.rule;
      logEvent("error", {
        event: "limiter_failed",
        rule: rule.id,
        mode: rule.mode,
        route: routeOf(rule),
        key: o.app.keyHash,
        reason: o.reason,
        failure: o.failure,
        attempts: o.attempts,
        error: o.error,
      });
      return;
    }
    metric(cx, o.app, outcome, o.source, o.decision.retryAfterMs);
    if (outcome === "shadow_denied") {
      stats.shadow_denials++;
      logShadow(cx, o.app, o.decision.retryAfterMs, "would_deny", o.source);
    }
  });
}

/** A request that is not admitted costs nothing anywhere: give back what the admitting rules charged. */
async function giveBack(
  cx: RequestContext,
  outcomes: readonly AskResult[],
  composition: Composition,
): Promise<Map<AskResult, RefundResult>> {
  const refunded = new Map<AskResult, RefundResult>();
  if (composition.refundLate) {
    for (const o of outcomes) {
      if (o.kind !== "failed" || o.late === null) continue;
      const { late, refund, app } = o;
      cx.ctx.waitUntil(
        late.then(
          (r) => (r.ok && r.decision.allowed ? safeRefund(() => refund(r.atMs), app) : null),
          () => null,
        ),
      );
    }
  }
  await Promise.all(
    composition.refund.map(async (i) => {
      const o = outcomes[i]!;
      if (o.kind === "decided") refunded.set(o, await safeRefund(o.refund, o.app));
    }),
  );
  return refunded;
}

/** The judgement: a denial, a closed failure, or an admission after any shaping delay, with the fields. */
async function settle(
  cx: RequestContext,
  outcomes: readonly AskResult[],
  composition: Composition,
  refunded: ReadonlyMap<AskResult, RefundResult>,
): Promise<Judgement> {
  const views: RuleView[] = [];
  const rules = outcomes.map((o, i): RuleReport => {
    const outcome = composition.outcomes[i]!;
    if (o.kind === "failed") return reportOf(o.app, outcome, null, null);
    const after = refunded.get(o) ?? null;
    if (o.app.compiled.rule.mode === "enforce") views.push(viewOf(o.app, o.decision, o.atMs, after));
    return reportOf(o.app, outcome, o.decision, after);
  });
  const fields = limitFields(views);
  const { verdict } = composition;
  if (verdict.kind === "deny") {
    rememberCompanions(cx, outcomes, views);
    const denial = deny(
      cx,
      fields,
      verdict.denying.map((i) => outcomes[i]!),
    );
    return { kind: "refused", reason: "denied", ...denial, rules };
  }
  if (verdict.kind === "fail_closed") {
    const failure = failClosed(
      fields,
      verdict.failed.map((i) => outcomes[i]!),
    );
    return { kind: "refused", reason: "fail_closed", ...failure, rules };
  }
  // Shaping: leaky-queue rules hold an admitted request until its turn.
  if (verdict.delayMs > 0) await cx.isolate.sleep(verdict.delayMs);
  const headers = [...fields.headers];
  // Said plainly: these rules answered from this isolate's lease (their RateLimit figures are the lease's).
  const leased = outcomes.flatMap((o) =>
    o.kind === "decided" && o.source === "lease" && o.app.compiled.rule.mode === "enforce"
      ? [o.app.compiled.rule.id]
      : [],
  );
  if (leased.length > 0) headers.push([LEASE_HEADER, leased.join(", ")]);
  return { kind: "admitted", headers, delayedMs: verdict.delayMs, rules, outcomes };
}

/** One rule's report; `decision` is `null` when the rule did not decide, `after` its refund's figures. */
function reportOf(app: Applicable, outcome: RuleOutcome, decision: Decision | null, after: RefundResult): RuleReport {
  const { rule } = app.compiled;
  return {
    rule: rule.id,
    mode: rule.mode,
    outcome,
    remaining: decision === null ? null : (after?.remaining ?? decision.remaining),
    resetAfterMs: decision === null ? null : (after?.resetAfterMs ?? decision.resetAfterMs),
    retryAfterMs: decision === null || decision.allowed ? null : decision.retryAfterMs,
  };
}

/** Lists the rules whose decision came from this isolate's lease (a slice of the key's budget held here). */
export const LEASE_HEADER = "Sluice-Lease";

function viewOf(app: Applicable, decision: Decision, atMs: number, after: RefundResult): RuleView {
  const { compiled, keyHash } = app;
  return {
    ruleId: compiled.rule.id,
    quota: compiled.capacity,
    windowS: policyWindowS(compiled.params, atMs),
    remaining: after?.remaining ?? decision.remaining,
    resetAfterMs: after?.resetAfterMs ?? decision.resetAfterMs,
    retryAfterMs: decision.allowed ? null : decision.retryAfterMs,
    status: compiled.rule.status,
    jitterS: decision.allowed ? 0 : jitterSeconds(keyHash, compiled.rule.id, compiled.rule.retryJitterS),
  };
}

/** A refusal's status, body and fields. */
interface Refusal {
  readonly status: number;
  readonly problem: Readonly<Record<string, unknown>>;
  readonly headers: ReadonlyArray<readonly [string, string]>;
}

/** The denial, with its one log line. */
function deny(cx: RequestContext, fields: ReturnType<typeof limitFields>, denials: readonly AskResult[]): Refusal {
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
function failClosed(fields: ReturnType<typeof limitFields>, failed: readonly AskResult[]): Refusal {
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

const routeOf = (rule: ResolvedRule): string => rule.match.route?.source ?? "*";

function metric(
  cx: RequestContext,
  app: Applicable,
  outcome: RuleOutcome,
  source: Source | "none",
  retryAfterMs: number | null,
): void {
  if (outcome === "denied") {
    const { rule } = app.compiled;
    cx.isolate.denials.record({ atMs: cx.isolate.clock(), rule: rule.id, key: app.keyHash, retryAfterMs, source });
  }
  writeDataPoint(cx.env.METRICS, {
    rule: app.compiled.rule.id,
    outcome,
    source,
    plan: cx.plan,
    route: routeOf(app.compiled.rule),
    method: cx.method,
    keyHash: app.keyHash,
    cost: app.cost,
    retryAfterMs,
  });
}

async function safeRefund(refund: () => Promise<RefundResult>, app: Applicable): Promise<RefundResult> {
  try {
    return await refund();
  } catch (error) {
    logEvent("error", {
      event: "refund_failed",
      rule: app.compiled.rule.id,
      key: app.keyHash,
      error: messageOf(error),
    });
    return null;
  }
}

function logShadow(
  cx: RequestContext,
  app: Applicable,
  retryAfterMs: number | null,
  reason: "would_deny" | "cost_exceeds_capacity",
  source: Source | "none",
): void {
  const rule = app.compiled.rule;
  logEvent("log", {
    event: "shadow_deny",
    rule: rule.id,
    plan: cx.plan,
    method: cx.method,
    route: routeOf(rule),
    key: app.keyHash,
    retry_after_ms: retryAfterMs,
    reason,
    source,
  });
}

/** 401: a rule with `unverified: reject` applies, and the caller has no verified API key. Nothing is counted. */
function unauthorized(cx: RequestContext, compiled: CompiledRule): Judgement {
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
function badRequest(detail: string, error: string): Judgement {
  const problem = { type: "about:blank", title: "Bad Request", status: 400, detail, error };
  return { kind: "refused", reason: "bad_request", status: 400, problem, headers: [], rules: [] };
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
