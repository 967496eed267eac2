import { defineConfig } from "vitest/config";
import { QUIET } from "./test/support/quiet.ts";

// End-to-end tests against a real `wrangler dev` process that each test file starts and stops itself, each in a temp
// copy of the project on free ports of its own, so two files run at once: most of a file's time is waiting for a
// server to start or a child process to end. The tests count decisions, never time them.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    // Only the summary when every test passes; a failing test's name, error and log otherwise (test/support/quiet.ts).
    ...QUIET,
    environment: "node",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});
