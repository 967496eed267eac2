/**
 * An isolate's call to its region's delegate (`callTarget` below makes it, and falls back to the key's
 * object when this gives up). A delegate that fails as **reset** is restarting: it keeps its record durably and is
 * back in about 100 ms, so sending every region's batches to the key's object (which holds none of the rate the
 * delegates' shares hold, and is one object for the world) for `DELEGATE_BACKOFF_MS` cost 4-9% of a window in the
 * cluster simulation. Instead: the region's other shard first, then the same delegate again after a short wait, within
 * three quarters of the call's budget (`resetRetryMs`); only then the key's object, and the delegate avoided for
 * `DELEGATE_RESET_BACKOFF_MS`.
 * Any other failure (unreachable, an error) avoids it for `DELEGATE_BACKOFF_MS`, as before.
 */
import { type CallAnswer, callObject, type ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput } from "../protocol/store.ts";
import { DELEGATE_BACKOFF_MS, DELEGATE_RESET_BACKOFF_MS, DELEGATE_RESET_RETRY_MS } from "../protocol/tunables.ts";
import type { CoalesceCounters, CoalescerOptions, DelegateRoute, KeyState } from "./coalesce_types.ts";
import { noteDelegateBusy } from "./key_state.ts";
import { overloadTeachesHot } from "./last_known.ts";

/**
 * How long after its first call an isolate may start another call to a reset delegate, ms: three quarters of the
 * call's budget (the fallback to the key's object then has a budget of its own). A restarting delegate is back in
 * about 100 ms, and a call it was deciding when it went fails at the restart's start: within half the budget (125 ms
 * of 250) such a call's retries (its first two calls take some 40 ms, the next starts 50 ms after) ended about 105 ms
 * in, before the delegate was back, and it went to the key's object (cluster simulation, every delegate restarting,
 * hot-window 1,000 isolates at 10k req/s: 32 such calls in 100 ms, then 17 more while those isolates avoided their
 * delegate; 129 calls in that second at the key's object, 77 with three quarters, none of them an isolate's).
 */
export function resetRetryMs(timeoutMs: number): number {
  return (timeoutMs * 3) / 4;
}

export interface DelegateCallDeps {
  readonly clock: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly counters: CoalesceCounters;
  readonly newId: () => string;
}

/** What calling the delegates came to: an answer (or a failure to keep), or `fallBack` to the key's object. */
export type DelegateOutcome =
  | { readonly kind: "answer"; readonly answer: CallAnswer; readonly from: DelegateRoute }
  | { readonly kind: "fallBack"; readonly avoidForMs: number };

/**
 * The region's other shard for a route that failed: the first shard when `tried` is this isolate's own, its own when
 * `tried` is the first (`null`: this isolate's shard is the first, or no other is known).
 */
export function otherShard(routes: DelegateRoute, tried: DelegateRoute): DelegateRoute | null {
  if (routes.ownShard === undefined) return null;
  return tried.name === routes.name ? routes.ownShard : { transport: routes.transport, name: routes.name };
}

/**
 * How long to avoid a delegate whose call failed as `failure` (after its retries), ms: `null` for a failure that is
 * not a delegate's failure (it answered, or is busy: overloaded or slow).
 */
export function avoidFor(failure: CallAnswer): number | null {
  if (failure.kind === "answered" || failure.failure === "overloaded" || failure.failure === "timeout") return null;
  return failure.failure === "reset" ? DELEGATE_RESET_BACKOFF_MS : DELEGATE_BACKOFF_MS;
}

/**
 * Call `delegate` (the route `routes` chose) with `input` within `timeoutMs`. An answer, or a busy delegate's failure
 * (overloaded, timing out: decided from what the isolate last knew, never sent to the key's object), is the outcome;
 * a reset is tried on the other shard (a new id, no refunds: the first may have applied them), then on the same
 * delegate (the same input: a delegate that applied it answers as remembered) every `DELEGATE_RESET_RETRY_MS` while
 * within `resetRetryMs` of the budget; any other failure, or a reset that outlasts that, falls back to the key's object.
 */
export async function callDelegates(
  deps: DelegateCallDeps,
  routes: DelegateRoute,
  delegate: DelegateRoute,
  input: CallInput,
  timeoutMs: number,
): Promise<DelegateOutcome> {
  const startMs = deps.clock();
  const isolate = { sleep: deps.sleep, stats: deps.counters };
  const call = (route: { transport: ObjectTransport; name: string }, call: CallInput) =>
    callObject(route.transport, route.name, call, timeoutMs, isolate);
  const first = await call(delegate, input);
  let avoid = avoidFor(first);
  if (avoid === null) return { kind: "answer", answer: first, from: delegate };
  deps.counters.delegate_failures = (deps.counters.delegate_failures ?? 0) + 1;
  if (first.kind === "failed" && first.failure === "reset") {
    const other = otherShard(routes, delegate);
    if (other !== null) {
      const answer = await call(other, { ...input, id: deps.newId(), giveBack: [] });
      if (avoidFor(answer) === null) return { kind: "answer", answer, from: other };
    }
    while (deps.clock() + DELEGATE_RESET_RETRY_MS - startMs < resetRetryMs(timeoutMs)) {
      await deps.sleep(DELEGATE_RESET_RETRY_MS);
      const again = await call(delegate, input);
      avoid = avoidFor(again);
      if (avoid === null) return { kind: "answer", answer: again, from: delegate };
      if (again.kind === "failed" && again.failure !== "reset") break;
    }
  }
  return { kind: "fallBack", avoidForMs: avoid ?? DELEGATE_BACKOFF_MS };
}

/**
 * Make the call: to the delegate, when there is one (delegate_call.ts `callDelegates`: a reset one is tried on the
 * other shard, then again shortly), else, or when it fails, to the key's object (the fallback carries no refunds: the
 * delegate may have applied them). A busy delegate's failure (overloaded, timing out) is decided from what this
 * isolate last knew, never sent to the key's object. A busy key's object (overloaded, or timing out) sends the key to
 * the delegate (`overloadTeachesHot`); a busy delegate, to its own shard (`noteDelegateBusy`).
 */
export async function callTarget(
  options: CoalescerOptions,
  st: KeyState,
  delegate: DelegateRoute | null,
  input: CallInput,
): Promise<CallAnswer> {
  const isolate = { sleep: options.sleep, stats: options.counters };
  const direct = async (call: CallInput) => {
    const answer = await callObject(st.transport, st.name, call, st.timeoutMs, isolate);
    if (answer.kind === "failed") overloadTeachesHot(st, answer.failure, options.clock());
    return answer;
  };
  if (delegate === null || st.delegate === null) return direct(input);
  const out = await callDelegates(options, st.delegate, delegate, input, st.timeoutMs);
  if (out.kind === "answer") {
    const { answer } = out;
    noteDelegateBusy(st, answer.kind === "answered" ? answer.result.busy === true : answer.failure === "overloaded");
    return answer;
  }
  st.delegateDownUntilMs = options.clock() + out.avoidForMs;
  return direct({ ...input, id: options.newId(), giveBack: [] });
}
