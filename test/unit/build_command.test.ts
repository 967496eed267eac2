/**
 * wrangler.toml's build command, run as wrangler runs it (`sh -c`, in the folder wrangler started in): from the
 * checkout, from a folder inside it (a consumer Worker beside Sluice in one `wrangler dev`, two `-c`), from anywhere
 * with SLUICE_DIR, and a clear message (no stack) from a folder that has no checkout above it.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { projectCopy, shippedRules } from "../support/wrangler_dev.ts";

const copy = projectCopy("sluice-build-", shippedRules());
const outside = mkdtempSync(join(tmpdir(), "sluice-elsewhere-"));
afterAll(() => {
  rmSync(copy, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

/** The command as wrangler.toml spells it (a TOML literal string: no escapes). */
const command = /^command = '(.*)'$/m.exec(readFileSync(join(copy, "wrangler.toml"), "utf8"))?.[1];

function build(cwd: string, env: Record<string, string> = {}) {
  const { SLUICE_DIR: _, ...rest } = process.env;
  return spawnSync("sh", ["-c", command!], { cwd, env: { ...rest, ...env }, encoding: "utf8" });
}

describe("the build command", () => {
  it("is a literal string", () => expect(command).toBeDefined());

  it.each([
    ["the checkout", ""],
    ["a consumer's folder inside it", "examples/hono-api"],
  ])("compiles the checkout's rules from %s", (_name, sub) => {
    const cwd = join(copy, sub);
    mkdirSync(cwd, { recursive: true });
    const r = build(cwd);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("wrote src/generated/rules.ts");
  });

  it("from a folder outside the checkout: with SLUICE_DIR it compiles; without, one line says what to do", () => {
    const found = build(outside, { SLUICE_DIR: copy });
    expect(found.status).toBe(0);
    const lost = build(outside);
    expect(lost.status).toBe(1);
    expect(lost.stderr).toBe(
      `sluice: no bin/sluice.mjs in ${outside} or above it: start wrangler inside the Sluice checkout, or set ` +
        "SLUICE_DIR to it\n",
    );
  });
});
