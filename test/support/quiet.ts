/**
 * How every vitest stage of `npm test` reports: a passing run prints its summary and nothing else; a failing run
 * prints the failing tests, what they logged, and (Workers stage) what workerd logged meanwhile.
 *
 * - `minimal`: vitest's reporter that lists failed tests only, then the summary.
 * - `silent: "passed-only"`: a test's console output is shown when it fails.
 * - `RuntimeLogs`: workerd's own log (the pool prints it as it comes: "uncaught exception ... Error: injected" for
 *   every fault a test injects into a Durable Object, the pool's "WebSocket peer disconnected" after each file) is
 *   held back, and printed at the end only when the run did not pass. The tests assert the behaviour those faults
 *   cause; the log lines are the runtime reporting a rejection the Worker handles.
 */
import type { InlineConfig, Reporter, TestRunEndReason } from "vitest/node";

/** Lines of workerd's log kept for a failing run (the last ones). */
const KEEP_LINES = 2_000;

type Write = typeof process.stderr.write;

/** Holds back what the Workers pool's runtime log handler writes; prints it only if the run does not pass. */
export class RuntimeLogs implements Reporter {
  private held: string[] = [];
  private restore: (() => void) | null = null;

  onInit(): void {
    const streams = [process.stdout, process.stderr] as const;
    const originals = streams.map((stream) => stream.write.bind(stream) as Write);
    streams.forEach((stream, i) => {
      const original = originals[i]!;
      stream.write = ((chunk: unknown, ...rest: unknown[]) => {
        // The pool writes workerd's structured logs from its `handleStructuredLogs` (vitest-pool-workers): only those.
        // Still after the run: workerd's goodbye ("WebSocket peer disconnected") comes after the summary.
        if (new Error().stack?.includes("handleStructuredLogs")) {
          this.held.push(String(chunk));
          if (this.held.length > KEEP_LINES) this.held.splice(0, this.held.length - KEEP_LINES);
          return true;
        }
        return (original as (...args: unknown[]) => boolean)(chunk, ...rest);
      }) as Write;
    });
    this.restore = () => {
      streams.forEach((stream, i) => {
        stream.write = originals[i]!;
      });
    };
  }

  onTestRunEnd(_modules: unknown, _errors: unknown, reason: TestRunEndReason): void {
    if (reason !== "passed" && this.held.length > 0) {
      this.restore?.(); // from now on workerd's log goes straight out, as without this reporter
      process.stderr.write(`\nworkerd's log during the run (shown because it did not pass):\n${this.held.join("")}\n`);
    }
    this.held = [];
  }
}

/** The `test` options every stage's config spreads in. */
export const QUIET: Pick<InlineConfig, "reporters" | "silent"> = {
  reporters: ["minimal"],
  silent: "passed-only",
};

/** The Workers stage's: also workerd's log, held back unless the run fails. */
export const QUIET_WORKERS: Pick<InlineConfig, "reporters" | "silent"> = {
  reporters: [new RuntimeLogs(), "minimal"],
  silent: "passed-only",
};
