#!/usr/bin/env node
// `npm start`: validate and compile the rules, load the demo accounts into the local KV, then run the Worker locally
// with wrangler dev on 127.0.0.1:8787 (PORT overrides), offline and quiet. Extra arguments go to wrangler dev, e.g.
// `npm start -- --persist-to /tmp/sluice-state` (the demo accounts are then seeded there too).
import { spawn, spawnSync } from "node:child_process";

const extra = process.argv.slice(2);
const env = {
  ...process.env,
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
};

const compiled = spawnSync(process.execPath, ["bin/sluice.mjs", "compile"], { stdio: "inherit" });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

const persistAt = extra.indexOf("--persist-to");
const seedArgs = persistAt >= 0 && extra[persistAt + 1] !== undefined ? ["--persist-to", extra[persistAt + 1]] : [];
const seeded = spawnSync(process.execPath, ["scripts/seed-accounts.mjs", ...seedArgs], { stdio: "inherit", env });
if (seeded.status !== 0) process.exit(seeded.status ?? 1);

const port = process.env.PORT ?? "8787";
// ECHO_ORIGIN: with no UPSTREAM_URL set, the built-in echo origin answers admitted requests (local development only).
const devArgs = ["wrangler", "dev", "--ip", "127.0.0.1", "--port", port, "--var", "ECHO_ORIGIN:true", ...extra];
const child = spawn("npx", devArgs, {
  stdio: "inherit",
  env,
});
child.on("exit", (code) => process.exit(code ?? 0));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
