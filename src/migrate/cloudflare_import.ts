/**
 * Cloudflare WAF rate limiting rules (a ruleset as the Rulesets API returns it) as Sluice rules: one rule per
 * enabled rule, `sliding_counter` with `limit: requests_per_period` and `window: period`, its expression as the
 * match (cloudflare_match.ts), its characteristics as the key and its counting expression as `count_when`
 * (cloudflare_count.ts), `mitigation_timeout` as `block_for`, `log` as `mode: shadow`.
 *
 * Why sliding_counter: Cloudflare's documentation says a rule acts once the rate over the last `period` passes
 * `requests_per_period` (per counter, without naming the algorithm), and Cloudflare's 2017 blog post on building its
 * rate limiting ("How we built rate limiting capable of scaling to millions of domains") describes the estimate as the
 * previous period's count weighted by its overlap plus the current one: sliding_counter's two-counter estimate. A
 * fixed window would let twice the limit through around a period's edge, which a sliding estimate does not.
 */

import { countWhenOf, type Findings, keyOf } from "./cloudflare_count.ts";
import { ExpressionSyntaxError, type Node, parseExpression } from "./cloudflare_expr.ts";
import { selectionOf } from "./cloudflare_match.ts";
import {
  conditionFields,
  type DraftRule,
  type FieldValue,
  type ImportResult,
  type ReportItem,
  ruleId,
} from "./report.ts";

/** A file that is not a Cloudflare ruleset: the message names the file and what is wrong. */
export class CloudflareImportError extends Error {}

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export function importCloudflare(text: string, file: string): ImportResult {
  const rules = rulesOf(text, file);
  const report: ReportItem[] = [];
  const drafts: DraftRule[] = [];
  const taken = new Set<string>();
  rules.forEach((rule, i) => {
    const draft = importRule(rule, `${file}: rules[${i}]`, report, taken);
    if (draft !== null) drafts.push(draft);
  });
  if (drafts.length > 1) {
    report.push({
      where: file,
      kind: "note",
      message:
        "Cloudflare evaluates its rules in order and a blocking one ends the evaluation; Sluice applies every rule that matches, and gives back what the admitting rules charged when one refuses",
    });
  }
  return { rules: drafts, report };
}

/** The rules of `{"result": {"rules": [...]}}`, `{"rules": [...]}` or `[...]`, each checked to be an object. */
function rulesOf(text: string, file: string): Obj[] {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (err) {
    throw new CloudflareImportError(`${file}: not JSON: ${(err as Error).message}`);
  }
  const ruleset = isObject(root) && isObject(root.result) ? root.result : root;
  if (isObject(root) && root.success === false)
    throw new CloudflareImportError(`${file}: the API answered an error (success: false), not a ruleset`);
  if (isObject(ruleset) && typeof ruleset.phase === "string" && ruleset.phase !== "http_ratelimit")
    throw new CloudflareImportError(
      `${file}: a ruleset of phase ${ruleset.phase}, not of rate limiting rules (phase http_ratelimit)`,
    );
  const rules = Array.isArray(ruleset) ? ruleset : isObject(ruleset) ? ruleset.rules : undefined;
  if (!Array.isArray(rules))
    throw new CloudflareImportError(
      `${file}: expected a ruleset ({"result": {"rules": [...]}} as the Rulesets API returns it), {"rules": [...]} or a list of rules`,
    );
  rules.forEach((r, i) => {
    if (!isObject(r))
      throw new CloudflareImportError(`${file}: rules[${i}]: a rule must be an object, got ${kindOf(r)}`);
  });
  return rules as Obj[];
}

function kindOf(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "a list" : `${typeof v} ${JSON.stringify(v)}`.slice(0, 60);
}

