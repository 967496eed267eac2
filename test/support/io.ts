/** An in-memory Io for running CLI commands in process. */
import { PassThrough, Readable } from "node:stream";
import type { Io } from "../../src/cli/io.ts";
import { main } from "../../src/cli/main.ts";

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export async function runCli(args: string[], stdinText = ""): Promise<RunResult> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: string[] = [];
  const err: string[] = [];
  stdout.on("data", (c: Buffer) => out.push(c.toString("utf8")));
  stderr.on("data", (c: Buffer) => err.push(c.toString("utf8")));
  const io: Io = { stdout, stderr, stdin: Readable.from([stdinText]) };
  const code = await main(args, io);
  stdout.end();
  stderr.end();
  await new Promise((r) => setImmediate(r));
  return { code, stdout: out.join(""), stderr: err.join("") };
}
