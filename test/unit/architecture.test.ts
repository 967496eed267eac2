/**
 * The shape of src/ that the layout in CONTRIBUTING.md promises: short functions (or a reason in a `long:` comment),
 * no import cycles between modules, folders in layers (algorithms imports nothing else, rules only algorithms, no
 * two folders import each other), folders by where their code runs (the pure ones use no Workers API; `cloudflare:*`
 * only in object and edge; sim and bench reach neither), one owner of the clock, files of at most 400 lines and
 * headers of at most 15. Read with the TypeScript compiler API (test/support/source_shape.ts).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ALGORITHMS } from "../../src/algorithms/index.ts";
import {
  clockReads,
  folderOf,
  functionShapes,
  headerLines,
  importCycles,
  importGraph,
  importSpecifiers,
  longFiles,
  longFunctions,
  MAX_FILE_LINES,
  MAX_FUNCTION_LINES,
  MAX_HEADER_LINES,
  namesInCode,
  reachable,
  sourceFiles,
  workersApiUses,
} from "../support/source_shape.ts";

const files = sourceFiles("src");
const graph = importGraph(files);

/** Folder-to-folder imports, e.g. `cli -> viz`. */
function folderEdges(g: ReadonlyMap<string, readonly string[]>): Set<string> {
  const edges = new Set<string>();
  for (const [file, targets] of g) {
    for (const target of targets) {
      if (folderOf(file) !== folderOf(target)) edges.add(`${folderOf(file)} -> ${folderOf(target)}`);
    }
  }
  return edges;
}

/**
 * What breaks the layers under `root` (its `src/`), one line per fault: algorithms importing anything beyond itself,
 * rules importing beyond algorithms, viz or replay importing cli, two folders importing each other.
 */
function layerFaults(root: string): string[] {
  const srcDir = join(root, "src");
  const src = sourceFiles(srcDir);
  const folder = (f: string) => folderOf(f, srcDir);
  const edges = new Set<string>();
  for (const [file, targets] of importGraph(src)) {
    for (const t of targets) if (folder(file) !== folder(t)) edges.add(`${folder(file)} -> ${folder(t)}`);
  }
  const faults: string[] = [];
  for (const f of src.filter((f) => folder(f) === "algorithms")) {
    for (const name of importSpecifiers(f)) if (!name.startsWith("./")) faults.push(`algorithms imports ${name}`);
  }
  for (const edge of edges) {
    const [from, to] = edge.split(" -> ");
    if (from === "rules" && to !== "algorithms") faults.push(`rules beyond algorithms: ${edge}`);
    if ((from === "viz" || from === "replay") && to === "cli")
      faults.push(`drawing or replay imports the CLI: ${edge}`);
    if (edges.has(`${to} -> ${from}`)) faults.push(`folders import each other: ${edge}`);
  }
  return faults.sort();
}

/** A throwaway source tree for checking that the checks can fail. */
function scratch(sources: Record<string, string>): string[] {
  return scratchTree(sources).files;
}

function scratchTree(sources: Record<string, string>): { root: string; files: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "sluice-shape-"));
  const files = Object.entries(sources).map(([name, text]) => {
    const path = join(dir, name);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, text);
    return relative(process.cwd(), path);
  });
  return { root: relative(process.cwd(), dir), files };
}

/** Folders whose code runs anywhere (Node, the simulator, the bench, a Worker): no Workers API. */
const PURE = new Set(["algorithms", "rules", "protocol", "request", "replay", "viz", "sim"]);
/** The only folders that import `cloudflare:*`: the Durable Object and the Worker. */
const RUNTIME = new Set(["object", "edge"]);

