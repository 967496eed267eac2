/**
 * The service binding's way to report what happened to a request it admitted: `limit({ key, rule, outcome })` on a
 * rule that counts by the response (`count_when`, `cost_header`). A `limit({ key, rule })` on such a rule checks
 * without charging; the outcome, once the handler answered, is charged (exactly once, by the key's object) as the
 * gateway charges the origin's answer (direct.ts `chargeAfter`). The answer keeps the native binding's `{ success }`:
 * `false` when this charge crossed the rule's limit (the next `limit` is refused; a `block_for` ban starts).
 */
import type { LimitOutcome, LimitResult } from "../client/types.ts";
import type { CompiledRule } from "../request/match.ts";
import { isDeferred, type ResponseFacts } from "../rules/outcome.ts";
import type { AskContext } from "./ask.ts";
import { chargeAfter } from "./direct.ts";

const where = "Sluice limit()";

/** Read `outcome` strictly (`{ status, headers? }`), for a rule that counts by the response; throws what to fix. */
export function readOutcome(value: unknown, compiled: CompiledRule): LimitOutcome {
  const id = compiled.rule.id;
  if (!isDeferred(compiled.rule))
    throw new RangeError(
      `${where}: rule ${JSON.stringify(id)} has no count_when or cost_header; an outcome is only charged by such a rule`,
    );
  if (typeof value !== "object" || value === null)
    throw new TypeError(
      `${where}: outcome must be { status, headers? }, got ${value === null ? "null" : typeof value}`,
    );
  const { status, headers } = value as Record<string, unknown>;
  for (const name of Object.keys(value))
    if (name !== "status" && name !== "headers")
      throw new TypeError(`${where}: unknown outcome field ${JSON.stringify(name)}; an outcome has status and headers`);
  if (typeof status !== "number" || !Number.isInteger(status) || status < 100 || status > 599)
    throw new RangeError(`${where}: outcome.status must be an HTTP status from 100 to 599, got ${String(status)}`);
  if (headers === undefined) return { status };
  if (typeof headers !== "object" || headers === null || Array.isArray(headers))
    throw new TypeError(`${where}: outcome.headers must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [name, v] of Object.entries(headers)) {
    if (typeof v !== "string") throw new TypeError(`${where}: outcome.headers must map names to strings (${name})`);
    out[name.toLowerCase()] = v;
  }
  return { status, headers: out };
}

/** Charge an outcome to (rule, key): the binding's answer, with the units charged. */
export async function chargeOutcome(
  cx: AskContext,
  compiled: CompiledRule,
  keyHash: string,
  cost: number,
  outcome: LimitOutcome,
): Promise<LimitResult> {
  const facts: ResponseFacts = {
    status: outcome.status,
    header: (name) => outcome.headers?.[name.toLowerCase()] ?? null,
  };
  const charged = await chargeAfter(cx, { compiled, keyHash, cost }, facts);
  const { rule } = compiled;
  const decision = charged?.decision ?? null;
  const success = decision?.allowed ?? true;
  const retryAfterMs = success ? null : (decision?.retryAfterMs ?? null);
  const ruleResult = {
    rule: rule.id,
    mode: rule.mode,
    outcome: success ? ("allowed" as const) : ("denied" as const),
    remaining: decision?.remaining ?? null,
    resetAfterMs: decision?.resetAfterMs ?? null,
    retryAfterMs,
  };
  return {
    success,
    status: success ? 200 : rule.status,
    reason: success ? null : "denied",
    headers: {},
    problem: null,
    delayedMs: 0,
    retryAfterMs,
    rules: [ruleResult],
    rule: rule.id,
    remaining: ruleResult.remaining,
    resetAfterMs: ruleResult.resetAfterMs,
    charged: charged?.charged ?? 0,
  };
}
