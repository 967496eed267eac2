/** An in-memory Io for running CLI commands in process. */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

/**
 * Runs `bin/sluice.mjs` as a child process in `cwd` (a scratch folder with a rules/ of the test's own), for what
 * depends on the working directory: the default `--rules rules/`, git refs.
 */
export function runCliIn(cwd: string, args: string[], stdinText = ""): RunResult {
  const sluice = join(import.meta.dirname, "..", "..", "bin", "sluice.mjs");
  const r = spawnSync(process.execPath, [sluice, ...args], { cwd, input: stdinText, encoding: "utf8" });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** A scratch folder holding rules/ with `files` (name -> YAML). */
export function scratchRules(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-cwd-"));
  mkdirSync(join(dir, "rules"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, "rules", name), text);
  return dir;
}
