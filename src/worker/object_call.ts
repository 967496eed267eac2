/**
 * One Durable Object check within a time budget, as a value: the answer, or why there is none.
 *
 * - An error is classified by its structured fields only, never by its message text: `overloaded` and `retryable`
 *   (both survive RPC when true) and `durableObjectReset` (the object was reset, e.g. by `ctx.abort()` or a code
 *   update, while the call was in flight).
 * - A retryable error is retried once, inside the same budget, on a fresh stub (an object that was reset, e.g. by
 *   `ctx.abort()` or a code update, breaks the stub that saw it). An overloaded object is never retried: more calls
 *   are what it is drowning in.
 * - A call that misses the budget is `timeout`; it keeps running, and its late answer is handed back so the caller
 *   can refund an admission nobody used.
 *
 * A retried check may be charged twice if the first attempt was applied before its connection broke (the object
 * cannot tell a retry from a new request); the limiter then errs towards refusing, never towards admitting.
 */
import type { Isolate } from "./isolate.ts";
import type { SluiceLimiter } from "./limiter.ts";
import type { CheckInput, CheckResult } from "./store.ts";

export type FailureKind = "overloaded" | "retryable" | "reset" | "error" | "timeout" | "invalid";

export type ObjectAnswer =
  | { readonly kind: "answered"; readonly result: CheckResult; readonly attempts: number }
  | {
      readonly kind: "failed";
      readonly failure: FailureKind;
      /** For the log: the error's message (never used to decide anything). */
      readonly message: string;
      readonly attempts: number;
      /** The call still running after the budget ran out, if any. */
      readonly late: Promise<CheckResult> | null;
    };

/** The structured fields of an error that crossed RPC. */
export function classify(error: unknown): { readonly failure: FailureKind; readonly retry: boolean } {
  const e =
    typeof error === "object" && error !== null
      ? (error as { overloaded?: unknown; retryable?: unknown; durableObjectReset?: unknown })
      : {};
  if (e.overloaded === true) return { failure: "overloaded", retry: false };
  if (e.durableObjectReset === true) return { failure: "reset", retry: true };
  if (e.retryable === true) return { failure: "retryable", retry: true };
  return { failure: "error", retry: false };
}

export function messageOf(error: unknown): string {
  if (typeof error === "object" && error !== null && "message" in error) return String(error.message);
  return String(error);
}

/** Ask the object named `name`, within `timeoutMs` on the isolate's sleeper, counting calls in its stats. */
export async function checkObject(
  namespace: DurableObjectNamespace<SluiceLimiter>,
  name: string,
  input: CheckInput,
  timeoutMs: number,
  isolate: Pick<Isolate, "sleep" | "stats">,
): Promise<ObjectAnswer> {
  const { stats } = isolate;
  const deadline = isolate.sleep(timeoutMs).then(() => "timeout" as const);
  for (let attempt = 1; ; attempt++) {
    stats.object_calls++;
    if (attempt > 1) stats.object_retries++;
    const stub = namespace.get(namespace.idFromName(name));
    const call = (async () => (await stub.check(input)) as CheckResult)();
    const settled = call.then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const raced = await Promise.race([settled, deadline]);
    if (raced === "timeout") {
      return {
        kind: "failed",
        failure: "timeout",
        message: `no answer within ${timeoutMs} ms`,
        attempts: attempt,
        late: call,
      };
    }
    if (raced.ok) return { kind: "answered", result: raced.result, attempts: attempt };
    const { failure, retry } = classify(raced.error);
    if (!retry || attempt >= 2) {
      return { kind: "failed", failure, message: messageOf(raced.error), attempts: attempt, late: null };
    }
  }
}
