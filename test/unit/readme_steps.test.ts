/** The README test's reading of the README (test/support/readme.ts): markers, commands, and output matching. */
import { describe, expect, it } from "vitest";
import { outputDifference, readmeSteps } from "../support/readme.ts";

describe("readmeSteps", () => {
  it("reads marked blocks only, in order, with the line their content starts on", () => {
    const md = [
      "# Title",
      "```sh",
      "curl http://not-run",
      "```",
      "<!-- readme-test: file rules/mine.yaml -->",
      "```yaml",
      "- id: a",
      "```",
      "<!-- readme-test: run -->",
      "```sh",
      "# a comment",
      "npx sluice validate",
      "",
      "npx sluice gen --burst 2@0 \\",
      "  --out out/t.csv",
      "```",
      "<!-- readme-test: output -->",
      "```",
      "ok",
      "```",
    ].join("\n");
    expect(readmeSteps(md)).toEqual([
      { kind: "file", path: "rules/mine.yaml", text: "- id: a\n", line: 7 },
      { kind: "run", commands: ["npx sluice validate", "npx sluice gen --burst 2@0    --out out/t.csv"], line: 11 },
      { kind: "output", text: "ok\n", line: 19 },
    ]);
  });

  it.each([
    ["<!-- readme-test: run -->\ntext", "README.md:1: a readme-test marker must precede a fenced block"],
    ["<!-- readme-test: run -->\n```sh\nx", "README.md:2: the fenced block never ends"],
    ["<!-- readme-test: file -->\n```\nx\n```", 'README.md:1: "readme-test: file" needs a path'],
  ])("a broken marker is an error: %j", (md, message) => {
    expect(() => readmeSteps(md)).toThrow(message);
  });
});

describe("outputDifference", () => {
  it.each([
    ["a\nb\n", "a\nb\n", null],
    ["a\n...\nd\n", "a\nb\nc\nd\n", null],
    ["a\n...\n", "a\n", null],
    ["a\n...\nd\n", "a\nb\n", 'the lines after "..." differ'],
    ["a\nb\n", "a\nc\n", "line 2: the README shows\n  b\nbut the command printed\n  c"],
    ["a\nb\n", "a\n", "line 2: the README shows\n  b\nbut the command printed\n  (nothing)"],
    ["a\n", "a\nextra\n", "the command printed more: line 2 is\n  extra"],
  ])("%j against %j", (expected, actual, difference) => {
    expect(outputDifference(expected, actual)).toBe(difference);
  });
});
