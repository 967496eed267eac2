/**
 * Rules that count by the response or ban (`count_when`, `cost_header`, `block_for`) ask their key's object directly,
 * one call per request: not through the coalescer's batches, leases or the delegate tier (src/isolate/coalesce*.ts),
 * where a share's delegate decides without the object and could neither see a ban nor take a late charge. So these
 * rules stay exact at the price of a call per request (BENCHMARKS.md, "Counting by the response"). Their calls are
 * `probe` (a deferred rule before forwarding), `check` (a `block_for` rule) and `charge` (after the origin answered),
 * src/protocol/outcome.ts; each goes through `callObject` (the rule's time budget, one retry with the same call id, so
 * a charge is never applied twice).
 */

import type { Decision } from "../algorithms/index.ts";
import { logEvent } from "../isolate/metrics.ts";
import { banIndexStub, objectNameOf } from "../object/names.ts";
import { durableObjectTransport } from "../object/transport.ts";
import { callObject, messageOf } from "../protocol/object_call.ts";
import type { CheckResult, LimiterRule } from "../protocol/store.ts";
import type { Applicable, CompiledRule } from "../request/match.ts";
import { chargeOf, isDeferred, needsObject, type ResponseFacts } from "../rules/outcome.ts";
import type { AfterOrigin } from "./after_origin.ts";
import { type AskContext, type AskResult, ask, fingerprintOfRule } from "./ask.ts";

/** The rule as its key's object sees it: id, parameters, rules version and `block_for`. */
export function limiterRuleOf(compiled: CompiledRule): LimiterRule {
  const { rule, params, version } = compiled;
  return { id: rule.id, params, version, ...(rule.blockForMs === null ? {} : { blockForMs: rule.blockForMs }) };
}

/**
 * Ask one rule (ask.ts), except that a rule that counts by the response or bans asks its key's object directly, unless
 * this isolate already knows the object's denial.
 */
export function askRule(cx: AskContext, app: Applicable, known: Decision | null): Promise<AskResult> {
  if (known === null && needsObject(app.compiled.rule) && app.compiled.rule.scope === "global")
    return askDirect(cx, app);
  return ask(cx, app, known);
}

/** A rule that counts by the response or bans, asked before forwarding: a probe, or a check for a `block_for` rule. */
export async function askDirect(cx: AskContext, app: Applicable): Promise<AskResult> {
  const { env, settings, isolate } = cx;
  const { compiled, keyHash, cost } = app;
  const name = objectNameOf(compiled.rule.id, keyHash);
  const transport = durableObjectTransport(env.LIMITER);
  const rule = limiterRuleOf(compiled);
  const kind = isDeferred(compiled.rule) ? "probe" : "check";
  const sentAtMs = isolate.clock();
  const timeoutMs = settings.limiterTimeoutMs ?? compiled.rule.timeoutMs;
  const answer = await callObject(
    transport,
    name,
    { rule, id: crypto.randomUUID(), costs: [cost], kind },
    timeoutMs,
    isolate,
  );
  const refundAt = (admittedAtMs: number) => {
    // A probe charged nothing: there is nothing to give back.
    if (kind === "probe") return Promise.resolve(null);
    isolate.blocked.forgetRefunded(name, isolate.clock());
    return transport.refund(name, { rule, cost, admittedAtMs });
  };
  const reason = compiled.rule.onError === "closed" ? "fail_closed" : "fail_open";
  if (answer.kind === "failed") {
    const { failure, message, attempts } = answer;
    const late = answer.late === null ? null : answer.late.then((r) => firstOf(r.results));
    return { kind: "failed", app, reason, failure, error: message, attempts, late, refund: refundAt };
  }
  const result = firstOf(answer.result.results);
  if (!result.ok) {
    const { attempts } = answer;
    return {
      kind: "failed",
      app,
      reason,
      failure: "invalid",
      error: result.error,
      attempts,
      late: null,
      refund: refundAt,
    };
  }
  observe(cx, compiled, name, cost, sentAtMs, result);
  const { decision, atMs } = result;
  return { kind: "decided", app, decision, source: "object", atMs, refund: () => refundAt(atMs) };
}

function firstOf(results: readonly CheckResult[]): CheckResult {
  return results[0] ?? { ok: false, error: "invalid_cost" };
}

