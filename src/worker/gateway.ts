/**
 * The request path: identify the caller, find its plan, find every rule that applies, ask all of them at once,
 * compose their answers, then forward (after any shaping delay) or deny.
 *
 * Composition: a request is admitted only if every enforcing rule admits it. When one denies, every rule that did
 * admit it (shadow rules too) is refunded, so a denied request costs nothing anywhere. Shadow rules never block: a
 * would-be denial is one structured JSON log line. A limiter that fails or misses the rule's `timeout_ms` is a value:
 * `fail_open` (the rule is skipped) or `fail_closed` (503), per the rule's `on_error`.
 */

import type { Decision } from "../algorithms/index.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { jitterSeconds, sha256Hex } from "./hash.ts";
import { limitFields, policyWindowS, problemResponse, type RuleView } from "./headers.ts";
import { identitiesOf } from "./identity.ts";
import { localStore } from "./local_store.ts";
import { type Applicable, applicableRules, type CompiledRule } from "./match.ts";
import { planFor } from "./plan.ts";
import { type Env, type Settings, settingsOf } from "./settings.ts";
import type { CheckInput, CheckResult, RefundResult } from "./store.ts";

/** What asking one rule produced. */
type Outcome =
  | {
      readonly kind: "decided";
      readonly app: Applicable;
      readonly decision: Decision;
      readonly atMs: number;
      readonly refund: () => Promise<RefundResult>;
    }
  | {
      readonly kind: "failed";
      readonly app: Applicable;
      readonly reason: "fail_open" | "fail_closed";
      readonly error: string;
      /** The answer that arrived too late, if the call is still running: refunded if the request ends up denied. */
      readonly late: Promise<CheckResult> | null;
      readonly refund: (admittedAtMs: number) => Promise<RefundResult>;
    };

export async function handleRequest(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
): Promise<Response> {
  try {
    return await gateway(request, env, ctx, rules);
  } catch (error) {
    console.error(JSON.stringify({ event: "gateway_error", error: String(error) }));
    return problemResponse(500, { type: "about:blank", title: "Internal Server Error", status: 500 });
  }
}

