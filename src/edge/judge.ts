/**
 * The request path: who calls, which rules apply, what this isolate already knows, ask them all at once, compose
 * their answers, then admit (after any shaping delay) or refuse. `judgeRequest` decides an HTTP request (the gateway,
 * the service binding's `check`); `judgeApplicable` decides rules already chosen (the binding's `limit`). Each step is
 * a short function or module: caller.ts -> match.ts (no cost above a rule's capacity) -> known_denials.ts -> ask.ts
 * -> compose.ts (pure) -> telemetry.ts, refunds -> refusals.ts or an admission. How rules compose, where a decision
 * comes from and the failure policy: docs/production.md, "The request path".
 */
import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";
import type { RefundResult } from "../protocol/store.ts";
import { type Answer, type Composition, compose } from "../request/compose.ts";
import { limitFields, type RuleView } from "../request/headers.ts";
import {
  type Applicable,
  applicableRules,
  type CompiledDeny,
  type CompiledRule,
  denyingRules,
  rejectingRule,
} from "../request/match.ts";
import { shapeOf } from "../request/request_shape.ts";
import type { AskContext, AskResult } from "./ask.ts";
import { whoIsCalling } from "./caller.ts";
import { askRule } from "./direct.ts";
import { type Judgement, type RequestContext, type RuleReport, reportOf, viewOf } from "./judgement.ts";
import { knownDenials, refuseFromCache, rememberCompanions } from "./known_denials.ts";
import { badRequest, deny, failClosed, forbidden, refuseTooCostly, unauthorized } from "./refusals.ts";
import { hasKeyedRules, keyedRules, keySourceOf } from "./rule_keys.ts";
import { logShadow, metric, report } from "./telemetry.ts";

/**
 * The request path, step by step, for one HTTP request; with the request's forwarded path and the caller's plan.
 * A deny rule that matches refuses it before anything else is looked at or counted (src/rules/deny.ts).
 * `bodyWithheld`: the binding's `check` was not given the body of a request that has one (body_method.ts).
 */
export async function judgeRequest(
  request: Request,
  url: URL,
  base: AskContext & { readonly ctx: ExecutionContext },
  { rules, denies }: { readonly rules: readonly CompiledRule[]; readonly denies: readonly CompiledDeny[] },
  bodyWithheld = false,
): Promise<{ readonly judgement: Judgement; readonly forwardPath: string; readonly plan: string | null }> {
  const { env, settings, isolate } = base;
  isolate.stats.requests++;
  const shape = await shapeOf(request, url, settings, bodyWithheld);
  if (!shape.ok) return { judgement: badRequest(shape.detail, shape.error), forwardPath: url.pathname, plan: null };
  const { method, methods, paths } = shape;
  const foldCase = !settings.path.caseSensitive;
  const caller = await whoIsCalling(request, env, settings, isolate, rules, { methods, paths, foldCase });
  if ("refused" in caller) {
    const { status, body, headers } = caller.refused;
    const judgement: Judgement = { kind: "refused", reason: "bad_request", status, problem: body, headers, rules: [] };
    return { judgement, forwardPath: shape.forwardPath, plan: null };
  }
  const cx: RequestContext = { ...base, method, plan: caller.plan };
  const { plan, keyHashes, unverified, overrides } = caller;
  const values = keySourceOf(request, url);
  const known = { methods, paths, foldCase, plan, keyHashes, unverified, overrides, values };
  const denied = forbidden(cx, denyingRules(denies, known));
  if (denied !== null) return { judgement: denied, forwardPath: shape.forwardPath, plan };
  const rejecting = rejectingRule(rules, known);
  if (rejecting !== null) return { judgement: unauthorized(cx, rejecting), forwardPath: shape.forwardPath, plan };
  const keys = hasKeyedRules(rules) ? await keyedRules(rules, known, values, settings) : null;
  if (keys !== null && "refused" in keys) {
    const { detail, error } = keys.refused;
    return { judgement: badRequest(detail, error), forwardPath: shape.forwardPath, plan };
  }
  const facts = keys === null ? known : { ...known, keyed: keys.keyed };
  return { judgement: await judgeApplicable(cx, applicableRules(rules, facts)), forwardPath: shape.forwardPath, plan };
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

  const outcomes = await Promise.all(applicable.map((app) => askRule(cx, app, known.get(app) ?? null)));
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

function answerOf(o: AskResult): Answer {
  const mode = o.app.compiled.rule.mode;
  return o.kind === "decided" ? { mode, kind: o.kind, decision: o.decision } : { mode, kind: o.kind, reason: o.reason };
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

/** Lists the rules whose decision came from this isolate's lease (units of the key's budget held here). */
export const LEASE_HEADER = "Sluice-Lease";
