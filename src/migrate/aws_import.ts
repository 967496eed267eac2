/**
 * AWS WAF (wafv2) rate-based rules as Sluice rules: one rule per rule whose statement is a RateBasedStatement, a
 * `sliding_counter` of `limit: Limit` per `window: EvaluationWindowSec` in 10-second sub-windows, counting refused
 * requests too; its ScopeDownStatement as the match (aws_statement.ts), its aggregation as the key (aws_key.ts),
 * its Action as the mode or status. A rule that blocks what its statement matches without a rate is a deny rule
 * (aws_block.ts); other rules are not rate limits: noted and skipped.
 *
 * Why this algorithm: AWS "estimates the current request rate using an algorithm that gives more importance to more
 * recent requests" and does "not guarantee an exact limit match" (Rate-based rule caveats); each check counts the
 * requests of the last EvaluationWindowSec, about every 10 seconds (API reference, RateBasedStatement): a sliding
 * estimate over 10-second steps, which is `sliding_counter` with `buckets: window / 10 s`. A request is acted on while
 * its aggregation instance's count is over the limit (Applying rate limiting to requests) and blocked "until the
 * request rate falls below the limit": the client's rate, blocked requests in it (our reading), so `count_denied`.
 * `sliding_log` would be exact where AWS is not, at a memory cost growing with Limit (up to 2,000,000,000).
 */

import { actionFields } from "./aws_action.ts";
import { blockRule, type RuleFacts, ruleFacts } from "./aws_block.ts";
import {
  AwsImportError,
  awsRulesOf,
  field,
  here,
  isInteger,
  isObject,
  isString,
  type Obj,
  required,
  soleKey,
} from "./aws_file.ts";
import type { IpSet, PlaceWithSets } from "./aws_ip_set.ts";
import { awsKeyOf } from "./aws_key.ts";
import { scopeOf } from "./aws_statement.ts";
import type { Finding, Findings } from "./cloudflare_count.ts";
import { duration } from "./cloudflare_import.ts";
import { type DraftRule, draftMatch, type FieldValue, type ImportResult, type ReportItem, ruleId } from "./report.ts";

export { AwsImportError };

/** Every report item says `file:line:col` of the value it is about, then the rule: `Rules[2] (login-per-ip)`. */
export function importAwsWaf(text: string, file: string, ipSets: readonly IpSet[] = []): ImportResult {
  const read = awsRulesOf(text, file);
  const { rules, list } = read;
  const place: PlaceWithSets = { ...read.place, ipSets: new Map(ipSets.map((s) => [s.arn, s])) };
  const report: ReportItem[] = [];
  const drafts: DraftRule[] = [];
  const taken = new Set<string>();
  const facts = ruleFacts(place, rules);
  rules.forEach((rule, i) => {
    const draft = importRule(place, rule, { facts: facts[i]!, all: facts }, report, taken);
    if (draft !== null) drafts.push(draft);
  });
  const where = here(place, list);
  // A deny rule (aws_block.ts) counts nothing: what AWS's rate checks do is about the rate-based rules alone.
  if (drafts.some((d) => !d.fields.some(([name]) => name === "deny")))
    report.push({
      where,
      kind: "approximate",
      message:
        "AWS WAF checks each rate about every 10 s and usually acts within 30 s, so a burst over the limit passes until its next check; Sluice counts every request before deciding it",
    });
  if (drafts.length > 1)
    report.push({
      where,
      kind: "note",
      message:
        "AWS WAF evaluates its rules by Priority and a Block, Captcha or Challenge ends the evaluation; Sluice applies every rule that matches, and gives back what the admitting rules charged when one refuses",
    });
  return { rules: drafts, report };
}

const WINDOWS = new Set([60, 120, 300, 600]);