/** A field that must have a type when present; the file is malformed otherwise. */
function field<T>(obj: Obj, name: string, where: string, ok: (v: unknown) => v is T, want: string): T | undefined {
  const v = obj[name];
  if (v === undefined || v === null) return undefined;
  if (!ok(v)) throw new CloudflareImportError(`${where}.${name}: must be ${want}, got ${kindOf(v)}`);
  return v;
}
const isString = (v: unknown): v is string => typeof v === "string";
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);

const CHALLENGES = new Set(["managed_challenge", "js_challenge", "challenge"]);

/** A rule's `ratelimit`, its types checked (the file is refused otherwise). */
interface RateLimit {
  readonly characteristics: readonly string[];
  readonly period: number;
  readonly perPeriod: number;
  readonly timeout: number;
  readonly counting: string;
  readonly score: number | undefined;
  readonly mitigation: string;
  readonly toOrigin: boolean;
}

function rateLimitOf(rl: Obj, at: string): RateLimit {
  const score = field(rl, "score_per_period", at, isCount, "a whole number");
  const period = field(rl, "period", at, isCount, "a whole number of seconds") ?? 0;
  const perPeriod = field(rl, "requests_per_period", at, isCount, "a whole number") ?? 0;
  // A complexity-based rule has a score instead of a request count; it is left out, not malformed.
  if (score === undefined && (period === 0 || perPeriod === 0))
    throw new CloudflareImportError(`${at}: needs a period and a requests_per_period above 0`);
  return {
    characteristics: field(rl, "characteristics", at, isStrings, "a list of strings") ?? [],
    period,
    perPeriod,
    timeout: field(rl, "mitigation_timeout", at, isCount, "a whole number of seconds") ?? 0,
    counting: field(rl, "counting_expression", at, isString, "a string") ?? "",
    score,
    mitigation: field(rl, "mitigation_expression", at, isString, "a string") ?? "",
    toOrigin: field(rl, "requests_to_origin", at, isBool, "true or false") ?? false,
  };
}

// long: the rule's parts in the order the report reads best, each mapped or reported where it is read
function importRule(rule: Obj, where: string, report: ReportItem[], taken: Set<string>): DraftRule | null {
  const description = field(rule, "description", where, isString, "a string");
  const ref = field(rule, "ref", where, isString, "a string") ?? field(rule, "id", where, isString, "a string");
  const name = description ?? ref ?? "";
  const label = `${where}${name === "" ? "" : ` (${name})`}`;
  const say = (kind: ReportItem["kind"], message: string) => report.push({ where: label, kind, message });
  const action = field(rule, "action", where, isString, "a string") ?? "";
  const expressionText = field(rule, "expression", where, isString, "a string") ?? "";
  const rl = field(rule, "ratelimit", where, isObject, "an object");
  if (field(rule, "enabled", where, isBool, "true or false") === false) {
    say("note", "disabled (enabled: false), so no rule");
    return null;
  }
  if (rl === undefined) {
    say("left out", `no ratelimit: a rule of action ${action === "" ? "(none)" : action}, not a rate limiting rule`);
    return null;
  }
  const limit = rateLimitOf(rl, `${where}.ratelimit`);
  const found: Findings = { approximate: [], notes: [], leftOut: [] };
  if (limit.score !== undefined)
    found.leftOut.push(
      "score_per_period: complexity-based counting (Cloudflare skips a response without a valid score; Sluice's cost_header charges the rule's cost for it), say it by hand with cost_header if that difference is acceptable",
    );
  const expression = expressionOf(expressionText, found);
  const selection = expression === null ? null : selectionOf(expression);
  if (selection !== null && "refused" in selection) found.leftOut.push(`the expression's ${selection.refused}`);
  else if (selection !== null) found.approximate.push(...selection.notes);
  const key = keyOf(limit.characteristics, found);
  const countWhen = expression === null ? null : countWhenOf(limit.counting, expression, found);
  const fields: [string, FieldValue][] = [];
  if (description !== undefined && description !== "" && description.length <= 200 && !/[\r\n]/.test(description))
    fields.push(["description", description]);
  fields.push(["algorithm", "sliding_counter"], ["limit", limit.perPeriod], ["window", duration(limit.period)]);
  fields.push(...actionFields(rule, action, found));
  if (countWhen !== null) fields.push(["count_when", { flow: countWhen }]);
  if (limit.timeout > 0) fields.push(["block_for", duration(limit.timeout)]);
  if (limit.mitigation.trim() !== "")
    found.leftOut.push("mitigation_expression: Sluice's refusal applies to every request of the key the rule matches");
  if (limit.toOrigin)
    found.approximate.push(
      "requests_to_origin: Cloudflare counts only requests that reach the origin (not served from cache); Sluice counts every request the Worker sees",
    );
  if (key.clientChosen) fields.push(["key_client_chosen", "accept"]);
  for (const m of found.leftOut) say("left out", m);
  if (selection === null || "refused" in selection || found.leftOut.length > 0) return null;
  for (const m of found.approximate) say("approximate", m);
  for (const m of found.notes) say("note", m);
  const timeout = limit.timeout > 0 ? `, mitigation_timeout ${limit.timeout} s` : "";
  return {
    id: ruleId(name === "" ? "cloudflare-rule" : name, taken),
    source: `${label}: ${limit.perPeriod} requests per ${limit.period} s${timeout}, action ${action}`,
    notes: found.approximate.map((m) => `approximate: ${m}`),
    match: {
      ...(selection.routes === null ? {} : { route: selection.routes }),
      ...(selection.except.length === 0 ? {} : { except: selection.except }),
      ...conditionFields(selection.conditions),
      ...(key.identity === null ? {} : { identity: key.identity }),
    },
    ...(key.key === null ? {} : { key: key.key }),
    fields,
  };
}