/** What breaks the layout by runtime under `root` (its `src/` and `bench/`), one line per fault. */
function runtimeFaults(root: string): string[] {
  const srcDir = join(root, "src");
  const src = sourceFiles(srcDir);
  const bench = sourceFiles(join(root, "bench"));
  const support = existsSync(join(root, "test", "support")) ? sourceFiles(join(root, "test", "support")) : [];
  const folder = (f: string) => folderOf(f, srcDir);
  const faults = workersApiUses(src.filter((f) => PURE.has(folder(f)))).map((u) => `pure folder uses ${u}`);
  for (const f of src.filter((f) => !RUNTIME.has(folder(f)))) {
    for (const name of importSpecifiers(f).filter((n) => n.startsWith("cloudflare:"))) {
      faults.push(`${name} outside object and edge: ${f}`);
    }
  }
  const graph = importGraph([...src, ...bench, ...support]);
  const reached = reachable(graph, [...bench, ...src.filter((f) => folder(f) === "sim")]).filter((f) =>
    src.includes(f),
  );
  for (const f of reached.filter((f) => RUNTIME.has(folder(f)))) faults.push(`sim or bench reaches ${f}`);
  for (const use of workersApiUses(reached)) faults.push(`sim or bench reaches the Workers API: ${use}`);
  return faults;
}

const body = (lines: number) => Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");

describe(`functions in src/ (at most ${MAX_FUNCTION_LINES} lines, or a reason in a \`long:\` comment)`, () => {
  it("every longer function says why", () => {
    const { unexplained } = longFunctions(files);
    expect(unexplained.map((f) => `${f.where} ${f.name} (${f.lines} lines)`)).toEqual([]);
  });

  it("measures every kind of function, and only a `long:` comment excuses one", () => {
    const [file] = scratch({
      "a.ts": [
        `export function declared() {\n${body(61)}\n}`,
        `// long: one table, read top to bottom\nexport const arrow = () => {\n${body(62)}\n};`,
        `/** A class. */\nclass C {\n  method() {\n${body(61)}\n  }\n  short() {\n    return 1;\n  }\n}`,
        `// not a reason\nexport const obj = { prop: function () {\n${body(61)}\n} };`,
        `export const fits = () => {\n${body(60)}\n};`,
        "void C;",
      ].join("\n"),
    });
    const shapes = functionShapes([file!]);
    expect(shapes.map((f) => [f.name, f.lines])).toEqual([
      ["declared", 61],
      ["arrow", 62],
      ["C.method", 61],
      ["C.short", 3],
      ["prop", 61],
      ["fits", 60],
    ]);
    const { long, unexplained } = longFunctions([file!]);
    expect(long.map((f) => [f.name, f.reason])).toEqual([
      ["declared", null],
      ["arrow", "one table, read top to bottom"],
      ["C.method", null],
      ["prop", null],
    ]);
    expect(unexplained.map((f) => f.name)).toEqual(["declared", "C.method", "prop"]);
  });
});

/**
 * The files of issue 18's work in flight (the hot-key tier: the coalescer and the record protocol), allowed a long
 * file with a `long-file:` reason or a long header until they are split; the list only shrinks.
 */
const IN_FLIGHT = new Set<string>([]);

describe(`files in src/ (at most ${MAX_FILE_LINES} lines, or a reason in a \`long-file:\` comment)`, () => {
  const measured = longFiles(
    files.filter((f) => folderOf(f) !== "generated"),
    0,
  );

  it("only the files in flight are longer, and each says why", () => {
    expect(measured.filter((f) => f.lines > 100).length).toBeGreaterThan(10); // the check sees real files
    const long = measured.filter((f) => f.lines > MAX_FILE_LINES);
    expect(long.filter((f) => !f.explained).map((f) => `${f.file} (${f.lines} lines)`)).toEqual([]);
    expect(long.filter((f) => !IN_FLIGHT.has(f.file)).map((f) => `${f.file} (${f.lines} lines)`)).toEqual([]);
  });

  it("no file that fits keeps a `long-file:` reason", () => {
    const stale = measured.filter((f) => f.explained && f.lines <= MAX_FILE_LINES);
    expect(stale.map((f) => `${f.file} (${f.lines} lines)`)).toEqual([]);
  });

  it("counts lines, and only a `long-file:` comment excuses a long file", () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `export const v${i} = ${i};`).join("\n");
    const [fits, long, excused] = scratch({
      "fits.ts": `${lines(MAX_FILE_LINES)}\n`,
      "long.ts": `// long: is the marker for functions, not files\n${lines(MAX_FILE_LINES)}\n`,
      "excused.ts": `// long-file: one table\n${lines(MAX_FILE_LINES)}\n`,
    });
    expect(longFiles([fits!, long!, excused!]).map((f) => [f.file, f.lines, f.explained])).toEqual([
      [long, MAX_FILE_LINES + 1, false],
      [excused, MAX_FILE_LINES + 1, true],
    ]);
  });
});

