/** `sluice simulate`, `validate` and `compile` through the CLI entry, in process. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { EXIT_CODES } from "../../src/cli/args.ts";
import { COMMANDS } from "../../src/cli/commands.ts";
import { rulesVersion, runCompile } from "../../src/cli/compile.ts";
import { runCli, runCliIn, scratchRules } from "../support/io.ts";

const RULES = "test/fixtures/cli/rules.yaml";
const sim = (trace: string, ...extra: string[]) =>
  runCli(["simulate", "--rules", RULES, "--rule", "tb", ...extra], trace);
const lines = (s: string) => s.trimEnd().split("\n");

describe("sluice simulate", () => {
  it("prints one JSON object per input line, in input order, in the field order the README shows", async () => {
    const r = await sim("t_ms,key,cost\n0,a,1\n0,b\n0,a,19\n0,a\n");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(lines(r.stdout)).toEqual([
      '{"t_ms":0,"key":"a","cost":1,"allowed":true,"remaining":19,"reset_after_ms":100,"retry_after_ms":null,"delay_ms":0}',
      '{"t_ms":0,"key":"b","cost":1,"allowed":true,"remaining":19,"reset_after_ms":100,"retry_after_ms":null,"delay_ms":0}',
      '{"t_ms":0,"key":"a","cost":19,"allowed":true,"remaining":0,"reset_after_ms":2000,"retry_after_ms":null,"delay_ms":0}',
      '{"t_ms":0,"key":"a","cost":1,"allowed":false,"remaining":0,"reset_after_ms":2000,"retry_after_ms":100,"delay_ms":0}',
    ]);
  });

  it("reports an impossible cost as an error line and goes on", async () => {
    const r = await sim("0,a,50\n0,a\n");
    expect(lines(r.stdout)).toEqual([
      '{"t_ms":0,"key":"a","cost":50,"error":"cost_exceeds_capacity"}',
      '{"t_ms":0,"key":"a","cost":1,"allowed":true,"remaining":19,"reset_after_ms":100,"retry_after_ms":null,"delay_ms":0}',
    ]);
  });

  it("reads --trace from a file, accepts CRLF and JSON-escapes keys", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-"));
    const trace = join(dir, "t.csv");
    writeFileSync(trace, '0,say "hi"\\\r\n');
    const r = await runCli(["simulate", "--rules", RULES, "--rule", "tb", "--trace", trace]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).key).toBe('say "hi"\\');
  });

  it("leaky_queue reports delay_ms", async () => {
    const r = await runCli(["simulate", "--rules", RULES, "--rule", "queue"], "0,k\n0,k\n0,k\n");
    expect(lines(r.stdout).map((l) => JSON.parse(l).delay_ms)).toEqual([0, 100, 200]);
  });

  it("t_ms may go backwards for a key: the later clock still rules", async () => {
    const r = await sim(`${"1000,a\n".repeat(20)}0,a\n`);
    expect(JSON.parse(lines(r.stdout)[20]!)).toMatchObject({ allowed: false, retry_after_ms: 100 });
  });

  it.each([
    ["a non-integer time", "0,a\nx,a\n", '<stdin>:2: t_ms must be an integer number of milliseconds, got "x"'],
    ["a zero cost", "0,a\n0,a,0\n", "<stdin>:2: cost must be a positive integer, got 0"],
    ["a fractional cost", "0,a,1.5\n", '<stdin>:1: cost must be a positive integer, got "1.5"'],
    ["a missing key field", "0\n", '<stdin>:1: expected "t_ms,key[,cost]", got "0"'],
    ["too many fields", "0,a,1,2\n", '<stdin>:1: too many fields (keys may not contain commas): "0,a,1,2"'],
    ["a negative time", "-5,a\n", "<stdin>:1: t_ms must be between 0 and 8640000000000000, got -5"],
  ])("%s: message with file and line, exit 2, nothing after", async (_name, trace, message) => {
    const r = await sim(`${trace}0,z\n`);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${message}\n`);
    expect(r.stdout).not.toContain('"key":"z"');
  });

  it("an unknown rule id: exit 2, names the file and the rules it has", async () => {
    const r = await runCli(["simulate", "--rules", RULES, "--rule", "nope"], "0,a\n");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${RULES}: no rule with id "nope" (rules: tb, queue)\n`);
    expect(r.stdout).toBe("");
  });

  it("an invalid rules file: exit 2 with the validator's message", async () => {
    const r = await runCli(["simulate", "--rules", "test/fixtures/cli/bad.yaml", "--rule", "tb"], "0,a\n");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("test/fixtures/cli/bad.yaml: tb.burst:");
    expect(r.stdout).toBe("");
  });

  it("a missing trace file: exit 2", async () => {
    const r = await sim("", "--trace", "/nonexistent/trace.csv");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("/nonexistent/trace.csv: cannot read trace:");
  });

  it("unknown flags and missing options are usage errors (exit 2); --help exits 0", async () => {
    expect((await runCli(["simulate", "--rules", RULES, "--rule", "tb", "--fast"])).stderr).toContain(
      "unknown option --fast",
    );
    expect((await runCli(["simulate", "--rule", "tb"])).code).toBe(2);
    const help = await runCli(["simulate", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(
      "Usage: sluice simulate [--rules PATH]... [--rule RULE_ID] [--trace FILE] [--accounts FILE.json]",
    );
    expect((await runCli(["frobnicate"])).code).toBe(2);
  });
});

describe("sluice validate", () => {
  it("a valid file: one summary line, exit 0", async () => {
    const r = await runCli(["validate", RULES]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${RULES}: 2 rules ok: token_bucket 1, leaky_queue 1; on_error (default open) open 2\n`);
  });
  it("an invalid file: every problem on stderr, exit 1", async () => {
    const r = await runCli(["validate", "test/fixtures/cli/bad.yaml"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^test\/fixtures\/cli\/bad\.yaml: tb\.burst: .*\n1 problem found\n$/);
  });
  it("the shipped example validates", async () => {
    const r = await runCli(["validate", "test/fixtures/shipped"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^test\/fixtures\/shipped\/shiplane\.yaml: \d+ rules ok: /);
  });
});

describe("sluice compile", () => {
  it("writes the resolved rules as a module, and nothing when the rules are invalid", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-"));
    const out = join(dir, "rules.ts");
    const ok = await runCli(["compile", "--rules", RULES, "--out", out]);
    expect(ok.code).toBe(0);
    const text = readFileSync(out, "utf8");
    expect(text).toContain('"id": "tb"');
    expect(text).toContain("export const RULES: readonly ResolvedRule[] =");
    const bad = await runCli(["compile", "--rules", "test/fixtures/cli/bad.yaml", "--out", join(dir, "x.ts")]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("nothing written");
    const unwritable = await runCli(["compile", "--rules", RULES, "--out", `${RULES}/rules.ts`]);
    expect(unwritable.code).toBe(1);
    expect(unwritable.stderr).toContain(`sluice compile: cannot write ${RULES}/rules.ts:`);
  });

  it("--watching (and wrangler dev's WRANGLER_COMMAND=dev): invalid rules keep the last valid module, exit 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-"));
    const out = join(dir, "rules.ts");
    const bad = "test/fixtures/cli/bad.yaml";
    const none = await runCli(["compile", "--watching", "--rules", bad, "--out", out]);
    expect(none.code).toBe(1); // nothing valid to keep serving
    expect((await runCli(["compile", "--rules", RULES, "--out", out])).code).toBe(0);
    const lastValid = readFileSync(out, "utf8");
    const kept = await runCli(["compile", "--watching", "--rules", bad, "--out", out]);
    expect(kept.code).toBe(0);
    expect(kept.stdout).toBe("");
    expect(kept.stderr).toMatch(
      new RegExp(
        `^sluice: the rules are invalid; still serving the last valid ones \\(${out}\\) until they are fixed:\n${bad}: tb\\.burst: .*\n$`,
      ),
    );
    expect(readFileSync(out, "utf8")).toBe(lastValid);
    const io = { stdout: new PassThrough(), stderr: new PassThrough(), stdin: Readable.from([""]) };
    expect(await runCompile(["--rules", bad, "--out", out], io, { WRANGLER_COMMAND: "dev" })).toBe(0);
    expect(await runCompile(["--rules", bad, "--out", out], io, { WRANGLER_COMMAND: "deploy" })).toBe(1);
  });
});

describe("the rules version sluice compile stamps", () => {
  const rules = "export const RULES: readonly ResolvedRule[] = [];\n";
  const module = (version: number, text = rules) => `// header\nexport const RULES_VERSION = ${version};\n\n${text}`;

  it("keeps the version while the rules are unchanged, and moves it forward (never back) when they change", () => {
    expect(rulesVersion("", rules, undefined, 1_000)).toBe(1_000);
    expect(rulesVersion(module(1_000), rules, undefined, 5_000)).toBe(1_000);
    expect(rulesVersion(module(1_000), "export const RULES = [1];\n", undefined, 5_000)).toBe(5_000);
    // A build clock behind the last version still moves forward.
    expect(rulesVersion(module(9_000), "export const RULES = [1];\n", undefined, 5_000)).toBe(9_001);
  });

  it("takes SLUICE_RULES_VERSION when set, and refuses one that is not a non-negative integer", () => {
    expect(rulesVersion(module(1_000), rules, "42", 5_000)).toBe(42);
    expect(rulesVersion("", rules, "-1", 5_000)).toBe(
      'sluice compile: SLUICE_RULES_VERSION must be a non-negative integer, got "-1"',
    );
  });

  it("is written into the module", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-"));
    const out = join(dir, "rules.ts");
    expect((await runCli(["compile", "--rules", RULES, "--out", out])).code).toBe(0);
    const first = /RULES_VERSION = (\d+);/.exec(readFileSync(out, "utf8"))![1];
    expect((await runCli(["compile", "--rules", RULES, "--out", out])).code).toBe(0);
    expect(/RULES_VERSION = (\d+);/.exec(readFileSync(out, "utf8"))![1]).toBe(first);
  });
});

describe("one dialect across commands", () => {
  it("validate takes --rules as well as bare paths", async () => {
    const flag = await runCli(["validate", "--rules", RULES]);
    expect(flag.code).toBe(0);
    expect(flag.stdout).toBe((await runCli(["validate", RULES])).stdout);
  });

  it("simulate takes a directory in --rules, and defaults to rules/", async () => {
    const dir = await runCli(["simulate", "--rules", "test/fixtures/cli/", "--rule", "tb"], "0,a\n");
    // The fixture directory also holds bad.yaml, so loading it all is invalid rules: exit 2 (the simulator contract).
    expect(dir.code).toBe(2);
    expect(dir.stderr).toContain("test/fixtures/cli/bad.yaml: tb.burst:");
    const cwd = scratchRules({ "api.yaml": readFileSync(RULES, "utf8") });
    const shipped = runCliIn(cwd, ["simulate", "--rule", "tb"], "0,a\n");
    expect(shipped.code).toBe(0);
    expect(JSON.parse(shipped.stdout)).toMatchObject({ allowed: true, remaining: 19 });
  });

  it.each(COMMANDS.map((c) => c.name))("%s --help states the exit codes", async (name) => {
    const r = await runCli([name, "--help"]);
    expect(r.code).toBe(0);
    // simulate words its exception (exit 2 for bad input too); every other command prints the convention as is.
    if (name === "simulate") expect(r.stdout).toMatch(/Exit status: 0 success; .*2/s);
    else expect(r.stdout).toContain(EXIT_CODES);
  });

  it("sluice --help lists every command of the table", async () => {
    const r = await runCli(["--help"]);
    expect(COMMANDS.map((c) => c.name)).toEqual([
      "validate",
      "compile",
      "simulate",
      "compare",
      "gen",
      "trace",
      "accounts",
      "import",
      "plan",
    ]);
    for (const { name } of COMMANDS) expect(r.stdout).toContain(`  ${name} `);
    expect(r.stdout).toContain("Exit status: 0 success; 1 invalid rules or invalid input");
  });

  it.each([
    [["validate", "--rules"], "sluice validate: --rules needs a value"],
    [["validate", "--help=yes"], "sluice validate: --help takes no value"],
    [["compile", "--out", "a", "--out", "b"], "sluice compile: --out given more than once"],
    [["simulate", "-x"], "sluice simulate: unknown option -x"],
  ])("%j is a usage error: %s", async (args, message) => {
    const r = await runCli(args);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe(message);
  });
});
