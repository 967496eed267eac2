/**
 * Rule-file values as validation sees them, whichever format they came from: YAML (yaml.ts) or the JSON of an
 * account record read from KV (`rawFromJson`), so both get the same checks and the same messages.
 */

/** A YAML float kept with its source text, so a message can show `1.0` as written rather than `1`. */
export class YamlFloat {
  constructor(
    readonly value: number,
    readonly source: string,
  ) {}
}
/** A YAML value as validation sees it: integers are bigints (exact at any size), floats are `YamlFloat`. */
export type Raw = string | bigint | boolean | null | YamlFloat | Raw[] | Map<string, Raw>;

/**
 * A JSON value (an account record read from KV) as a `Raw` value: integers become bigints, other numbers keep their
 * text, so the checks and messages are those of a rule file. Nesting stops at depth 100 as null.
 */
export function rawFromJson(value: unknown, depth = 0): Raw {
  if (depth > 100 || value === undefined || value === null) return null;
  if (typeof value === "number")
    return Number.isSafeInteger(value) ? BigInt(value) : new YamlFloat(value, String(value));
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (Array.isArray(value)) return value.map((v) => rawFromJson(v, depth + 1));
  if (typeof value === "object") {
    const out = new Map<string, Raw>();
    for (const [k, v] of Object.entries(value)) out.set(k, rawFromJson(v, depth + 1));
    return out;
  }
  return String(value);
}

/** A value as a message shows it: strings quoted, numbers as written. */
export function describe(v: Raw | undefined): string {
  if (v === undefined || v === null) return "an empty value";
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof YamlFloat) return v.source;
  if (Array.isArray(v)) return "a list";
  if (v instanceof Map) return "a mapping";
  return String(v);
}
