/**
 * Flags for every command, parsed by Node's `util.parseArgs` (strict: unknown flags are errors), with `--help`,
 * usage errors and the exit-code convention answered in one place.
 */
import { parseArgs as nodeParseArgs } from "node:util";

export interface FlagSpec {
  /** Flags that take a value. */
  readonly values: readonly string[];
  /** Flags that may be given more than once (their values collect into a list, in order). */
  readonly repeated?: readonly string[];
  /** Flags without a value. */
  readonly booleans?: readonly string[];
}

/** One flag as given, in command-line order (for commands where the order of different flags matters). */
export interface FlagToken {
  readonly name: string;
  readonly value: string | undefined;
}

export type ParsedArgs =
  | {
      readonly ok: true;
      readonly values: Map<string, string[]>;
      readonly booleans: Set<string>;
      readonly positionals: string[];
      /** Every flag in the order given. */
      readonly flags: readonly FlagToken[];
    }
  | { readonly ok: false; readonly error: string };

/**
 * The exit-code convention every command follows (`sluice simulate` has one documented exception, required by the
 * simulator contract in docs/rules.md). Printed at the end of each command's `--help`.
 */
export const EXIT_CODES = `Exit status: 0 success; 1 invalid rules or invalid input (a malformed trace line, a file that cannot be
read or written); 2 a usage error (an unknown or missing flag, a bad flag value, an unknown rule id).
`;

/** `args` against `spec`: values by flag, booleans, positionals and the flags in order, or the first error. */
export function parseArgs(args: readonly string[], spec: FlagSpec): ParsedArgs {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> = {};
  for (const name of spec.values) options[name] = { type: "string", multiple: true };
  for (const name of spec.booleans ?? []) options[name] = { type: "boolean" };
  if (options.help !== undefined) options.help = { type: "boolean", short: "h" };
  let parsed: ReturnType<typeof nodeParseArgs>;
  try {
    parsed = nodeParseArgs({
      args: joinNegativeValues(args, spec.values),
      options,
      strict: true,
      allowPositionals: true,
      tokens: true,
    });
  } catch (err) {
    return { ok: false, error: parseError(err as Error & { code?: string }, Object.keys(options)) };
  }
  const values = new Map<string, string[]>();
  const booleans = new Set<string>();
  const flags: FlagToken[] = [];
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== "option") continue;
    flags.push({ name: token.name, value: token.value });
    if (token.value === undefined) {
      booleans.add(token.name);
      continue;
    }
    const list = values.get(token.name) ?? [];
    if (list.length > 0 && spec.repeated?.includes(token.name) !== true) {
      return { ok: false, error: `--${token.name} given more than once` };
    }
    list.push(token.value);
    values.set(token.name, list);
  }
  return { ok: true, values, booleans, positionals: parsed.positionals, flags };
}

/**
 * `--flag -1` as `--flag=-1`: `util.parseArgs` takes a value starting with "-" for another flag and says the flag
 * "needs a value"; a negative number is a value, which the command then checks (and refuses with its own message).
 */
function joinNegativeValues(args: readonly string[], valueFlags: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (arg.startsWith("--") && valueFlags.includes(arg.slice(2)) && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** `util.parseArgs`' messages, shortened to ours (`unknown option --x; did you mean --y?`, `--x needs a value`). */
function parseError(err: Error & { code?: string }, known: readonly string[]): string {
  const flag = /'(?:-\w, )?(-[^' ]+)/.exec(err.message)?.[1] ?? "";
  switch (err.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION": {
      const guess = nearest(flag.replace(/^-+/, ""), known);
      return `unknown option ${flag}${guess === null ? "" : `; did you mean --${guess}?`}`;
    }
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE":
      return err.message.includes("does not take an argument") ? `${flag} takes no value` : `${flag} needs a value`;
    default:
      return err.message;
  }
}

/** Where a command writes: its name and help, for usage errors. */
export interface CommandInfo {
  readonly name: string;
  readonly help: string;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

/** A command's flags once `commandArgs` has accepted them. */
export type CommandArgs = Extract<ParsedArgs, { ok: true }>;

/**
 * The word in `known` nearest to `word`: the fewest edits (insertions, deletions, substitutions, adjacent swaps), at
 * most 2, else one that `word` begins (an abbreviation); ties go to the first in `known`. Null when none is near.
 */
export function nearest(word: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(word.toLowerCase(), k);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  if (best !== null || word.length < 3) return best;
  return known.find((k) => k.startsWith(word.toLowerCase())) ?? null;
}

/** Optimal-string-alignment distance (`simualte` -> `simulate` is 1). */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      let v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, before[j - 2]! + 1);
      row.push(v);
    }
    before = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/** `no rule with id "x"; did you mean "y"? (rules: ...)`, for an unknown rule id. */
export function unknownRuleId(id: string, known: readonly string[]): string {
  const guess = nearest(id, known);
  const list = known.length === 0 ? "none" : known.join(", ");
  return `no rule with id "${id}"${guess === null ? "" : `; did you mean "${guess}"?`} (rules: ${list})`;
}

/** A command's usage line(s): its help up to the first blank line. */
export function usageLines(help: string): string {
  const end = help.indexOf("\n\n");
  return end < 0 ? help.trimEnd() : help.slice(0, end);
}

/** A usage error: the message, the command's usage line and where its help is, on standard error; exit status 2. */
export function usageError(cmd: CommandInfo, message: string): number {
  cmd.stderr.write(
    `sluice ${cmd.name}: ${message}\n${usageLines(cmd.help)}\nRun "sluice ${cmd.name} --help" for every option.\n`,
  );
  return 2;
}

/** Invalid rules or input: the messages on standard error; exit status 1 (see `EXIT_CODES`). */
export function inputError(cmd: Pick<CommandInfo, "stderr">, messages: readonly string[], code = 1): number {
  cmd.stderr.write(`${messages.join("\n")}\n`);
  return code;
}

/**
 * A command's flags, with `--help` (or `-h`) and usage errors answered: the parsed flags, or the exit status to
 * return now. `positionals: false` makes any positional argument a usage error.
 */
export function commandArgs(
  cmd: CommandInfo,
  args: readonly string[],
  spec: FlagSpec & { readonly positionals: boolean },
): CommandArgs | number {
  const parsed = parseArgs(args, { ...spec, booleans: [...(spec.booleans ?? []), "help"] });
  if (!parsed.ok) return usageError(cmd, parsed.error);
  if (parsed.booleans.has("help")) {
    cmd.stdout.write(cmd.help);
    return 0;
  }
  if (!spec.positionals && parsed.positionals.length > 0) {
    return usageError(cmd, `unexpected argument "${parsed.positionals[0]}"`);
  }
  return parsed;
}

/** The rule paths a command reads: every `--rules PATH`, then any positional paths; `rules/` when none. */
export function rulePaths(parsed: CommandArgs, positionals = false): string[] {
  const paths = [...(parsed.values.get("rules") ?? []), ...(positionals ? parsed.positionals : [])];
  return paths.length > 0 ? paths : ["rules/"];
}
