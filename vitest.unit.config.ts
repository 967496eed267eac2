import { defineConfig } from "vitest/config";

// Plain-Node tests: the pure core, rule validation, the CLI. (Workers-runtime tests have their own config.)
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    // What a test logs is shown when it fails.
    silent: "passed-only",
    environment: "node",
    testTimeout: 60_000,
  },
});
