/**
 * An AWS WAF (wafv2) file read for aws_import.ts: the rules of `aws wafv2 get-web-acl` ({"WebACL": {"Rules": [...]}}),
 * of `get-rule-group` ({"RuleGroup": {"Rules": [...]}}) or a bare list of rules, each field checked for its type when
 * read, with where each value is (`file:line:col`, json_at.ts) for every message. A file that is not JSON, not such a
 * list, or has a field of the wrong type is refused with the place, the field and the reason.
 */
import { fieldReader, here, isObject, isString, kindOf, type Obj, type Place, readJsonFile } from "./json_file.ts";

export { here, isObject, isString, kindOf, type Obj, type Place };

/** A file that is not AWS WAF rules: the message names the file, the line and column, the field and what is wrong. */
export class AwsImportError extends Error {}

/** The rules of the file, each checked to be an object. */
export function awsRulesOf(text: string, file: string): { place: Place; rules: Obj[]; list: unknown[] } {
  const place = readJsonFile(text, file, AwsImportError);
  const json = place.json;
  const root = json.value;
  const holder = isObject(root)
    ? isObject(root.WebACL)
      ? root.WebACL
      : isObject(root.RuleGroup)
        ? root.RuleGroup
        : root
    : root;
  const rules = Array.isArray(holder) ? holder : isObject(holder) ? holder.Rules : undefined;
  if (!Array.isArray(rules)) {
    const at = isObject(holder) ? here(place, holder, "Rules") : `${file}:${json.start.line}:${json.start.col}`;
    throw new AwsImportError(
      `${at}: expected a web ACL ({"WebACL": {"Rules": [...]}} as aws wafv2 get-web-acl prints it), a rule group ({"RuleGroup": {"Rules": [...]}}) or a list of rules`,
    );
  }
  rules.forEach((r, i) => {
    if (!isObject(r))
      throw new AwsImportError(`${here(place, rules, i)}: Rules[${i}]: a rule must be an object, got ${kindOf(r)}`);
  });
  return { place, rules: rules as Obj[], list: rules };
}

/** A field that must have a type when present (`path` names its object: `Rules[2].Statement`); else the file is refused. */
export const field = fieldReader(AwsImportError);

/** A field that must be there. */
export function required<T>(
  place: Place,
  obj: Obj,
  name: string,
  path: string,
  ok: (v: unknown) => v is T,
  want: string,
): T {
  const v = field(place, obj, name, path, ok, want);
  if (v === undefined) throw new AwsImportError(`${here(place, obj)}: ${path}: needs ${name} (${want})`);
  return v;
}

export const isInteger = (v: unknown): v is number => Number.isSafeInteger(v);
export const isList = (v: unknown): v is unknown[] => Array.isArray(v);
export const isObjects = (v: unknown): v is Obj[] => Array.isArray(v) && v.every(isObject);
export const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);

/** A text transformation: its type, where it is. */
export interface Transformation {
  readonly type: string;
  readonly at: string;
}

/** `TextTransformations` in priority order (AWS applies them lowest Priority first), each checked. */
export function transformationsOf(place: Place, obj: Obj, path: string): Transformation[] {
  const list = field(place, obj, "TextTransformations", path, isObjects, "a list of objects") ?? [];
  const read = list.map((t, i) => ({
    type: required(place, t, "Type", `${path}.TextTransformations[${i}]`, isString, "a string"),
    priority: field(place, t, "Priority", `${path}.TextTransformations[${i}]`, isInteger, "a whole number") ?? 0,
    at: here(place, t, "Type"),
  }));
  return read.sort((a, b) => a.priority - b.priority).map(({ type, at }) => ({ type, at }));
}

/** The one key of an object like `{"ByteMatchStatement": {...}}` or `{"UriPath": {}}`, or why it is not one. */
export function soleKey(place: Place, obj: Obj, path: string, what: string): [string, unknown] {
  const keys = Object.keys(obj);
  if (keys.length !== 1)
    throw new AwsImportError(
      `${here(place, obj)}: ${path}: ${what} has one member naming its kind, got ${keys.length === 0 ? "none" : keys.join(", ")}`,
    );
  return [keys[0]!, obj[keys[0]!]];
}
