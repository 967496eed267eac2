/** `sluice <command>`: the command-line entry. Each command returns its exit status; nothing here calls exit(). */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EXIT_CODES, nearest } from "./args.ts";
import { COMMANDS } from "./commands.ts";
import type { Io } from "./io.ts";

/** The options `sluice` takes before (or instead of) a command: what `--help` lists and a typo is matched against. */
export const TOP_OPTIONS: readonly {
  readonly name: string;
  readonly aliases: readonly string[];
  readonly summary: string;
}[] = [
  { name: "help", aliases: ["-h", "help"], summary: "print this help" },
  { name: "version", aliases: ["-v", "version"], summary: "print the version (from package.json)" },
];

function usage(): string {
  const options = TOP_OPTIONS.map((o) => [`--${o.name}, ${o.aliases[0]}`, o.summary] as const);
  const width = Math.max(...COMMANDS.map((c) => c.name.length), ...options.map(([flags]) => flags.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return `Usage: sluice <command> [options]
       sluice --help | --version

Commands:
${lines.join("\n")}

Options:
${options.map(([flags, summary]) => `  ${flags.padEnd(width)}  ${summary}`).join("\n")}

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
  const option = TOP_OPTIONS.find((o) => name === `--${o.name}` || o.aliases.includes(name ?? ""));
  if (name === undefined || option?.name === "help") {
    (name === undefined ? io.stderr : io.stdout).write(usage());
    return name === undefined ? 2 : 0;
  }
  if (option?.name === "version") {
    io.stdout.write(`sluice ${version()}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    const names = COMMANDS.map((c) => c.name);
    const guess = nearest(name.replace(/^-+/, ""), name.startsWith("-") ? TOP_OPTIONS.map((o) => o.name) : names);
    const what = name.startsWith("-") ? "option" : "command";
    const hint = guess === null ? "" : `; did you mean ${name.startsWith("-") ? "--" : ""}${guess}?`;
    io.stderr.write(
      `sluice: unknown ${what} ${JSON.stringify(name)}${hint}\nUsage: sluice <command> [options], one of: ${names.join(", ")}\nRun "sluice --help" for what each does.\n`,
    );
    return 2;
  }
  return command.run(rest, io);
}
