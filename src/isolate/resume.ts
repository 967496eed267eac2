/** A waiting request continues from timers of its own (docs/production.md, "Why a waiting request polls"). */
import type { Clock } from "./time.ts";

/** The longest poll after the first sleep, ms: what a waiting request may answer later than its answer came. */
export const POLL_MAX_MS = 4;
/** The first sleep at most, ms, whatever recent waits took. */
const FIRST_MAX_MS = 16;
/** A wait counts at most this much in the estimate, ms (a stepped clock, a request held for a lease's renewal). */
const SAMPLE_MAX_MS = 64;

/**
 * `resume` for the coalescer: waits for `settled` from this request's own timers. `clock` times the waits for the
 * estimate only (a frozen clock gives a 1 ms first sleep); `wait` must be the runtime's own timer.
 */
export function ownContextResumer(clock: Clock, wait: (ms: number) => Promise<unknown> = (ms) => scheduler.wait(ms)) {
  let typicalMs = 0; // a moving average of recent waits, ms, each until the timer that saw its answer
  return async <T>(settled: Promise<T>): Promise<T> => {
    let outcome: PromiseSettledResult<T> | null = null;
    // Runs in whichever context settles the promise: it only records the outcome (no I/O).
    settled.then(
      (value) => {
        outcome = { status: "fulfilled", value };
      },
      (reason: unknown) => {
        outcome = { status: "rejected", reason };
      },
    );
    const startMs = clock();
    let sleepMs = Math.min(FIRST_MAX_MS, Math.max(1, Math.floor(typicalMs / 2)));
    let pollMs = 1;
    do {
      await wait(sleepMs);
      sleepMs = pollMs;
      pollMs = Math.min(POLL_MAX_MS, pollMs * 2);
    } while (outcome === null);
    const tookMs = Math.min(SAMPLE_MAX_MS, Math.max(0, clock() - startMs));
    typicalMs += (tookMs - typicalMs) / 8;
    const done = outcome as PromiseSettledResult<T>;
    if (done.status === "rejected") throw done.reason;
    return done.value;
  };
}
