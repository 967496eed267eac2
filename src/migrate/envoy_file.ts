/** An Envoy configuration file (YAML or JSON) as plain values, with the line each mapping starts on, for messages. */
import { type Document, isMap, isScalar, isSeq, LineCounter, parseAllDocuments } from "yaml";

export class EnvoyImportError extends Error {}

/** A YAML or JSON file as plain values, with the line each mapping starts on. */
export interface Loaded {
  readonly value: unknown;
  readonly lineOf: (node: object) => number;
}

export function load(text: string, file: string): Loaded {
  const all = loadAll(text, file);
  if (all.length === 1) return all[0]!;
  return { value: all.map((d) => d.value), lineOf: (node) => all.find((d) => d.has(node))?.lineOf(node) ?? 1 };
}

/** Every document of a YAML stream (a Kubernetes manifest holds several, between `---` lines). */
export function loadAll(text: string, file: string): (Loaded & { has: (node: object) => boolean })[] {
  const counter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: counter, uniqueKeys: true });
  if (!Array.isArray(docs)) return [{ value: null, lineOf: () => 1, has: () => false }];
  return docs.map((doc) => one(doc, counter, file));
}

function one(doc: Document.Parsed, counter: LineCounter, file: string): Loaded & { has: (node: object) => boolean } {
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw new EnvoyImportError(
      `${file}${pos === undefined ? "" : `:${pos.line}:${pos.col}`}: ${(e.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "")}`,
    );
  }
  const lines = new WeakMap<object, number>();
  const convert = (node: unknown): unknown => {
    if (isScalar(node)) return node.value;
    if (isSeq(node)) {
      const out = node.items.map(convert);
      if (node.range) lines.set(out, counter.linePos(node.range[0]).line);
      return out;
    }
    if (isMap(node)) {
      const out: Record<string, unknown> = {};
      for (const pair of node.items) out[String(isScalar(pair.key) ? pair.key.value : pair.key)] = convert(pair.value);
      if (node.range) lines.set(out, counter.linePos(node.range[0]).line);
      return out;
    }
    return null;
  };
  return { value: convert(doc.contents), lineOf: (node) => lines.get(node) ?? 1, has: (node) => lines.has(node) };
}

export type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
