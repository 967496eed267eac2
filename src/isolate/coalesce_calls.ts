/** A coalescer's calls (coalesce.ts): who leads, what a call carries, its answers, refunds and lease returns. */

import { uses } from "../protocol/mechanisms.ts";
import type { CallAnswer, FailureKind } from "../protocol/object_call.ts";
import { type CallInput, type CallResult, type CheckResult, leaseCapOf, type RefundResult } from "../protocol/store.ts";
import { OVERLOAD_BACKOFF_MS, RETURN_WAIT_MS } from "../protocol/tunables.ts";
import {
  type Asked,
  type AskInput,
  AUTO_LEASE,
  COALESCE_MAX_KEYS,
  type CoalescerOptions,
  leaseSettingsOf,
  type NotedCallInput,
  type NotedReturn,
  type Waiting,
} from "./coalesce_types.ts";
import { callTarget } from "./delegate_call.ts";
import { busyFailure, hashString, heldAnswer, KeyState, lateResult } from "./key_state.ts";
import { giveSlotBack } from "./slot_return.ts";

export type KeepAlive = AskInput["keepAlive"];

/** A call starts (or the key is held as if one did). */
export function startCall(st: KeyState, now: number): void {
  st.inFlight = true;
  st.inFlightSinceMs = now;
}

/** An answer's news: busy (lease even below `above`), hot or cold. */
export function noteAnswer(st: KeyState, result: CallResult, now: number): void {
  if (result.busy === true) st.busyUntilMs = now + (st.leaseSettings?.ttlMs ?? 0);
  st.noteHot(result.hot, now);
}

/** Whether the key has units to give back (ended leases' or refunds), for the next call. */
export const owes = (st: KeyState): boolean => st.returns.length > 0 || st.refunds.length > 0;

/** Stop admitting from the key's lease; its unused units go back with the next call. */
export function endLease(st: KeyState): void {
  const held = st.lease;
  if (held === null) return;
  st.lease = null;
  if (held.unitsLeft > 0) st.returns.push(held);
  else held.returned = true;
}

/** What one coalescer keeps over all its keys, and its calls (coalesce.ts `Coalescer` holds one). */
export class Calls {
  readonly keys = new Map<string, KeyState>();
  /** Who waits for the refunds each call in flight carries (`refundObject`). */
  readonly refundWaiters = new WeakMap<CallInput, ((result: RefundResult) => void)[]>();
  /** Seeded on first use (`spread`): at module load the runtime refuses random values. */
  private spreadSeed: number | null = null;

  constructor(readonly options: CoalescerOptions) {}

  /** A deterministic pseudo-random integer in [0, rangeMs) (a xorshift): spreads renewals of synchronized isolates. */
  spread(rangeMs: number): number {
    if (rangeMs < 1) return 0;
    let x = this.spreadSeed ?? hashString(this.options.newId());
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.spreadSeed = x >>> 0 || 1; // never 0
    return this.spreadSeed % Math.floor(rangeMs);
  }

  /**
   * A request the object could not decide: refused if short here or the object busy (then refused here for part of
   * `OVERLOAD_BACKOFF_MS`, unless `backoff` is false); any other failure: `null`, its rule's `on_error`.
   */
  lastKnown(st: KeyState, failure: FailureKind, now: number, backoff = true): Asked | null {
    if (failure === "overloaded") st.overloadedUntilMs = now + (st.leaseSettings?.ttlMs ?? AUTO_LEASE.ttlMs);
    if (now >= st.lastKnownUntilMs) {
      if (!busyFailure(failure)) return null;
      if (backoff) {
        st.lastKnownUntilMs = now + OVERLOAD_BACKOFF_MS / 2 + this.spread(OVERLOAD_BACKOFF_MS / 2);
        st.lastKnownRetryAtMs = Math.max(st.lastKnownRetryAtMs, st.lastKnownUntilMs);
      }
    }
    this.options.counters.last_known_answers = (this.options.counters.last_known_answers ?? 0) + 1;
    return st.lastKnownRefusal(now);
  }

