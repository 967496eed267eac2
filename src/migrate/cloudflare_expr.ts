/**
 * A subset of Cloudflare's Rules language (the `expression` of a ruleset rule) read into a tree: `and`/`&&`,
 * `or`/`||`, `xor`/`^^`, `not`/`!`, parentheses, the comparison operators (`eq`/`==`, `ne`/`!=`, `lt`, `le`, `gt`,
 * `ge`, `contains`, `matches`/`~`, `wildcard`, `in { ... }`), `starts_with`, `ends_with`, `lower`, `len` and `any`.
 * Each node keeps its source text, so what cannot be imported is named as written. What the tree means to Sluice
 * is cloudflare_match.ts's business; this file only reads.
 */

/** A field as an expression reads it: `lower(http.request.headers["x-plan"][0])` is name, key, index and lower. */
export interface Field {
  /** `http.request.headers`; for a function this file does not know, the call as written. */
  readonly name: string;
  /** The map key in `["..."]`, or `null`. */
  readonly key: string | null;
  /** `[0]`, `[*]`, or `null` when not indexed. */
  readonly index: number | "*" | null;
  readonly lower: boolean;
  /** Inside `len(...)`. */
  readonly len: boolean;
  /** A function this file does not know (`lookup_json_string`, `concat`): the field is `name` as written. */
  readonly unknownCall: boolean;
}

export type Value =
  | { readonly kind: "string"; readonly text: string }
  | { readonly kind: "number"; readonly n: number }
  | { readonly kind: "range"; readonly from: number; readonly to: number }
  /** An unquoted word other than a number: an address, a CIDR range, a `$list`. */
  | { readonly kind: "word"; readonly text: string };

export type Op =
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge"
  | "contains"
  | "matches"
  | "wildcard"
  | "strict wildcard"
  | "in"
  | "starts_with"
  | "ends_with";

export type Node = { readonly text: string } & (
  | { readonly kind: "and" | "or" | "xor"; readonly items: readonly Node[] }
  | { readonly kind: "not"; readonly item: Node }
  | { readonly kind: "bool"; readonly value: boolean }
  | { readonly kind: "compare"; readonly field: Field; readonly op: Op; readonly values: readonly Value[] }
  | { readonly kind: "any"; readonly item: Node }
  /** A field standing alone as a test (`cf.bot_management.verified_bot`, `ssl`). */
  | { readonly kind: "flag"; readonly field: Field }
);

export class ExpressionSyntaxError extends Error {}

interface Token {
  readonly kind: "word" | "string" | "punct";
  readonly text: string;
  readonly start: number;
  readonly end: number;
}

const PUNCT = ["==", "!=", "<=", ">=", "&&", "||", "^^", "(", ")", "[", "]", "{", "}", ",", "<", ">", "~", "!", "*"];
const WORD = /[A-Za-z0-9_.:/$-]+/y;

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const raw = /r(#*)"/y;
    raw.lastIndex = i;
    const r = raw.exec(source);
    if (r !== null) {
      // r"..." and r#"..."#: no escapes; the string ends at the quote followed by as many #.
      const close = `"${r[1]}`;
      const end = source.indexOf(close, i + r[0].length);
      if (end < 0) throw new ExpressionSyntaxError(`a raw string at character ${i + 1} is not closed`);
      tokens.push({ kind: "string", text: source.slice(i + r[0].length, end), start: i, end: end + close.length });
      i = end + close.length;
      continue;
    }
    if (c === '"') {
      let text = "";
      let j = i + 1;
      for (; j < source.length && source[j] !== '"'; j++) {
        if (source[j] === "\\") j++;
        text += source[j] ?? "";
      }
      if (j >= source.length) throw new ExpressionSyntaxError(`a string at character ${i + 1} is not closed`);
      tokens.push({ kind: "string", text, start: i, end: j + 1 });
      i = j + 1;
      continue;
    }
    const p = PUNCT.find((x) => source.startsWith(x, i));
    if (p !== undefined) {
      tokens.push({ kind: "punct", text: p, start: i, end: i + p.length });
      i += p.length;
      continue;
    }
    WORD.lastIndex = i;
    const w = WORD.exec(source);
    if (w === null) throw new ExpressionSyntaxError(`unexpected ${JSON.stringify(c)} at character ${i + 1}`);
    tokens.push({ kind: "word", text: w[0], start: i, end: i + w[0].length });
    i += w[0].length;
  }
  return tokens;
}

const OPS: Readonly<Record<string, Op>> = {
  eq: "eq",
  "==": "eq",
  ne: "ne",
  "!=": "ne",
  lt: "lt",
  "<": "lt",
  le: "le",
  "<=": "le",
  gt: "gt",
  ">": "gt",
  ge: "ge",
  ">=": "ge",
  contains: "contains",
  matches: "matches",
  "~": "matches",
  wildcard: "wildcard",
  in: "in",
};

