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
 * service reads its (gopkg.in/yaml.v2: YAML 1.1, so `yes`, `on` and `y` are true, `0b101` and `017` numbers; a plain
 * timestamp and `1:20` stay text; a float is a float, kept as a `GoFloat` so that its check can refuse it where the
 * service does). Checked against Debian's golang-gopkg-yaml.v2-dev 2.4.0, the service's version (CHANGELOG).
 */
export type Reading = "yaml-1.2" | "go-yaml-v2";

/**
 * A plain scalar yaml.v2 reads as a float64 (`1.0`, `1e3`) or, a whole number above 2^63-1, a uint64: the service
 * takes neither outside `metadata` (its `validateYamlKeys` knows text, int, bool and nothing).
 */
export class GoFloat {
  constructor(
    readonly value: number,
    readonly source: string,
    readonly line: number,
    readonly type: "float64" | "uint64" = "float64",
  ) {}
}

const GO_FLOAT =
  /^[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?$|^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$/;

/** The service's string fields (config_impl.go's structs), which yaml.v2 fills with a scalar's text. */
const GO_TEXT_FIELDS = new Set(["domain", "key", "value", "unit", "name"]);

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
          // yaml.v2 keeps a plain timestamp and a sexagesimal number (`1:20`) as text.
          customTags: (tags) =>
            tags.filter(
              (t) => typeof t === "string" || (t.tag !== "tag:yaml.org,2002:timestamp" && t.format !== "TIME"),
            ),
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
        const line = node.range ? counter.linePos(node.range[0]).line : 1;
        if (GO_FLOAT.test(text) || !Number.isInteger(node.value)) return new GoFloat(node.value, text, line);
        // Beyond int64, yaml.v2 reads a uint64 (below 2^64) or a float64.
        if (Math.abs(node.value) >= 2 ** 63)
          return new GoFloat(node.value, text, line, node.value > 0 && node.value < 2 ** 64 ? "uint64" : "float64");
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
      for (const pair of node.items) {
        const key = String(isScalar(pair.key) ? pair.key.value : pair.key);
        const value = convert(pair.value);
        // yaml.v2 puts a plain scalar's own text in a string field (`key: true` is "true", `value: 0x1F` "0x1F").
        const text = isScalar(pair.value) ? (pair.value as { source?: unknown }).source : undefined;
        const plain = (typeof value === "number" || typeof value === "boolean") && typeof text === "string";
        out[key] = reading === "go-yaml-v2" && GO_TEXT_FIELDS.has(key) && plain ? text : value;
      }
      if (node.range) lines.set(out, counter.linePos(node.range[0]).line);
      return out;
    }
    return null;
  };
  return { value: convert(doc.contents), lineOf: (node) => lines.get(node) ?? 1, has: (node) => lines.has(node) };
}

export type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Every mapping in a parsed file, depth first (at most 60 deep): `visit` says whether to look inside the mapping
 * (`false`: what it holds is not searched further).
 */
export function walkObjects(value: unknown, visit: (o: Obj) => boolean, depth = 0): void {
  if (depth > 60) return;
  if (Array.isArray(value)) {
    for (const v of value) walkObjects(v, visit, depth + 1);
    return;
  }
  if (!isObject(value) || !visit(value)) return;
  for (const v of Object.values(value)) walkObjects(v, visit, depth + 1);
}