  /** A grant `short` of the need: refuse beyond the lease until `endsAtMs`, retry when the object's denials say. */
  noteLastKnown(st: KeyState, short: boolean, endsAtMs: number, results: readonly CheckResult[]): void {
    st.lastKnownUntilMs = short ? endsAtMs : 0;
    st.lastKnownRetryAtMs = short ? endsAtMs : 0;
    if (!short) return;
    const now = this.options.clock();
    st.shortAtMs = now;
    for (const r of results) {
      if (!r.ok || r.decision.allowed || r.decision.retryAfterMs === null) continue;
      st.lastKnownRetryAtMs = Math.max(st.lastKnownRetryAtMs, now + r.decision.retryAfterMs);
    }
  }

  /** Let the first waiting request make the next call. */
  handOff(st: KeyState): void {
    const next = st.queue[0];
    if (st.inFlight || next === undefined) return;
    startCall(st, this.options.clock());
    next.settled = true;
    next.resolve("lead");
  }

  /** A request waited two budgets for a call that never came: decided as `lastKnown` says of a busy object. */
  giveUp(st: KeyState, me: Waiting): void {
    if (me.settled) return;
    me.settled = true;
    st.queue.splice(st.queue.indexOf(me), 1);
    me.resolve(this.lastKnown(st, "timeout", this.options.clock())!);
    if (st.inFlight && this.options.clock() - st.inFlightSinceMs >= 2 * st.timeoutMs) {
      st.inFlight = false;
      this.handOff(st);
    }
  }

  /** The key's state, made new (forgetting idle keys beyond `COALESCE_MAX_KEYS`) or brought up to the input's rule. */
  stateOf(input: AskInput): KeyState {
    let st = this.keys.get(input.name);
    if (st === undefined) {
      st = new KeyState(input, this.options.clock());
      for (const [name, idle] of this.keys) {
        if (this.keys.size < COALESCE_MAX_KEYS) break;
        if (!idle.inFlight && idle.lease === null && !owes(idle)) this.keys.delete(name);
      }
    } else {
      this.keys.delete(input.name); // re-inserted below: the map's order is least recently used first
      // A newer rules version: the lease held under the older one ends (its units go back with the next call).
      if ((input.rule.version ?? 0) > (st.rule.version ?? 0)) endLease(st);
      st.transport = input.transport;
      st.rule = input.rule;
      st.timeoutMs = input.timeoutMs;
      st.leaseSettings = leaseSettingsOf(input);
      st.delegate = input.delegate ?? null;
    }
    this.keys.set(input.name, st);
    return st;
  }

  /** The queued requests answered without a call (from the lease, then refused while short); the rest: the batch. */
  answerHere(st: KeyState, queued: Waiting[], leader: Waiting | null): { batch: Waiting[]; mine: Asked | null } {
    const now = this.options.clock();
    let mine: Asked | null = null;
    const answer = (w: Waiting, a: Asked) => {
      if (w === leader) mine = a;
      else w.resolve(a);
    };
    let served = 0;
    for (const w of queued) {
      const a = this.leaseServe(st, w.cost, now, w.keepAlive);
      if (a === null) break;
      answer(w, a);
      served++;
    }
    const batch = queued.slice(served);
    if (batch.length === 0 || now >= st.lastKnownUntilMs) return { batch, mine };
    for (const w of batch) answer(w, this.refuseShort(st, now)!);
    return { batch: [], mine };
  }

  /** The call for `batch`: its costs, the held units to give back, and a lease to ask for (remembered for `settle`). */
  callInput(st: KeyState, batch: readonly Waiting[], renew: boolean, toDelegate: boolean): NotedCallInput {
    const { counters, clock } = this.options;
    const giveBack: NotedReturn[] = [];
    for (const held of st.returns.splice(0)) {
      held.returned = true;
      if (held.unitsLeft <= 0) continue;
      const { unitsLeft: units, atMs, from, id } = held;
      const lender = from === undefined ? {} : { lender: from };
      giveBack.push({ units, atMs, ...lender, ...(id === undefined ? {} : { id }) });
      counters.lease_units_returned += held.unitsLeft;
      held.unitsLeft = 0;
    }
    giveBack.push(...st.refunds.splice(0));
    const waiters = st.refundWaiters.splice(0);
    const input: NotedCallInput = {
      rule: st.rule,
      id: this.options.newId(),
      costs: batch.map((w) => w.cost),
      giveBack,
      lease: batch.length > 0 || renew ? st.leaseAsk(clock(), toDelegate) : null,
    };
    const ask = input.lease;
    // A grant cut at the cap one lease may take is no sign of a short key.
    const need = ask == null ? 0 : Math.min(ask.units, st.seenOver(clock(), ask.ttlMs), leaseCapOf(st.rule.params));
    st.lastAsk = ask == null ? undefined : { ...ask, need, sub: toDelegate };
    if (batch.length > 1) counters.batched_requests += batch.length;
    if (waiters.length > 0) this.refundWaiters.set(input, waiters);
    return input;
  }

