/** An Envoy configuration file (YAML or JSON) as plain values, with the line each mapping starts on, for messages. */
import { type Document, isMap, isScalar, isSeq, LineCounter, parseAllDocuments } from "yaml";

export class EnvoyImportError extends Error {}

/** A YAML or JSON file as plain values, with the line each mapping starts on. */
export interface Loaded {
  readonly value: unknown;
  readonly lineOf: (node: object) => number;
}

/**
 * How a file is read: `yaml-1.2` as Envoy reads its own configuration; `go-yaml-v2` as the envoyproxy/ratelimit
 * service reads its (gopkg.in/yaml.v2: YAML 1.1, so `yes`, `on` and `y` are true; a plain timestamp stays text; a
 * float is a float, kept as a `GoFloat` so that its check can refuse it where the service does).
 */
export type Reading = "yaml-1.2" | "go-yaml-v2";

/** A plain scalar yaml.v2 reads as a float (`1.0`, `1e3`): the service takes none outside `metadata`. */
export class GoFloat {
  constructor(
    readonly value: number,
    readonly source: string,
    readonly line: number,
  ) {}
}

const GO_FLOAT =
  /^[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?$|^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$/;

export function load(text: string, file: string, reading: Reading = "yaml-1.2"): Loaded {
  const all = loadAll(text, file, reading);
  if (all.length === 1) return all[0]!;
  return { value: all.map((d) => d.value), lineOf: (node) => all.find((d) => d.has(node))?.lineOf(node) ?? 1 };
}

/** Every document of a YAML stream (a Kubernetes manifest holds several, between `---` lines). */
export function loadAll(
  text: string,
  file: string,
  reading: Reading = "yaml-1.2",
): (Loaded & { has: (node: object) => boolean })[] {
  const counter = new LineCounter();
  const docs = parseAllDocuments(
    text,
    reading === "yaml-1.2"
      ? { lineCounter: counter, uniqueKeys: true }
      : {
          lineCounter: counter,
          uniqueKeys: true,
          version: "1.1",
          customTags: (tags) => tags.filter((t) => typeof t === "string" || t.tag !== "tag:yaml.org,2002:timestamp"),
        },
  );
  if (!Array.isArray(docs)) return [{ value: null, lineOf: () => 1, has: () => false }];
  return docs.map((doc) => one(doc, counter, file, reading));
}

function one(
  doc: Document.Parsed,
  counter: LineCounter,
  file: string,
  reading: Reading,
): Loaded & { has: (node: object) => boolean } {
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw new EnvoyImportError(
      `${file}${pos === undefined ? "" : `:${pos.line}:${pos.col}`}: ${(e.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "")}`,
    );
  }
  const lines = new WeakMap<object, number>();
  const convert = (node: unknown): unknown => {
    if (isScalar(node)) {
      const source = (node as { source?: unknown }).source;
      if (reading === "go-yaml-v2" && typeof node.value === "number" && node.type === "PLAIN") {
        const text = typeof source === "string" ? source : String(node.value);
        if (GO_FLOAT.test(text) || !Number.isInteger(node.value)) {
          return new GoFloat(node.value, text, node.range ? counter.linePos(node.range[0]).line : 1);
        }
      }
      return node.value;
    }
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
