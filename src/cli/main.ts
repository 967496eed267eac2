/** `sluice <command>`: the command-line entry. Each command returns its exit status; nothing here calls exit(). */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_CODES, nearest } from "./args.ts";
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

/** The version in package.json. */
export function version(): string {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "package.json"), "utf8")) as {
    version: string;
  };
  return pkg.version;
}

export async function main(argv: string[], io: Io = process): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    (name === undefined ? io.stderr : io.stdout).write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v" || name === "version") {
    io.stdout.write(`sluice ${version()}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    const names = COMMANDS.map((c) => c.name);
    const guess = nearest(name.replace(/^-+/, ""), name.startsWith("-") ? ["help", "version"] : names);
    const what = name.startsWith("-") ? "option" : "command";
    const hint = guess === null ? "" : `; did you mean ${name.startsWith("-") ? "--" : ""}${guess}?`;
    io.stderr.write(
      `sluice: unknown ${what} ${JSON.stringify(name)}${hint}\nUsage: sluice <command> [options], one of: ${names.join(", ")}\nRun "sluice --help" for what each does.\n`,
    );
    return 2;
  }
  return command.run(rest, io);
}
