/**
 * A green `npm test` is quiet: each stage prints its summary and nothing else; what a passing test logs, and workerd's
 * log of the faults the tests inject, are shown only when something fails. And the tests do not read a developer's
 * `.dev.vars`. These check the mechanism (test/support/quiet.ts and the stage configurations), not each test.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { QUIET, QUIET_WORKERS, RuntimeLogs } from "../support/quiet.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const pkg = JSON.parse(read("package.json")) as { scripts: Record<string, string> };

/** What the Workers pool does with a line of workerd's log (vitest-pool-workers' `handleStructuredLogs`). */
function handleStructuredLogs(line: string): void {
  process.stderr.write(`${line}\n`);
}

describe("RuntimeLogs: workerd's log is held back unless the run fails", () => {
  const captured: string[] = [];
  const realWrite = process.stderr.write;
  afterEach(() => {
    process.stderr.write = realWrite;
    captured.length = 0;
  });
  /** Record what reaches the real stderr (under the reporter's filter, which is installed on top of this). */
  const record = () => {
    process.stderr.write = ((chunk: unknown) => {
      captured.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
  };

  it("holds the pool's runtime lines and prints nothing when the run passes; other writes go through", () => {
    record();
    const logs = new RuntimeLogs();
    logs.onInit();
    handleStructuredLogs("uncaught exception; source = Uncaught (in promise); stack = Error: injected");
    process.stderr.write("a reporter's own line\n");
    logs.onTestRunEnd([], [], "passed");
    handleStructuredLogs("exception = workerd/api/web-socket.c++:821: disconnected: WebSocket peer disconnected");
    expect(captured).toEqual(["a reporter's own line\n"]);
  });

  it("prints the held lines after a failing run, and lets later ones through", () => {
    record();
    const logs = new RuntimeLogs();
    logs.onInit();
    handleStructuredLogs("uncaught exception; source = Uncaught (in promise); stack = Error: injected");
    logs.onTestRunEnd([], [], "failed");
    expect(captured.join("")).toContain("shown because it did not pass");
    expect(captured.join("")).toContain("Error: injected");
    handleStructuredLogs("after the run");
    expect(captured.at(-1)).toBe("after the run\n");
  });
});

describe("every stage of npm test reports quietly", () => {
  it("the vitest stages list failures only and show a test's log only when it fails", () => {
    expect(QUIET.reporters).toEqual(["minimal"]);
    expect(QUIET.silent).toBe("passed-only");
    expect(QUIET_WORKERS.silent).toBe("passed-only");
    expect(QUIET_WORKERS.reporters).toContain("minimal");
    for (const [file, spread] of [
      ["vitest.unit.config.ts", "...QUIET,"],
      ["vitest.e2e.config.ts", "...QUIET,"],
      ["vitest.workers.config.ts", "...QUIET_WORKERS,"],
    ] as const) {
      expect(read(file), file).toContain(spread);
    }
  });

  it("a lint warning fails npm test, and the build stage prints one line", () => {
    expect(pkg.scripts["lint"]).toContain("--error-on-warnings");
    expect(pkg.scripts["test"]).toContain("npm run lint");
    expect(pkg.scripts["test"]).toContain("npm run test:build");
    expect(pkg.scripts["test"]).not.toMatch(/npm run build\b/);
  });
});

describe("the tests do not read a developer's .dev.vars", () => {
  it("the Workers stage reads a copy of wrangler.toml from a folder of its own", () => {
    const config = read("vitest.workers.config.ts");
    expect(config).toContain("configPath: TEST_CONFIG");
    expect(config).not.toContain('configPath: "./wrangler.toml"');
  });

  it("wrangler dev in the end-to-end tests gets an empty env file instead", () => {
    expect(read("test/support/wrangler_dev.ts")).toMatch(/"--env-file",\s*envFile/);
  });
});
