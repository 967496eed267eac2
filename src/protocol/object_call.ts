/**
 * One call to a key's Durable Object within a time budget, as a value: the answer, or why there is none.
 * - An error is classified by its structured fields only, never its message: `overloaded` and `retryable` (both
 *   survive RPC when true) and `durableObjectReset` (the object was reset while the call was in flight).
 * - A retryable error is retried once, inside the same budget, on a fresh stub (a reset breaks the stub that saw it),
 *   with the same call id, so an attempt applied before its connection broke is answered as remembered and charged
 *   once (store.ts, `callRecord`). An overloaded object is never retried: more calls are what it is drowning in.
 * - A call that misses the budget is `timeout`; it keeps running, and its late answer is handed back so the caller
 *   can refund admissions nobody used.
 * The transport (a stub per attempt in the Worker, a simulated network in the simulator) and the sleeper are passed in.
 */
import type { ReleaseInput, ReleaseResult } from "./slots.ts";
import type { CallInput, CallResult, RefundInput, RefundResult } from "./store.ts";

export type FailureKind = "overloaded" | "retryable" | "reset" | "error" | "timeout" | "invalid";

export type CallAnswer =
  | { readonly kind: "answered"; readonly result: CallResult; readonly attempts: number }
  | {
      readonly kind: "failed";
      readonly failure: FailureKind;
      /** For the log: the error's message (never used to decide anything). */
      readonly message: string;
      readonly attempts: number;
      /** The call still running after the budget ran out, if any. */
      readonly late: Promise<CallResult> | null;
    };

/** How calls reach a key's object. Each `call` is one attempt (a fresh stub in the Worker). */
export interface ObjectTransport {
  call(name: string, input: CallInput): Promise<CallResult>;
  refund(name: string, input: RefundInput): Promise<RefundResult>;
  /** Give slots back by id (slots.ts); absent where no slot-holding rule is called (the simulated tiers). */
  release?(name: string, input: ReleaseInput): Promise<ReleaseResult>;
}

/** Counters a call updates (the isolate's `/_sluice/stats`). */
export interface CallCounters {
  object_calls: number;
  object_retries: number;
}

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

/** Call the object named `name` within `timeoutMs` on the given sleeper, counting calls. */
export async function callObject(
  transport: ObjectTransport,
  name: string,
  input: CallInput,
  timeoutMs: number,
  isolate: { readonly sleep: (ms: number) => Promise<void>; readonly stats: CallCounters },
): Promise<CallAnswer> {
  const { stats } = isolate;
  const deadline = isolate.sleep(timeoutMs).then(() => "timeout" as const);
  for (let attempt = 1; ; attempt++) {
    stats.object_calls++;
    if (attempt > 1) stats.object_retries++;
    const call = transport.call(name, input);
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
