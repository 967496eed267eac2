// Mutation testing of the pure core (`npm run test:mutation:core`; not part of `npm test`). See docs/testing.md.
// The protocol's pure code has its own run and goal: stryker.protocol.config.mjs (`npm run test:mutation:protocol`);
// `npm run test:mutation` runs both. One file at a time is kinder to a shared machine:
// `npm run test:mutation:core -- --mutate src/algorithms/gcra.ts`.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  // Stryker's vitest runner, but a test file that fails to load counts as a failed test (scripts/stryker-vitest-files.mjs).
  plugins: ["@stryker-mutator/*", "./scripts/stryker-vitest-files.mjs"],
  testRunner: "vitest-files",
  // The core's tests and the rule-file tests (vitest.mutation.config.ts), quick tables first, fewer fast-check cases.
  vitest: { configFile: "vitest.mutation.config.ts", related: true },
  mutate: ["src/algorithms/**/*.ts", "!src/algorithms/types.ts"],
  coverageAnalysis: "perTest",
  // Two cores shared by many processes: 1 (override with --concurrency 2 on a quiet machine).
  concurrency: 1,
  // A mutant that loops forever (a loop bound flipped) is stopped after its tests' normal time × 1.5 + this many ms.
  timeoutMS: 10_000,
  reporters: ["clear-text", "progress", "html", "json"],
  // `npm run test:mutation:core -- --incremental` retests only mutants whose code or tests changed since the last run.
  incrementalFile: "reports/stryker-incremental.json",
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  thresholds: { high: 95, low: 90, break: 95 },
  ignorePatterns: ["dist", ".wrangler", "reports"],
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
