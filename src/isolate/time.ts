/**
 * The Worker's sense of time, owned here: the clock and sleeper type, and the runtime's own, which production uses.
 * Everything else takes them injected (the isolate state in isolate.ts, the limiter object's constructor), so that
 * tests drive time instead of racing real timers; nothing else in src/ reads `Date.now()` or waits on a timer.
 */

/** This isolate's clock, ms since the epoch. */
export type Clock = () => number;
/** Resolves after `ms` on the isolate's clock (the shaping delay, the limiter's time budget). */
export type Sleep = (ms: number) => Promise<void>;

/** The Workers runtime's clock and timer: `Date.now()` and `scheduler.wait`. */
export const systemClock: Clock = () => Date.now();
export const systemSleep: Sleep = (ms) => scheduler.wait(ms);
