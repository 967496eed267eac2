/**
 * The request path: identify the caller, find its plan, find every rule that applies, ask all of them at once,
 * compose their answers, then forward (after any shaping delay) or deny.
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
import type { ResolvedRule } from "../rules/types.ts";
import { handleAdmin, isAdminPath } from "./admin.ts";
import { blockedCache, cacheIdOf } from "./cache_state.ts";
import { jitterSeconds, keyHashOf, sha256Hex } from "./hash.ts";
import { limitFields, policyWindowS, problemResponse, type RuleView } from "./headers.ts";
import { identitiesOf } from "./identity.ts";
import { checkLocal, refundLocal } from "./local_scope.ts";
import { type Applicable, applicableRules, type CompiledRule } from "./match.ts";
import { logEvent, type Outcome as MetricOutcome, type Source, stats, writeDataPoint } from "./metrics.ts";
import { checkObject, type FailureKind, messageOf } from "./object_call.ts";
import { planFor } from "./plan.ts";
import { type Env, type Settings, settingsOf } from "./settings.ts";
import { type CheckInput, type CheckResult, fingerprintOf, type RefundResult } from "./store.ts";

export const TEMPORARY_REDUCED_CAPACITY_TYPE =
  "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/** What asking one rule produced. */
type Outcome =
  | {
      readonly kind: "decided";
      readonly app: Applicable;
      readonly decision: Decision;
      readonly source: Source;
      readonly atMs: number;
      readonly refund: () => Promise<RefundResult>;
    }
  | {
      readonly kind: "failed";
      readonly app: Applicable;
      readonly reason: "fail_open" | "fail_closed";
      readonly failure: FailureKind;
      readonly error: string;
      readonly attempts: number;
      /** The answer that arrived too late, if the call is still running: refunded if the request ends up denied. */
      readonly late: Promise<CheckResult> | null;
      readonly refund: (admittedAtMs: number) => Promise<RefundResult>;
    };

/** Everything about the request that logs and metrics carry (no raw key, no raw path). */
interface RequestFacts {
  readonly method: string;
  readonly plan: string;
}

export async function handleRequest(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
): Promise<Response> {
  try {
    const url = new URL(request.url);
    const settings = settingsOf(env);
    if (isAdminPath(url.pathname)) return await handleAdmin(request, url, env, settings, rules);
    return await gateway(request, url, env, settings, ctx, rules);
  } catch (error) {
    logEvent("error", { event: "gateway_error", error: messageOf(error) });
    return problemResponse(500, { type: "about:blank", title: "Internal Server Error", status: 500 });
  }
}

const fingerprints = new WeakMap<CompiledRule, string>();
function fingerprintOfRule(compiled: CompiledRule): string {
  let fp = fingerprints.get(compiled);
  if (fp === undefined) {
    fp = fingerprintOf(compiled.params);
    fingerprints.set(compiled, fp);
  }
  return fp;
}

const routeOf = (rule: ResolvedRule): string => rule.match.route?.source ?? "*";

