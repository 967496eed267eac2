/**
 * The README, followed as a newcomer would, in a fresh copy of the project with the shipped rules: every marked
 * step (test/support/readme.ts; the first rule among them) is taken and every marked command run, and what each
 * prints must be what the README shows. Then, with the reader's own rule in rules/, the rule checks and the unit
 * tests that read rules pass: a user's rules never break the project's tests. `npm run test:own-rules` runs the
 * whole unit suite there instead (minutes; not part of npm test).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { outputDifference, readmeSteps } from "../support/readme.ts";
import { OFFLINE_ENV, ROOT } from "../support/wrangler_dev.ts";

const steps = readmeSteps(readFileSync(join(ROOT, "README.md"), "utf8"));

/** A copy of the project's tracked files, its rules/ the shipped example, committed (so `--from HEAD` works). */
function freshCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-readme-"));
  const files = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" }).split("\0");
  for (const file of files) {
    if (file === "" || file.startsWith("rules/")) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(ROOT, file), join(dir, file));
  }
  cpSync(join(ROOT, "test", "fixtures", "shipped"), join(dir, "rules"), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: dir });
  git("init", "--quiet");
  git("add", "--all");
  git("commit", "--quiet", "-m", "fresh clone");
  return dir;
}

const dir = freshCopy();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sh = (command: string) =>
  spawnSync("sh", ["-c", `${command} 2>&1`], { cwd: dir, encoding: "utf8", env: { ...process.env, ...OFFLINE_ENV } });

describe("the README, followed step by step in a fresh copy", () => {
  it("has steps to follow: a file to write, commands and their output", () => {
    expect(steps.map((s) => s.kind)).toContain("file");
    expect(steps.filter((s) => s.kind === "output").length).toBeGreaterThanOrEqual(2);
  });

  // One test per step, in order: a later step sees what the earlier ones wrote.
  let printed = "";
  for (const step of steps) {
    const title =
      step.kind === "file"
        ? `README.md:${step.line}: write ${step.path}`
        : step.kind === "run"
          ? `README.md:${step.line}: ${step.commands.join(" && ")}`
          : `README.md:${step.line}: prints what the README shows`;
    it(title, () => {
      if (step.kind === "file") {
        mkdirSync(dirname(join(dir, step.path)), { recursive: true });
        writeFileSync(join(dir, step.path), step.text);
      } else if (step.kind === "run") {
        printed = "";
        for (const command of step.commands) {
          const r = sh(command);
          printed += r.stdout;
          expect(r.status, `${command}\n${r.stdout}`).toBe(0);
        }
      } else {
        expect(outputDifference(step.text, printed), `README.md:${step.line}\n${printed}`).toBeNull();
      }
    });
  }

  it("with the reader's own rule in rules/, the rules compile and the tests that read rules pass", () => {
    const compiled = sh("node bin/sluice.mjs compile");
    expect(compiled.status, compiled.stdout).toBe(0);
    const suite =
      process.env.SLUICE_OWN_RULES_FULL === "1"
        ? []
        : [
            "test/unit/rules.test.ts",
            "test/unit/cli.simulate.test.ts",
            "test/unit/cli.typos.test.ts",
            "test/unit/compare.test.ts",
            "test/unit/deploy_plan.test.ts",
            "test/unit/docs_rules.test.ts",
          ];
    // vitest runs nothing for a file name that matches no file (plan.test.ts was renamed once, unnoticed).
    for (const file of suite) expect(existsSync(join(dir, file)), file).toBe(true);
    const unit = sh(`npx vitest run --config vitest.unit.config.ts ${suite.join(" ")}`);
    expect(unit.status, unit.stdout.slice(-5000)).toBe(0);
  }, 900_000);
});
