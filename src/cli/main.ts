/** `sluice <command>`: the command-line entry. Each command returns its exit status; nothing here calls exit(). */
import { runCompile } from "./compile.ts";
import { runSimulate } from "./simulate.ts";
import { runValidate } from "./validate.ts";

export interface Io {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: NodeJS.ReadableStream;
}

const USAGE = `Usage: sluice <command> [options]

Commands:
  simulate   run one rule over a trace (CSV t_ms,key,cost) and print one JSON decision per line
  validate   check rule files and print a summary (default: rules/)
  compile    validate rules/ and write the resolved rules the Worker is built with
  compare    run several rules over one trace and print a table (and an SVG with --svg)
  gen        write a synthetic trace

Run "sluice <command> --help" for a command's options.
`;

type Command = (args: string[], io: Io) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  simulate: runSimulate,
  validate: runValidate,
  compile: runCompile,
};

/** Register an extra command (used by modules that add commands without touching this file's table). */
export function registerCommand(name: string, command: Command): void {
  COMMANDS[name] = command;
}

export async function main(argv: string[], io: Io = process): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    (name === undefined ? io.stderr : io.stdout).write(USAGE);
    return name === undefined ? 2 : 0;
  }
  await loadOptionalCommands();
  const command = COMMANDS[name];
  if (command === undefined) {
    io.stderr.write(`sluice: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  return command(rest, io);
}

async function loadOptionalCommands(): Promise<void> {
  const extra = await import("./commands.ts");
  for (const [n, c] of Object.entries(extra.EXTRA_COMMANDS)) registerCommand(n, c);
}
