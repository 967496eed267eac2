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
