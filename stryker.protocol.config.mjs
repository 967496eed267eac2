// Mutation testing of the isolate <-> object protocol's pure code, src/protocol (shares, batches, refunds, versions,
// call ids; the delegate's decisions and steps): `npm run test:mutation:protocol`, not part of `npm test`.
// Same runner and test set as the core's run (stryker.config.mjs); its own goal (90%, issue 18) and its own reports.
import core from "./stryker.config.mjs";

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...core,
  mutate: ["src/protocol/**/*.ts"],
  incrementalFile: "reports/stryker-protocol-incremental.json",
  htmlReporter: { fileName: "reports/mutation-protocol/index.html" },
  jsonReporter: { fileName: "reports/mutation-protocol/mutation.json" },
  thresholds: { high: 95, low: 90, break: 90 },
};
