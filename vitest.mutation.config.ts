import { defineConfig } from "vitest/config";

// The unit tests Stryker runs against mutants of src/algorithms (`npm run test:mutation`, stryker.config.mjs): every
// plain-Node test except two that cannot help there. plan.test.ts reads a git ref, and Stryker's sandbox copy has no
// .git; isolate_bounds.test.ts floods caches with a million keys and touches no algorithm code. The worker, viz and
// rules tests stay in: they are what kill mutants of each algorithm's shell knowledge (describe, peak span, the
// blocked-cache bound, whether denials count). A run with only the algorithm tests left those alive: fixed_window.ts
// scored 74% that way (2026-11-30), its survivors all in that knowledge.
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    exclude: ["test/unit/plan.test.ts", "test/unit/isolate_bounds.test.ts"],
    environment: "node",
    testTimeout: 60_000,
  },
});
