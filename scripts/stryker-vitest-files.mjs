// Stryker's vitest runner (9.5.1) made to work with vitest 4 (both pinned), with two fixes:
//
// 1. Its setup file (copied into the sandbox for each run) reports coverage and hit counts from
//    `afterAll(({ meta }) => …)`. Vitest 4 passes a suite hook's fixtures first and the suite second, so that hook
//    fails in every test file: Stryker then had no per-test coverage (every mutant ran every test, about 7 s each) and
//    no hit counts (a mutant that loops forever ran into the timeout instead of the hit limit). Here the copy reads
//    `afterAll(({}, { meta }) => …)`.
// 2. A test file that fails to load counts as a failing test. The runner only collects the results of the tests it
//    finds, so a mutant that makes a test file throw while it loads (the algorithm table's object emptied, so
//    src/algorithms/index.ts throws on import) was reported Survived with 0 tests run, although `vitest run` fails.
//
// Used by stryker.config.mjs (`testRunner: "vitest-files"`); its options stay under `vitest`.
import { readFile, writeFile } from "node:fs/promises";
import { declareFactoryPlugin, PluginKind } from "@stryker-mutator/api/plugin";
import { DryRunStatus, TestStatus } from "@stryker-mutator/api/test-runner";
import { strykerPlugins as vitestPlugins } from "@stryker-mutator/vitest-runner";

const vitest = vitestPlugins[0];
const SUITE_HOOK = "afterAll(({ meta }) => {";
const VITEST4_SUITE_HOOK = "afterAll(({}, { meta }) => {";

function createRunner(injector) {
  const runner = vitest.factory(injector);

  const init = runner.init.bind(runner);
  runner.init = async () => {
    await init();
    const setup = await readFile(runner.localSetupFile, "utf8");
    const parts = setup.split(SUITE_HOOK);
    if (parts.length !== 3) throw new Error(`${runner.localSetupFile}: expected two "${SUITE_HOOK}" hooks to fix`);
    await writeFile(runner.localSetupFile, parts.join(VITEST4_SUITE_HOOK));
  };

  const run = runner.run.bind(runner);
  runner.run = async (options) => {
    const result = await run(options);
    if (result.status !== DryRunStatus.Complete) return result;
    const broken = runner.ctx.state
      .getFiles()
      .filter((file) => file.result?.state === "fail" && (file.result.errors?.length ?? 0) > 0);
    for (const file of broken) {
      result.tests.push({
        id: `${file.filepath}#(the file loads)`,
        name: "(the file loads)",
        status: TestStatus.Failed,
        failureMessage: file.result.errors[0]?.message ?? "the test file failed to load",
        timeSpentMs: 0,
        fileName: file.filepath,
      });
    }
    return result;
  };
  return runner;
}
createRunner.inject = vitest.factory.inject;

export const strykerPlugins = [declareFactoryPlugin(PluginKind.TestRunner, "vitest-files", createRunner)];
