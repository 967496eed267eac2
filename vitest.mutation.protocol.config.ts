import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// The tests Stryker runs against mutants of the protocol's pure code (`npm run test:mutation:protocol`,
// stryker.protocol.config.mjs; see docs/testing.md): src/protocol and the isolate's pure key functions. The core's
// tests are left out (they never reach src/protocol, and a mutant reached while a module loads would run them all).
//
// Quick exact tables first (Stryker stops a mutant's run at its first failing test, and runs only the tests that
// cover the mutant), then the other files by how long they take (measured on the unmutated code, nice 19 on 2 busy
// cores, in ms): a mutant one quick file kills is never run through the simulated tiers. Properties run a fraction of
// their cases (test/support/runs.ts).
const TABLES = "test/unit/protocol.*.test.ts"; // protocol.calls, .record, .store, .share, .delegate, ...: exact tables
const ORDER = [
  "docs_tuning.test.ts", // the tuning table pins every tunable's value (a static mutant of one fails it)
  "delegate_call.test.ts", // 40
  "store.test.ts", // 84
  "hot_marks.test.ts", // 226
  "late_refund.test.ts", // 304
  "sublease_return.test.ts", // sub-leases as reservations (sublease.ts)
  "coalesce.test.ts", // 924
  "protocol.versions.test.ts", // 2,699
  "lease.props.test.ts", // 3,898
  "shells.contract.test.ts", // 5,517
  "share.test.ts", // 5,684
  "share_bound.props.test.ts", // 5,715
  "share.props.test.ts", // 14,184
  "tier.test.ts", // 27,072
  "isolate_bounds.test.ts", // 29,088
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
