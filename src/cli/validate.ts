/** `sluice validate [--rules PATH]... [PATH...]`: every problem at once (exit 1), or a summary per file (exit 0). */
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { commandArgs, EXIT_CODES, inputError, rulePaths } from "./args.ts";
import type { Io } from "./io.ts";

const HELP = `Usage: sluice validate [--rules PATH]... [PATH...]

Validates rule files (default: rules/). Each path (given with --rules or bare) is a YAML file or a directory of
them. Prints every problem, each starting with file, rule id and field, and exits 1; or a one-line summary per file
(rules, algorithms, modes and failure policy; on_error defaults to "open") and exits 0.
${EXIT_CODES}`;

export async function runValidate(args: string[], io: Io): Promise<number> {
  const cmd = { name: "validate", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, { values: ["rules"], repeated: ["rules"], positionals: true });
  if (typeof parsed === "number") return parsed;
  const loaded = loadRules(rulePaths(parsed, true));
  writeWarnings(io.stderr, loaded.warnings);
  if (loaded.errors.length > 0) return inputError(io, [...loaded.errors, problemCount(loaded.errors.length, "")]);
  writeSummaries(io.stdout, loaded);
  return 0;
}

/** Warnings (valid rules likely not meant as written), one a line on standard error; they never fail a command. */
export function writeWarnings(err: NodeJS.WritableStream, warnings: readonly string[]): void {
  for (const w of warnings) err.write(`${w}\n`);
}

/** `3 problems found` and what follows it (compile adds "; nothing written"). */
export function problemCount(n: number, tail: string): string {
  return `${n} problem${n === 1 ? "" : "s"} found${tail}`;
}

/** One summary line per file, as `validate` and `compile` print them. */
export function writeSummaries(out: NodeJS.WritableStream, loaded: ReturnType<typeof loadRules>): void {
  for (const { file, count } of loaded.files) {
    out.write(
      `${file}: ${summarize(
        loaded.rules.filter((r) => r.file === file),
        count,
        loaded.denies.filter((r) => r.file === file).length,
      )}\n`,
    );
  }
}

/** e.g. `9 rules ok: token_bucket 3, gcra 1, deny 1; 1 shadow; on_error (default open) open 8, closed 1` */
export function summarize(rules: readonly ResolvedRule[], count: number, denies = 0): string {
  const tally = (values: string[]) => {
    const m = new Map<string, number>();
    for (const v of values) m.set(v, (m.get(v) ?? 0) + 1);
    return [...m].map(([k, n]) => `${k} ${n}`).join(", ");
  };
  const shadow = rules.filter((r) => r.mode === "shadow").length;
  const local = rules.filter((r) => r.scope === "local").length;
  const parts = [
    `${count} rule${count === 1 ? "" : "s"} ok: ${tally([...rules.map((r) => r.algorithm), ...Array(denies).fill("deny")])}`,
    ...(shadow > 0 ? [`${shadow} shadow`] : []),
    ...(local > 0 ? [`${local} local`] : []),
    `on_error (default open) ${tally(rules.map((r) => r.onError))}`,
  ];
  return parts.join("; ");
}
