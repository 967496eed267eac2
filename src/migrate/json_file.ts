/**
 * What the JSON importers (Cloudflare's rulesets, AWS WAF's web ACLs) share when they read a file: the file with the
 * place of every value (json_at.ts), a syntax error as `file:line:col: why`, and fields checked for their type when
 * read, each refusal naming the place, the field and what it should be. Each importer throws its own error class.
 */
import { type JsonAt, JsonSyntaxError, readJson } from "./json_at.ts";

export type Obj = Record<string, unknown>;
export const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
export const isString = (v: unknown): v is string => typeof v === "string";

/** The file being read: its name and its JSON with places. */
export interface Place {
  readonly file: string;
  readonly json: JsonAt;
}

/** An importer's own error class, for the messages of this file. */
export type Refuse = new (message: string) => Error;

/** `file:line:col` of `container` or, with `key`, of its member's value (the container's when it has none). */
export function here(place: Place, container: object, key?: string | number): string {
  const p = place.json.at(container, key);
  return `${place.file}:${p.line}:${p.col}`;
}

/** The file's JSON with places; a syntax error (or a key given twice) refused as `file:line:col: why`. */
export function readJsonFile(text: string, file: string, refuse: Refuse): Place {
  try {
    return { file, json: readJson(text) };
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    throw new refuse(`${file}:${err.pos.line}:${err.pos.col}: ${err.parsable ? "" : "not JSON: "}${err.why}`);
  }
}

/** A value as a message shows what was found instead. */
export function kindOf(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "a list" : `${typeof v} ${JSON.stringify(v)}`.slice(0, 60);
}

/** A field that must have a type when present (`path` names its object: `rules[2]`); the file is refused otherwise. */
export function typedField<T>(
  refuse: Refuse,
  where: { readonly place: Place; readonly obj: Obj; readonly path: string },
  name: string,
  ok: (v: unknown) => v is T,
  want: string,
): T | undefined {
  const v = where.obj[name];
  if (v === undefined || v === null) return undefined;
  if (!ok(v))
    throw new refuse(`${here(where.place, where.obj, name)}: ${where.path}.${name}: must be ${want}, got ${kindOf(v)}`);
  return v;
}

/** `typedField` as an importer calls it, `field(place, obj, name, path, ok, want)`, refusing with its error class. */
export function fieldReader(refuse: Refuse) {
  return <T>(place: Place, obj: Obj, name: string, path: string, ok: (v: unknown) => v is T, want: string) =>
    typedField(refuse, { place, obj, path }, name, ok, want);
}