async function gateway(
  request: Request,
  url: URL,
  env: Env,
  settings: Settings,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
): Promise<Response> {
  stats.requests++;
  const method = request.method.toUpperCase();
  const path = url.pathname;
  const ids = identitiesOf(request.headers, settings);
  const secret = settings.keyHashSecret;
  const hashOf = (v: string | null) => (v === null ? Promise.resolve(null) : keyHashOf(secret, v));
  // The account record is keyed by the plain SHA-256 of the API key, whatever KEY_HASH_SECRET says.
  const accountKeyOf = (v: string | null) => (v === null || secret === null ? Promise.resolve(null) : sha256Hex(v));
  const [apiKey, ip, user, accountKey] = await Promise.all([
    hashOf(ids.api_key),
    hashOf(ids.ip),
    hashOf(ids.user),
    accountKeyOf(ids.api_key),
  ]);
  const keyHashes = { api_key: apiKey, ip, user };
  const plan = await planFor(
    env.ACCOUNTS,
    secret === null ? apiKey : accountKey,
    settings.defaultPlan,
    settings.planCacheTtlMs,
    Date.now(),
  );
  const facts: RequestFacts = { method, plan };
  const nowMs = Date.now();

  const matched = applicableRules(rules, { method, path, plan, keyHashes });
  const applicable: Applicable[] = [];
  for (const app of matched) {
    if (app.cost <= app.compiled.capacity) {
      applicable.push(app);
      continue;
    }
    const rule = app.compiled.rule;
    metric(env, facts, app, "cost_exceeds_capacity", "none", null);
    if (rule.mode === "shadow") {
      stats.shadow_denials++;
      logShadow(facts, app, null, "cost_exceeds_capacity", "none");
      continue;
    }
    // Refused before any limiter is asked: no state changes, so only the policies are advertised.
    stats.denials++;
    logEvent("log", {
      event: "deny",
      plan,
      method,
      rules: [{ rule: rule.id, route: routeOf(rule), key: app.keyHash, reason: "cost_exceeds_capacity" }],
    });
    const policy = policyHeader(matched, nowMs);
    return problemResponse(
      400,
      {
        type: "about:blank",
        title: "Bad Request",
        status: 400,
        detail: `This request costs ${app.cost}, more than rule ${rule.id} can ever admit (${app.compiled.capacity}).`,
        error: "cost_exceeds_capacity",
        rule: rule.id,
        cost: app.cost,
        capacity: app.compiled.capacity,
      },
      policy,
    );
  }

  // An enforcing rule this isolate knows will deny: refuse with its answer and ask nobody.
  const known: { app: Applicable; decision: Decision }[] = [];
  for (const app of applicable) {
    const { rule } = app.compiled;
    if (rule.mode !== "enforce" || rule.scope !== "global") continue;
    const decision = blockedCache.lookup(
      cacheIdOf(rule.id, app.keyHash),
      fingerprintOfRule(app.compiled),
      app.cost,
      nowMs,
    );
    if (decision !== null) known.push({ app, decision });
  }
  if (known.length > 0) {
    stats.cache_answers += known.length;
    for (const { app, decision } of known) metric(env, facts, app, "denied", "cache", decision.retryAfterMs);
    for (const app of applicable)
      if (!known.some((k) => k.app === app)) metric(env, facts, app, "not_asked", "none", null);
    const fields = limitFields(known.map(({ app, decision }) => viewOf(app, decision, nowMs, null)));
    // Not logged one by one: a flood from a blocked key must not become a flood of log lines (each cache answer is
    // still counted in the stats and written as an Analytics Engine point); the object's denial was logged.
    stats.denials++;
    return problemResponse(fields.denial!.status, { ...fields.denial!.problem }, fields.headers);
  }

  const outcomes = await Promise.all(applicable.map((app) => ask(env, settings, app)));

  const enforcing = outcomes.filter((o) => o.app.compiled.rule.mode === "enforce");
  const denied = enforcing.some((o) => o.kind === "decided" && !o.decision.allowed);
  const failedClosed = enforcing.filter((o) => o.kind === "failed" && o.reason === "fail_closed");
  const admitted = !denied && failedClosed.length === 0;

  for (const o of outcomes) {
    const rule = o.app.compiled.rule;
    if (o.kind === "failed") {
      if (o.reason === "fail_open") stats.fail_open++;
      else stats.fail_closed++;
      metric(env, facts, o.app, o.reason, "object", null);
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
    } else if (rule.mode === "shadow" && !o.decision.allowed) {
      stats.shadow_denials++;
      metric(env, facts, o.app, "shadow_denied", o.source, o.decision.retryAfterMs);
      logShadow(facts, o.app, o.decision.retryAfterMs, "would_deny", o.source);
    } else {
      const outcome = !o.decision.allowed ? "denied" : admitted || rule.mode === "shadow" ? "allowed" : "refunded";
      metric(env, facts, o.app, outcome, o.source, o.decision.retryAfterMs);
    }
  }

  // A denied request costs nothing anywhere: give back what the admitting rules charged.
  const refunded = new Map<Outcome, RefundResult>();
  if (!admitted) {
    await Promise.all(
      outcomes.map(async (o) => {
        if (o.kind === "decided" && o.decision.allowed) refunded.set(o, await safeRefund(o.refund, o.app));
        else if (o.kind === "failed" && o.late !== null) {
          const { late, refund, app } = o;
          ctx.waitUntil(
            late.then(
              (r) => (r.ok && r.decision.allowed ? safeRefund(() => refund(r.atMs), app) : null),
              () => null,
            ),
          );
        }
      }),
    );
  }

  const views: RuleView[] = [];
  for (const o of enforcing) {
    if (o.kind !== "decided") continue;
    views.push(viewOf(o.app, o.decision, o.atMs, refunded.get(o) ?? null));
  }
  const fields = limitFields(views);

  if (fields.denial !== null) {
    const denials = enforcing.flatMap((o) =>
      o.kind === "decided" && !o.decision.allowed ? [{ app: o.app, decision: o.decision, source: o.source }] : [],
    );
    return deny(facts, fields, denials);
  }
  if (failedClosed.length > 0) {
    const ruleIds = failedClosed.map((o) => o.app.compiled.rule.id);
    return problemResponse(
      503,
      {
        type: TEMPORARY_REDUCED_CAPACITY_TYPE,
        title: "Temporary Reduced Capacity",
        status: 503,
        detail: `The rate limiter for ${ruleIds.join(", ")} is unavailable, and fails closed.`,
        "violated-policies": ruleIds,
      },
      [...fields.headers, ["Retry-After", "1"]],
    );
  }

  // Shaping: leaky-queue rules hold an admitted request until its turn.
  let delayMs = 0;
  for (const o of enforcing) if (o.kind === "decided") delayMs = Math.max(delayMs, o.decision.delayMs);
  if (delayMs > 0) await scheduler.wait(delayMs);

  const response =
    settings.upstreamUrl === null
      ? echo(request, url, plan, outcomes, delayMs)
      : await forward(request, url, settings.upstreamUrl);
  for (const [name, value] of fields.headers) response.headers.set(name, value);
  return response;
}

