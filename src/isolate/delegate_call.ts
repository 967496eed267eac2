/** An isolate's call to its region's delegate (`callTarget`), else the key's object (`callDelegates` says when). */

import { uses } from "../protocol/mechanisms.ts";
import { type CallAnswer, callObject, firstAnswer } from "../protocol/object_call.ts";
import { holdsSlots } from "../protocol/slots.ts";
import type { CallInput, CallResult, LeaseReturn } from "../protocol/store.ts";
import { DELEGATE_BACKOFF_MS, DELEGATE_RESET_BACKOFF_MS, DELEGATE_RESET_RETRY_MS } from "../protocol/tunables.ts";
import type { CoalescerOptions, DelegateRoute, NotedCallInput, NotedReturn } from "./coalesce_types.ts";
import { busyFailure, type KeyState } from "./key_state.ts";

/** What calling the delegates came to: an answer (or a failure to keep), or `fallBack` to the key's object. */
type DelegateOutcome =
  | { readonly kind: "answer"; readonly answer: CallAnswer; readonly from: DelegateRoute; readonly sent: CallInput }
  | { readonly kind: "fallBack"; readonly avoidForMs: number };

/** The region's other shard than `tried` (`null`: this isolate's own shard is the first). */
export function otherShard(routes: DelegateRoute, tried: DelegateRoute): DelegateRoute | null {
  if (routes.ownShard === undefined) return null;
  return tried.name === routes.name ? routes.ownShard : { transport: routes.transport, name: routes.name };
}

/** How long to avoid a delegate after `failure`, ms; `null`: an answer, or busy (overloaded, slow). */
export function avoidFor(failure: CallAnswer): number | null {
  if (failure.kind === "answered" || busyFailure(failure.failure)) return null;
  return failure.failure === "reset" ? DELEGATE_RESET_BACKOFF_MS : DELEGATE_BACKOFF_MS;
}

/**
 * Call `delegate` (of `routes`): an answer or a busy failure (decided from last known, never sent on) is the outcome;
 * a reset is tried on the other shard (a new id, no refunds), then again every `DELEGATE_RESET_RETRY_MS` within three
 * quarters of the budget (the fallback has its own); else `fallBack`.
 */
export async function callDelegates(
  deps: Pick<CoalescerOptions, "clock" | "sleep" | "counters" | "newId">,
  routes: DelegateRoute,
  delegate: DelegateRoute,
  input: CallInput,
  timeoutMs: number,
): Promise<DelegateOutcome> {
  const startMs = deps.clock();
  const call = (route: DelegateRoute, body: CallInput) =>
    callObject(route.transport, route.name, body, timeoutMs, { sleep: deps.sleep, stats: deps.counters });
  const first = await call(delegate, input);
  let avoid = avoidFor(first);
  if (avoid === null) return { kind: "answer", answer: first, from: delegate, sent: input };
  deps.counters.delegate_failures = (deps.counters.delegate_failures ?? 0) + 1;
  if (first.kind === "failed" && first.failure === "reset") {
    const other = otherShard(routes, delegate);
    if (other !== null) {
      const sent = { ...input, id: deps.newId(), giveBack: [] };
      const answer = await call(other, sent);
      if (avoidFor(answer) === null) return { kind: "answer", answer, from: other, sent };
    }
    while (deps.clock() + DELEGATE_RESET_RETRY_MS - startMs < (timeoutMs * 3) / 4) {
      await deps.sleep(DELEGATE_RESET_RETRY_MS);
      const again = await call(delegate, input);
      avoid = avoidFor(again);
      if (avoid === null) return { kind: "answer", answer: again, from: delegate, sent: input };
      if (again.kind === "failed" && again.failure !== "reset") break;
    }
  }
  return { kind: "fallBack", avoidForMs: avoid ?? DELEGATE_BACKOFF_MS };
}

