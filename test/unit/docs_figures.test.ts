/**
 * The figures in docs/examples/ are generated, never drawn by hand: this runs the commands of
 * docs/examples/figures.sh in process, into a temporary directory, and fails if any output differs from the
 * committed file. To update them after a deliberate change: `sh docs/examples/figures.sh` from the repository root.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import { xmlProblems } from "../fixtures/compare/xml.ts";
import { runCli } from "../support/io.ts";

const SCRIPT = "docs/examples/figures.sh";

/** Shell words of one command line: whitespace-separated, double quotes group (no escapes needed here). */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|(\S+)/g)) out.push(m[1] ?? m[2]!);
  return out;
}

interface Step {
  readonly args: string[];
  readonly stdoutTo: string | null;
  readonly outputs: string[];
}

function steps(): Step[] {
  return readFileSync(SCRIPT, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("npx sluice "))
    .map((l) => {
      const all = words(l).slice(2);
      const redirect = all.indexOf(">");
      const args = redirect < 0 ? all : all.slice(0, redirect);
      const stdoutTo = redirect < 0 ? null : all[redirect + 1]!;
      const outputs = args.filter((_, i) => args[i - 1] === "--out" || args[i - 1] === "--svg");
      return { args, stdoutTo, outputs: stdoutTo === null ? outputs : [...outputs, stdoutTo] };
    });
}

describe("docs/examples figures", () => {
  const list = steps();

  it("the script has the commands for both figures", () => {
    const outputs = list.flatMap((s) => s.outputs);
    for (const f of ["free-burst.csv", "free-burst.svg", "free-burst.txt", "boundary.csv", "boundary.svg"]) {
      expect(outputs).toContain(`docs/examples/${f}`);
    }
  });

  it("regenerates every committed output byte for byte", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-docs-"));
    const redirected = new Map<string, string>();
    for (const step of list) {
      // Outputs go to the temporary directory; later steps read the regenerated files, not the committed ones.
      const args = step.args.map((a, i) => {
        const out = step.outputs.includes(a) && (step.args[i - 1] === "--out" || step.args[i - 1] === "--svg");
        if (out) redirected.set(a, join(dir, basename(a)));
        return redirected.get(a) ?? a;
      });
      const r = await runCli(args);
      expect(r.stderr, `sluice ${step.args.join(" ")}`).toBe("");
      expect(r.code).toBe(0);
      if (step.stdoutTo !== null) {
        const target = join(dir, basename(step.stdoutTo));
        writeFileSync(target, r.stdout);
        redirected.set(step.stdoutTo, target);
      }
    }
    for (const [committed, fresh] of redirected) {
      expect(existsSync(committed), `${committed} is missing: run sh ${SCRIPT}`).toBe(true);
      expect(readFileSync(fresh, "utf8"), `${committed} drifted: run sh ${SCRIPT} and review the diff`).toBe(
        readFileSync(committed, "utf8"),
      );
      if (committed.endsWith(".svg")) expect(xmlProblems(readFileSync(committed, "utf8"))).toEqual([]);
    }
  });

  it("the boundary table shows the counts the core computes", () => {
    const table = readFileSync("docs/examples/boundary.txt", "utf8");
    expect(table).toMatch(/fixed-window\s+fixed_window 100 per 60 s\s+200\s/);
    expect(table).toMatch(/sliding-log\s+sliding_log 100 per 60 s\s+100\s/);
    expect(table).toMatch(/sliding-counter\s+sliding_counter 100 per 60 s\s+116\s/);
    expect(table).toMatch(/token-bucket\s+token_bucket 100\/min, burst 100\s+133\s/);
  });
});
