/** An Envoy configuration file (YAML or JSON) as plain values, with the line each mapping starts on, for messages. */
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml";

export class EnvoyImportError extends Error {}

/** A YAML or JSON file as plain values, with the line each mapping starts on. */
export interface Loaded {
  readonly value: unknown;
  readonly lineOf: (node: object) => number;
}

export function load(text: string, file: string): Loaded {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, uniqueKeys: true });
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
  return { value: convert(doc.contents), lineOf: (node) => lines.get(node) ?? 1 };
}

export type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