/** A call's give-backs: to `delegate`, or `away` to the other delegates that lent them (only a lender holds theirs). */
export function byLender(delegate: DelegateRoute, giveBack: readonly NotedReturn[]) {
  const here: LeaseReturn[] = [];
  const away = new Map<string, { readonly to: DelegateRoute; readonly giveBack: LeaseReturn[] }>();
  for (const { lender, ...back } of giveBack) {
    if (lender === undefined || lender.name === delegate.name) here.push(back);
    else {
      const to = away.get(lender.name) ?? { to: lender, giveBack: [] };
      to.giveBack.push(back);
      away.set(lender.name, to);
    }
  }
  return { here, away: [...away.values()] };
}

/** Send the same call again (`awaitLate`): its answer to come, or `null` if it was not sent. */
export type Resend = () => Promise<{ readonly answer: Promise<CallResult> } | null>;

/**
 * A call past its budget on a key not known busy (`knownBusy`; likelier the network's tail than a queue: docs/
 * production.md, "Failure cases"): its late answer decides within one more budget; with no word half of it on, the
 * same call (its id) is sent `again`, and either answer within a budget from then decides. Else the timeout stands.
 */
export async function awaitLate(
  deps: Pick<CoalescerOptions, "clock" | "sleep" | "counters">,
  st: KeyState,
  answer: CallAnswer,
  again?: Resend,
): Promise<CallAnswer> {
  if (answer.kind !== "failed" || answer.failure !== "timeout" || answer.late === null) return answer;
  if (!uses("lateAnswers") || st.knownBusy(deps.clock())) return answer;
  const halfMs = Math.ceil(st.timeoutMs / 2);
  let late = answer.late;
  let duplicate: Promise<CallResult> | undefined;
  let got = await within(late, deps.sleep(halfMs));
  if (got === undefined) {
    const resent = again !== undefined && uses("resend") ? await again() : null;
    if (resent !== null) {
      const first = late;
      late = firstAnswer(first, resent.answer);
      duplicate = appliedTwice(late, first, resent.answer);
    }
    got = await within(late, deps.sleep(resent !== null ? st.timeoutMs : st.timeoutMs - halfMs));
  }
  const twice = duplicate === undefined ? {} : { duplicate };
  if (got == null) return { ...answer, late, ...twice };
  deps.counters.late_answers = (deps.counters.late_answers ?? 0) + 1;
  return { kind: "answered", result: got, attempts: answer.attempts, ...twice };
}

/**
 * A call that failed `retryable` or `reset` on both attempts (the object may have applied it) is sent once more as a
 * copy, its answer taken as a late one: an admission of a request refused meanwhile is given back (chaos.test.ts,
 * "answers lost"). A plain error is never sent again (failure_policy.test.ts).
 */
async function resendUnknown(answer: CallAnswer, again: Resend): Promise<CallAnswer> {
  if (answer.kind !== "failed" || (answer.failure !== "retryable" && answer.failure !== "reset")) return answer;
  const resent = await again();
  return resent === null ? answer : { ...answer, late: resent.answer };
}

/** The answer of two copies not `taken`, if the object applied both (neither a replay); else never settles. */
function appliedTwice(taken: Promise<CallResult>, a: Promise<CallResult>, b: Promise<CallResult>) {
  const settled = (p: Promise<CallResult>) => p.catch(() => null);
  return Promise.all([settled(taken), settled(a), settled(b)]).then(([t, x, y]) =>
    x === null || y === null || x.replayed || y.replayed ? new Promise<CallResult>(() => {}) : t === x ? y : x,
  );
}

/** `late`'s result if it comes before `deadline`: `null` if it failed, `undefined` if no word came by then. */
const within = (late: Promise<CallResult>, deadline: Promise<void>): Promise<CallResult | null | undefined> =>
  Promise.race([late.catch(() => null), deadline.then(() => undefined)]);

/**
 * A copy's result, whenever it comes (a copy applied late still charged), or a rejection: failed, or `unsure` (the
 * first copy decides). Marked handled at once: it may fail before its takers wait for it.
 */
function resultOf(answer: Promise<CallAnswer>): Promise<CallResult> {
  const none = () => Promise.reject(new Error("no answer"));
  const usable = (r: CallResult) => (r.unsure === true ? none() : r);
  const result = answer.then((a) => (a.kind === "answered" ? usable(a.result) : (a.late?.then(usable) ?? none())));
  result.catch(() => undefined);
  return result;
}