async function gateway(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
): Promise<Response> {
  const settings = settingsOf(env);
  const url = new URL(request.url);
  const method = request.method.toUpperCase();
  const path = url.pathname;
  const ids = identitiesOf(request.headers, settings);
  const hashOf = (v: string | null) => (v === null ? Promise.resolve(null) : sha256Hex(v));
  const [apiKey, ip, user] = await Promise.all([hashOf(ids.api_key), hashOf(ids.ip), hashOf(ids.user)]);
  const keyHashes = { api_key: apiKey, ip, user };
  const plan = await planFor(env.ACCOUNTS, apiKey, settings.defaultPlan, settings.planCacheTtlMs, Date.now());
  const route = `${method} ${path}`;
  const nowMs = Date.now();

  const matched = applicableRules(rules, { method, path, plan, keyHashes });
  const applicable: Applicable[] = [];
  for (const app of matched) {
    if (app.cost <= app.compiled.capacity) {
      applicable.push(app);
      continue;
    }
    const rule = app.compiled.rule;
    if (rule.mode === "shadow") {
      logShadow(rule, plan, route, app.keyHash, null, "cost_exceeds_capacity");
      continue;
    }
    // Refused before any limiter is asked: no state changes, so only the policies are advertised.
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

  const outcomes = await Promise.all(applicable.map((app) => ask(env, settings, app)));

  const enforcing = outcomes.filter((o) => o.app.compiled.rule.mode === "enforce");
  const denied = enforcing.some((o) => o.kind === "decided" && !o.decision.allowed);
  const failedClosed = enforcing.filter((o) => o.kind === "failed" && o.reason === "fail_closed");
  const admitted = !denied && failedClosed.length === 0;

  for (const o of outcomes) {
    const rule = o.app.compiled.rule;
    if (o.kind === "failed") {
      console.error(
        JSON.stringify({ event: "limiter_failed", rule: rule.id, mode: rule.mode, reason: o.reason, error: o.error }),
      );
    } else if (rule.mode === "shadow" && !o.decision.allowed) {
      logShadow(rule, plan, route, o.app.keyHash, o.decision.retryAfterMs, "would_deny");
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
    const { compiled } = o.app;
    const after = refunded.get(o) ?? null;
    views.push({
      ruleId: compiled.rule.id,
      quota: compiled.capacity,
      windowS: policyWindowS(compiled.params, compiled.capacity, o.atMs),
      remaining: after?.remaining ?? o.decision.remaining,
      resetAfterMs: after?.resetAfterMs ?? o.decision.resetAfterMs,
      retryAfterMs: o.decision.allowed ? null : o.decision.retryAfterMs,
      status: compiled.rule.status,
      jitterS: o.decision.allowed ? 0 : jitterSeconds(o.app.keyHash, compiled.rule.id, compiled.rule.retryJitterS),
    });
  }
  const fields = limitFields(views);

  if (fields.denial !== null) {
    return problemResponse(fields.denial.status, { ...fields.denial.problem }, fields.headers);
  }
  if (failedClosed.length > 0) {
    const ids = failedClosed.map((o) => o.app.compiled.rule.id);
    return problemResponse(
      503,
      {
        type: "about:blank",
        title: "Service Unavailable",
        status: 503,
        detail: `The rate limiter for ${ids.join(", ")} is unavailable and fails closed.`,
        "violated-policies": ids,
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

/** Ask one rule about the request, within the rule's time budget. Never throws. */
async function ask(env: Env, settings: Settings, app: Applicable): Promise<Outcome> {
  const { rule, params } = app.compiled;
  const name = `${rule.id}:${app.keyHash}`;
  const input: CheckInput = { rule: { id: rule.id, params }, cost: app.cost };
  const reason = rule.onError === "closed" ? "fail_closed" : "fail_open";

  if (rule.scope === "local") {
    const refund = (admittedAtMs: number) =>
      Promise.resolve(localStore.refund(name, { ...input, admittedAtMs }, Date.now()));
    const result = localStore.check(name, input, Date.now());
    if (!result.ok) return { kind: "failed", app, reason, error: result.error, late: null, refund };
    return { kind: "decided", app, decision: result.decision, atMs: result.atMs, refund: () => refund(result.atMs) };
  }

  const stub = env.LIMITER.get(env.LIMITER.idFromName(name));
  const refund = async (admittedAtMs: number): Promise<RefundResult> =>
    (await stub.refund({ ...input, admittedAtMs })) as RefundResult;
  const call = (async () => (await stub.check(input)) as CheckResult)();
  const timeoutMs = settings.limiterTimeoutMs ?? rule.timeoutMs;
  const raced = await withTimeout(call, timeoutMs);
  if (raced.kind === "timeout") {
    return { kind: "failed", app, reason, error: `no answer within ${timeoutMs} ms`, late: call, refund };
  }
  if (raced.kind === "error")
    return { kind: "failed", app, reason, error: describeError(raced.error), late: null, refund };
  const result = raced.value;
  if (!result.ok) return { kind: "failed", app, reason, error: result.error, late: null, refund };
  return { kind: "decided", app, decision: result.decision, atMs: result.atMs, refund: () => refund(result.atMs) };
}

async function safeRefund(refund: () => Promise<RefundResult>, app: Applicable): Promise<RefundResult> {
  try {
    return await refund();
  } catch (error) {
    console.error(JSON.stringify({ event: "refund_failed", rule: app.compiled.rule.id, error: describeError(error) }));
    return null;
  }
}

type Raced<T> =
  | { readonly kind: "value"; readonly value: T }
  | { readonly kind: "error"; readonly error: unknown }
  | { readonly kind: "timeout" };

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<Raced<T>> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ kind: "timeout" }), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve({ kind: "value", value });
      },
      (error: unknown) => {
        clearTimeout(timer);
        resolve({ kind: "error", error });
      },
    );
  });
}

/** A Durable Object error's structured fields first (`overloaded`, `retryable`), then its message. */
function describeError(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const e = error as { overloaded?: unknown; retryable?: unknown; message?: unknown };
    const flags = [e.overloaded === true ? "overloaded" : "", e.retryable === true ? "retryable" : ""].filter(Boolean);
    const message = typeof e.message === "string" ? e.message : String(error);
    return flags.length > 0 ? `${flags.join(",")}: ${message}` : message;
  }
  return String(error);
}

function logShadow(
  rule: ResolvedRule,
  plan: string,
  route: string,
  keyHash: string,
  retryAfterMs: number | null,
  reason: "would_deny" | "cost_exceeds_capacity",
): void {
  console.log(
    JSON.stringify({
      event: "shadow_deny",
      rule: rule.id,
      plan,
      route,
      key: keyHash,
      retry_after_ms: retryAfterMs,
      reason,
    }),
  );
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
    console.error(JSON.stringify({ event: "upstream_failed", error: describeError(error) }));
    return problemResponse(502, { type: "about:blank", title: "Bad Gateway", status: 502 });
  }
}
