#!/usr/bin/env node
// The `sluice` command. Runs the TypeScript sources through tsx's loader, so there is no build step to forget.
import { setFlagsFromString } from "node:v8";
import { register } from "tsx/esm/api";

// The streaming commands (simulate, compare, plan) make much short-lived garbage, and V8 by default lets the old
// generation grow to several times its live size between full collections: a 10M-line `compare` peaked near 300 MB
// with a live heap of about 40 MB. Growing it by at most 30% per collection keeps the peak near the live size at no
// measurable cost in time (bench/compare.ts). Read at every collection, so it takes effect when set here.
setFlagsFromString("--heap-growing-percent=30");
register();
const { main } = await import("../src/cli/main.ts");
process.exitCode = await main(process.argv.slice(2));
