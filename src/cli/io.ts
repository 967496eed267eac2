import { mkdirSync } from "node:fs";
import { dirname } from "node:path";

/** What every command is given and returns: its streams in, its exit status out. No command calls `exit()`. */
export interface Io {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: NodeJS.ReadableStream;
}

/** A command: its arguments (after the command's name) and streams in, its exit status out (see `EXIT_CODES`). */
export type Run = (args: string[], io: Io) => Promise<number>;

export interface Command {
  readonly name: string;
  /** One line for `sluice --help`. */
  readonly summary: string;
  readonly run: Run;
}

/** Creates the folder an output file goes to (`--out out/trace.csv` works in a fresh checkout); throws as a write would. */
export function makeParentFolder(path: string): void {
  mkdirSync(dirname(path), { recursive: true });
}

/**
 * On a terminal, say that a command is waiting for a trace on standard input (else it would wait in silence for a
 * user who forgot `--trace`). Nothing is said when standard input is a pipe or a file.
 */
export function sayReadingStdin(io: { stdin: NodeJS.ReadableStream; stderr: NodeJS.WritableStream }, label: string) {
  if ((io.stdin as { isTTY?: boolean }).isTTY === true)
    io.stderr.write(`${label}: reading a trace from standard input, Ctrl-D to end (or give --trace FILE)\n`);
}
