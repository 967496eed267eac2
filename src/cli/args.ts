/** A tiny strict flag parser: `--name value`, `--flag`, repeated flags collect; unknown flags are errors. */
export interface FlagSpec {
  /** Flags that take a value. */
  readonly values: readonly string[];
  /** Flags that may be given more than once (their values collect into a list). */
  readonly repeated?: readonly string[];
  /** Flags without a value. */
  readonly booleans?: readonly string[];
}

export type ParsedArgs =
  | {
      readonly ok: true;
      readonly values: Map<string, string[]>;
      readonly booleans: Set<string>;
      readonly positionals: string[];
    }
  | { readonly ok: false; readonly error: string };

export function parseArgs(args: readonly string[], spec: FlagSpec): ParsedArgs {
  const values = new Map<string, string[]>();
  const booleans = new Set<string>();
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith("--") || arg === "--") {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    if (spec.booleans?.includes(name) === true) {
      if (eq >= 0) return { ok: false, error: `--${name} takes no value` };
      booleans.add(name);
      continue;
    }
    if (!spec.values.includes(name)) return { ok: false, error: `unknown option --${name}` };
    const value = eq >= 0 ? arg.slice(eq + 1) : args[++i];
    if (value === undefined || (eq < 0 && value.startsWith("--"))) {
      return { ok: false, error: `--${name} needs a value` };
    }
    const list = values.get(name) ?? [];
    if (list.length > 0 && spec.repeated?.includes(name) !== true) {
      return { ok: false, error: `--${name} given more than once` };
    }
    list.push(value);
    values.set(name, list);
  }
  return { ok: true, values, booleans, positionals };
}

/** Where a command writes: its name and help, for usage errors. */
export interface CommandInfo {
  readonly name: string;
  readonly help: string;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

/** A usage error: the message and the command's help on standard error; exit status 2. */
export function usageError(cmd: CommandInfo, message: string): number {
  cmd.stderr.write(`sluice ${cmd.name}: ${message}\n\n${cmd.help}`);
  return 2;
}

/**
 * A command's flags, with `--help` and usage errors answered: the parsed flags, or the exit status to return now.
 * `positionals: false` makes any positional argument a usage error.
 */
export function commandArgs(
  cmd: CommandInfo,
  args: readonly string[],
  spec: FlagSpec & { readonly positionals: boolean },
): Extract<ParsedArgs, { ok: true }> | number {
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