describe(`file headers in src/ (at most ${MAX_HEADER_LINES} lines of opening comment)`, () => {
  it("say what a file is for in a few lines (history goes to CHANGELOG.md or BENCHMARKS.md)", () => {
    const long = files
      .filter((f) => folderOf(f) !== "generated" && !IN_FLIGHT.has(f))
      .map((f) => ({ file: f, lines: headerLines(f) }));
    expect(long.filter((h) => h.lines > 5).length).toBeGreaterThan(10); // the check sees real headers
    expect(long.filter((h) => h.lines > MAX_HEADER_LINES).map((h) => `${h.file} (${h.lines} lines)`)).toEqual([]);
  });

  it("counts every comment line before the first line of code, and only those", () => {
    const comment = (n: number) => ["/**", ...Array.from({ length: n - 2 }, (_, i) => ` * line ${i}`), " */"];
    const [fits, long, spread, code] = scratch({
      "fits.ts": [...comment(MAX_HEADER_LINES), "", "export const a = 1; // not the header", "/** nor this */"].join(
        "\n",
      ),
      "long.ts": [...comment(MAX_HEADER_LINES + 1), "export const a = 1;"].join("\n"),
      "spread.ts": [
        "// long-file: a reason",
        ...comment(MAX_HEADER_LINES - 2),
        "",
        "/* one more */",
        "// and one",
      ].join("\n"),
      "code.ts": ["export const a = 1;", ...comment(MAX_HEADER_LINES + 1)].join("\n"),
    });
    expect([fits, long, spread, code].map((f) => headerLines(f!))).toEqual([
      MAX_HEADER_LINES,
      MAX_HEADER_LINES + 1,
      MAX_HEADER_LINES + 1,
      0,
    ]);
  });
});

describe("imports in src/", () => {
  it("form no cycle", () => {
    expect(importCycles(graph)).toEqual([]);
  });

  it("the graph sees imports of every kind (it is not vacuous)", () => {
    expect(graph.get(join("src", "cli", "main.ts"))).toContain(join("src", "cli", "commands.ts"));
    // `import type` counts too: a cycle through types is still one a reader has to untangle.
    expect(graph.get(join("src", "algorithms", "index.ts"))).toContain(join("src", "algorithms", "types.ts"));
    expect(graph.size).toBe(files.length);
  });

  it("the cycle check finds a cycle, however it is closed", () => {
    const cyclic = scratch({
      "x/a.ts": 'import { b } from "./b.ts";\nexport const a = b;',
      "x/b.ts": 'import type { C } from "../y/c";\nexport const b = 1 as unknown as C;',
      "y/c.ts": 'export type { A as C } from "../x/a.ts";\nexport type A = 1;',
    });
    expect(importCycles(importGraph(cyclic))).toHaveLength(1);
    expect(importCycles(importGraph(cyclic))[0]).toMatch(/a\.ts -> .*b\.ts -> .*c\.ts -> .*a\.ts$/);
  });

  it("algorithms imports nothing outside itself, not even a package", () => {
    const core = files.filter((f) => folderOf(f) === "algorithms");
    expect(core.length).toBeGreaterThan(7);
    expect(core.flatMap((f) => graph.get(f)!).filter((t) => folderOf(t) !== "algorithms")).toEqual([]);
    expect(core.flatMap((f) => importSpecifiers(f)).filter((name) => !name.startsWith("./"))).toEqual([]);
  });

  it("rules imports only algorithms", () => {
    const edges = [...folderEdges(graph)].filter((e) => e.startsWith("rules ->"));
    expect(edges).toEqual(["rules -> algorithms"]);
  });

  it("viz and replay import nothing from cli, and no two folders import each other", () => {
    const edges = folderEdges(graph);
    expect([...edges].filter((e) => e.startsWith("viz -> cli") || e.startsWith("replay -> cli"))).toEqual([]);
    const mutual = [...edges].filter((e) => {
      const [from, to] = e.split(" -> ");
      return edges.has(`${to} -> ${from}`);
    });
    expect(mutual).toEqual([]);
    expect(edges.has("cli -> viz")).toBe(true); // the CLI draws viz's charts; the other way round is the cycle
  });
});

