/**
 * Mistakes a user makes at the command line, each answered in a few lines that say what was meant: misspelt
 * commands, flags and rule ids ("did you mean"), a short usage line instead of the whole help, `--version`; YAML
 * mistakes with line and column, one problem per mistake; every malformed trace line in one run; a trace out of time
 * order.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "../../src/cli/commands.ts";
import { TOP_OPTIONS } from "../../src/cli/main.ts";
import { MAX_REPORTED_LINES } from "../../src/cli/trace.ts";
import { parseYaml } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

const RULES = "test/fixtures/cli/rules.yaml";

const COMMAND_TYPOS: readonly (readonly [string, string])[] = [
  ["simualte", "simulate"],
  ["valdiate", "validate"],
  ["validat", "validate"],
  ["comapre", "compare"],
  ["compil", "compile"],
  ["genn", "gen"],
  ["paln", "plan"],
  ["acounts", "accounts"],
  ["tarce", "trace"],
  ["improt", "import"],
  ["Simulate", "simulate"],
];

const OPTION_TYPOS: readonly (readonly [string, string])[] = [
  ["--verison", "--version"],
  ["--vresion", "--version"],
  ["--hepl", "--help"],
  ["--halp", "--help"],
];

const FLAG_TYPOS: readonly (readonly [string, string, string])[] = [
  ["simulate", "--rul", "--rule"],
  ["simulate", "--rulez", "--rules"],
  ["simulate", "--rlues", "--rules"],
  ["simulate", "--trce", "--trace"],
  ["simulate", "--tarce", "--trace"],
  ["compare", "--tracee", "--trace"],
  ["compare", "--sgv", "--svg"],
  ["compare", "--tiltle", "--title"],
  ["compare", "--frm", "--from"],
  ["plan", "--form", "--from"],
  ["plan", "--max-flip", "--max-flips"],
  ["plan", "--max_flips", "--max-flips"],
  ["gen", "--poison", "--poisson"],
  ["gen", "--seeed", "--seed"],
  ["gen", "--bursts", "--burst"],
  ["gen", "--constnat", "--constant"],
  ["validate", "--rule", "--rules"],
  ["compile", "--outt", "--out"],
  ["accounts", "--kye", "--key"],
  ["accounts", "--paln", "--plan"],
  ["accounts", "--dryrun", "--dry-run"],
  ["accounts", "--persist", "--persist-to"],
  ["trace", "--ot", "--out"],
  ["trace", "--fromat", "--format"],
  ["import", "--ot", "--out"],
  ["import", "--allow-partail", "--allow-partial"],
];

describe("the typo tables cover every command and top-level option", () => {
  it("every command has a misspelling case", () => {
    expect([...new Set(COMMAND_TYPOS.map(([, meant]) => meant))].sort()).toEqual(COMMANDS.map((c) => c.name).sort());
  });

  it("every command has a misspelt flag case", () => {
    expect([...new Set(FLAG_TYPOS.map(([command]) => command))].sort()).toEqual(COMMANDS.map((c) => c.name).sort());
  });

  it("every top-level option has a misspelling case, and sluice --help lists it", async () => {
    expect([...new Set(OPTION_TYPOS.map(([, meant]) => meant))].sort()).toEqual(
      TOP_OPTIONS.map((o) => `--${o.name}`).sort(),
    );
    const help = (await runCli(["--help"])).stdout;
    for (const o of TOP_OPTIONS) expect(help).toMatch(new RegExp(`^  --${o.name}, ${o.aliases[0]} +\\S`, "m"));
  });
});

describe("a misspelt command", () => {
  it.each(COMMAND_TYPOS)("%s: did you mean %s?", async (typo, meant) => {
    const r = await runCli([typo]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines[0]).toBe(`sluice: unknown command "${typo}"; did you mean ${meant}?`);
    expect(lines[1]).toMatch(/^Usage: sluice <command> \[options\], one of: validate, compile, /);
    expect(lines[2]).toBe('Run "sluice --help" for what each does.');
    expect(lines).toHaveLength(3);
  });

  it("a word near no command gets no guess", async () => {
    const r = await runCli(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe('sluice: unknown command "frobnicate"');
  });
});

describe("--version and the top-level options", () => {
  const version = (JSON.parse(readFileSync("package.json", "utf8")) as { version: string }).version;
  it.each([["--version"], ["-v"], ["version"]])("%s prints the version", async (flag) => {
    const r = await runCli([flag]);
    expect(r).toEqual({ code: 0, stdout: `sluice ${version}\n`, stderr: "" });
  });

  it.each(OPTION_TYPOS)("%s: did you mean %s?", async (typo, meant) => {
    const r = await runCli([typo]);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe(`sluice: unknown option "${typo}"; did you mean ${meant}?`);
  });
});

describe("a misspelt flag: one line that says what was meant, the usage line, and where the help is", () => {
  it.each(FLAG_TYPOS)("sluice %s %s: did you mean %s?", async (command, typo, meant) => {
    const r = await runCli([command, typo, "x"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines[0]).toBe(`sluice ${command}: unknown option ${typo}; did you mean ${meant}?`);
    expect(lines[1]).toMatch(new RegExp(`^Usage: sluice ${command}\\b`));
    expect(lines.at(-1)).toBe(`Run "sluice ${command} --help" for every option.`);
    expect(lines.length).toBeLessThanOrEqual(4);
  });

  it("a flag near none gets no guess, and still no more than the usage line", async () => {
    const r = await runCli(["simulate", "--frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split("\n")).toEqual([
      "sluice simulate: unknown option --frobnicate",
      "Usage: sluice simulate [--rules PATH]... [--rule RULE_ID] [--trace FILE] [--accounts FILE.json]",
      'Run "sluice simulate --help" for every option.',
    ]);
  });

  it("a missing flag value is a short usage error too", async () => {
    const r = await runCli(["simulate", "--rule"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(3);
    expect(r.stderr).toContain("--rule needs a value");
  });
});

describe("a misspelt rule id", () => {
  it.each([
    ["simulate", "tbb", "tb"],
    ["simulate", "queu", "queue"],
    ["compare", "qeueu", "queue"],
  ])("sluice %s --rule %s: did you mean %s?", async (command, typo, meant) => {
    const r = await runCli([command, "--rules", RULES, "--rule", typo], "0,a\n");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`no rule with id "${typo}"; did you mean "${meant}"? (rules: tb, queue)`);
  });
});

describe("YAML mistakes: line and column, one problem per mistake", () => {
  const RULE = "- id: a\n  match: { identity: api_key }\n  algorithm: gcra\n  rate: 5/s\n  burst: 10\n";
  it.each([
    {
      mistake: "a tab before a key",
      text: RULE.replace("  algorithm", "\talgorithm"),
      errors: ["f.yaml:3:1: a tab in the indentation; YAML indents with spaces only"],
    },
    {
      mistake: "a tab after spaces",
      text: RULE.replace("  rate", " \trate"),
      errors: ["f.yaml:4:2: a tab in the indentation; YAML indents with spaces only"],
    },
    {
      mistake: "two tabbed lines",
      text: RULE.replace("  rate", "\trate").replace("  burst", "\tburst"),
      errors: [
        "f.yaml:4:1: a tab in the indentation; YAML indents with spaces only",
        "f.yaml:5:1: a tab in the indentation; YAML indents with spaces only",
      ],
    },
    {
      mistake: "an unclosed flow map",
      text: RULE.replace("api_key }", "api_key"),
      errors: ['f.yaml:2:10: "{" is never closed'],
    },
    {
      mistake: "an unclosed flow sequence",
      text: RULE.replace("{ identity: api_key }", "{ identity: api_key, plan: [free, growth }"),
      errors: ['f.yaml:2:37: "[" is never closed'],
    },
    {
      mistake: "a line indented too deep",
      text: RULE.replace("  rate", "     rate").replace("algorithm: gcra", "algorithm: gcra"),
      errors: ["f.yaml:4:1: indented deeper than line 3, whose key already has a value"],
    },
    {
      mistake: "a missing colon",
      text: RULE.replace("algorithm: gcra", "algorithm gcra"),
      errors: ['f.yaml:3:3: expected "key: value" (is a colon missing?)'],
    },
    {
      // Pasted from a document: it looks like a space and is a word character to YAML.
      mistake: "a no-break space after a colon",
      text: RULE.replace("algorithm: gcra", "algorithm:\u00a0gcra"),
      errors: ["f.yaml:3:13: a no-break space (U+00A0) where YAML needs a plain space (U+0020)"],
    },
    {
      mistake: "a byte-order mark at the start is fine",
      text: `\ufeff${RULE}`,
      errors: [],
    },
    {
      mistake: "two duplicate keys",
      text: `${RULE}  burst: 11\n  rate: 6/s\n`,
      errors: ["f.yaml:6:3: Map keys must be unique", "f.yaml:7:3: Map keys must be unique"],
    },
    {
      mistake: "a tab inside a value is no mistake",
      text: RULE.replace("- id: a", "- id: a # a\tcomment"),
      errors: [],
    },
  ])("$mistake", ({ text, errors }) => {
    const parsed = parseYaml(text, "f.yaml");
    expect("errors" in parsed ? parsed.errors : []).toEqual(errors);
  });
});

describe("a trace with mistakes", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-typos-"));
  const bad = join(dir, "bad.csv");
  writeFileSync(bad, "t_ms,key,cost\n0,a\nsoon,a\n5,b\n7\n8,c,0\n9,c\n");
  const BAD_LINES = [
    `${bad}:3: t_ms must be an integer number of milliseconds, got "soon"`,
    `${bad}:5: expected "t_ms,key[,cost]", got "7"`,
    `${bad}:6: cost must be a positive integer, got 0`,
  ];

  it.each([
    ["compare", ["compare", "--rules", RULES, "--trace", bad], 1],
    ["plan", ["plan", "--from", RULES, "--to", RULES, "--trace", bad], 1],
    ["simulate", ["simulate", "--rules", RULES, "--rule", "tb", "--trace", bad], 2],
  ] as const)("%s reports every malformed line with its number, in one run", async (_name, args, code) => {
    const r = await runCli([...args]);
    expect(r.code).toBe(code);
    expect(r.stderr.trimEnd().split("\n")).toEqual(BAD_LINES);
  });

  it("simulate prints nothing for the lines after the first malformed one", async () => {
    const r = await runCli(["simulate", "--rules", RULES, "--rule", "tb", "--trace", bad]);
    expect(
      r.stdout
        .trimEnd()
        .split("\n")
        .map((l) => (JSON.parse(l) as { t_ms: number }).t_ms),
    ).toEqual([0]);
  });

  it("a first line that is no trace it reads says what it reads, and how to make a trace of a log", async () => {
    // An NGINX log in a log_format of its own was read as a t_ms,key,cost trace: "--rule RULE_ID is required".
    const log = join(dir, "access.log");
    writeFileSync(log, '127.0.0.1 - [05/Dec/2026:09:18:21 +0000] "GET /v1/a HTTP/1.1" 200 1796462301.337 0.000\n');
    const r = await runCli(["simulate", "--rules", RULES, "--trace", log]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${log}:1: not a trace this reads:`);
    expect(r.stderr).toContain("sluice trace from nginx LOG --conf nginx.conf");
    expect(r.stderr).not.toContain("--rule RULE_ID is required");
  });

  it(`stops after ${MAX_REPORTED_LINES} malformed lines, and says so`, async () => {
    const many = join(dir, "many.csv");
    writeFileSync(many, "-1,k\n".repeat(MAX_REPORTED_LINES + 5));
    const r = await runCli(["compare", "--rules", RULES, "--trace", many]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(MAX_REPORTED_LINES + 1);
    expect(lines[0]).toBe(`${many}:1: t_ms must be between 0 and 8640000000000000, got -1`);
    expect(lines.at(-1)).toBe(`${many}: stopped at line ${MAX_REPORTED_LINES + 1}, after 20 malformed lines`);
  });

  it.each([
    ["compare", ["compare", "--rules", RULES]],
    ["plan", ["plan", "--from", RULES, "--to", RULES, "--trace", "-"]],
    ["simulate", ["simulate", "--rules", RULES, "--rule", "tb"]],
  ])("%s warns once about lines out of time order, and runs them", async (_name, args) => {
    const r = await runCli(args, "0,a\n500,a\n100,b\n600,a\n200,a\n");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(
      "<stdin>: warning: 2 lines go back in time (first at line 3: 100 after 500); a trace is replayed in file order, each key at the latest time seen for it\n",
    );
  });

  it("a trace in order gets no warning", async () => {
    const r = await runCli(["compare", "--rules", RULES], "0,a\n0,b\n100,a\n");
    expect(r.stderr).toBe("");
  });
});
