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
