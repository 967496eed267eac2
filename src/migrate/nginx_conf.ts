/**
 * NGINX configuration syntax: directives (`name arg ...;`) and blocks (`name arg ... { ... }`), `#` comments,
 * single and double quotes with backslash escapes, and `include` followed (globs too, relative to the main file's
 * folder, as NGINX resolves them against its configuration prefix). The tree keeps each directive's file and line, so
 * the importer can name where a rule came from. Syntax errors name the file, line and column.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";

export interface Directive {
  readonly name: string;
  readonly args: readonly string[];
  readonly file: string;
  readonly line: number;
  /** The block's directives, for a block (`http { ... }`); `null` for a simple directive. */
  readonly block: readonly Directive[] | null;
}

export class NginxSyntaxError extends Error {}

/** A configuration that parses but cannot be imported; its message starts with the directive's `file:line`. */
export class NginxImportError extends Error {}

/** Where a directive stands: `file:line`. */
export const where = (d: Directive) => `${d.file}:${d.line}`;
/** A directive as written, for messages: `limit_req zone=api burst=20`. */
export const text = (d: Directive) => [d.name, ...d.args].join(" ");

interface Token {
  readonly text: string;
  /** `word` (a name or argument, unquoted or quoted), or one of `;`, `{`, `}`. */
  readonly kind: "word" | ";" | "{" | "}";
  readonly line: number;
  readonly column: number;
}

/** Characters that look like spaces (or nothing) but are word bytes to NGINX: in a directive's name, NGINX refuses it. */
const ODD_SPACE = /[\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff\v\f]/;
const ODD_SPACE_ALL = new RegExp(ODD_SPACE.source, "g");

/** What a backslash escapes, as NGINX reads it; before anything else (`\.` in a regex) the backslash stays. */
const ESCAPED = new Set(['"', "'", "\\", " ", ";", "{", "}", "#"]);

/** Split configuration text into tokens. */
export function tokenize(text: string, file: string): Token[] {
  const tokens: Token[] = [];
  let line = 1;
  let lineStart = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "\n") {
      line++;
      lineStart = ++i;
    } else if (c === " " || c === "\t" || c === "\r") {
      i++;
    } else if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === ";" || c === "{" || c === "}") {
      tokens.push({ text: c, kind: c, line, column: i - lineStart + 1 });
      i++;
    } else if (c === '"' || c === "'") {
      const q = quoted(text, i, file, line, lineStart);
      tokens.push({ text: q.value, kind: "word", line, column: i - lineStart + 1 });
      ({ i, line, lineStart } = q);
    } else {
      const w = word(text, i, `${file}:${line}:${i - lineStart + 1}`);
      tokens.push({ text: w.value, kind: "word", line, column: i - lineStart + 1 });
      i = w.i;
    }
  }
  return tokens;
}

/** A quoted word from its opening quote at `i`: its text, and where the text goes on (lines may end inside it). */
function quoted(
  text: string,
  start: number,
  file: string,
  startLine: number,
  startLineStart: number,
): { value: string; i: number; line: number; lineStart: number } {
  const c = text[start]!;
  let value = "";
  let line = startLine;
  let lineStart = startLineStart;
  let i = start + 1;
  while (i < text.length && text[i] !== c) {
    if (text[i] === "\\" && i + 1 < text.length && ESCAPED.has(text[i + 1]!)) i++;
    if (text[i] === "\n") {
      line++;
      lineStart = i + 1;
    }
    value += text[i];
    i++;
  }
  if (i >= text.length) {
    // Named where the quote opens, not where the file ends.
    const at = `${file}:${startLine}:${start - startLineStart + 1}`;
    throw new NginxSyntaxError(`${at}: unterminated ${c === '"' ? "double" : "single"} quote`);
  }
  return { value, i: i + 1, line, lineStart };
}

/**
 * A plain word from `i`. NGINX's spaces are ASCII space, tab, CR and LF: any other byte, a no-break space or a
 * byte-order mark too, is part of a word (ngx_conf_read_token).
 */
function word(text: string, start: number, at: string): { value: string; i: number } {
  let value = "";
  let i = start;
  while (i < text.length && !/[ \t\r\n;{}"'#]/.test(text[i]!)) {
    // `${var}` may hold a brace.
    if (text[i] === "$" && text[i + 1] === "{") {
      const close = text.indexOf("}", i);
      if (close < 0) throw new NginxSyntaxError(`${at}: unterminated \${`);
      value += text.slice(i, close + 1);
      i = close + 1;
      continue;
    }
    if (text[i] === "\\" && i + 1 < text.length && ESCAPED.has(text[i + 1]!)) i++;
    value += text[i];
    i++;
  }
  return { value, i };
}

/** The directives of one file, includes not yet followed. */
export function parseText(text: string, file: string): Directive[] {
  const tokens = tokenize(text, file);
  let pos = 0;
  const parseBlock = (depth: number): Directive[] => {
    const out: Directive[] = [];
    while (pos < tokens.length) {
      const t = tokens[pos]!;
      if (t.kind === "}") {
        if (depth === 0) throw new NginxSyntaxError(`${file}:${t.line}:${t.column}: unexpected "}"`);
        pos++;
        return out;
      }
      if (t.kind !== "word") throw new NginxSyntaxError(`${file}:${t.line}:${t.column}: unexpected "${t.text}"`);
      const odd = ODD_SPACE.exec(t.text);
      if (odd !== null) {
        const code = odd[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
        throw new NginxSyntaxError(
          `${file}:${t.line}:${t.column}: directive "${t.text.replace(ODD_SPACE_ALL, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`)}" holds U+${code} (${code === "FEFF" ? "a byte-order mark" : "a space that is not ASCII"}), which NGINX reads as part of the name: an unknown directive, so NGINX refuses this configuration (save it as UTF-8 without a byte-order mark, with plain spaces)`,
        );
      }
      const args: string[] = [];
      pos++;
      while (pos < tokens.length && tokens[pos]!.kind === "word") args.push(tokens[pos++]!.text);
      const end = tokens[pos];
      if (end === undefined) {
        throw new NginxSyntaxError(`${file}:${t.line}:${t.column}: directive "${t.text}" has no ending ";"`);
      }
      pos++;
      if (end.kind === ";") out.push({ name: t.text, args, file, line: t.line, block: null });
      else if (end.kind === "{") out.push({ name: t.text, args, file, line: t.line, block: parseBlock(depth + 1) });
      else
        throw new NginxSyntaxError(
          `${file}:${end.line}:${end.column}: unexpected "}" (directive "${t.text}" has no ending ";")`,
        );
    }
    if (depth > 0) {
      const last = tokens.at(-1);
      throw new NginxSyntaxError(`${file}:${last?.line ?? 1}: unexpected end of file, expecting "}"`);
    }
    return out;
  };
  return parseBlock(0);
}

