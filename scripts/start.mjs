#!/usr/bin/env node
// `npm start`: validate and compile the rules, then run the Worker locally with wrangler dev, offline and quiet.
import { spawn, spawnSync } from "node:child_process";

const compiled = spawnSync(process.execPath, ["bin/sluice.mjs", "compile"], { stdio: "inherit" });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

const port = process.env.PORT ?? "8787";
const env = {
  ...process.env,
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
};
const child = spawn("npx", ["wrangler", "dev", "--ip", "127.0.0.1", "--port", port], { stdio: "inherit", env });
child.on("exit", (code) => process.exit(code ?? 0));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
