/**
 * What this isolate knows before asking: the blocked-key cache (blocked_cache.ts), looked up once per rule and
 * request; a refusal answered from it without any object call; and, kept with each fresh denial, what the request's
 * other enforcing rules said, so the cached answer carries the same RateLimit items.
 */
import type { Decision } from "../algorithms/index.ts";
import type { Companion } from "../isolate/blocked_cache.ts";
import type { Isolate } from "../isolate/isolate.ts";
import { objectNameOf } from "../object/names.ts";
import { limitFields, type RuleView } from "../request/headers.ts";
import type { Applicable } from "../request/match.ts";
import { type AskResult, fingerprintOfRule } from "./ask.ts";
import { type Judgement, type RequestContext, type RuleReport, reportOf, viewOf } from "./judgement.ts";
import { metric } from "./telemetry.ts";

/** The denials this isolate already knows, for every `scope: global` rule: one cache lookup per rule and request. */
export function knownDenials(
  isolate: Isolate,
  applicable: readonly Applicable[],
  nowMs: number,
): Map<Applicable, Decision> {
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
export function refuseFromCache(
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
export function rememberCompanions(
  cx: RequestContext,
  outcomes: readonly AskResult[],
  views: readonly RuleView[],
): void {
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
