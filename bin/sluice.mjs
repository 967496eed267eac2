#!/usr/bin/env node
// The `sluice` command. Runs the TypeScript sources through tsx's loader, so there is no build step to forget.
import { existsSync } from "node:fs";
import { setFlagsFromString } from "node:v8";

// The installed package (`npm pack`) carries only the client (sluice/client, sluice/hono); the CLI needs the sources.
if (!existsSync(new URL("../src/cli/main.ts", import.meta.url))) {
  console.error("sluice: the CLI runs from a Sluice checkout (its src/ and rules/); this installed package holds only");
  console.error("the client for Workers that bind to Sluice: import from sluice/client and sluice/hono.");
  process.exit(1);
}
// The streaming commands (simulate, compare, plan) make much short-lived garbage, and V8 by default lets the old
// generation grow to several times its live size between full collections: a 10M-line `compare` peaked near 300 MB
// with a live heap of about 40 MB. Growing it by at most 30% per collection keeps the peak near the live size at no
// measurable cost in time (bench/compare.ts). Read at every collection, so it takes effect when set here.
setFlagsFromString("--heap-growing-percent=30");
// A reader that stops early (`sluice accounts show KEY | head -1`) closes the pipe: stop writing, quietly, as `cat`
// does, rather than die with an EPIPE stack trace.
process.stdout.on("error", (err) => {
  if (err.code !== "EPIPE") throw err;
  process.exit(process.exitCode ?? 0);
});
const { register } = await import("tsx/esm/api");
register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
