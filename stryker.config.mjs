// Mutation testing of the pure core (`npm run test:mutation`; not part of `npm test`). See docs/testing.md.
// One file at a time is kinder to a shared machine: `npm run test:mutation -- --mutate src/algorithms/gcra.ts`.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  // The plain-Node tests of the core (vitest.mutation.config.ts); the Workers-runtime tests cannot run under Stryker.
  vitest: { configFile: "vitest.mutation.config.ts", related: true },
  mutate: ["src/algorithms/**/*.ts", "!src/algorithms/types.ts"],
  coverageAnalysis: "perTest",
  // Two cores shared by many processes: 1 (override with --concurrency 2 on a quiet machine).
  concurrency: 1,
  // A mutant that loops forever (a loop bound flipped) is stopped after its tests' normal time × 1.5 + this many ms.
  timeoutMS: 10_000,
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  thresholds: { high: 95, low: 90, break: 95 },
  ignorePatterns: ["dist", ".wrangler", "reports"],
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
