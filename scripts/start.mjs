#!/usr/bin/env node
// `npm start`: validate and compile the rules, load the demo accounts into the local KV, then run the Worker locally
// with wrangler dev on 127.0.0.1:8787 (PORT overrides), offline and quiet. Extra arguments go to wrangler dev, e.g.
// `npm start -- --persist-to /tmp/sluice-state` (the demo accounts are then seeded there too). A local admin token for
// /_sluice/ is generated into .dev.vars when it has none (dev-admin-token.mjs).
//
// Live reload: this process watches rules/ and compiles on every change, in process (milliseconds). Valid rules are
// written to src/generated/rules.ts, which wrangler dev (watching the Worker's sources) bundles and serves; invalid
// rules print the validator's messages and change nothing, so the Worker keeps serving the last valid rules and no
// request waits. wrangler dev runs from a copy of wrangler.toml without its [build] step (.wrangler.dev.toml): that
// step is for `wrangler deploy`, and under wrangler dev it would compile again and hold requests while it runs.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, watch, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { register } from "tsx/esm/api";
import { ensureAdminToken } from "./dev-admin-token.mjs";
import { freePort } from "./free-port.mjs";

const extra = process.argv.slice(2);
const env = {
  ...process.env,
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
};

const port = process.env.PORT ?? "8787";

/** Whether 127.0.0.1:`p` can be listened on (its number if so). */
function probe(p) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err) => resolve(err.code === "EADDRINUSE" ? null : err));
    server.listen(Number(p), "127.0.0.1", () => {
      const taken = server.address().port;
      server.close(() => resolve(taken));
    });
  });
}

const free = await probe(port);
if (typeof free !== "number") {
  const why = free === null ? "is taken (is another `npm start` running?)" : `cannot be used: ${free.message}`;
  process.stderr.write(
    `sluice: port ${port} on 127.0.0.1 ${why}; stop it, or run PORT=${Number(port) + 1} npm start\n`,
  );
  process.exit(1);
}
// The devtools inspector listens too (9229 by default), and a second wrangler dev would fight over it.
// A port outside the ephemeral range, which a client socket may take before wrangler binds it (free-port.mjs).
const inspector = extra.includes("--inspector-port")
  ? []
  : ["--inspector-port", String(await freePort([Number(port)]))];

register();
const { runCompile } = await import("../src/cli/compile.ts");
const io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin };
if ((await runCompile([], io)) !== 0) process.exit(1);

const persistAt = extra.indexOf("--persist-to");
const seedArgs = persistAt >= 0 && extra[persistAt + 1] !== undefined ? ["--persist-to", extra[persistAt + 1]] : [];
const seeded = spawnSync(process.execPath, ["scripts/seed-accounts.mjs", ...seedArgs], { stdio: "inherit", env });
if (seeded.status !== 0) process.exit(seeded.status ?? 1);

const DEV_CONFIG = ".wrangler.dev.toml";
const toml = readFileSync("wrangler.toml", "utf8");
const withoutBuild = toml.replace(/^\[build\]\n(?:[a-z_]+ = .*\n)+/m, "");
if (withoutBuild.includes("[build]")) throw new Error("start.mjs: could not drop [build] from wrangler.toml");
writeFileSync(
  DEV_CONFIG,
  `# Written by scripts/start.mjs for wrangler dev: wrangler.toml without [build]. Edit wrangler.toml.\n${withoutBuild}`,
);

process.stdout.write(ensureAdminToken(".dev.vars", `http://127.0.0.1:${port}/_sluice/`));
// ECHO_ORIGIN: with no UPSTREAM_URL set, the built-in echo origin answers admitted requests (local development only).
const args = ["wrangler", "dev", "--config", DEV_CONFIG, "--ip", "127.0.0.1", "--port", port, ...inspector];
args.push("--var", "ECHO_ORIGIN:true", ...extra);
const child = spawn("npx", args, { stdio: "inherit", env });

let timer = null;
watch("rules", () => {
  // Editors write a file in several steps (truncate, write, rename): compile once they are done.
  clearTimeout(timer);
  timer = setTimeout(() => {
    process.stdout.write("sluice: rules/ changed\n");
    void runCompile(["--watching"], io);
  }, 100);
});
child.on("exit", (code) => process.exit(code ?? 0));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
