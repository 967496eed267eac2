import { defineConfig } from "vitest/config";
import { QUIET } from "./test/support/quiet.ts";

// Plain-Node tests: the pure core, rule validation, the CLI. (Workers-runtime tests have their own config.)
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    // Only the summary when every test passes; a failing test's name, error and log otherwise (test/support/quiet.ts).
    ...QUIET,
    environment: "node",
    testTimeout: 60_000,
    // Two files at a time. Vitest's default in `run` is one fewer than the cores, which is one on a 2-core machine;
    // many of these files spend their time waiting on child processes (the CLI, wrangler's local KV, tsc, git).
    maxWorkers: 2,
  },
});
