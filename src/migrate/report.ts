/**
 * What an importer produces: draft rules (rule-file fields in order, each with a comment naming where it came from)
 * and a report of everything it mapped approximately or left out. `rulesYaml` writes the drafts as a rule file that
 * `sluice validate` reads; `formatReport` writes the report.
 */
import { CONDITION_SOURCES, type ConditionSource, printCondition } from "../rules/match_conditions.ts";
import type { MatchCondition } from "../rules/types.ts";

/** A rule as it will be written: its fields in rule-file spelling and order. */
export interface DraftRule {
  readonly id: string;
  /** Where it came from, for the comment above it: `nginx.conf:12: limit_req zone=api burst=20 nodelay`. */
  readonly source: string;
  /** Further comment lines (approximations that concern this rule). */
  readonly notes: readonly string[];
  readonly match: {
    readonly plan?: string;
    /** One route, or several (the rule applies on any of them). */
    readonly route?: string | readonly string[];
    readonly except?: readonly string[];
    /** `match.header` conditions in rule-file flow style (`{ name: x-plan, equals: "gold" }`). */
    readonly header?: readonly string[];
    /** `match.cookie` conditions, as `header`. */
    readonly cookie?: readonly string[];
    /** `match.query` conditions, as `header`. */
    readonly query?: readonly string[];
    /** `match.cf` conditions (where Cloudflare says the client is), as `header`. */
    readonly cf?: readonly string[];
    /** `match.address`: the client address ranges the rule applies to (CIDR text). */
    readonly address?: readonly string[];
    /** `match.except_address`: the client address ranges it never applies to. */
    readonly except_address?: readonly string[];
    /** `api_key`, `ip` or `user`; absent when the rule gives `key`. */
    readonly identity?: string;
  };
  /** The rule's `key:` instead of an identity: `global`, or its parts in rule-file flow style (`{ header: x-t }`). */
  readonly key?: "global" | readonly string[];
  readonly fields: readonly (readonly [string, FieldValue])[];
}

/** A field's value: a scalar, or a mapping already in rule-file flow style (`{ flow: "{ status: [401, 403] }" }`). */
export type FieldValue = string | number | boolean | { readonly flow: string };

export type ReportKind = "approximate" | "left out" | "note";

export interface ReportItem {
  /** `file:line`. */
  readonly where: string;
  readonly kind: ReportKind;
  readonly message: string;
}

export interface ImportResult {
  readonly rules: readonly DraftRule[];
  readonly report: readonly ReportItem[];
}

/** Whether something was left out (the import then exits non-zero unless `--allow-partial`). */
export function leftOut(result: ImportResult): number {
  return result.report.filter((r) => r.kind === "left out").length;
}

/** The drafts as a rule file. */
export function rulesYaml(result: ImportResult, header: string): string {
  const out = [`# ${header}`, "# Review the rules and the report before deploying; `sluice validate` checks them.", ""];
  if (result.rules.length === 0) out.push("[]");
  for (const rule of result.rules) {
    out.push(`# from ${rule.source}`);
    for (const note of rule.notes) out.push(`# ${note}`);
    out.push(`- id: ${rule.id}`);
    const m = rule.match;
    const match = [
      ...(m.plan === undefined ? [] : [`plan: ${scalar(m.plan)}`]),
      ...(m.route === undefined ? [] : [`route: ${routes(m.route)}`]),
      ...(m.except === undefined || m.except.length === 0 ? [] : [`except: ${routes(m.except)}`]),
      ...CONDITION_SOURCES.flatMap((k) =>
        m[k] === undefined || m[k].length === 0 ? [] : [`${k}: [${m[k].join(", ")}]`],
      ),
      ...(["address", "except_address"] as const).flatMap((k) =>
        m[k] === undefined || m[k].length === 0 ? [] : [`${k}: [${m[k].map((r) => JSON.stringify(r)).join(", ")}]`],
      ),
      ...(m.identity === undefined ? [] : [`identity: ${m.identity}`]),
    ];
    out.push(match.length === 0 ? "  match: {}" : `  match: { ${match.join(", ")} }`);
    if (rule.key !== undefined) out.push(`  key: ${rule.key === "global" ? "global" : `[${rule.key.join(", ")}]`}`);
    for (const [name, value] of rule.fields)
      out.push(`  ${name}: ${typeof value === "object" ? value.flow : scalar(value)}`);
    out.push("");
  }
  return `${out.join("\n")}\n`;
}

function routes(list: string | readonly string[]): string {
  return typeof list === "string" || list.length === 1
    ? JSON.stringify(typeof list === "string" ? list : list[0])
    : `[${list.map((r) => JSON.stringify(r)).join(", ")}]`;
}

function scalar(value: string | number | boolean): string {
  if (typeof value !== "string") return String(value);
  return /^[A-Za-z0-9_./-]+$/.test(value) && !/^(?:true|false|null|yes|no|on|off|~)$/i.test(value)
    ? value
    : JSON.stringify(value);
}

/** The report: one line per item, then a summary line. */
export function formatReport(result: ImportResult): string {
  const lines = result.report.map((r) => `${r.where}: ${r.kind}: ${r.message}`);
  const count = (k: ReportKind) => result.report.filter((r) => r.kind === k).length;
  const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? "" : "s"}`;
  lines.push(
    `${plural(result.rules.length, "rule")} written; ${count("approximate")} approximate, ${count("left out")} left out`,
  );
  return `${lines.join("\n")}\n`;
}

/** A rule id from free text: letters, digits, `-`, `_`, `.`; unique within `taken` (which it joins). */
export function ruleId(text: string, taken: Set<string>): string {
  const base =
    text
      .toLowerCase()
      .replace(/[^a-z0-9_.-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .replace(/-{2,}/g, "-") || "rule";
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  taken.add(id);
  return id;
}

/**
 * A draft's `match` from a translated selection (routes, `null` for any request; `except`; conditions) and the
 * identity it counts by, `null` when the rule gives `key:` instead (the Cloudflare and AWS WAF imports).
 */
export function draftMatch(
  selection: {
    readonly routes: readonly string[] | null;
    readonly except: readonly string[];
    readonly conditions: readonly MatchCondition[];
    readonly addresses?: readonly string[];
    readonly exceptAddresses?: readonly string[];
  },
  identity: string | null,
): DraftRule["match"] {
  return {
    ...(selection.routes === null ? {} : { route: selection.routes }),
    ...(selection.except.length === 0 ? {} : { except: selection.except }),
    ...conditionFields(selection.conditions),
    ...(selection.addresses === undefined ? {} : { address: selection.addresses }),
    ...(selection.exceptAddresses === undefined ? {} : { except_address: selection.exceptAddresses }),
    ...(identity === null ? {} : { identity }),
  };
}

/** Conditions as a draft's `match` fields: each source's (`header`, `cookie`, `query`, `cf`) in rule-file flow style. */
export function conditionFields(conditions: readonly MatchCondition[]): Pick<DraftRule["match"], ConditionSource> {
  const out: Partial<Record<ConditionSource, string[]>> = {};
  for (const c of conditions) out[c.in] = [...(out[c.in] ?? []), printCondition(c)];
  return out;
}