  /** Each request's answer from the key's object's (or delegate's) result for the batch. */
  answered(st: KeyState, batch: readonly Waiting[], result: CallResult, attempts: number): Asked[] {
    return batch.map((w, i): Asked => {
      const r = result.results[i] ?? { ok: false as const, error: "invalid_cost" as const };
      const refund = () =>
        r.ok && r.decision.allowed ? this.giveAdmissionBack(st, w, r.slot, r.atMs) : Promise.resolve(null);
      return { kind: "answered", result: r, source: "object", attempts, refund };
    });
  }

  /** Each request's answer when the call failed: from what this isolate last knew, or the failure (`on_error`). */
  failed(st: KeyState, batch: readonly Waiting[], answer: CallAnswer & { kind: "failed" }): Asked[] {
    const { failure, message, attempts, late } = answer;
    const now = this.options.clock();
    return batch.map(
      (w, i): Asked =>
        this.lastKnown(st, failure, now) ?? {
          kind: "failed",
          failure,
          message,
          attempts,
          late: late === null ? null : lateResult(late, i),
          refund: (admittedAtMs) => this.refundObject(st, w.cost, admittedAtMs, w.keepAlive),
        },
    );
  }

  /**
   * The admissions of `results` nobody uses given back: all (a call the object applied twice: `awaitLate`), or, of a
   * failed call's late answer, those of the requests refused `here` (`lastKnown`).
   */
  giveBackAll(st: KeyState, batch: readonly Waiting[], results: readonly CheckResult[], here?: readonly Asked[]) {
    for (const [i, w] of batch.entries()) {
      const refused = here === undefined || (here[i]?.kind === "answered" && uses("lateRefunds"));
      const x = refused ? results[i] : undefined;
      if (x?.ok && x.decision.allowed) void this.giveAdmissionBack(st, w, x.slot, x.atMs);
    }
  }

  /** An admission nobody uses: its slot back by id at once (slot_return.ts), else a refund with the key's next call. */
  private giveAdmissionBack(st: KeyState, w: Waiting, slot: number | undefined, atMs: number) {
    return giveSlotBack(st, slot, w.keepAlive) ?? this.refundObject(st, w.cost, atMs, w.keepAlive);
  }

  /** A request answered from the key's live lease, if it holds `cost` (`refund` gives it back to the lease). */
  leaseServe(st: KeyState, cost: number, now: number, keepAlive: KeepAlive): Asked | null {
    const lease = st.lease;
    if (lease === null || lease.returned || now >= lease.endsAtMs || lease.unitsLeft < cost) return null;
    lease.unitsLeft -= cost;
    this.options.counters.lease_answers++;
    const resetAfterMs = Math.max(0, lease.endsAtMs - now);
    const decision = { allowed: true, remaining: lease.unitsLeft, resetAfterMs, retryAfterMs: null, delayMs: 0 };
    return heldAnswer(lease.atMs, decision, () => {
      const at = this.options.clock();
      st.unsee(at);
      if (st.lease === lease && at < lease.endsAtMs) {
        lease.unitsLeft += cost;
        return Promise.resolve({ remaining: lease.unitsLeft, resetAfterMs: lease.endsAtMs - at });
      }
      if (!lease.returned) {
        // Ended but not yet given back: it goes back with its other unused units.
        lease.unitsLeft += cost;
        return Promise.resolve(null);
      }
      return this.refundObject(st, cost, lease.atMs, keepAlive, false);
    });
  }

  /** While the key is short here (`lastKnownUntilMs`), a last known refusal; else `null`. */
  refuseShort(st: KeyState, now: number): Asked | null {
    if (now >= st.lastKnownUntilMs) return null;
    this.options.counters.lease_answers++;
    return st.lastKnownRefusal(now);
  }