function viewOf(app: Applicable, decision: Decision, atMs: number, after: RefundResult): RuleView {
  const { compiled, keyHash } = app;
  return {
    ruleId: compiled.rule.id,
    quota: compiled.capacity,
    windowS: policyWindowS(compiled.params, compiled.capacity, atMs),
    remaining: after?.remaining ?? decision.remaining,
    resetAfterMs: after?.resetAfterMs ?? decision.resetAfterMs,
    retryAfterMs: decision.allowed ? null : decision.retryAfterMs,
    status: compiled.rule.status,
    jitterS: decision.allowed ? 0 : jitterSeconds(keyHash, compiled.rule.id, compiled.rule.retryJitterS),
  };
}

/** The denial response, with its one log line. */
function deny(
  facts: RequestFacts,
  fields: ReturnType<typeof limitFields>,
  denials: readonly { app: Applicable; decision: Decision; source: Source }[],
): Response {
  stats.denials++;
  logEvent("log", {
    event: "deny",
    plan: facts.plan,
    method: facts.method,
    rules: denials.map(({ app, decision, source }) => ({
      rule: app.compiled.rule.id,
      route: routeOf(app.compiled.rule),
      key: app.keyHash,
      cost: app.cost,
      retry_after_ms: decision.retryAfterMs,
      source,
    })),
  });
  const denial = fields.denial!;
  return problemResponse(denial.status, { ...denial.problem }, fields.headers);
}

function metric(
  env: Env,
  facts: RequestFacts,
  app: Applicable,
  outcome: MetricOutcome,
  source: Source | "none",
  retryAfterMs: number | null,
): void {
  writeDataPoint(env.METRICS, {
    rule: app.compiled.rule.id,
    outcome,
    source,
    plan: facts.plan,
    route: routeOf(app.compiled.rule),
    method: facts.method,
    keyHash: app.keyHash,
    cost: app.cost,
    retryAfterMs,
  });
}