// long: the rule's parts in the order the report reads best, each mapped or reported where it is read
function importRule(
  place: PlaceWithSets,
  rule: Obj,
  order: { readonly facts: RuleFacts; readonly all: readonly RuleFacts[] },
  report: ReportItem[],
  taken: Set<string>,
): DraftRule | null {
  const path = order.facts.path;
  const name = required(place, rule, "Name", path, isString, "a string");
  const label = `${path} (${name})`;
  const say = (kind: ReportItem["kind"], f: Finding) =>
    report.push({ where: `${f.at}: ${label}`, kind, message: f.message });
  const statement = required(place, rule, "Statement", path, isObject, "an object");
  const [kind, rbs] = soleKey(place, statement, `${path}.Statement`, "a statement");
  if (kind !== "RateBasedStatement" && order.facts.verb === "Block") {
    return blockRule(place, rule, statement, order.facts, order.all, report, taken);
  }
  if (kind !== "RateBasedStatement") {
    say("note", {
      message: `${/^[AEIOU]/.test(kind) ? "an" : "a"} ${kind}, not a rate-based rule: not a rate limit, so no rule`,
      at: here(place, statement, kind),
    });
    return null;
  }
  const at = (obj: object, key?: string) => here(place, obj, key);
  const inner = `${path}.Statement.RateBasedStatement`;
  if (!isObject(rbs)) throw new AwsImportError(`${at(statement, kind)}: ${inner}: must be an object`);
  const limit = required(place, rbs, "Limit", inner, isInteger, "a whole number");
  if (limit < 10 || limit > 2_000_000_000)
    throw new AwsImportError(`${at(rbs, "Limit")}: ${inner}.Limit: 10 to 2000000000 (AWS's range), got ${limit}`);
  const window = field(place, rbs, "EvaluationWindowSec", inner, isInteger, "a whole number of seconds") ?? 300;
  if (!WINDOWS.has(window))
    throw new AwsImportError(
      `${at(rbs, "EvaluationWindowSec")}: ${inner}.EvaluationWindowSec: 60, 120, 300 or 600, got ${window}`,
    );
  const found: Findings = { approximate: [], notes: [], leftOut: [] };
  if (limit * window * 1000 > 2 ** 50)
    found.leftOut.push({
      message: `Limit ${limit} per ${window} s: limit × window is beyond Sluice's exact arithmetic (2^50 request-ms); a shorter EvaluationWindowSec or a smaller Limit`,
      at: at(rbs, "Limit"),
    });
  const key = awsKeyOf(place, rbs, inner, found);
  const scopeDown = field(place, rbs, "ScopeDownStatement", inner, isObject, "a statement");
  const scope = scopeDown === undefined ? null : scopeOf(place, scopeDown, `${inner}.ScopeDownStatement`);
  if (scope !== null && "refused" in scope)
    found.leftOut.push({ message: scope.refused.replace(`${inner}.`, ""), at: scope.at });
  else for (const f of scope?.notes ?? []) (f.kind === "approximate" ? found.approximate : found.notes).push(f);
  const action = required(place, rule, "Action", path, isObject, "an object");
  const [verb, fields] = actionFields(place, action, path, found);
  if (field(place, rule, "RuleLabels", path, Array.isArray, "a list") !== undefined)
    found.notes.push({
      message: "RuleLabels: labels for AWS's later rules; Sluice rules have none",
      at: at(rule, "RuleLabels"),
    });
  for (const f of found.leftOut) say("left out", f);
  if (found.leftOut.length > 0 || (scope !== null && "refused" in scope)) return null;
  for (const f of found.approximate) say("approximate", f);
  for (const f of found.notes) say("note", f);
  const all: [string, FieldValue][] = [
    ["algorithm", "sliding_counter"],
    ["limit", limit],
    ["window", duration(window)],
    ["buckets", window / 10],
    ["count_denied", true],
    ...fields,
  ];
  if (key.key !== null && key.key !== "global") all.push(["key_missing", "skip"]);
  if (key.clientChosen) all.push(["key_client_chosen", "accept"]);
  const match = scope ?? { routes: null, except: [], conditions: [] };
  return {
    id: ruleId(name, taken),
    source: `${at(rule)}: ${label}: ${limit} requests per ${window} s, action ${verb}`,
    notes: found.approximate.map((f) => `approximate: ${f.message}`),
    match: draftMatch(match, key.identity),
    ...(key.key === null ? {} : { key: key.key }),
    fields: all,
  };
}