  /**
   * Give an admission back with the key's next call (at most `RETURN_WAIT_MS` later if hot), answering `null` (one unit
   * short: the safe side); a cold key with no call in flight sends it at once.
   */
  private refundObject(st: KeyState, cost: number, admittedAtMs: number, keepAlive: KeepAlive, unseen = true) {
    const { clock, sleep, resume } = this.options;
    if (unseen) st.unsee(clock());
    const same = st.refunds.findIndex((r) => r.atMs === admittedAtMs);
    if (same === -1) st.refunds.push({ units: cost, atMs: admittedAtMs, admitted: true });
    else st.refunds[same] = { units: st.refunds[same]!.units + cost, atMs: admittedAtMs, admitted: true };
    if (this.returnLater(st, keepAlive)) return Promise.resolve(null);
    if (!st.inFlight) return this.sendReturns(st, keepAlive);
    // With the next call (`afterCall`), answering when it lands or after two budgets (a timer of its own: see `wait`).
    const landed = new Promise<RefundResult>((resolve) => st.refundWaiters.push(resolve));
    const bounded = sleep(2 * st.timeoutMs).then(() => null);
    return Promise.race([resume?.(landed) ?? landed, bounded]);
  }

  /** Send the refunds and lease returns waiting, in a call of their own (nothing else to carry them). */
  private async sendReturns(st: KeyState, keepAlive: KeepAlive): Promise<RefundResult> {
    const { clock } = this.options;
    startCall(st, clock());
    try {
      const delegate = st.delegateFor(clock());
      const input = this.callInput(st, [], false, delegate !== null);
      const answer = await callTarget(this.options, st, delegate, input, keepAlive);
      this.refundsLanded(st, input, answer);
      if (answer.kind !== "answered") return null; // not given back: the key is short that much, never over
      noteAnswer(st, answer.result, clock());
      return answer.result.refunded ?? null;
    } finally {
      this.afterCall(st, keepAlive);
    }
  }

  /** A call ended: the first request waiting leads the next; with none, refunds go now (hot: with the next call). */
  afterCall(st: KeyState, keepAlive: KeepAlive): void {
    st.inFlight = false;
    this.handOff(st);
    if (st.inFlight || st.refunds.length === 0 || this.returnLater(st, keepAlive)) return;
    const work = this.sendReturns(st, keepAlive); // sent with or without `keepAlive` (`?.` would skip it)
    keepAlive?.(work);
  }

  /** A hot key's returns (or after an overload's backoff) go with its next call, or in one of their own after a wait. */
  private returnLater(st: KeyState, keepAlive: KeepAlive): boolean {
    const now = this.options.clock();
    if (!st.isHot(now) && now >= st.returnsNotBeforeMs) return false;
    this.armReturns(st, keepAlive);
    return true;
  }

  /** Make sure the refunds waiting reach the object: with the next call, or in one of their own after a wait. */
  private armReturns(st: KeyState, keepAlive: KeepAlive): void {
    if (st.returnsArmed) return;
    st.returnsArmed = true;
    const work = this.options.sleep(RETURN_WAIT_MS).then(async () => {
      st.returnsArmed = false;
      if (st.refunds.length === 0) return;
      if (st.inFlight) this.armReturns(st, keepAlive);
      else await this.sendReturns(st, keepAlive);
    });
    keepAlive?.(work);
  }

  /**
   * The refunds a call carried landed; an overloaded object never saw them (again after a backoff); other failures may
   * have applied them: not sent again (short, never over).
   */
  refundsLanded(st: KeyState, input: CallInput, answer: CallAnswer): void {
    const waiters = this.refundWaiters.get(input) ?? [];
    this.refundWaiters.delete(input);
    if (answer.kind === "failed" && answer.failure === "overloaded" && (input.giveBack?.length ?? 0) > 0) {
      st.refunds.unshift(...(input.giveBack ?? []));
      st.refundWaiters.unshift(...waiters);
      st.returnsNotBeforeMs = this.options.clock() + OVERLOAD_BACKOFF_MS;
      return;
    }
    const refunded = answer.kind === "answered" ? (answer.result.refunded ?? null) : null;
    for (const resolve of waiters) resolve(refunded);
  }
}