/** What the action makes of the rule: `log` a shadow rule, `block` its status, a challenge a refusal. */
function actionFields(rule: Obj, action: string, found: Findings): [string, FieldValue][] {
  if (action === "log") return [["mode", "shadow"]];
  if (CHALLENGES.has(action)) {
    // Refusing is what a rate limiter can do where Cloudflare would challenge; a shadow rule would stop limiting.
    found.approximate.push(
      `action ${action}: Sluice refuses (429) where Cloudflare would challenge, so a visitor who would pass the challenge is refused too (mode: shadow to watch it first)`,
    );
    return [];
  }
  if (action !== "block") {
    found.leftOut.push(`action ${JSON.stringify(action)}: not a rate limiting rule's action`);
    return [];
  }
  const response = isObject(rule.action_parameters) ? rule.action_parameters.response : undefined;
  const status = isObject(response) ? response.status_code : undefined;
  if (isObject(response) && response.content !== undefined)
    found.notes.push("its custom response body: Sluice answers a refusal with its own problem+json body");
  if (status === undefined || status === 429) return [];
  if (Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599)
    return [["status", status as number]];
  found.leftOut.push(
    `action_parameters.response.status_code ${JSON.stringify(status)}: a refusal's status is 400 to 599`,
  );
  return [];
}

/** An empty expression is every request, as Cloudflare's dashboard writes `true`. */
function expressionOf(text: string, found: Findings): Node | null {
  try {
    return parseExpression(text.trim() === "" ? "true" : text);
  } catch (err) {
    if (!(err instanceof ExpressionSyntaxError)) throw err;
    found.leftOut.push(`the expression does not parse as one the import reads: ${err.message}`);
    return null;
  }
}

/** Seconds as a rule-file duration: `10s`, `min`, `10min`, `h`, `d`. */
export function duration(seconds: number): string {
  for (const [unit, size] of [
    ["d", 86400],
    ["h", 3600],
    ["min", 60],
  ] as const) {
    if (seconds % size === 0) return seconds === size ? unit : `${seconds / size}${unit}`;
  }
  return seconds === 1 ? "s" : `${seconds}s`;
}
