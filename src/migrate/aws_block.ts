/**
 * AWS WAF rules that block what their statement matches, without a rate (an IP set of bad addresses, a path no one
 * may reach): deny rules (src/rules/deny.ts), refusing with AWS's answer (403, or the CustomResponse's code). The
 * statement is read as a rate-based rule's scope-down statement is (aws_statement.ts). AWS ends its evaluation at the
 * first rule by Priority that allows or blocks: a rule that allows before a Block spares requests the deny rule
 * refuses, which the report says (approximate). A statement a match cannot say is noted, not left out: it is no rate
 * limit, and AWS WAF can keep it.
 */
import { actionFields } from "./aws_action.ts";
import { field, here, isInteger, type Obj } from "./aws_file.ts";
import type { PlaceWithSets } from "./aws_ip_set.ts";
import { scopeOf } from "./aws_statement.ts";
import type { Findings } from "./cloudflare_count.ts";
import { type DraftRule, draftMatch, type ReportItem, ruleId } from "./report.ts";

/** A rule of the web ACL as this module needs it: where it is, its name, its Action's verb and its Priority. */
export interface RuleFacts {
  readonly path: string;
  readonly name: string;
  readonly verb: string | null;
  readonly priority: number | null;
}

/** The Action's verb (`Block`, `Allow`, ...) and the Priority of each rule, for the order AWS evaluates them in. */
export function ruleFacts(place: PlaceWithSets, rules: readonly Obj[]): RuleFacts[] {
  return rules.map((rule, i) => {
    const action = rule.Action;
    const verb = action !== null && typeof action === "object" ? (Object.keys(action)[0] ?? null) : null;
    const priority = field(place, rule, "Priority", `Rules[${i}]`, isInteger, "a whole number") ?? null;
    return { path: `Rules[${i}]`, name: typeof rule.Name === "string" ? rule.Name : "", verb, priority };
  });
}

/** A Block rule's statement as a deny rule, or `null` with the reason in the report. */
export function blockRule(
  place: PlaceWithSets,
  rule: Obj,
  statement: Obj,
  facts: RuleFacts,
  all: readonly RuleFacts[],
  report: ReportItem[],
  taken: Set<string>,
): DraftRule | null {
  const label = `${facts.path} (${facts.name})`;
  const scope = scopeOf(place, statement, `${facts.path}.Statement`);
  // Not a rate limit: a block Sluice cannot say stays AWS WAF's (a note, as for any other rule that is not one).
  if ("refused" in scope) {
    const message = `a Block without a rate, not a rate limit; as a deny rule: ${scope.refused.replace(`${facts.path}.`, "")}; so no rule`;
    report.push({ where: `${scope.at}: ${label}`, kind: "note", message });
    return null;
  }
  const found: Findings = { approximate: [], notes: [...scope.notes], leftOut: [] };
  const [, fields] = actionFields(place, rule.Action as Obj, facts.path, found);
  const allowing = all.filter(
    (r) => r.verb === "Allow" && r.priority !== null && facts.priority !== null && r.priority < facts.priority,
  );
  if (allowing.length > 0) {
    found.approximate.push({
      message: `${allowing.map((r) => `${r.path} (${r.name})`).join(", ")} allow${allowing.length === 1 ? "s" : ""} before it (a lower Priority), and AWS ends its evaluation there; the deny rule refuses what it matches whatever they allow`,
      at: here(place, rule, "Priority"),
    });
  }
  for (const f of found.approximate)
    report.push({ where: `${f.at}: ${label}`, kind: "approximate", message: f.message });
  for (const f of found.notes) report.push({ where: `${f.at}: ${label}`, kind: "note", message: f.message });
  return {
    id: ruleId(facts.name, taken),
    source: `${here(place, rule)}: ${label}: blocks what its statement matches, without a rate`,
    notes: found.approximate.map((f) => `approximate: ${f.message}`),
    match: draftMatch(scope, null),
    fields: [["deny", true], ...fields],
  };
}