/** An `include` whose file (or glob's folder) is not there, so its directives are not read. */
export interface UnreadInclude {
  readonly at: Directive;
  readonly why: string;
}

/** How includes are followed: `unread` collects those that name nothing (else they throw); `absoluteUnder` is a folder
 * that absolute paths are read under (a configuration copied off its server, with its /etc/nginx/... beside it). */
export interface ReadOptions {
  readonly unread?: UnreadInclude[];
  readonly absoluteUnder?: string;
}

/** The whole configuration from its main file, every `include` replaced by the directives it names. */
export function readNginxConfig(path: string, options: ReadOptions = {}): Directive[] {
  const root = dirname(resolve(path));
  return expand(parseText(readText(path, null), path), root, [resolve(path)], options);
}

/**
 * The directives of the `http` block, or of the file itself when it has none but holds what an `http` block does (a
 * `conf.d/` or `sites-enabled/` file, which NGINX includes inside `http`); `null` when it has neither.
 */
export function httpBlockOf(
  config: readonly Directive[],
): { block: readonly Directive[]; at: Directive | null } | null {
  const http = config.find((d) => d.name === "http" && d.block !== null);
  if (http !== undefined) return { block: http.block!, at: http };
  const inside = ["server", "limit_req_zone", "limit_conn_zone", "limit_req", "limit_conn", "map"];
  return config.some((d) => inside.includes(d.name)) ? { block: config, at: null } : null;
}

function readText(path: string, from: Directive | null): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    const where = from === null ? "" : `${from.file}:${from.line}: include: `;
    throw new NginxSyntaxError(
      `${where}cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
}

function expand(
  directives: readonly Directive[],
  root: string,
  stack: readonly string[],
  options: ReadOptions,
): Directive[] {
  const out: Directive[] = [];
  for (const d of directives) {
    if (d.name === "include" && d.block === null) {
      if (d.args.length !== 1) throw new NginxSyntaxError(`${d.file}:${d.line}: include takes one file or glob`);
      for (const file of includedFiles(d, root, options)) {
        if (stack.includes(file)) throw new NginxSyntaxError(`${d.file}:${d.line}: include loops back to ${file}`);
        out.push(...expand(parseText(readText(file, d), file), root, [...stack, file], options));
      }
    } else if (d.block !== null) {
      out.push({ ...d, block: expand(d.block, root, stack, options) });
    } else {
      out.push(d);
    }
  }
  return out;
}

/**
 * The files an `include` names: one path, or a glob's matches in name order (none is fine, as for NGINX). A file or a
 * glob's folder that is not there throws, or with `unread` is listed there.
 */
function includedFiles(d: Directive, root: string, options: ReadOptions): string[] {
  const pattern = d.args[0]!;
  const { unread, absoluteUnder } = options;
  const full = isAbsolute(pattern)
    ? absoluteUnder === undefined
      ? pattern
      : join(absoluteUnder, pattern)
    : join(root, pattern);
  if (!/[*?[]/.test(full)) {
    try {
      statSync(full);
    } catch {
      if (unread === undefined) throw new NginxSyntaxError(`${d.file}:${d.line}: include: no such file ${full}`);
      unread.push({ at: d, why: `no such file ${full}` });
      return [];
    }
    return [full];
  }
  const dir = dirname(full);
  if (/[*?[]/.test(dir))
    throw new NginxSyntaxError(`${d.file}:${d.line}: include: a glob only in the file name is supported`);
  const re = new RegExp(`^${globToRegex(basename(full))}$`);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    unread?.push({ at: d, why: `no such folder ${dir}` });
    return [];
  }
  return names
    .filter((n) => re.test(n))
    .sort()
    .map((n) => join(dir, n));
}

function globToRegex(glob: string): string {
  let out = "";
  for (const c of glob) {
    if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else out += c.replace(/[.+^${}()|\\\]]/g, "\\$&").replace("[", "[");
  }
  return out;
}

/**
 * The statuses NGINX's `limit_req` refuses with in this configuration: every `limit_req_status`, and 503 (the
 * default) unless the `http` block sets one for all.
 */
export function nginxLimitStatuses(config: readonly Directive[]): Set<number> {
  const statuses = new Set<number>();
  const walk = (block: readonly Directive[]) => {
    for (const d of block) {
      if (d.name === "limit_req_status" && d.args.length === 1) statuses.add(Number(d.args[0]));
      if (d.block !== null) walk(d.block);
    }
  };
  walk(config);
  const http = httpBlockOf(config)?.block ?? [];
  if (!http.some((d) => d.name === "limit_req_status")) statuses.add(503);
  return statuses;
}
