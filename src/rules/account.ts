/**
 * Account records: what the `ACCOUNTS` KV namespace holds for an API key, under the SHA-256 hex of the key (never the
 * key itself), as JSON: `{ "plan": "growth", "limits": { "growth-global": { "rate": "250/s", "burst": 500 } } }`.
 * `limits` (optional) replaces some rules' algorithm parameters for this account's key only, in rule-file spelling
 * and with a rule file's checks (`resolveOverride` in parse.ts). `version` (optional, a non-negative integer) is the
 * record's own rules version: raise it with every change of `limits`, so the key's Durable Object obeys the new
 * parameters, not an isolate's cached old ones (store.ts `ruleFor`). Other fields are ignored.
 *
 * One reader for both sides: `sluice accounts` checks a record with it before writing, and the Worker reads every
 * record with it (a bad plan falls back to the default plan, a bad override to the rule's own parameters; both are
 * logged, neither fails a request). Imports no YAML parser: it runs in the Worker.
 */
import { closest } from "./closest.ts";
import { resolveOverride } from "./parse.ts";
import { rawFromJson } from "./raw.ts";
import type { AlgorithmParams, ResolvedRule } from "./types.ts";

export interface Account {
  /** The account's plan; `null` when the record names none validly (the default plan applies). */
  readonly plan: string | null;
  /** Rule id -> the parameters that replace the rule's for this account (only valid overrides). */
  readonly limits: ReadonlyMap<string, AlgorithmParams>;
  /** The record's own rules version (`version`); `null` when it has none (or an invalid one, reported). */
  readonly version: number | null;
}

export interface AccountReading {
  readonly account: Account;
  /** Problems with the record itself (not an object, no valid `plan`). */
  readonly recordErrors: readonly string[];
  /** Problems with `limits`, one message each, as `<where>: <rule id>.<field>: <message>`. */
  readonly limitErrors: readonly string[];
}

/** A parsed JSON record read against the deployed `rules`; `where` starts every message (e.g. the key's hash). */
export function readAccount(value: unknown, rules: readonly ResolvedRule[], where: string): AccountReading {
  const recordErrors: string[] = [];
  const limitErrors: string[] = [];
  const limits = new Map<string, AlgorithmParams>();
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    recordErrors.push(`${where}: an account record must be a JSON object such as {"plan": "growth"}`);
    return { account: { plan: null, limits, version: null }, recordErrors, limitErrors };
  }
  const record = value as Record<string, unknown>;
  const plan = typeof record.plan === "string" && record.plan !== "" ? record.plan : null;
  if (plan === null) {
    recordErrors.push(`${where}: plan: must be a non-empty string, got ${JSON.stringify(record.plan) ?? "nothing"}`);
  }
  const given = record.limits;
  if (given !== undefined) {
    if (typeof given !== "object" || given === null || Array.isArray(given)) {
      limitErrors.push(`${where}: limits: must be an object of rule id -> parameters, got ${JSON.stringify(given)}`);
    } else {
      for (const [ruleId, override] of Object.entries(given)) {
        const rule = rules.find((r) => r.id === ruleId);
        if (rule === undefined) {
          const guess = closest(
            ruleId,
            rules.map((r) => r.id),
          );
          limitErrors.push(
            `${where}: ${ruleId}: no such rule is deployed${guess === null ? "" : `; did you mean "${guess}"?`}`,
          );
          continue;
        }
        if (plan !== null && rule.match.plans !== null && !rule.match.plans.includes(plan)) {
          limitErrors.push(
            `${where}: ${ruleId}.limits: the rule applies to plan ${rule.match.plans.join(", ")}, not to this ` +
              `account's plan ${plan}, so the override would never apply`,
          );
          continue;
        }
        const params = resolveOverride(rule, rawFromJson(override), where, limitErrors);
        if (params !== null) limits.set(ruleId, params);
      }
    }
  }
  let version: number | null = null;
  if (record.version !== undefined) {
    if (typeof record.version === "number" && Number.isSafeInteger(record.version) && record.version >= 0) {
      version = record.version;
    } else {
      limitErrors.push(`${where}: version: must be a non-negative integer, got ${JSON.stringify(record.version)}`);
    }
  }
  return { account: { plan, limits, version }, recordErrors, limitErrors };
}