/** `source` as a tree; throws ExpressionSyntaxError with what is wrong and where. */
// long: a recursive-descent parser, one closure per grammar rule sharing the token position
export function parseExpression(source: string): Node {
  const tokens = tokenize(source);
  let pos = 0;
  const peek = (offset = 0): Token | undefined => tokens[pos + offset];
  const is = (...texts: string[]) => {
    const t = peek();
    return t !== undefined && t.kind !== "string" && texts.includes(t.text);
  };
  const where = () => {
    const t = peek();
    return t === undefined ? "at the end" : `at character ${t.start + 1} (${JSON.stringify(t.text)})`;
  };
  const expect = (text: string) => {
    if (!is(text)) throw new ExpressionSyntaxError(`expected ${JSON.stringify(text)} ${where()}`);
    pos++;
  };
  const textFrom = (start: number) => source.slice(tokens[start]!.start, tokens[pos - 1]!.end);

  const chain = (kind: "or" | "xor" | "and", words: string[], next: () => Node): Node => {
    const start = pos;
    const items = [next()];
    while (is(...words)) {
      pos++;
      items.push(next());
    }
    return items.length === 1 ? items[0]! : { kind, items, text: textFrom(start) };
  };
  const orExpr = (): Node => chain("or", ["or", "||"], xorExpr);
  const xorExpr = (): Node => chain("xor", ["xor", "^^"], andExpr);
  const andExpr = (): Node => chain("and", ["and", "&&"], unary);
  const unary = (): Node => {
    const start = pos;
    if (is("not", "!")) {
      pos++;
      const item = unary();
      return { kind: "not", item, text: textFrom(start) };
    }
    return primary();
  };

  const primary = (): Node => {
    const start = pos;
    const t = peek();
    if (t === undefined) throw new ExpressionSyntaxError("the expression ends where a test was expected");
    if (is("(")) {
      pos++;
      const inner = orExpr();
      expect(")");
      return inner;
    }
    if (t.kind === "word" && (t.text === "true" || t.text === "false") && !isOp(peek(1))) {
      pos++;
      return { kind: "bool", value: t.text === "true", text: t.text };
    }
    if (t.kind === "word" && t.text === "any" && peek(1)?.text === "(") {
      pos += 2;
      const item = orExpr();
      expect(")");
      return { kind: "any", item, text: textFrom(start) };
    }
    if (t.kind === "word" && (t.text === "starts_with" || t.text === "ends_with") && peek(1)?.text === "(") {
      pos += 2;
      const field = fieldExpr();
      expect(",");
      const value = literal();
      expect(")");
      return { kind: "compare", field, op: t.text, values: [value], text: textFrom(start) };
    }
    const field = fieldExpr();
    const opToken = peek();
    if (!isOp(opToken)) return { kind: "flag", field, text: textFrom(start) };
    pos++;
    let op: Op;
    if (opToken!.text === "strict") {
      expect("wildcard");
      op = "strict wildcard";
    } else op = OPS[opToken!.text]!;
    const values = op === "in" ? list() : [literal()];
    return { kind: "compare", field, op, values, text: textFrom(start) };
  };

  const isOp = (t: Token | undefined) =>
    t !== undefined && t.kind !== "string" && (Object.hasOwn(OPS, t.text) || t.text === "strict");

  const fieldExpr = (): Field => {
    const t = peek();
    if (t === undefined || t.kind !== "word") throw new ExpressionSyntaxError(`expected a field ${where()}`);
    pos++;
    let field: Field;
    if (peek()?.text === "(" && (t.text === "lower" || t.text === "len")) {
      pos++;
      const inner = fieldExpr();
      expect(")");
      field = t.text === "lower" ? { ...inner, lower: true } : { ...inner, len: true };
    } else if (peek()?.text === "(") {
      field = { ...plainField(skipCall(t.start)), unknownCall: true };
    } else field = plainField(t.text);
    while (is("[")) {
      pos++;
      const k = peek();
      if (k?.kind === "string") field = { ...field, key: k.text };
      else if (k?.text === "*") field = { ...field, index: "*" };
      else if (k?.kind === "word" && /^\d+$/.test(k.text)) field = { ...field, index: Number(k.text) };
      else throw new ExpressionSyntaxError(`expected a key, an index or * in [ ] ${where()}`);
      pos++;
      expect("]");
    }
    return field;
  };

  /** Skips an unknown function's arguments; returns the call as written. */
  const skipCall = (start: number): string => {
    let depth = 0;
    do {
      const t = peek();
      if (t === undefined) throw new ExpressionSyntaxError("a function call is not closed");
      if (t.text === "(" && t.kind === "punct") depth++;
      if (t.text === ")" && t.kind === "punct") depth--;
      pos++;
    } while (depth > 0);
    return source.slice(start, tokens[pos - 1]!.end);
  };

  const literal = (): Value => {
    const t = peek();
    if (t === undefined || t.kind === "punct") throw new ExpressionSyntaxError(`expected a value ${where()}`);
    pos++;
    if (t.kind === "string") return { kind: "string", text: t.text };
    const range = /^(\d+)\.\.(\d+)$/.exec(t.text);
    if (range !== null) return { kind: "range", from: Number(range[1]), to: Number(range[2]) };
    return /^\d+$/.test(t.text) ? { kind: "number", n: Number(t.text) } : { kind: "word", text: t.text };
  };

  const list = (): Value[] => {
    if (peek()?.kind === "word" && peek()!.text.startsWith("$")) return [literal()];
    expect("{");
    const values: Value[] = [];
    while (!is("}")) {
      if (is(",")) pos++;
      else values.push(literal());
    }
    pos++;
    return values;
  };

  const tree = orExpr();
  if (pos < tokens.length) throw new ExpressionSyntaxError(`unexpected ${JSON.stringify(peek()!.text)} ${where()}`);
  return tree;
}

function plainField(name: string): Field {
  return { name, key: null, index: null, lower: false, len: false, unknownCall: false };
}

/** A node's conjuncts: the tests of a top-level `and` (or the node itself). */
export function conjuncts(node: Node): readonly Node[] {
  return node.kind === "and" ? node.items.flatMap(conjuncts) : [node];
}

/** A node's text with runs of white space as one space, to compare two expressions' tests. */
export function normalText(node: Node): string {
  return node.text.replace(/\s+/g, " ").trim();
}
