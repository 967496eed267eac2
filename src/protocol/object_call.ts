/**
 * One call to a key's Durable Object within a budget, as a value: the answer, or why none (by the error's structured
 * fields). A retryable error is retried once with the same call id; past the budget, `timeout` with the late answer.
 */
import type { ReleaseInput, ReleaseResult } from "./slots.ts";
import type { CallInput, CallResult, RefundInput, RefundResult } from "./store.ts";

export type FailureKind = "overloaded" | "retryable" | "reset" | "error" | "timeout" | "invalid";

export type CallAnswer = (
  | { readonly kind: "answered"; readonly result: CallResult; readonly attempts: number }
  | {
      readonly kind: "failed";
      readonly failure: FailureKind;
      /** For the log only. */
      readonly message: string;
      readonly attempts: number;
      /** The call still running after the budget ran out, if any. */
      readonly late: Promise<CallResult> | null;
    }
) & {
  /**
   * A call sent twice (delegate_call.ts `awaitLate`) that the object applied twice (it forgot the first copy by the
   * time the other came): the answer not taken, whose admissions are nobody's. Never settles otherwise.
   */
  readonly duplicate?: Promise<CallResult>;
};

/** How calls reach a key's object. Each `call` is one attempt (a fresh stub in the Worker). */
export interface ObjectTransport {
  call(name: string, input: CallInput): Promise<CallResult>;
  refund(name: string, input: RefundInput): Promise<RefundResult>;
  /** Give slots back by id (slots.ts); absent where no slot-holding rule is called (the simulated tiers). */
  release?(name: string, input: ReleaseInput): Promise<ReleaseResult>;
}

/** Counters a call updates (the isolate's `/_sluice/stats`). */
export type CallCounters = { object_calls: number; object_retries: number };

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
  return typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error);
}

/** The first of two calls (the same call sent twice) to answer; if both fail, the first's failure (never an unhandled rejection). */
export function firstAnswer<T>(a: Promise<T>, b: Promise<T>): Promise<T> {
  a.catch(() => undefined);
  b.catch(() => undefined);
  return Promise.any([a, b]).catch(() => a);
}

/** Call the object named `name` within `timeoutMs` on the given sleeper, counting calls. */
export async function callObject(
  transport: ObjectTransport,
  name: string,
  input: CallInput,
  timeoutMs: number,
  isolate: { readonly sleep: (ms: number) => Promise<void>; readonly stats: CallCounters },
): Promise<CallAnswer> {
  const deadline = isolate.sleep(timeoutMs).then(() => "timeout" as const);
  const message = `no answer within ${timeoutMs} ms`;
  for (let attempt = 1; ; attempt++) {
    isolate.stats.object_calls++;
    if (attempt > 1) isolate.stats.object_retries++;
    const call = transport.call(name, input);
    const settled = call.then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const raced = await Promise.race([settled, deadline]);
    if (raced === "timeout") return { kind: "failed", failure: "timeout", message, attempts: attempt, late: call };
    if (raced.ok) return { kind: "answered", result: raced.result, attempts: attempt };
    const { failure, retry } = classify(raced.error);
    if (!retry || attempt >= 2) {
      return { kind: "failed", failure, message: messageOf(raced.error), attempts: attempt, late: null };
    }
  }
}
