import { defineConfig } from "vitest/config";

// End-to-end tests against a real `wrangler dev` process that each test file starts and stops itself.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    environment: "node",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