/** `input` without the isolate's notes on what it gives back. */
function unnoted(input: NotedCallInput): CallInput {
  const giveBack = input.giveBack ?? [];
  if (!giveBack.some((b) => b.lender !== undefined)) return input;
  return { ...input, giveBack: giveBack.map(({ lender: _lender, ...back }) => back) };
}

/**
 * Make the call: to the delegate if any, else or on its fallback to the key's object (no refunds: the delegate may
 * have applied them). A busy key's object sends the key to the delegate; a busy first shard, this isolate to its own.
 */
export async function callTarget(
  options: CoalescerOptions,
  st: KeyState,
  delegate: DelegateRoute | null,
  input: NotedCallInput,
  /** Keeps the return-only calls to other lenders alive after the answer (the request's `waitUntil`). */
  keepAlive?: (work: Promise<unknown>) => void,
): Promise<CallAnswer> {
  const isolate = { sleep: options.sleep, stats: options.counters };
  // The same call sent again, its first copy sent at `sentAtMs` (store.ts: applied only if the object remembers that
  // far back). Without its units given back: one that forgot them would take them twice (a lost first: short).
  const resend = (to: Pick<DelegateRoute, "transport" | "name">, call: CallInput, sentAtMs: number) => {
    const copy = { ...call, giveBack: [], resent: options.clock() - sentAtMs + st.timeoutMs };
    return { answer: resultOf(callObject(to.transport, to.name, copy, st.timeoutMs, isolate)) };
  };
  const direct = async (call: CallInput) => {
    const sentAtMs = options.clock();
    const first = await callObject(st.transport, st.name, call, st.timeoutMs, isolate);
    // Not again to a key its data center marks hot: its object is busy, not lost (its late answer is waited for). Nor
    // a take of a slot: a copy applied apart would hold a second slot until released by a late answer that may not come.
    const again: Resend = async () => {
      if (holdsSlots(st.rule.params)) return null;
      return (await st.spreadMark?.(st.name).catch(() => null)) != null ? null : resend(st, call, sentAtMs);
    };
    const answer = await awaitLate(options, st, first, again);
    if (answer.kind === "failed") st.overloadTeachesHot(answer.failure, options.clock());
    return call.costs.length > 0 ? resendUnknown(answer, again) : answer;
  };
  if (delegate === null || st.delegate === null) return direct(unnoted(input));
  const { here, away } = byLender(delegate, input.giveBack ?? []);
  const sentAtMs = options.clock();
  const out = await callDelegates(options, st.delegate, delegate, { ...input, giveBack: here }, st.timeoutMs);
  if (out.kind === "fallBack") {
    st.delegateDownUntilMs = options.clock() + out.avoidForMs;
    return direct({ ...input, id: options.newId(), giveBack: [] });
  }
  const answer = await awaitLate(options, st, out.answer, async () => resend(out.from, out.sent, sentAtMs));
  const overloaded = answer.kind === "failed" && answer.failure === "overloaded";
  // Not after an overloaded answer, nor a fallback: the coalescer sends all of it again (`refundsLanded`), and a lender
  // given a return twice might match another lease of the same ms with it. Not waited for: the answer is ready now.
  if (!overloaded && away.length > 0) {
    const sent = away.map((a) => {
      const back = { rule: input.rule, id: options.newId(), costs: [], giveBack: a.giveBack, lease: null };
      return callObject(a.to.transport, a.to.name, back, st.timeoutMs, isolate);
    });
    keepAlive?.(Promise.all(sent).catch(() => undefined));
  }
  // The first shard's spread (busy without one, or overloaded: as spread as can be, `heardBusy`).
  const busy = answer.kind === "answered" ? answer.result.busy === true : overloaded;
  if (busy && out.from.name === st.delegate.name)
    st.heardBusy(answer.kind === "answered" ? (answer.result.spread ?? 1) : 1, options.clock());
  return answer;
}
