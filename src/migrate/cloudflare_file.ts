/**
 * A Cloudflare ruleset file read for cloudflare_import.ts: its rules, each field checked for its type, and where each
 * value is (`file:line:col`, json_at.ts) for every message. A file that is not JSON, or not a ruleset, or has a field
 * of the wrong type is refused with the place and the reason.
 */
import type { Located } from "./cloudflare_count.ts";
import { fieldReader, here, isObject, isString, kindOf, type Obj, type Place, readJsonFile } from "./json_file.ts";

export { here, isObject, isString, type Obj, type Place };

/** A file that is not a Cloudflare ruleset: the message names the file, the line and column, and what is wrong. */
export class CloudflareImportError extends Error {}

/** The rules of `{"result": {"rules": [...]}}`, `{"rules": [...]}` or `[...]`, each checked to be an object. */
export function rulesOf(text: string, file: string): { place: Place; rules: Obj[] } {
  const place = readJsonFile(text, file, CloudflareImportError);
  const json = place.json;
  const root = json.value;
  const rootAt = `${file}:${json.start.line}:${json.start.col}`;
  if (isObject(root) && root.success === false)
    throw new CloudflareImportError(
      `${here(place, root, "success")}: the API answered an error (success: false), not a ruleset`,
    );
  const ruleset = isObject(root) && isObject(root.result) ? root.result : root;
  if (isObject(ruleset) && typeof ruleset.phase === "string" && ruleset.phase !== "http_ratelimit")
    throw new CloudflareImportError(
      `${here(place, ruleset, "phase")}: a ruleset of phase ${ruleset.phase}, not of rate limiting rules (phase http_ratelimit)`,
    );
  const rules = Array.isArray(ruleset) ? ruleset : isObject(ruleset) ? ruleset.rules : undefined;
  if (!Array.isArray(rules))
    throw new CloudflareImportError(
      `${isObject(ruleset) ? here(place, ruleset, "rules") : rootAt}: expected a ruleset ({"result": {"rules": [...]}} as the Rulesets API returns it), {"rules": [...]} or a list of rules`,
    );
  rules.forEach((r, i) => {
    if (!isObject(r))
      throw new CloudflareImportError(
        `${here(place, rules, i)}: rules[${i}]: a rule must be an object, got ${kindOf(r)}`,
      );
  });
  return { place, rules: rules as Obj[] };
}

/** A field that must have a type when present (`path` names its object: `rules[2]`); the file is malformed otherwise. */
export const field = fieldReader(CloudflareImportError);
export const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);

/** A rule's `ratelimit`, its types checked (the file is refused otherwise); each text with where it is. */
export interface RateLimit {
  readonly characteristics: readonly Located[];
  readonly period: number;
  readonly perPeriod: number;
  readonly timeout: number;
  readonly counting: Located;
  readonly score: number | undefined;
  readonly mitigation: string;
  readonly toOrigin: boolean;
}

export function rateLimitOf(place: Place, rl: Obj, path: string): RateLimit {
  const score = field(place, rl, "score_per_period", path, isCount, "a whole number");
  const period = field(place, rl, "period", path, isCount, "a whole number of seconds") ?? 0;
  const perPeriod = field(place, rl, "requests_per_period", path, isCount, "a whole number") ?? 0;
  // A complexity-based rule has a score instead of a request count; it is left out, not malformed.
  if (score === undefined && (period === 0 || perPeriod === 0))
    throw new CloudflareImportError(
      `${here(place, rl, period === 0 ? "period" : "requests_per_period")}: ${path}: needs a period and a requests_per_period above 0`,
    );
  const characteristics = field(place, rl, "characteristics", path, isStrings, "a list of strings") ?? [];
  const list = rl.characteristics;
  return {
    characteristics: characteristics.map((value, i) => ({ value, at: here(place, list as string[], i) })),
    period,
    perPeriod,
    timeout: field(place, rl, "mitigation_timeout", path, isCount, "a whole number of seconds") ?? 0,
    counting: {
      value: field(place, rl, "counting_expression", path, isString, "a string") ?? "",
      at: here(place, rl, "counting_expression"),
    },
    score,
    mitigation: field(place, rl, "mitigation_expression", path, isString, "a string") ?? "",
    toOrigin: field(place, rl, "requests_to_origin", path, isBool, "true or false") ?? false,
  };
}
