/** `sluice <command>`: the command-line entry. Each command returns its exit status; nothing here calls exit(). */
import { EXIT_CODES } from "./args.ts";
import { COMMANDS } from "./commands.ts";
import type { Io } from "./io.ts";

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `Usage: sluice <command> [options]

Commands:
${lines.join("\n")}

Every command that reads rules takes --rules PATH (a YAML file or a directory of them; repeatable; default rules/).
Run "sluice <command> --help" for a command's options.
${EXIT_CODES}(sluice simulate also exits 2 for invalid rules and malformed trace lines, as docs/rules.md requires.)
`;
}

export async function main(argv: string[], io: Io = process): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    (name === undefined ? io.stderr : io.stdout).write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    io.stderr.write(`sluice: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return command.run(rest, io);
}