/** What the object answered, this isolate remembers (a denial, a ban) or forgets (an admission). */
function observe(
  cx: AskContext,
  compiled: CompiledRule,
  name: string,
  cost: number,
  sentAtMs: number,
  result: Extract<CheckResult, { ok: true }>,
): void {
  const { blocked } = cx.isolate;
  if (result.decision.allowed) blocked.forget(name);
  else {
    const banned = result.banUntilMs !== undefined;
    if (banned && !blocked.holdsBan(name)) noteBan(cx, compiled, name, result.banUntilMs!);
    blocked.remember(name, fingerprintOfRule(compiled), compiled.params, cost, sentAtMs, result.decision, banned);
  }
}

/**
 * Tell the ban index (names.ts `BAN_INDEX_NAME`) of a ban this isolate met: once per ban and isolate, again at most
 * every `BAN_CACHE_MS` while refused requests keep coming, in the background. A failed note only leaves the ban out of
 * the dashboard's list; the key's object enforces it all the same.
 */
function noteBan(cx: AskContext, compiled: CompiledRule, object: string, untilMs: number): void {
  const keyHash = object.slice(compiled.rule.id.length + 1);
  const note = banIndexStub(cx.env.LIMITER)
    .noteBan({ object, rule: compiled.rule.id, keyHash, untilMs })
    .catch((error: unknown) =>
      logEvent("warn", { event: "ban_note_failed", rule: compiled.rule.id, error: messageOf(error) }),
    );
  cx.ctx?.waitUntil(note);
}

/**
 * Charge a deferred rule for what the origin answered: the charge `chargeOf` says (nothing when `count_when` does not
 * match), sent to the key's object. Never throws: a failure is logged (that charge is lost, docs/rules.md says so).
 * The object's answer, or `null` when nothing was charged or the call failed.
 */
export async function chargeAfter(
  cx: AskContext,
  app: Applicable,
  response: ResponseFacts,
): Promise<Extract<CheckResult, { ok: true }> | null> {
  const { compiled, keyHash } = app;
  const charge = chargeOf(compiled.rule, response, app.cost, compiled.capacity);
  if (charge.bad !== null) {
    logEvent("warn", { event: "bad_cost_header", rule: compiled.rule.id, key: keyHash, value: charge.bad });
  }
  if (charge.cost < 1) return null;
  return chargeUnits(cx, app, charge.cost);
}

/**
 * The after-response hook (after_origin.ts) of an admitted request: one charge per rule of it that counts by the
 * response, all in the background; `null` when none does.
 */
export function chargesAfter(cx: AskContext, outcomes: readonly AskResult[]): AfterOrigin | null {
  const deferred = outcomes.filter((o) => o.app.compiled.rule.scope === "global" && isDeferred(o.app.compiled.rule));
  if (deferred.length === 0) return null;
  return (answer) => {
    const facts: ResponseFacts = { status: answer.status, header: (name) => answer.headers.get(name) };
    return Promise.all(deferred.map((o) => chargeAfter(cx, o.app, facts)));
  };
}

/** Charge `cost` units of a deferred rule to its key's object (the binding's outcome, the gateway's after-response). */
export async function chargeUnits(
  cx: AskContext,
  app: Applicable,
  cost: number,
): Promise<Extract<CheckResult, { ok: true }> | null> {
  const { env, settings, isolate } = cx;
  const { compiled, keyHash } = app;
  const name = objectNameOf(compiled.rule.id, keyHash);
  const rule = limiterRuleOf(compiled);
  const sentAtMs = isolate.clock();
  const timeoutMs = settings.limiterTimeoutMs ?? compiled.rule.timeoutMs;
  const input = { rule, id: crypto.randomUUID(), costs: [cost], kind: "charge" as const };
  try {
    const answer = await callObject(durableObjectTransport(env.LIMITER), name, input, timeoutMs, isolate);
    const result = answer.kind === "answered" ? firstOf(answer.result.results) : null;
    if (result === null || !result.ok) {
      const error = answer.kind === "failed" ? answer.message : result === null ? "no result" : result.error;
      logEvent("error", { event: "charge_failed", rule: compiled.rule.id, key: keyHash, error });
      return null;
    }
    isolate.stats.charges++;
    if (result.banUntilMs !== undefined) observe(cx, compiled, name, cost, sentAtMs, result);
    return result;
  } catch (error) {
    logEvent("error", { event: "charge_failed", rule: compiled.rule.id, key: keyHash, error: messageOf(error) });
    return null;
  }
}
