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

import { countWhenOf, type Finding, type Findings, keyOf } from "./cloudflare_count.ts";
import { ExpressionSyntaxError, type Node, parseExpression } from "./cloudflare_expr.ts";
import {
  CloudflareImportError,
  field,
  here,
  isBool,
  isObject,
  isString,
  type Obj,
  type Place,
  rateLimitOf,
  rulesOf,
} from "./cloudflare_file.ts";
import { withLists } from "./cloudflare_lists.ts";
import { selectionOf } from "./cloudflare_match.ts";
import { type DraftRule, draftMatch, type FieldValue, type ImportResult, type ReportItem, ruleId } from "./report.ts";

export { CloudflareImportError };

/** Every report item says `file:line:col` of the value it is about, then the rule: `rules[2] (Login limit)`. */
export function importCloudflare(
  text: string,
  file: string,
  lists: ReadonlyMap<string, readonly string[]> = new Map(),
): ImportResult {
  const { place, rules } = rulesOf(text, file);
  const report: ReportItem[] = [];
  const drafts: DraftRule[] = [];
  const taken = new Set<string>();
  rules.forEach((rule, i) => {
    const draft = importRule(place, rule, `rules[${i}]`, { report, taken, lists });
    if (draft !== null) drafts.push(draft);
  });
  if (drafts.length > 1) {
    report.push({
      where: here(place, rules),
      kind: "note",
      message:
        "Cloudflare evaluates its rules in order and a blocking one ends the evaluation; Sluice applies every rule that matches, and gives back what the admitting rules charged when one refuses",
    });
  }
  return { rules: drafts, report };
}

const CHALLENGES = new Set(["managed_challenge", "js_challenge", "challenge"]);

// long: the rule's parts in the order the report reads best, each mapped or reported where it is read
function importRule(
  place: Place,
  rule: Obj,
  path: string,
  { report, taken, lists }: { report: ReportItem[]; taken: Set<string>; lists: ReadonlyMap<string, readonly string[]> },
): DraftRule | null {
  const description = field(place, rule, "description", path, isString, "a string");
  const ref =
    field(place, rule, "ref", path, isString, "a string") ?? field(place, rule, "id", path, isString, "a string");
  const name = description ?? ref ?? "";
  const label = `${path}${name === "" ? "" : ` (${name})`}`;
  const at = (obj: object, key?: string) => here(place, obj, key);
  const say = (kind: ReportItem["kind"], f: Finding) =>
    report.push({ where: `${f.at}: ${label}`, kind, message: f.message });
  const action = field(place, rule, "action", path, isString, "a string") ?? "";
  const expression = {
    value: field(place, rule, "expression", path, isString, "a string") ?? "",
    at: at(rule, "expression"),
  };
  const rl = field(place, rule, "ratelimit", path, isObject, "an object");
  if (field(place, rule, "enabled", path, isBool, "true or false") === false) {
    say("note", { message: "disabled (enabled: false), so no rule", at: at(rule, "enabled") });
    return null;
  }
  if (rl === undefined) {
    say("left out", {
      message: `no ratelimit: a rule of action ${action === "" ? "(none)" : action}, not a rate limiting rule`,
      at: at(rule),
    });
    return null;
  }
  const limit = rateLimitOf(place, rl, `${path}.ratelimit`);
  const found: Findings = { approximate: [], notes: [], leftOut: [] };
  if (limit.score !== undefined)
    found.leftOut.push({
      message:
        "score_per_period: complexity-based counting (Cloudflare skips a response without a valid score; Sluice's cost_header charges the rule's cost for it), say it by hand with cost_header if that difference is acceptable",
      at: at(rl, "score_per_period"),
    });
  const parsed = expressionOf(expression.value, expression.at, found);
  const tree = parsed === null ? null : withLists(parsed, lists);
  const selection = tree === null ? null : selectionOf(tree);
  if (selection !== null && "refused" in selection)
    found.leftOut.push({ message: `the expression's ${selection.refused}`, at: expression.at });
  else if (selection !== null)
    found.approximate.push(...selection.notes.map((message) => ({ message, at: expression.at })));
  const key = keyOf(limit.characteristics, found);
  const countWhen = tree === null ? null : countWhenOf(limit.counting, tree, found);
  const fields: [string, FieldValue][] = [];
  if (description !== undefined && description !== "" && description.length <= 200 && !/[\r\n]/.test(description))
    fields.push(["description", description]);
  fields.push(["algorithm", "sliding_counter"], ["limit", limit.perPeriod], ["window", duration(limit.period)]);
  fields.push(...actionFields(place, rule, action, found));
  if (countWhen !== null) fields.push(["count_when", { flow: countWhen }]);
  if (limit.timeout > 0) fields.push(["block_for", duration(limit.timeout)]);
  if (limit.mitigation.trim() !== "")
    found.leftOut.push({
      message: "mitigation_expression: Sluice's refusal applies to every request of the key the rule matches",
      at: at(rl, "mitigation_expression"),
    });
  if (limit.toOrigin)
    found.approximate.push({
      message:
        "requests_to_origin: Cloudflare counts only requests that reach the origin (not served from cache); Sluice counts every request the Worker sees",
      at: at(rl, "requests_to_origin"),
    });
  if (key.clientChosen) fields.push(["key_client_chosen", "accept"]);
  for (const f of found.leftOut) say("left out", f);
  if (selection === null || "refused" in selection || found.leftOut.length > 0) return null;
  for (const f of found.approximate) say("approximate", f);
  for (const f of found.notes) say("note", f);
  const timeout = limit.timeout > 0 ? `, mitigation_timeout ${limit.timeout} s` : "";
  return {
    id: ruleId(name === "" ? "cloudflare-rule" : name, taken),
    source: `${at(rule)}: ${label}: ${limit.perPeriod} requests per ${limit.period} s${timeout}, action ${action}`,
    notes: found.approximate.map((f) => `approximate: ${f.message}`),
    match: draftMatch(selection, key.identity),
    ...(key.key === null ? {} : { key: key.key }),
    fields,
  };
}

