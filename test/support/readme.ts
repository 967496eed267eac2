/**
 * The README's runnable parts, as marked in it (CONTRIBUTING.md, "The README test"): an HTML comment line right
 * before a fenced block says what the block is.
 *
 *   <!-- readme-test: file PATH -->   the block is a file's content, written to PATH (a step the reader takes)
 *   <!-- readme-test: run -->         each line is a command, run with sh in the project folder (lines starting
 *                                     with # and blank lines are skipped; a line ending in \ continues)
 *   <!-- readme-test: output -->      what the commands of the last run block print, stdout and stderr; a line
 *                                     "..." stands for any number of lines
 */

export type ReadmeStep =
  | { readonly kind: "file"; readonly path: string; readonly text: string; readonly line: number }
  | { readonly kind: "run"; readonly commands: readonly string[]; readonly line: number }
  | { readonly kind: "output"; readonly text: string; readonly line: number };

const MARKER = /^<!-- readme-test: (file|run|output)(?: (\S+))? -->$/;

/** The marked blocks of `markdown`, in order; throws on a marker not followed by a fenced block. */
export function readmeSteps(markdown: string): ReadmeStep[] {
  const lines = markdown.split("\n");
  const steps: ReadmeStep[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = MARKER.exec(lines[i]!);
    if (m === null) continue;
    const fence = lines[i + 1] ?? "";
    if (!fence.startsWith("```"))
      throw new Error(`README.md:${i + 1}: a readme-test marker must precede a fenced block`);
    const end = lines.indexOf("```", i + 2);
    if (end < 0) throw new Error(`README.md:${i + 2}: the fenced block never ends`);
    const body = lines.slice(i + 2, end);
    const line = i + 3;
    const kind = m[1]!;
    if (kind === "file") {
      if (m[2] === undefined) throw new Error(`README.md:${i + 1}: "readme-test: file" needs a path`);
      steps.push({ kind, path: m[2], text: `${body.join("\n")}\n`, line });
    } else if (kind === "run") {
      steps.push({ kind, commands: commandsOf(body), line });
    } else {
      steps.push({ kind: "output", text: `${body.join("\n")}\n`, line });
    }
    i = end;
  }
  return steps;
}

function commandsOf(body: readonly string[]): string[] {
  const commands: string[] = [];
  let pending = "";
  for (const raw of body) {
    if (pending === "" && (raw.trim() === "" || raw.trimStart().startsWith("#"))) continue;
    if (raw.endsWith("\\")) {
      pending += `${raw.slice(0, -1)} `;
      continue;
    }
    commands.push(pending + raw);
    pending = "";
  }
  return commands;
}

/**
 * Whether `actual` is what `expected` shows, line for line, where an expected line "..." stands for any number of
 * lines. The first difference, described, or null.
 */
export function outputDifference(expected: string, actual: string): string | null {
  const want = expected.trimEnd().split("\n");
  const got = actual.trimEnd().split("\n");
  const match = (w: number, g: number): boolean => {
    if (w === want.length) return g === got.length;
    if (want[w] === "...") {
      for (let k = g; k <= got.length; k++) if (match(w + 1, k)) return true;
      return false;
    }
    return g < got.length && want[w] === got[g] && match(w + 1, g + 1);
  };
  if (match(0, 0)) return null;
  for (let i = 0; i < want.length; i++) {
    if (want[i] === "...") break;
    if (want[i] !== got[i])
      return `line ${i + 1}: the README shows\n  ${want[i]}\nbut the command printed\n  ${got[i] ?? "(nothing)"}`;
  }
  if (!want.includes("...")) return `the command printed more: line ${want.length + 1} is\n  ${got[want.length]}`;
  return 'the lines after "..." differ';
}
