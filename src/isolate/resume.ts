/**
 * Continuing in a request's own I/O context after awaiting a promise another request settles (the coalescer's
 * `resume`). A stub call made from another request's context fails ("Cannot perform I/O on behalf of a different
 * request (I/O type: SpanParent)"), and workerd's flag `handle_cross_request_promise_resolution`, which routes a
 * continuation back to the request that made the promise, did not hold under load in `wrangler dev` (issue 18;
 * docs/production.md, "Why a waiting request polls"; the vitest pool turns it off). So another request's settlement
 * only records the value, and the waiting request takes it up from a timer of its own (polled every 1 ms), which the
 * runtime always fires in the request that set it.
 */
export async function resumeInOwnContext<T>(settled: Promise<T>): Promise<T> {
  let outcome: { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown } | null = null;
  // Runs in whichever context settles the promise: it only records the outcome (no I/O).
  settled.then(
    (value) => {
      outcome = { ok: true, value };
    },
    (error: unknown) => {
      outcome = { ok: false, error };
    },
  );
  do await scheduler.wait(1);
  while (outcome === null);
  const done = outcome as { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };
  if (!done.ok) throw done.error;
  return done.value;
}