/** What the action makes of the rule: `log` a shadow rule, `block` its status, a challenge a refusal. */
function actionFields(place: Place, rule: Obj, action: string, found: Findings): [string, FieldValue][] {
  const at = here(place, rule, "action");
  if (action === "log") return [["mode", "shadow"]];
  if (CHALLENGES.has(action)) {
    // Refusing is what a rate limiter can do where Cloudflare would challenge; a shadow rule would stop limiting.
    found.approximate.push({
      message: `action ${action}: Sluice refuses (429) where Cloudflare would challenge, so a visitor who would pass the challenge is refused too (mode: shadow to watch it first)`,
      at,
    });
    return [];
  }
  if (action !== "block") {
    found.leftOut.push({ message: `action ${JSON.stringify(action)}: not a rate limiting rule's action`, at });
    return [];
  }
  const response = isObject(rule.action_parameters) ? rule.action_parameters.response : undefined;
  if (!isObject(response)) return [];
  const status = response.status_code;
  if (response.content !== undefined)
    found.notes.push({
      message: "its custom response body: Sluice answers a refusal with its own problem+json body",
      at: here(place, response, "content"),
    });
  if (status === undefined || status === 429) return [];
  if (Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599)
    return [["status", status as number]];
  found.leftOut.push({
    message: `action_parameters.response.status_code ${JSON.stringify(status)}: a refusal's status is 400 to 599`,
    at: here(place, response, "status_code"),
  });
  return [];
}

/** An empty expression is every request, as Cloudflare's dashboard writes `true`. A parse error is at the string's
 * start: its offset is within the text after JSON's escapes, which is not a column of the file. */
function expressionOf(text: string, at: string, found: Findings): Node | null {
  try {
    return parseExpression(text.trim() === "" ? "true" : text);
  } catch (err) {
    if (!(err instanceof ExpressionSyntaxError)) throw err;
    found.leftOut.push({ message: `the expression does not parse as one the import reads: ${err.message}`, at });
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
