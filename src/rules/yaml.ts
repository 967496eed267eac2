/**
 * Rule files: YAML text -> plain values (`Raw`) -> the validation in parse.ts. The only module that imports the YAML
 * parser, so the Worker bundle (which validates per-account overrides with parse.ts) never carries it.
 *
 * YAML syntax errors are reported as `<file>:<line>:<column>: <message>`; integers stay exact (bigints), floats keep their
 * text for messages, duplicate keys are errors.
 */
import { type Document, isAlias, isMap, isScalar, isSeq, parseDocument, type YAMLError } from "yaml";
import { resolveRules } from "./parse.ts";
import { yamlLocator } from "./positions.ts";
import { describe, type Raw, YamlFloat } from "./raw.ts";
import type { DenyRule, ResolvedRule } from "./types.ts";

export function parseRules(
  given: string,
  file: string,
): { rules: ResolvedRule[]; denies: DenyRule[]; errors: string[]; warnings: string[] } {
  const text = withoutBom(given);
  const parsed = parseYamlDocument(text, file);
  if ("errors" in parsed) return { rules: [], denies: [], errors: parsed.errors, warnings: [] };
  return resolveRules(parsed.value, file, yamlLocator(parsed.doc, text));
}

/**
 * One YAML document as a `Raw` value, or its syntax errors (`<file>:<line>:<column>: <message>`), one per mistake:
 * a tab in an indentation is one problem per line (the parser's dozen follow-on errors are dropped), and of the
 * parser's own errors only the first is kept (what follows a syntax error is misread), except duplicate keys, which
 * are each a mistake of their own.
 */
export function parseYaml(given: string, file: string): { value: Raw } | { errors: string[] } {
  const parsed = parseYamlDocument(withoutBom(given), file);
  return "errors" in parsed ? parsed : { value: parsed.value };
}

function parseYamlDocument(text: string, file: string): { value: Raw; doc: Document } | { errors: string[] } {
  // A byte-order mark may open a YAML stream (an editor's UTF-8 with BOM); the callers strip it (`withoutBom`).
  const tabs = tabIndents(text, file);
  if (tabs.length > 0) return { errors: tabs };
  const doc = parseDocument(text, { intAsBigInt: true, uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length === 0) return { value: toRaw(doc.contents, doc, 0), doc };
  const duplicates = doc.errors.filter((e) => e.code === "DUPLICATE_KEY");
  const first = doc.errors.find((e) => e.code !== "DUPLICATE_KEY");
  const kept = first === undefined ? duplicates : [first, ...duplicates];
  return { errors: kept.map((e) => syntaxError(e, text, file)) };
}

/** Lines indented with a tab, one problem each (YAML indents with spaces only). */
function tabIndents(text: string, file: string): string[] {
  const errors: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const indent = /^[ \t]*/.exec(lines[i]!)?.[0] ?? "";
    const column = indent.indexOf("\t");
    if (column >= 0 && lines[i]!.trim() !== "" && !lines[i]!.trimStart().startsWith("#")) {
      errors.push(`${file}:${i + 1}:${column + 1}: a tab in the indentation; YAML indents with spaces only`);
    }
  }
  return errors;
}

function syntaxError(e: YAMLError, text: string, file: string): string {
  // yaml appends " at line L, column C:" and a source excerpt; keep the first line, without the position.
  const message = (e.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
  const at = e.linePos?.[0];
  if (at === undefined) return `${file}: ${message}`;
  // A space that is not ASCII (pasted from a document) looks like one and is not one to YAML: name it.
  const odd = oddSpaceNear(text, at.line);
  if (odd !== null) {
    return `${file}:${odd.line}:${odd.column}: a ${odd.name} where YAML needs a plain space (U+0020)`;
  }
  const close = /end with an? ([}\]])/.exec(message)?.[1];
  const opened = close === undefined ? null : unclosedBefore(text, at, close === "}" ? "{" : "[", close);
  if (opened !== null) return `${file}:${opened.line}:${opened.column}: "${opened.char}" is never closed`;
  // A line indented under a key that already has a value on its own line: the mistake is the deeper line.
  if (e.code === "BLOCK_AS_IMPLICIT_KEY" && at.line < text.split("\n").length) {
    return `${file}:${at.line + 1}:1: indented deeper than line ${at.line}, whose key already has a value`;
  }
  if (e.code === "MULTILINE_IMPLICIT_KEY") {
    return `${file}:${at.line}:${at.col}: expected "key: value" (is a colon missing?)`;
  }
  return `${file}:${at.line}:${at.col}: ${message}`;
}

/** The text without the byte-order mark that may open it (YAML allows one; positions then count from after it). */
const withoutBom = (text: string) => (text.startsWith("\ufeff") ? text.slice(1) : text);

const ODD_SPACES: Readonly<Record<string, string>> = {
  "\u00a0": "no-break space (U+00A0)",
  "\u2007": "figure space (U+2007)",
  "\u202f": "narrow no-break space (U+202F)",
  "\u3000": "ideographic space (U+3000)",
  "\u200b": "zero-width space (U+200B)",
  "\ufeff": "byte-order mark (U+FEFF)",
};

/** A line's characters outside quotes, with their indexes, up to a comment. */
function* unquoted(line: string): Generator<[number, string]> {
  let quote: string | null = null;
  for (let c = 0; c < line.length; c++) {
    const ch = line[c]!;
    if (quote !== null) {
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === "#" && (c === 0 || line[c - 1] === " ")) return;
    else yield [c, ch];
  }
}

/** The first space-like character that is not ASCII on the error's line or the one before it, outside quotes. */
function oddSpaceNear(text: string, line: number): { line: number; column: number; name: string } | null {
  const lines = text.split("\n");
  for (const n of [line - 1, line]) {
    for (const [c, ch] of unquoted(lines[n - 1] ?? "")) {
      const name = ODD_SPACES[ch];
      if (name !== undefined) return { line: n, column: c + 1, name };
    }
  }
  return null;
}

/** The last `open` before `at` (1-based line and column) that its own line does not close, outside quotes. */
function unclosedBefore(
  text: string,
  at: { line: number; col: number },
  open: string,
  close: string,
): { line: number; column: number; char: string } | null {
  const lines = text.split("\n").slice(0, at.line);
  lines[at.line - 1] = (lines[at.line - 1] ?? "").slice(0, at.col - 1);
  for (let i = lines.length - 1; i >= 0; i--) {
    const stack: number[] = [];
    for (const [c, ch] of unquoted(lines[i]!)) {
      if (ch === open) stack.push(c);
      else if (ch === close) stack.pop();
    }
    if (stack.length > 0) return { line: i + 1, column: stack[0]! + 1, char: open };
  }
  return null;
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
