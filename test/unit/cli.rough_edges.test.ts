/**
 * The command line's rough edges a user trips on: a command waiting on a terminal says so, a closed pipe ends the
 * output quietly, and `accounts --limit` answers an unknown rule id as a usage error (exit 2) and a nested field as
 * what it is.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { runCli } from "../support/io.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const SHIPPED = "test/fixtures/shipped";

/** Runs a command with a standard input that says it is a terminal, holding `text`. */
async function onTerminal(args: string[], text: string) {
  const stdin = Readable.from([text]) as Readable & { isTTY?: boolean };
  stdin.isTTY = true;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const err: string[] = [];
  stderr.on("data", (c: Buffer) => err.push(c.toString("utf8")));
  stdout.resume();
  const code = await main(args, { stdin, stdout, stderr });
  return { code, stderr: err.join("") };
}

describe("a command reading a trace from a terminal says so", () => {
  it.each([
    ["simulate", ["simulate", "--rules", SHIPPED, "--rule", "free-global"]],
    ["compare", ["compare", "--rules", SHIPPED, "--rule", "free-global"]],
    ["compare --svg", ["compare", "--rules", SHIPPED, "--rule", "free-global", "--svg", "/dev/null"]],
  ])("%s", async (_name, args) => {
    const r = await onTerminal(args, "0,k\n");
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("reading a trace from standard input, Ctrl-D to end (or give --trace FILE)");
  });

  it("and says nothing when standard input is a pipe", async () => {
    const r = await runCli(["simulate", "--rules", SHIPPED, "--rule", "free-global"], "0,k\n");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
  });
});

describe("a reader that stops early", () => {
  it("ends the output quietly: no EPIPE stack trace", () => {
    const r = spawnSync("sh", ["-c", "node bin/sluice.mjs gen --constant 1000/s,0,100s | head -n 1"], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(r.stdout).toBe("t_ms,key,cost\n");
    expect(r.stderr).toBe("");
  });
});

describe("sluice accounts --limit", () => {
  const accounts = (...limits: string[]) =>
    runCli([
      "accounts",
      "--dry-run",
      "--rules",
      SHIPPED,
      "--key",
      "k",
      "--plan",
      "growth",
      ...limits.flatMap((l) => ["--limit", l]),
    ]);

  it("an unknown rule id is a usage error: exit 2, as --help says", async () => {
    const r = await accounts("nope.rate=5/s");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("--limit nope: no such rule is deployed\nnothing written\n");
  });

  it("a nested field is not 'no such rule': it says the rule has no such parameter, and which it has", async () => {
    const r = await accounts("growth-global.lease.units=5");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      '--limit growth-global.lease.units: "lease.units" is not a parameter of gcra (gcra takes rate_per_s or rate, and ' +
        "burst); --limit RULE.FIELD sets one of the rule's algorithm parameters for this account\nnothing written\n",
    );
  });
});
