/**
 * Continuing in a request's own I/O context after awaiting a promise another request settles (the coalescer's
 * `resume`).
 */

/**
 * Whether the runtime runs the continuations of a promise in the I/O context of the request that created it, whoever
 * settles it: the compatibility flag `handle_cross_request_promise_resolution`, on by default from compatibility date
 * 2024-10-14 (so in production and in `wrangler dev` with this Worker's date). The vitest pool turns it off for its
 * test runner (`no_handle_cross_request_promise_resolution`), and a runtime without `Cloudflare.compatibilityFlags` is
 * not assumed to have it.
 */
export function runtimeResumesInOwnContext(): boolean {
  const global = globalThis as { Cloudflare?: { compatibilityFlags?: Record<string, boolean> } };
  return global.Cloudflare?.compatibilityFlags?.handle_cross_request_promise_resolution === true;
}

let resumesInOwnContext: boolean | undefined;

/**
 * Await a promise another request settles, then continue in this request's own I/O context. Where the runtime does that
 * itself (`runtimeResumesInOwnContext`), this is a plain `await`. Otherwise the runtime runs a continuation in the
 * context of the request that settled the promise, where this request's stubs and timers cannot be used ("Cannot
 * perform I/O on behalf of a different request"); a timer this request starts fires in its own context, so it polls
 * (1 ms apart) until the value is there. Polling costs a timer per waiting request per millisecond and at least 1 ms
 * of latency, which is why it is kept to runtimes that need it.
 */
export async function resumeInOwnContext<T>(settled: Promise<T>): Promise<T> {
  resumesInOwnContext ??= runtimeResumesInOwnContext();
  if (resumesInOwnContext) return settled;
  let outcome: { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown } | null = null;
  settled.then(
    (value) => {
      outcome = { ok: true, value };
    },
    (error: unknown) => {
      outcome = { ok: false, error };
    },
  );
  // A value already there still takes one timer turn: the continuation must not run in the settling request's context.
  do await scheduler.wait(1);
  while (outcome === null);
  const done = outcome as { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };
  if (!done.ok) throw done.error;
  return done.value;
}
