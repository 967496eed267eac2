/**
 * The shape of `src/`, read with the TypeScript compiler API: how long each function is, and which module imports
 * which. `test/unit/architecture.test.ts` holds the code to it; run this file to print the report by hand:
 *
 *   npx tsx test/support/source_shape.ts
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

/** A function should fit on a screen; a longer one says why in a comment carrying this marker. */
export const MAX_FUNCTION_LINES = 60;
export const LONG_MARKER = /\blong:\s*\S/;

export interface FunctionShape {
  /** `src/cli/compare.ts:12` (1-based line of the first line of the function). */
  where: string;
  name: string;
  lines: number;
  /** The text after `long:` in a comment just above the function (or on its first line), if there is one. */
  reason: string | null;
}

/** Every `.ts` file under `dir`, as paths relative to the working directory, sorted. */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (entry.endsWith(".ts") && !entry.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

const parsed = new Map<string, { readonly text: string; readonly source: ts.SourceFile }>();

/** `file` parsed, once per content (every check reads the same files). */
function parse(file: string): ts.SourceFile {
  const text = readFileSync(file, "utf8");
  const cached = parsed.get(file);
  if (cached?.text === text) return cached.source;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  parsed.set(file, { text, source });
  return source;
}

type FunctionNode =
  | ts.FunctionDeclaration
  | ts.FunctionExpression
  | ts.ArrowFunction
  | ts.MethodDeclaration
  | ts.ConstructorDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration;

function isFunctionNode(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** The name a reader would look for: the declaration's own, or the variable / property / class member it is bound to. */
function nameOf(node: FunctionNode, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return `${classNameOf(node)}.constructor`;
  if (node.name) {
    const own = node.name.getText(source);
    return ts.isClassLike(node.parent) ? `${classNameOf(node)}.${own}` : own;
  }
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  return "(anonymous)";
}

function classNameOf(node: ts.Node): string {
  const cls = node.parent;
  return ts.isClassLike(cls) && cls.name ? cls.name.text : "(class)";
}

/**
 * The comments that belong to a function: those before it and before every enclosing node that starts on the same
 * line (`export const f = () => {` keeps its comment on the statement), plus any on its first line.
 */
function commentsOf(node: ts.Node, source: ts.SourceFile): string[] {
  const text = source.text;
  const line = (pos: number) => source.getLineAndCharacterOfPosition(pos).line;
  const startLine = line(node.getStart(source));
  const out: string[] = [];
  for (let n: ts.Node | undefined = node; n && !ts.isSourceFile(n); n = n.parent) {
    if (line(n.getStart(source)) !== startLine) break;
    for (const c of ts.getLeadingCommentRanges(text, n.getFullStart()) ?? []) out.push(text.slice(c.pos, c.end));
  }
  const lineEnd = text.indexOf("\n", node.getStart(source));
  const firstLine = text.slice(node.getStart(source), lineEnd === -1 ? text.length : lineEnd);
  const trailing = firstLine.indexOf("//");
  if (trailing !== -1) out.push(firstLine.slice(trailing));
  return out;
}

/** Every function, method, constructor, accessor and arrow in `files`, with its length in lines. */
export function functionShapes(files: readonly string[]): FunctionShape[] {
  const out: FunctionShape[] = [];
  for (const file of files) {
    const source = parse(file);
    const visit = (node: ts.Node) => {
      if (isFunctionNode(node) && node.body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const marked = commentsOf(node, source)
          .map((c) => LONG_MARKER.exec(c) && c.slice(c.search(/\blong:/) + "long:".length))
          .find((r): r is string => typeof r === "string");
        out.push({
          where: `${file}:${first + 1}`,
          name: nameOf(node, source),
          lines: last - first + 1,
          reason: marked
            ? marked
                .replace(/\*\/\s*$/, "")
                .replace(/\n\s*(\*|\/\/)/g, " ")
                .replace(/\s+/g, " ")
                .trim()
            : null,
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

/** The functions longer than the limit, and which of them give no reason. */
export function longFunctions(files: readonly string[], maxLines = MAX_FUNCTION_LINES) {
  const long = functionShapes(files).filter((f) => f.lines > maxLines);
  return { long, unexplained: long.filter((f) => f.reason === null) };
}

/** What `file` imports, as written: `./types.ts`, `yaml`, `node:fs` (`import type` and `import()` included). */
export function importSpecifiers(file: string): string[] {
  return ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.map((i) => i.fileName);
}

/**
 * Module graph of `files`: for each file, the files it imports (static `import`, `import type`, `export ... from`
 * and `import()`), resolved relative to it. Imports of packages (`yaml`, `node:fs`), of JSON data (recorded
 * responses: leaves that import nothing) and of plain-JavaScript scripts (`.mjs`) are left out.
 */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files.map((f) => resolve(f)));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets: string[] = [];
    for (const fileName of importSpecifiers(file)) {
      if (!fileName.startsWith(".") || fileName.endsWith(".json")) continue;
      // A plain-JavaScript script (scripts/*.mjs: Node's own modules only) is a leaf, as JSON is.
      if (fileName.endsWith(".mjs") && existsSync(resolve(dirname(file), fileName))) continue;
      const base = resolve(dirname(file), fileName);
      const hit = [base, base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")].find((p) => known.has(p));
      if (!hit) throw new Error(`${file}: cannot resolve import "${fileName}"`);
      targets.push(relative(process.cwd(), hit));
    }
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/**
 * Import cycles found by a depth-first walk, each as `a -> b -> a` from its smallest file name: empty exactly when the
 * graph has none (a tangle of several cycles may be reported by only some of them).
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles = new Set<string>();
  const done = new Set<string>();
  const walk = (file: string, path: string[]) => {
    const at = path.indexOf(file);
    if (at !== -1) {
      const loop = path.slice(at);
      const start = loop.indexOf([...loop].sort()[0]!);
      const rotated = [...loop.slice(start), ...loop.slice(0, start)];
      cycles.add([...rotated, rotated[0]].join(" -> "));
      return;
    }
    if (done.has(file)) return;
    for (const next of graph.get(file) ?? []) walk(next, [...path, file]);
    done.add(file);
  };
  for (const file of graph.keys()) walk(file, []);
  return [...cycles].sort();
}

/** Calls that read the real clock or wait on a real timer. */
const CLOCK_CALLS = new Set(["Date.now", "performance.now", "setTimeout", "setInterval", "scheduler.wait"]);

/**
 * Every place in `files` that reads the real clock or waits on a timer (`Date.now()`, `performance.now()`,
 * `new Date()` without an argument, `setTimeout`, `setInterval`, `scheduler.wait`), as `file:line text`. Code inside
 * strings (the dashboard page's own script runs in the reader's browser) and comments are not code, so not counted.
 */
export function clockReads(files: readonly string[]): string[] {
  const out: string[] = [];
  for (const file of files) {
    const source = parse(file);
    const visit = (node: ts.Node) => {
      const reads =
        (ts.isCallExpression(node) && CLOCK_CALLS.has(node.expression.getText(source))) ||
        (ts.isNewExpression(node) && node.expression.getText(source) === "Date" && !node.arguments?.length);
      if (reads) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        out.push(`${file}:${line} ${node.getText(source)}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

/** `src/cli/main.ts` -> `cli` (`src/edge/admin/admin.ts` -> `edge`); `root` is where the folders are. */
export const folderOf = (file: string, root = "src") => relative(root, file).split(/[\\/]/)[0]!;

/** Names only the Workers runtime provides (globals from @cloudflare/workers-types), beyond web-standard APIs. */
export const WORKERS_GLOBALS = new Set([
  "AnalyticsEngineDataset",
  "Cloudflare",
  "DurableObject",
  "DurableObjectId",
  "DurableObjectNamespace",
  "DurableObjectState",
  "DurableObjectStub",
  "ExecutionContext",
  "HTMLRewriter",
  "KVNamespace",
  "WebSocketPair",
  "caches",
  "scheduler",
]);

/**
 * Where `files` use the Workers API, as `file name`: a `cloudflare:*` import, or a name only the Workers runtime
 * provides (`WORKERS_GLOBALS`) used in code (not in strings or comments). Each name once per file.
 */
export function workersApiUses(files: readonly string[]): string[] {
  const out = new Set<string>();
  for (const file of files) {
    for (const name of importSpecifiers(file)) if (name.startsWith("cloudflare:")) out.add(`${file} ${name}`);
    const source = parse(file);
    const visit = (node: ts.Node) => {
      if (ts.isIdentifier(node) && WORKERS_GLOBALS.has(node.text)) out.add(`${file} ${node.text}`);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return [...out];
}

/**
 * Where `files` name one of `names` in code (comments are not code): a string or template literal holding one as a
 * word, or an identifier spelt as one, as `file:line text`. A parameters object choosing its algorithm
 * (`algorithm: "gcra"`) is no branch on the name, and an import's module path is no name, so neither counts.
 */
export function namesInCode(files: readonly string[], names: readonly string[]): string[] {
  const word = new RegExp(`\\b(${names.join("|")})\\b`);
  const out: string[] = [];
  for (const file of files) {
    const source = parse(file);
    const at = (node: ts.Node) => `${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
    const visit = (node: ts.Node) => {
      if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) return;
      const chosen =
        ts.isPropertyAssignment(node) &&
        node.name.getText(source) === "algorithm" &&
        ts.isStringLiteral(node.initializer);
      if (chosen) return;
      const literal =
        ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateLiteralToken(node);
      if (literal && word.test(node.text)) out.push(`${at(node)} ${node.getText(source).slice(0, 80)}`);
      if (ts.isIdentifier(node) && names.includes(node.text)) out.push(`${at(node)} ${node.text}`);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

/** A file should be read in one sitting; a longer one says why in a comment carrying this marker. */
export const MAX_FILE_LINES = 400;
export const LONG_FILE_MARKER = /\blong-file:\s*\S/;

/** Files longer than `maxLines`, each with whether it states a reason (a `long-file:` comment). */
export function longFiles(files: readonly string[], maxLines = MAX_FILE_LINES) {
  return files
    .map((file) => {
      const text = readFileSync(file, "utf8");
      const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      return { file, lines, explained: LONG_FILE_MARKER.test(text) };
    })
    .filter((f) => f.lines > maxLines);
}

/** A file's opening comment says what the file is for and why, in a few lines; history goes to CHANGELOG.md. */
export const MAX_HEADER_LINES = 15;

/** The lines of a file's opening comments (every comment before its first line of code), blank lines not counted. */
export function headerLines(file: string): number {
  let count = 0;
  let inBlock = false;
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    if (inBlock) {
      count++;
      inBlock = !line.includes("*/");
      continue;
    }
    if (line === "") continue;
    if (line.startsWith("//")) {
      count++;
      continue;
    }
    if (!line.startsWith("/*")) break;
    count++;
    inBlock = !line.includes("*/", 2);
  }
  return count;
}

/** Every file reachable from `starts` through `graph` (the starts included). */
export function reachable(graph: ReadonlyMap<string, readonly string[]>, starts: readonly string[]): string[] {
  const seen = new Set<string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const next of graph.get(file) ?? []) walk(next);
  };
  for (const file of starts) walk(file);
  return [...seen].sort();
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename ?? "")) {
  process.stdout.on("error", () => process.exit(0)); // `| head` closed the pipe: nothing more to say
  const files = sourceFiles("src");
  const { long } = longFunctions(files);
  console.log(`functions in src/ longer than ${MAX_FUNCTION_LINES} lines: ${long.length}`);
  for (const f of long) console.log(`  ${f.where} ${f.name} (${f.lines} lines): ${f.reason ?? "NO REASON GIVEN"}`);
  const cycles = importCycles(importGraph(files));
  console.log(`import cycles in src/: ${cycles.length}`);
  for (const c of cycles) console.log(`  ${c}`);
  const reads = clockReads(files);
  console.log(`real clock reads and timers in src/: ${reads.length}`);
  for (const r of reads) console.log(`  ${r}`);
}
