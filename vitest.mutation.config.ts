import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// The tests Stryker runs against mutants of src/algorithms (`npm run test:mutation:core`, stryker.config.mjs; see
// docs/testing.md): the core's own tests, which hold every algorithm to everything the shells ask of it (decisions,
// refunds, freshAtMs, carry-over, the packed path, and the shell knowledge: parameters, header window, blocked-cache
// bound, whether denials count, peak span, describe, chart level), and the rule-file tests, which read each
// algorithm's parameters through its ParamSpec. The worker, viz and CLI tests call the same functions, but add
// nothing the core tests miss and cost seconds per mutant (a mutant that emptied `peakSpanMs` made a chart loop
// forever there, a timeout per mutant). The protocol's run has its own set (vitest.mutation.protocol.config.ts).
//
// The order matters: Stryker stops at the first failing test, so the quick exact tables run first and the
// fast-check properties last; and each property tries a fraction of its cases (test/support/runs.ts).
const ORDER = [
  "algorithms.knowledge.test.ts",
  "algorithms.edges.test.ts",
  "algorithms.tables.test.ts",
  "algorithms.vectors.test.ts",
  "carry_over.test.ts",
  "rules.test.ts",
  "algorithms.contract.test.ts",
  "algorithms.clock.test.ts",
  "algorithms.props.test.ts",
];
const rank = (spec: TestSpecification) => {
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
    include: ORDER.map((name) => `test/unit/${name}`),
    environment: "node",
    testTimeout: 60_000,
    env: { SLUICE_FC_RUNS_DIVISOR: "5" },
    sequence: { sequencer: QuickFirst },
  },
});
