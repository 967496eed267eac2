import { defineConfig } from "vitest/config";

// The tests that hold src/algorithms to the spec, for mutation testing (`npm run test:mutation`, stryker.config.mjs).
// The rest of the unit suite (CLI processes, git refs, floods of a million keys) adds minutes per Stryker run and
// no killing power over the core.
export default defineConfig({
  test: {
    include: [
      "test/unit/algorithms.*.test.ts",
      "test/unit/carry_over.test.ts",
      "test/unit/shells.contract.test.ts",
      "test/unit/local_store.fastpath.test.ts",
    ],
    environment: "node",
    testTimeout: 60_000,
  },
});