describe("layers", () => {
  it("hold in src/", () => {
    expect(layerFaults(".")).toEqual([]);
  });

  it("each layer check fails on a tree that breaks it", () => {
    const { root } = scratchTree({
      "src/algorithms/a.ts": 'import "yaml";\nimport { r } from "../rules/r.ts";\nexport const a = r;',
      "src/rules/r.ts": 'import type { Q } from "../request/q.ts";\nexport const r = 1 as unknown as Q;',
      "src/request/q.ts": 'import type { E } from "../edge/e.ts";\nexport type Q = E;',
      "src/edge/e.ts": 'import type { Q } from "../request/q.ts";\nexport type E = Q | 1;',
      "src/viz/v.ts": 'import { c } from "../cli/c.ts";\nexport const v = c;',
      "src/cli/c.ts": "export const c = 1;",
    });
    expect(layerFaults(root)).toEqual(
      [
        "algorithms imports ../rules/r.ts",
        "algorithms imports yaml",
        "drawing or replay imports the CLI: viz -> cli",
        "folders import each other: edge -> request",
        "folders import each other: request -> edge",
        "rules beyond algorithms: rules -> request",
      ].sort(),
    );
  });
});

describe("folders by where code runs", () => {
  it("the pure folders use no Workers API, cloudflare:* is imported only in object and edge, sim and bench reach neither", () => {
    expect(runtimeFaults(".")).toEqual([]);
  });

  it("the checks are not vacuous: the Workers API is used where it belongs, and bench reaches the isolate code", () => {
    const uses = workersApiUses(files);
    expect(uses).toContain(`${join("src", "object", "limiter.ts")} cloudflare:workers`);
    expect(uses.some((u) => u.startsWith(join("src", "edge")))).toBe(true);
    const bench = sourceFiles("bench");
    const reached = reachable(importGraph([...files, ...bench, ...sourceFiles(join("test", "support"))]), bench);
    expect(reached).toContain(join("src", "isolate", "coalesce.ts"));
    expect(reached).toContain(join("src", "protocol", "store.ts"));
  });

  it("each check fails on a tree that breaks it", () => {
    const { root } = scratchTree({
      "src/request/a.ts": "export const wait = () => scheduler.wait(1);",
      "src/viz/b.ts": 'import { DurableObject } from "cloudflare:workers";\nexport class B extends DurableObject {}',
      "src/isolate/c.ts": 'import { connect } from "cloudflare:sockets";\nexport const c = connect;',
      "src/edge/d.ts": 'import { DurableObject } from "cloudflare:workers";\nexport const d = DurableObject;',
      "src/sim/e.ts": 'import { d } from "../edge/d.ts";\nexport const e = d;',
      "src/isolate/f.ts": "export const f = (ns: KVNamespace) => ns;",
      "bench/g.ts": 'import { f } from "../src/isolate/f.ts";\nvoid f;',
    });
    const at = (f: string) => join(root, f);
    expect(runtimeFaults(root).sort()).toEqual(
      [
        `pure folder uses ${at("src/request/a.ts")} scheduler`,
        `pure folder uses ${at("src/viz/b.ts")} cloudflare:workers`,
        `pure folder uses ${at("src/viz/b.ts")} DurableObject`,
        `cloudflare:sockets outside object and edge: ${at("src/isolate/c.ts")}`,
        `cloudflare:workers outside object and edge: ${at("src/viz/b.ts")}`,
        `sim or bench reaches ${at("src/edge/d.ts")}`,
        `sim or bench reaches the Workers API: ${at("src/edge/d.ts")} cloudflare:workers`,
        `sim or bench reaches the Workers API: ${at("src/edge/d.ts")} DurableObject`,
        `sim or bench reaches the Workers API: ${at("src/isolate/f.ts")} KVNamespace`,
      ].sort(),
    );
  });
});

