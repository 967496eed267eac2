#!/usr/bin/env node
// `npm run test:browser`: the dashboard exercised in a real browser. Needs Debian's Chromium (not a browser build
// downloaded by Playwright): finds it at CHROMIUM_PATH or /usr/bin/chromium, and says how to install it when missing.
// Extra arguments go to vitest. UPDATE_SCREENSHOT=1 also rewrites docs/dashboard.png.
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";

const chromium = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
try {
  accessSync(chromium, constants.X_OK);
} catch {
  process.stderr.write(
    `test:browser: Chromium is missing (no executable at ${chromium}).\n` +
      "  Install Debian's package:  apt-get update && apt-get install -y chromium\n" +
      "  or point CHROMIUM_PATH at a Chromium or Chrome binary. (Playwright's own browser downloads are not used.)\n",
  );
  process.exit(1);
}

const compiled = spawnSync(process.execPath, ["bin/sluice.mjs", "compile"], { stdio: "inherit" });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);
const run = spawnSync("npx", ["vitest", "run", "--config", "vitest.browser.config.ts", ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, CHROMIUM_PATH: chromium },
});
process.exit(run.status ?? 1);
