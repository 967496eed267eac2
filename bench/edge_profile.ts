/**
 * Where an edge scenario's isolate time goes (bench/edge.ts `--profile`): a CPU profile of wrangler dev's Worker
 * isolate, whose samples are attributed to source files through the bundle's module markers (`// src/edge/gateway.ts`,
 * which esbuild writes before each module), and to a part: **the object's** when any frame of the sample's stack is in
 * the object's classes (src/object/limiter.ts, delegate.ts; the Durable Object runs in the same local workerd process and the same isolate as the Worker, so its
 * CPU counts in the edge's), **the isolate's** otherwise; the runtime's own native work the profiler shows as
 * `(program)`, and garbage collection (one heap for both), apart. Shares of the samples taken while busy.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { round } from "./common.ts";

/** The Durable Objects' own code (their classes); src/object/transport.ts and names.ts are the Worker's side of a call. */
const OBJECT_FILES = new Set(["src/object/limiter.ts", "src/object/delegate.ts", "src/object/ban_note.ts"]);

interface Frame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface Profile {
  readonly nodes: readonly { id: number; callFrame: Frame; children?: readonly number[] }[];
  readonly samples: readonly number[];
}

export interface ProfileSummary {
  /** Samples taken while the isolate was busy (not idle). */
  readonly busySamples: number;
  /** Shares of the busy samples, %: the object's, the isolate's (the Worker's request path), native, GC. */
  readonly parts: { readonly object: number; readonly isolate: number; readonly program: number; readonly gc: number };
  /** Self time by source file (a runtime builtin counts in the file that called it), % of the busy samples. */
  readonly files: readonly { readonly file: string; readonly part: "object" | "isolate"; readonly share: number }[];
  /** Self time by function, % of the busy samples. */
  readonly functions: readonly { readonly where: string; readonly share: number }[];
}

/** The bundle wrangler dev ran from a project copy (`.wrangler/tmp/dev-*\/index.js`), or null. */
export function bundleOf(dir: string): string | null {
  const tmp = join(dir, ".wrangler", "tmp");
  if (!existsSync(tmp)) return null;
  for (const sub of readdirSync(tmp)) {
    const file = join(tmp, sub, "index.js");
    if (sub.startsWith("dev-") && existsSync(file)) return readFileSync(file, "utf8");
  }
  return null;
}

/** For each line of the bundle (0-based), the source file whose module it belongs to. */
function modulesByLine(bundle: string): (line: number) => string {
  const starts: { line: number; file: string }[] = [];
  bundle.split("\n").forEach((text, line) => {
    const m = /^\/\/ ((?:src|node_modules|bench)\/\S+)$/.exec(text);
    if (m !== null) starts.push({ line, file: m[1]! });
  });
  return (line) => {
    let lo = 0;
    let hi = starts.length - 1;
    let found = "(wrangler's wrapper)";
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]!.line <= line) {
        found = starts[mid]!.file;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  };
}

// long: one pass over the samples, attributing each to a part, a file and a function
export function summarize(profile: unknown, bundle: string | null, count = 12): ProfileSummary {
  const p = profile as Profile;
  const fileOf = bundle === null ? () => "(no bundle)" : modulesByLine(bundle);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let busy = 0;
  const parts = { object: 0, isolate: 0, program: 0, gc: 0 };
  const files = new Map<string, { part: "object" | "isolate"; n: number }>();
  const functions = new Map<string, number>();
  for (const sample of p.samples) {
    const leaf = byId.get(sample)?.callFrame;
    if (leaf === undefined || leaf.functionName === "(idle)") continue;
    busy++;
    if (leaf.functionName === "(program)" || leaf.functionName === "(garbage collector)") {
      parts[leaf.functionName === "(program)" ? "program" : "gc"]++;
      continue;
    }
    // The first frame of ours up the stack names the file (a builtin such as `put` or `fetch` counts in its caller's).
    let file: string | null = null;
    let inObject = false;
    for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      if (frame.url === "" || frame.lineNumber < 0) continue;
      const f = fileOf(frame.lineNumber);
      file ??= f;
      if (OBJECT_FILES.has(f)) inObject = true;
    }
    const part = inObject ? "object" : "isolate";
    parts[part]++;
    const key = file ?? "(runtime, no caller of ours)";
    const entry = files.get(key) ?? { part, n: 0 };
    entry.n++;
    files.set(key, entry);
    const where = `${leaf.functionName || "(anonymous)"} ${leaf.url === "" ? "(builtin)" : fileOf(leaf.lineNumber)}`;
    functions.set(where, (functions.get(where) ?? 0) + 1);
  }
  const pct = (n: number) => round((100 * n) / Math.max(1, busy), 1);
  return {
    busySamples: busy,
    parts: { object: pct(parts.object), isolate: pct(parts.isolate), program: pct(parts.program), gc: pct(parts.gc) },
    files: [...files]
      .sort((a, b) => b[1].n - a[1].n)
      .slice(0, count)
      .map(([file, e]) => ({ file, part: e.part, share: pct(e.n) })),
    functions: [...functions]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(([where, n]) => ({ where, share: pct(n) })),
  };
}
