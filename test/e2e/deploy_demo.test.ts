/**
 * "Deploy to Cloudflare" ships the user's rules, never the demo's by mistake: `wrangler deploy` (its build step,
 * `sluice compile` under WRANGLER_COMMAND=deploy) refuses a rule file marked `# sluice: demo` (rules/shiplane.yaml),
 * even beside the user's own rules, and builds once the demo is gone. `npm start` and `wrangler dev` still serve it.
 */
import { spawnSync } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { OFFLINE_ENV, projectCopy, shippedRules } from "../support/wrangler_dev.ts";

const copy = projectCopy("sluice-demo-", shippedRules());
afterAll(() => rmSync(copy, { recursive: true, force: true }));

const env = { ...process.env, ...OFFLINE_ENV, SLUICE_DEPLOY_DEMO: "" };
const deployDryRun = () =>
  spawnSync(join(copy, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "--outdir", "dist"], {
    cwd: copy,
    encoding: "utf8",
    env,
    timeout: 60_000,
  });

describe("wrangler deploy and the demo rules", () => {
  it("refuses the demo beside the user's rules, naming the file and what to do, and builds nothing", () => {
    writeFileSync(
      join(copy, "rules", "mine.yaml"),
      "- id: mine\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 5/s\n  burst: 10\n",
    );
    const run = deployDryRun();
    expect(run.status).not.toBe(0);
    const said = `${run.stdout}${run.stderr}`;
    expect(said).toContain(`rules/shiplane.yaml: the demo API's rules (marked "# sluice: demo"), not yours`);
    expect(said).toContain("delete rules/shiplane.yaml");
    expect(existsSync(join(copy, "dist", "index.js"))).toBe(false);
  });

  it("builds the user's rules once the demo is deleted", () => {
    rmSync(join(copy, "rules", "shiplane.yaml"));
    const run = deployDryRun();
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
    expect(existsSync(join(copy, "dist", "index.js"))).toBe(true);
    expect(`${run.stdout}${run.stderr}`).toContain("rules/mine.yaml: 1 rule ok");
  });
});
