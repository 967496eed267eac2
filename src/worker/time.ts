/** The isolate's sense of time, injected (isolate.ts) so that tests drive it instead of racing real timers. */

/** This isolate's clock, ms since the epoch. */
export type Clock = () => number;
/** Resolves after `ms` on the isolate's clock (the shaping delay, the limiter's time budget). */
export type Sleep = (ms: number) => Promise<void>;
