/**
 * JSON read to the values JSON.parse gives (a number or a string is JSON.parse's own reading of its text), remembering
 * where each value starts, so that an importer's messages can say `file:line:col`. Lines and columns are 1-based,
 * columns in UTF-16 code units (as yaml's LineCounter, and so the Envoy import, counts them).
 *
 * Where it differs from JSON.parse, on purpose: a key repeated in one object is refused (JSON.parse silently keeps the
 * last, so a hand-edited file would import a field its author may not have meant); a leading byte order mark is
 * skipped (RFC 8259 lets a parser ignore it); nesting deeper than MAX_DEPTH is refused (a recursive reader's stack).
 * A syntax error names the place and the reason: a trailing comma, a comment, a file ending inside an object.
 */

export interface Pos {
  readonly line: number;
  readonly col: number;
}

/** Malformed JSON, or JSON refused on purpose (`parsable`: JSON.parse reads it): `message` is `line:col: why`. */
export class JsonSyntaxError extends Error {
  constructor(
    readonly pos: Pos,
    readonly why: string,
    readonly parsable = false,
  ) {
    super(`${pos.line}:${pos.col}: ${why}`);
  }
}

export interface JsonAt {
  readonly value: unknown;
  /** Where `value` starts. */
  readonly start: Pos;
  /** Where `container` (an object or list of `value`) starts; with `key`, where that member's value starts, or the
   * container's start when it has no such member. */
  at(container: object, key?: string | number): Pos;
}

export const MAX_DEPTH = 256;

/** A string's escapes, JSON's spelling of a number, and what a message quotes as the number written. */
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/y;
const TOKEN = /[-+.0-9A-Za-z_]+/y;
const WORD = /[A-Za-z_$][A-Za-z0-9_$]*/y;