/** Ask one rule about the request, within the rule's time budget. Never throws. */
async function ask(env: Env, settings: Settings, app: Applicable): Promise<Outcome> {
  const { compiled, keyHash, cost } = app;
  const { rule, params } = compiled;
  const reason = rule.onError === "closed" ? "fail_closed" : "fail_open";

  if (rule.scope === "local") {
    const atMs = Date.now();
    const refund = (admittedAtMs: number) =>
      Promise.resolve(refundLocal(compiled, settings.maxKeys, keyHash, cost, admittedAtMs, Date.now()));
    const result = checkLocal(compiled, settings.maxKeys, keyHash, cost, atMs);
    if (!result.ok) {
      return { kind: "failed", app, reason, failure: "invalid", error: result.error, attempts: 0, late: null, refund };
    }
    return { kind: "decided", app, decision: result.decision, source: "local", atMs, refund: () => refund(atMs) };
  }

  const id = cacheIdOf(rule.id, keyHash);
  const fingerprint = fingerprintOfRule(compiled);
  const sentAtMs = Date.now();
  const known = blockedCache.lookup(id, fingerprint, cost, sentAtMs);
  const noRefund = () => Promise.resolve(null);
  if (known !== null) {
    // Only shadow rules get here (a known enforcing denial refuses the request before anyone is asked).
    stats.cache_answers++;
    return { kind: "decided", app, decision: known, source: "cache", atMs: sentAtMs, refund: noRefund };
  }

  const name = `${rule.id}:${keyHash}`;
  const input: CheckInput = { rule: { id: rule.id, params }, cost };
  const refund = async (admittedAtMs: number): Promise<RefundResult> => {
    // A refund can make the object more generous than a denial this isolate remembers.
    blockedCache.forget(id);
    return (await env.LIMITER.get(env.LIMITER.idFromName(name)).refund({ ...input, admittedAtMs })) as RefundResult;
  };
  const answer = await checkObject(env.LIMITER, name, input, settings.limiterTimeoutMs ?? rule.timeoutMs);
  if (answer.kind === "failed") {
    const { failure, message, attempts, late } = answer;
    return { kind: "failed", app, reason, failure, error: message, attempts, late, refund };
  }
  const result = answer.result;
  if (!result.ok) {
    return {
      kind: "failed",
      app,
      reason,
      failure: "invalid",
      error: result.error,
      attempts: answer.attempts,
      late: null,
      refund,
    };
  }
  if (result.decision.allowed) blockedCache.forget(id);
  else blockedCache.remember(id, fingerprint, params, cost, sentAtMs, result.decision);
  return {
    kind: "decided",
    app,
    decision: result.decision,
    source: "object",
    atMs: result.atMs,
    refund: () => refund(result.atMs),
  };
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
  facts: RequestFacts,
  app: Applicable,
  retryAfterMs: number | null,
  reason: "would_deny" | "cost_exceeds_capacity",
  source: Source | "none",
): void {
  const rule = app.compiled.rule;
  logEvent("log", {
    event: "shadow_deny",
    rule: rule.id,
    plan: facts.plan,
    method: facts.method,
    route: routeOf(rule),
    key: app.keyHash,
    retry_after_ms: retryAfterMs,
    reason,
    source,
  });
}

function policyHeader(apps: readonly Applicable[], nowMs: number): [string, string][] {
  const views: RuleView[] = apps
    .filter((a) => a.compiled.rule.mode === "enforce")
    .map((a) => ({
      ruleId: a.compiled.rule.id,
      quota: a.compiled.capacity,
      windowS: policyWindowS(a.compiled.params, a.compiled.capacity, nowMs),
      remaining: 0,
      resetAfterMs: 0,
      retryAfterMs: null,
      status: a.compiled.rule.status,
      jitterS: 0,
    }));
  return limitFields(views).headers.filter(([name]) => name === "RateLimit-Policy") as [string, string][];
}

/** The built-in origin for local development: describes the request and the decisions, never a raw key. */
function echo(request: Request, url: URL, plan: string, outcomes: readonly Outcome[], delayedMs: number): Response {
  const decisions = outcomes.map((o) => {
    const base = { rule: o.app.compiled.rule.id, mode: o.app.compiled.rule.mode, cost: o.app.cost, key: o.app.keyHash };
    if (o.kind === "failed") return { ...base, error: o.reason };
    const d = o.decision;
    return {
      ...base,
      allowed: d.allowed,
      remaining: d.remaining,
      reset_after_ms: d.resetAfterMs,
      retry_after_ms: d.retryAfterMs,
      delay_ms: d.delayMs,
    };
  });
  return Response.json(
    {
      echo: true,
      method: request.method,
      path: url.pathname,
      query: url.search,
      plan,
      delayed_ms: delayedMs,
      decisions,
    },
    { headers: { "Cache-Control": "no-store" } },
  );
}

async function forward(request: Request, url: URL, upstream: URL): Promise<Response> {
  const target = new URL(upstream);
  target.pathname = upstream.pathname.replace(/\/$/, "") + url.pathname;
  target.search = url.search;
  try {
    const response = await fetch(new Request(target, request), { redirect: "manual" });
    // Re-wrap so the headers are mutable.
    return new Response(response.body, response);
  } catch (error) {
    logEvent("error", { event: "upstream_failed", error: messageOf(error) });
    return problemResponse(502, { type: "about:blank", title: "Bad Gateway", status: 502 });
  }
}
