#!/usr/bin/env node
// `npm test`'s build stage: `wrangler deploy --dry-run --outdir dist` (what `npm run build` runs, and what the
// end-to-end tests then load), with one summary line when it works and wrangler's whole output when it does not.
// SLUICE_DEPLOY_DEMO=1: this bundle is built to be tested, not deployed, so the demo rules (rules/shiplane.yaml,
// which a real deploy refuses: `sluice compile --help`) may be in it.
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";

const run = spawnSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", "dist"], {
  encoding: "utf8",
  env: { ...process.env, WRANGLER_HIDE_BANNER: "true", WRANGLER_SEND_METRICS: "false", SLUICE_DEPLOY_DEMO: "1" },
});
if (run.status !== 0) {
  process.stderr.write(`${run.stdout}${run.stderr}\nbuild: wrangler deploy --dry-run failed (exit ${run.status})\n`);
  process.exit(run.status ?? 1);
}
const upload =
  /Total Upload: (.*)/.exec(run.stdout)?.[1] ?? `${(statSync("dist/index.js").size / 1024).toFixed(2)} KiB`;
process.stdout.write(`build: dist/index.js, ${upload}\n`);
