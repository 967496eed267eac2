import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// The tests Stryker runs against mutants of the protocol's pure code (`npm run test:mutation:protocol`,
// stryker.protocol.config.mjs; see docs/testing.md): src/protocol and the isolate's pure key functions. The core's
// tests are left out (they never reach src/protocol, and a mutant reached while a module loads would run them all).
//
// Quick exact tables first (Stryker stops a mutant's run at its first failing test), then the runs through the
// coalescer and the simulated objects, then the fast-check properties, each with a fraction of its cases
// (test/support/runs.ts).
const TABLES = "test/unit/protocol.*.test.ts"; // protocol.calls, .record, .store, .share, .delegate, ...: exact tables
const ORDER = [
  "store.test.ts",
  "late_refund.test.ts",
  "hot_marks.test.ts",
  "delegate_call.test.ts",
  "protocol.versions.test.ts",
  "share.test.ts",
  "tier.test.ts",
  "shells.contract.test.ts",
  "coalesce.test.ts",
  "isolate_bounds.test.ts",
  "lease.props.test.ts",
  "share.props.test.ts",
  "share_bound.props.test.ts",
];
const rank = (spec: TestSpecification) => {
  if (/\/protocol\.(?!versions)[a-z_]+\.test\.ts$/.test(spec.moduleId)) return -1;
  const i = ORDER.findIndex((name) => spec.moduleId.endsWith(`/${name}`));
  return i < 0 ? ORDER.length : i;
};

class QuickFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: [TABLES, ...ORDER.map((name) => `test/unit/${name}`)],
    environment: "node",
    testTimeout: 60_000,
    env: { SLUICE_FC_RUNS_DIVISOR: "5" },
    sequence: { sequencer: QuickFirst },
  },
});
