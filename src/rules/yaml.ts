/**
 * Rule files: YAML text -> plain values (`Raw`) -> the validation in parse.ts. The only module that imports the YAML
 * parser, so the Worker bundle (which validates per-account overrides with parse.ts) never carries it.
 *
 * YAML syntax errors are reported as `<file>:<line>: <message>`; integers stay exact (bigints), floats keep their
 * text for messages, duplicate keys are errors.
 */
import { type Document, isAlias, isMap, isScalar, isSeq, parseDocument } from "yaml";
import { describe, type Raw, resolveRules, YamlFloat } from "./parse.ts";
import type { ResolvedRule } from "./types.ts";

export function parseRules(text: string, file: string): { rules: ResolvedRule[]; errors: string[] } {
  const parsed = parseYaml(text, file);
  return "errors" in parsed ? { rules: [], errors: parsed.errors } : resolveRules(parsed.value, file);
}

/** One YAML document as a `Raw` value, or its syntax errors (`<file>:<line>: <message>`). */
export function parseYaml(text: string, file: string): { value: Raw } | { errors: string[] } {
  const doc = parseDocument(text, { intAsBigInt: true, uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length === 0) return { value: toRaw(doc.contents, doc, 0) };
  return {
    errors: doc.errors.map((e) => {
      const line = e.linePos?.[0]?.line;
      // yaml appends " at line L, column C:" and a source excerpt; keep the first line, without the position.
      const message = (e.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
      return line === undefined ? `${file}: ${message}` : `${file}:${line}: ${message}`;
    }),
  };
}

/**
 * One value as a rule file would spell it (`500`, `250/s`, `true`), as plain JSON data: for values given on a
 * command line that end up in a JSON record (an account's limits). Integers become numbers.
 */
export function parseYamlValue(text: string): { value: unknown } | { error: string } {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) return { error: (doc.errors[0]!.message.split("\n")[0] ?? "").trim() };
  return { value: doc.toJS() };
}

/** A YAML node as a `Raw` value. Aliases are followed; a cycle or absurd nesting stops at depth 100 as null. */
function toRaw(node: unknown, doc: Document, depth: number): Raw {
  if (depth > 100) return null;
  if (isAlias(node)) return toRaw(node.resolve(doc), doc, depth + 1);
  if (isScalar(node)) {
    const v = node.value;
    if (typeof v === "number") return new YamlFloat(v, node.source ?? String(v));
    if (typeof v === "string" || typeof v === "bigint" || typeof v === "boolean" || v === null) return v;
    return String(v);
  }
  if (isSeq(node)) return node.items.map((item) => toRaw(item, doc, depth + 1));
  if (isMap(node)) {
    const out = new Map<string, Raw>();
    for (const pair of node.items) {
      const key = toRaw(pair.key, doc, depth + 1);
      out.set(typeof key === "string" ? key : describe(key), toRaw(pair.value, doc, depth + 1));
    }
    return out;
  }
  return null;
}
