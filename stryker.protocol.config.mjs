// Mutation testing of the isolate <-> object protocol's pure code (issue 18): src/protocol (the key's object's calls,
// shares, refunds, versions and call ids; the delegate's decisions and steps) and the isolate's pure key functions
// (src/isolate/key_state.ts, coalesce_types.ts, hot_marks.ts; delegate_call.ts: its clock and sleep
// are injected). `npm run test:mutation:protocol`, and the second half of
// `npm run test:mutation`; not part of `npm test`. Same runner as the core's run (stryker.config.mjs), the protocol's
// own tests (vitest.mutation.protocol.config.ts), its own goal (90%) and its own reports. See docs/testing.md.
import core from "./stryker.config.mjs";

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...core,
  vitest: { configFile: "vitest.mutation.protocol.config.ts", related: true },
  mutate: [
    "src/protocol/**/*.ts",
    "src/isolate/key_state.ts",
    "src/isolate/coalesce_types.ts",
    "src/isolate/hot_marks.ts",
    "src/isolate/delegate_call.ts",
  ],
  // Incremental: a run retests only the mutants whose code or covering tests changed since the last run here (the
  // whole set is 3,740 mutants, 47 min at concurrency 1 on 2 cores; `--force` retests every one).
  incremental: true,
  incrementalFile: "reports/stryker-protocol-incremental.json",
  htmlReporter: { fileName: "reports/mutation-protocol/index.html" },
  jsonReporter: { fileName: "reports/mutation-protocol/mutation.json" },
  thresholds: { high: 95, low: 90, break: 90 },
};
