/**
 * The client's one timer (src/isolate/time.ts owns the Worker's, outside this package's root): the renewal of a
 * request's slots in the consumer's Worker (respond.ts `releaseOf`). `setTimeout`, which a consumer Worker, Node and
 * a test's fake timers all have.
 */
export const clientSleep = (ms: number): Promise<void> => new Promise((wake) => setTimeout(wake, ms));