/** `text` as JSON, with where each of its values starts; throws JsonSyntaxError. */
export function readJson(text: string): JsonAt {
  const reader = new Reader(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  const { value, start } = reader.document();
  const starts = reader.starts;
  const members = reader.members;
  return {
    value,
    start,
    at: (container, key) =>
      (key === undefined ? undefined : members.get(container)?.get(key)) ?? starts.get(container) ?? reader.pos(0),
  };
}

/** `{"a": ...}` is an object, `[...]` a list: the words messages use. */
interface Open {
  readonly kind: "object" | "list";
  readonly offset: number;
}

class Reader {
  readonly starts = new WeakMap<object, Pos>();
  readonly members = new WeakMap<object, Map<string | number, Pos>>();
  private readonly lineStarts: number[] = [0];
  private readonly open: Open[] = [];
  private i = 0;

  constructor(private readonly text: string) {
    for (let j = text.indexOf("\n"); j >= 0; j = text.indexOf("\n", j + 1)) this.lineStarts.push(j + 1);
  }

  pos(offset: number): Pos {
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, col: offset - this.lineStarts[lo]! + 1 };
  }

  document(): { value: unknown; start: Pos } {
    this.space();
    if (this.i >= this.text.length) this.fail(this.i, "the file is empty: no JSON value in it");
    const start = this.pos(this.i);
    const value = this.value();
    const end = this.i;
    this.space();
    if (this.i < this.text.length) {
      const ended = this.pos(end);
      this.fail(this.i, `${this.describe()} after the JSON value, which ended at ${ended.line}:${ended.col}`);
    }
    return { value, start };
  }

  private fail(offset: number, why: string, parsable = false): never {
    throw new JsonSyntaxError(this.pos(offset), why, parsable);
  }

  /** The character at the reading position, for a message: `","`, or `U+00A0` when it is not printable ASCII. */
  private describe(): string {
    const code = this.text.codePointAt(this.i);
    if (code === undefined) return "the end of the file";
    if (code > 0x20 && code < 0x7f) return JSON.stringify(String.fromCodePoint(code));
    return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  }

  /** At the end of the file: which object or list it ends inside. */
  private endOfFile(): never {
    const inner = this.open.at(-1);
    if (inner === undefined) this.fail(this.i, "the file ends where a value was expected");
    const p = this.pos(inner.offset);
    this.fail(this.i, `the file ends inside the ${inner.kind} opened at ${p.line}:${p.col} (is it cut short?)`);
  }

  /** JSON's white space: space, tab, line feed, carriage return. */
  private space(): void {
    for (;;) {
      const c = this.text.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      this.i++;
    }
  }

  private value(): unknown {
    const c = this.text[this.i];
    if (c === undefined) return this.endOfFile();
    if (c === "{") return this.object();
    if (c === "[") return this.list();
    if (c === '"') return this.string();
    if (/[-+.0-9]/.test(c)) return this.number();
    if (c === "'") this.fail(this.i, "a JSON string is in double quotes, not single ones");
    if (c === "/") this.fail(this.i, "JSON has no comments");
    WORD.lastIndex = this.i;
    const w = WORD.exec(this.text)?.[0];
    if (w === "true" || w === "false" || w === "null") {
      this.i += w.length;
      return w === "true" ? true : w === "false" ? false : null;
    }
    if (w !== undefined) this.fail(this.i, `${w} is not a JSON value (its words are true, false and null)`);
    return this.fail(this.i, `${this.describe()} where a value was expected`);
  }

  private enter(kind: Open["kind"]): void {
    if (this.open.length >= MAX_DEPTH) this.fail(this.i, `objects and lists nested more than ${MAX_DEPTH} deep`, true);
    this.open.push({ kind, offset: this.i });
    this.i++;
    this.space();
  }

  /** After a member: `,` (then not the closing bracket: no trailing comma) or the closing bracket; true at the end. */
  private next(close: "}" | "]", after: string): boolean {
    this.space();
    const c = this.text[this.i];
    if (c === close) {
      this.i++;
      this.open.pop();
      return true;
    }
    if (c === undefined) this.endOfFile();
    if (c !== ",") this.fail(this.i, `expected "," or "${close}" after ${after}, got ${this.describe()}`);
    const comma = this.i;
    this.i++;
    this.space();
    if (this.text[this.i] === close) this.fail(comma, `a comma before "${close}": JSON allows no trailing comma`);
    return false;
  }

  private object(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const start = this.pos(this.i);
    const at = new Map<string | number, Pos>();
    const keys = new Map<string, number>();
    this.enter("object");
    let done = this.text[this.i] === "}";
    if (done) this.next("}", "");
    while (!done) {
      if (this.text[this.i] === undefined) this.endOfFile();
      if (this.text[this.i] !== '"') this.fail(this.i, `expected a key in double quotes, got ${this.describe()}`);
      const keyAt = this.i;
      const key = this.string();
      const first = keys.get(key);
      if (first !== undefined) {
        const p = this.pos(first);
        const why = `the key ${JSON.stringify(key)} twice in one object (first at ${p.line}:${p.col}): JSON.parse would keep the last silently; keep one of them`;
        this.fail(keyAt, why, true);
      }
      keys.set(key, keyAt);
      this.space();
      if (this.text[this.i] === undefined) this.endOfFile();
      if (this.text[this.i] !== ":")
        this.fail(this.i, `expected ":" after the key ${JSON.stringify(key)}, got ${this.describe()}`);
      this.i++;
      this.space();
      at.set(key, this.pos(this.i));
      // As JSON.parse does: an own property, even for "__proto__" (an assignment would set the prototype).
      Object.defineProperty(out, key, { value: this.value(), writable: true, enumerable: true, configurable: true });
      done = this.next("}", `the value of ${JSON.stringify(key)}`);
    }
    this.starts.set(out, start);
    this.members.set(out, at);
    return out;
  }

  private list(): unknown[] {
    const out: unknown[] = [];
    const start = this.pos(this.i);
    const at = new Map<string | number, Pos>();
    this.enter("list");
    let done = this.text[this.i] === "]";
    if (done) this.next("]", "");
    while (!done) {
      at.set(out.length, this.pos(this.i));
      out.push(this.value());
      done = this.next("]", `item ${out.length - 1} of the list`);
    }
    this.starts.set(out, start);
    this.members.set(out, at);
    return out;
  }

  /** A string, checked here for what JSON refuses, then read by JSON.parse. */
  private string(): string {
    const start = this.i;
    let j = start + 1;
    for (;;) {
      const c = this.text.charCodeAt(j);
      if (Number.isNaN(c)) {
        const p = this.pos(start);
        this.fail(j, `the file ends inside the string opened at ${p.line}:${p.col} (is it cut short?)`);
      }
      if (c === 0x22) break;
      if (c < 0x20)
        this.fail(
          j,
          c === 0x0a
            ? "a string not closed on its line (a line break in one is written \\n)"
            : `U+${c.toString(16).toUpperCase().padStart(4, "0")} in a string (write it as an escape)`,
        );
      if (c === 0x5c) {
        ESCAPE.lastIndex = j;
        if (!ESCAPE.test(this.text))
          this.fail(
            j,
            `${JSON.stringify(this.text.slice(j, j + 2))} is not a JSON escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)`,
          );
        j = ESCAPE.lastIndex;
      } else j++;
    }
    this.i = j + 1;
    return JSON.parse(this.text.slice(start, j + 1)) as string;
  }

  /** A number: JSON's spelling, then JSON.parse's value of it (so `1e400` is Infinity and `-0` is -0, as there). */
  private number(): number {
    const start = this.i;
    NUMBER.lastIndex = start;
    const m = NUMBER.exec(this.text)?.[0];
    TOKEN.lastIndex = start;
    const written = TOKEN.exec(this.text)?.[0] ?? "";
    if (m === undefined || m.length < written.length) this.fail(start, `${written} is not a JSON number`);
    this.i = start + m.length;
    return JSON.parse(m) as number;
  }
}