describe("algorithm names", () => {
  // src/migrate writes rule files from other proxies' configurations (whose own fields are named token_bucket).
  const outside = files.filter((f) => !["algorithms", "generated", "migrate"].includes(folderOf(f)));

  it("appear in code only in src/algorithms: everything else asks the algorithm table", () => {
    expect(outside.length).toBeGreaterThan(50);
    expect(namesInCode(outside, ALGORITHMS)).toEqual([]);
  });

  it("the check sees a branch on a name, a table keyed by names and a name in a message, but not a choice", () => {
    const [file] = scratch({
      "n.ts": [
        "// token_bucket in a comment",
        'import { gcra } from "../algorithms/gcra.ts";',
        'export const params = { algorithm: "gcra", burst: 1 };',
        'export const isQueue = (p: { algorithm: string }) => p.algorithm === "leaky_queue";',
        "export const widths = { fixed_window: 2, sliding_counter: 3 };",
        "export const message = `month is only for fixed_window`;",
        "void gcra;",
      ].join("\n"),
    });
    expect(namesInCode([file!], ALGORITHMS).map((r) => r.slice(r.indexOf(":") + 1))).toEqual([
      '4 "leaky_queue"',
      "5 fixed_window",
      "5 sliding_counter",
      "6 `month is only for fixed_window`",
      "7 gcra",
    ]);
  });
});

describe("time in src/", () => {
  it("only src/isolate/time.ts reads the clock or sleeps; the two scheduler turns elsewhere say why", () => {
    const where = (read: string) => read.replace(/:\d+ /, " ");
    expect(clockReads(files).map(where)).toEqual([
      // The client package's one timer (its own root, outside src/isolate): a request's slot renewals.
      "src/client/time.ts setTimeout(wake, ms)",
      // Resuming in the request's own I/O context waits on timers of its own (injected into the Coalescer as `resume`).
      "src/isolate/resume.ts scheduler.wait(ms)",
      "src/isolate/time.ts Date.now()",
      "src/isolate/time.ts scheduler.wait(ms)",
      // Group commit: one scheduler turn for other requests to join the write; no time is measured or waited for.
      "src/object/limiter.ts scheduler.wait(0)",
    ]);
  });

  it("the check sees every kind of clock read, in code but not in strings or comments", () => {
    const [file] = scratch({
      "t.ts": [
        "// Date.now() in a comment",
        'const page = "<script>Date.now()</script>";',
        "export const a = [Date.now(), performance.now(), new Date(), new Date(0), page];",
        "setTimeout(() => {}, 1);",
        "setInterval(() => {}, 1);",
        "void scheduler.wait(5);",
      ].join("\n"),
    });
    expect(clockReads([file!]).map((r) => r.slice(r.indexOf(" ") + 1))).toEqual([
      "Date.now()",
      "performance.now()",
      "new Date()",
      "setTimeout(() => {}, 1)",
      "setInterval(() => {}, 1)",
      "scheduler.wait(5)",
    ]);
  });
});

describe("the layout in CONTRIBUTING.md", () => {
  const readme = readFileSync("CONTRIBUTING.md", "utf8");
  const layout = /^## Layout\n\n```\n([\s\S]*?)\n```/m.exec(readme)?.[1] ?? "";
  const listed = new Set(layout.split("\n").map((line) => line.split(/\s/)[0]!.replace(/\/$/, "")));
  const ignored = new Set(
    readFileSync(".gitignore", "utf8")
      .split("\n")
      .map((l) => l.trim().replace(/\/$/, ""))
      .filter((l) => l !== "" && !l.includes("*")),
  );
  const folders = (dir: string) =>
    readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => (dir === "." ? d.name : `${dir}/${d.name}`));

  it("names every top-level folder and every folder of src/", () => {
    expect(listed.size).toBeGreaterThan(10);
    const expected = [
      ...folders(".").filter((f) => f !== ".git" && f !== "src" && !ignored.has(f)),
      ...folders("src"),
      "src/generated", // written by `sluice compile`, so it may not exist yet; the layout says why it is not committed
    ];
    expect(expected.filter((f) => !listed.has(f))).toEqual([]);
  });
});
