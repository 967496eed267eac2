/**
 * What the request path leaves for operators: the isolate's counters, one Analytics Engine point per rule's answer,
 * the recent denials, and structured log lines (keys only as hashes).
 */
import { logEvent, type Source, writeDataPoint } from "../isolate/metrics.ts";
import type { Composition, RuleOutcome } from "../request/compose.ts";
import type { Applicable } from "../request/match.ts";
import type { ResolvedRule } from "../rules/types.ts";
import type { AskResult } from "./ask.ts";
import type { RequestContext } from "./judgement.ts";

/** Counters, metrics and log lines for every rule's answer. */
export function report(cx: RequestContext, outcomes: readonly AskResult[], composition: Composition): void {
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

export function metric(
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

export function logShadow(
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

export const routeOf = (rule: Pick<ResolvedRule, "match">): string => rule.match.route?.source ?? "*";
