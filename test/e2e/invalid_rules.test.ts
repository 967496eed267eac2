/**
 * Invalid rules stop everything that would ship them: `npm start` (scripts/start.mjs) and `wrangler deploy` (its
 * build command), each with the validator's messages. Run in a temporary copy of the project, so the working tree's
 * rules and generated module are never touched.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const copy = mkdtempSync(join(tmpdir(), "sluice-invalid-"));
for (const name of ["src", "bin", "scripts", "wrangler.toml", "package.json", "tsconfig.json"])
  cpSync(join(ROOT, name), join(copy, name), { recursive: true });
symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
rmSync(join(copy, "src", "generated"), { recursive: true, force: true }); // what a build from the valid rules left
mkdirSync(join(copy, "rules"));
writeFileSync(
  join(copy, "rules", "api.yaml"),
  "- id: free-global\n  match: { plan: free, identity: api_key }\n  algorithm: token_bucket\n  rate_per_s: 10\n  brust: 20\n",
);
afterAll(() => rmSync(copy, { recursive: true, force: true }));

// One typo, one message: the did-you-mean, not also "burst: required for token_bucket".
const EXPECTED = ['rules/api.yaml: free-global.brust: unknown key; did you mean "burst"?', "1 problem found"];
const env = { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" };

describe("invalid rules", () => {
  it("stop `npm start` before wrangler dev starts", () => {
    const run = spawnSync(process.execPath, ["scripts/start.mjs"], {
      cwd: copy,
      encoding: "utf8",
      env,
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    for (const line of EXPECTED) expect(run.stderr).toContain(line);
  });

  it("stop `wrangler deploy` (its build step), and nothing is built", () => {
    const run = spawnSync(join(copy, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "--outdir", "dist"], {
      cwd: copy,
      encoding: "utf8",
      env,
      timeout: 60_000,
    });
    expect(run.status).not.toBe(0);
    for (const line of EXPECTED) expect(`${run.stdout}${run.stderr}`).toContain(line);
    expect(existsSync(join(copy, "dist", "index.js"))).toBe(false);
    expect(existsSync(join(copy, "src", "generated", "rules.ts"))).toBe(false);
  });
});
