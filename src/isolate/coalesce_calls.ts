/**
 * How a coalescer calls a key's object (coalesce.ts has the whole story): requests wait in a queue per key and the
 * first of them leads the next call, which carries the whole batch (`wait`, `handOff`, `flush`); the call goes to the
 * key's object, or while the key is hot to its region's delegate, falling back to the object if the delegate fails
 * (`callTarget`); its answer is spread back over the batch (`settle`). Leases and returns: coalesce.ts `Coalescer`.
 */

import { uses } from "../protocol/mechanisms.ts";
import { type CallAnswer, callObject } from "../protocol/object_call.ts";
import { type CallInput, type CallResult, type LeaseReturn, leaseCapOf, type RefundResult } from "../protocol/store.ts";
import {
  type Asked,
  type AskedLease,
  type AskInput,
  AUTO_LEASE,
  autoLease,
  COALESCE_MAX_KEYS,
  COALESCE_MAX_WAITING,
  type CoalescerOptions,
  type DelegateRoute,
  type HeldLease,
  type KeyState,
  type Waiting,
} from "./coalesce_types.ts";
import { callDelegates } from "./delegate_call.ts";
import {
  delegateFor,
  hashString,
  lateResult,
  leaseAsk,
  newKeyState,
  noteDelegateBusy,
  noteHot,
  readMark,
  seenOver,
  shortOf,
} from "./key_state.ts";
import { type KeyCtx, lastKnown, noteScarcity, overloadTeachesHot, scarceAnswer } from "./last_known.ts";

export type KeepAlive = AskInput["keepAlive"];
export abstract class KeyCalls {
  protected readonly ctx: KeyCtx;
  protected readonly keys = new Map<string, KeyState>();

  /** The lease each key's call in flight asked for (coalesce_types.ts `AskedLease`). */
  protected readonly lastAsk = new WeakMap<KeyState, AskedLease>();
  /** Who waits for the refunds each call in flight carries (`refundObject`). */
  protected readonly refundWaiters = new WeakMap<CallInput, ((result: RefundResult) => void)[]>();
  protected readonly maxKeys: number;
  protected readonly maxWaiting: number;

  /**
   * A small pseudo-random sequence, seeded from an id on first use: spreads renewals (see `spread`). Not in the
   * constructor: the Worker makes its coalescer at module load, where the runtime refuses random values.
   */
  protected spreadSeed: number | null = null;

  constructor(protected readonly options: CoalescerOptions) {
    this.ctx = { clock: options.clock, counters: options.counters, spread: (rangeMs) => this.spread(rangeMs) };
    this.maxKeys = options.maxKeys ?? COALESCE_MAX_KEYS;
    this.maxWaiting = options.maxWaiting ?? COALESCE_MAX_WAITING;
  }

  /**
   * A deterministic pseudo-random integer in [0, rangeMs): how much this isolate shortens a lease's term, or waits past
   * a window's end before renewing, so isolates synchronized (a cold start, a window's end) renew at different instants.
   */
  protected spread(rangeMs: number): number {
    if (rangeMs < 1) return 0;
    let x = this.spreadSeed ?? hashString(this.options.newId());
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.spreadSeed = x >>> 0 || 1;
    return this.spreadSeed % Math.floor(rangeMs);
  }

  /**
   * Queue the request, and wait for its answer or its turn to lead. A call is always made in the context of a request
   * it carries (the first of its batch): the Workers runtime forbids using one request's I/O (a stub, a timer) from
   * another, so a request that finds nothing in flight calls itself, and when a call ends, it hands the next call to
   * the first request waiting.
   */
  protected async wait(st: KeyState, input: AskInput): Promise<Asked> {
    if (st.queue.length >= this.maxWaiting) {
      const { counters } = this.options;
      counters.queue_overflows = (counters.queue_overflows ?? 0) + 1;
      // As an overloaded call: decided from what this isolate last knew (never `on_error`, see `lastKnown`), without
      // the backoff: the object is not the one overloaded, and the requests already waiting still go to it.
      return lastKnown(this.ctx, st, "overloaded", this.options.clock(), false)!;
    }
    let waiting: Waiting | undefined;
    const turn = new Promise<Asked | "lead">((resolve) => {
      waiting = { cost: input.cost, observe: input.observe, keepAlive: input.keepAlive, resolve, settled: false };
    });
    const me = waiting!;
    st.queue.push(me);
    // A leader whose request was cancelled never hands over: after two budgets, give up waiting for it.
    // (Two waits of one budget each: one for the call in flight, one for this request's own.)
    // Then, until its turn comes, the request keeps a timer of its own pending: while another request's call carries
    // it, it has no I/O of its own, and the Workers runtime cancels a request that waits on nothing of its own ("the
    // Worker's code had hung") when the runtime itself resumes it (resume.ts, `resumeInOwnContext`).
    const { sleep } = this.options;
    let turnCame = false;
    void (async () => {
      await sleep(st.timeoutMs);
      if (!me.settled) await sleep(st.timeoutMs);
      this.giveUp(st, me);
      while (!turnCame) await sleep(st.timeoutMs);
    })();
    if (!st.inFlight) this.handOff(st);
    const got = await (this.options.resume?.(turn) ?? turn);
    turnCame = true;
    if (got !== "lead") return got;
    return (await this.flush(st, me, input.keepAlive))!;
  }

  /** Let the first waiting request make the next call. */
  protected handOff(st: KeyState): void {
    const next = st.queue[0];
    if (st.inFlight || next === undefined) return;
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    next.settled = true;
    next.resolve("lead");
  }

  protected giveUp(st: KeyState, me: Waiting): void {
    if (me.settled) return;
    me.settled = true;
    st.queue.splice(st.queue.indexOf(me), 1);
    // No call for this key ended within two budgets: the object is busy (a timeout), decided as `lastKnown` says.
    me.resolve(lastKnown(this.ctx, st, "timeout", this.options.clock())!);
    if (st.inFlight && this.options.clock() - st.inFlightSinceMs >= 2 * st.timeoutMs) {
      st.inFlight = false;
      this.handOff(st);
    }
  }

  protected stateOf(input: AskInput): KeyState {
    let st = this.keys.get(input.name);
    if (st === undefined) {
      st = newKeyState(input);
      this.evict();
    } else {
      this.keys.delete(input.name); // re-inserted below: the map's order is least recently used first
      // A newer rules version: the lease held under the older one ends (its units go back with the next call).
      if ((input.rule.version ?? 0) > (st.rule.version ?? 0) && st.lease !== null) this.endLease(st);
      st.transport = input.transport;
      st.rule = input.rule;
      st.timeoutMs = input.timeoutMs;
      st.autoLease = autoLease(input.rule, input.lease);
      st.leaseSettings = input.lease ?? (st.autoLease ? AUTO_LEASE : null);
      st.delegate = input.delegate ?? null;
    }
    this.keys.set(input.name, st);
    return st;
  }

  protected evict(): void {
    if (this.keys.size < this.maxKeys) return;
    for (const [name, st] of this.keys) {
      if (this.keys.size < this.maxKeys) return;
      if (st.inFlight || st.lease !== null || st.returns.length > 0 || st.refunds.length > 0) continue;
      this.keys.delete(name);
    }
  }

  /**
   * Make one call for everything queued (the leader first) and whatever leases are to be given back; answer every
   * request in it, and return the leader's answer (`null` without a leader: a call that only gives units back).
   * `st.inFlight` is already set; it is cleared here, and the next call handed to the first request waiting.
   */
  protected async flush(
    st: KeyState,
    leader: Waiting | null,
    keepAlive: KeepAlive,
    renew = false,
  ): Promise<Asked | null> {
    const { clock } = this.options;
    const queued = st.queue.splice(0);
    for (const w of queued) w.settled = true;
    const { batch, mine } = this.answerHere(st, queued, leader, clock());
    if (leader !== null && mine !== null && this.leadOn(st, batch, keepAlive)) return mine;
    if (batch.length === 0 && st.returns.length === 0 && st.refunds.length === 0 && !renew) {
      st.inFlight = false;
      this.handOff(st);
      return mine;
    }
    if (st.lease !== null) this.endLease(st);
    let delegate = delegateFor(st, clock());
    if (delegate !== null && !st.spread && !st.markRead) delegate = await readMark(st, clock);
    const input = this.callInput(st, batch, renew, delegate !== null);
    const sentAtMs = clock();
    let answers: Asked[] = [];
    try {
      const answer = await this.callTarget(st, delegate, input);
      this.refundsLanded(st, input, answer);
      answers = this.settle(st, batch, answer, sentAtMs, keepAlive);
    } finally {
      this.afterCall(st, keepAlive);
    }
    batch.forEach((w, i) => {
      const a = answers[i]!;
      if (a.kind === "answered") w.observe?.(a.result, sentAtMs);
    });
    let leaderAnswer = mine;
    batch.forEach((w, i) => {
      const a = answers[i]!;
      if (w === leader) leaderAnswer = a;
      else w.resolve(a);
    });
    return leaderAnswer;
  }

  /**
   * The queued requests this isolate answers without a call: first from a lease that arrived while they waited, in
   * arrival order; then, while the key is scarce and this isolate's share spent, refused here rather than by a call
   * each (see `scarceAnswer`). The rest make the call's batch; `mine` is the leader's answer if it got one here.
   */
  protected answerHere(
    st: KeyState,
    queued: readonly Waiting[],
    leader: Waiting | null,
    now: number,
  ): { batch: Waiting[]; mine: Asked | null } {
    const { counters } = this.options;
    let mine: Asked | null = null;
    const answer = (w: Waiting, a: Asked) => {
      counters.lease_answers++;
      if (w === leader) mine = a;
      else w.resolve(a);
    };
    const lease = st.lease;
    let served = 0;
    if (lease !== null && !lease.returned && now < lease.endsAtMs) {
      for (const w of queued) {
        if (lease.unitsLeft < w.cost) break;
        lease.unitsLeft -= w.cost;
        answer(w, this.leaseAnswer(st, lease, w.cost, now, w.keepAlive));
        served++;
      }
    }
    const batch = queued.slice(served);
    if (batch.length === 0 || now >= st.scarceUntilMs) return { batch, mine };
    for (const w of batch) answer(w, scarceAnswer(st, now));
    return { batch: [], mine };
  }

  /**
   * Make the call: to the delegate, when there is one (delegate_call.ts `callDelegates`: a reset one is tried on the
   * other shard, then again shortly), else, or when it fails, to the key's object (the fallback carries no refunds: the
   * delegate may have applied them). A busy delegate's failure (overloaded, timing out) is decided from what this
   * isolate last knew, never sent to the key's object. A busy key's object (overloaded, or timing out) sends the key to
   * the delegate (`overloadTeachesHot`); a busy delegate, to its own shard (`noteDelegateBusy`).
   */
  protected async callTarget(st: KeyState, delegate: DelegateRoute | null, input: CallInput): Promise<CallAnswer> {
    const isolate = { sleep: this.options.sleep, stats: this.options.counters };
    const direct = async (call: CallInput) => {
      const answer = await callObject(st.transport, st.name, call, st.timeoutMs, isolate);
      if (answer.kind === "failed") overloadTeachesHot(st, answer.failure, this.options.clock());
      return answer;
    };
    if (delegate === null || st.delegate === null) return direct(input);
    const out = await callDelegates(this.options, st.delegate, delegate, input, st.timeoutMs);
    if (out.kind === "answer") {
      const { answer } = out;
      noteDelegateBusy(st, answer.kind === "answered" ? answer.result.busy === true : answer.failure === "overloaded");
      return answer;
    }
    st.delegateDownUntilMs = this.options.clock() + out.avoidForMs;
    return direct({ ...input, id: this.options.newId(), giveBack: [] });
  }

  /** The call for `batch`: its costs, the held units to give back, and a lease to ask for (remembered for `settle`). */
  protected callInput(st: KeyState, batch: readonly Waiting[], renew: boolean, toDelegate = false): CallInput {
    const { counters } = this.options;
    const giveBack: LeaseReturn[] = [];
    for (const held of st.returns.splice(0)) {
      held.returned = true;
      if (held.unitsLeft > 0) {
        giveBack.push({ units: held.unitsLeft, atMs: held.atMs });
        counters.lease_units_returned += held.unitsLeft;
        held.unitsLeft = 0;
      }
    }
    giveBack.push(...st.refunds.splice(0));
    const waiters = st.refundWaiters.splice(0);
    const input: CallInput = {
      rule: st.rule,
      id: this.options.newId(),
      costs: batch.map((w) => w.cost),
      giveBack,
      // A delegate grants sub-leases out of its share (src/protocol/sublease.ts), sized for their shorter term.
      lease: batch.length > 0 || renew ? leaseAsk(st, this.options.clock(), toDelegate) : null,
    };
    if (input.lease == null) this.lastAsk.delete(st);
    else {
      // What this isolate needs of one ttl, but never more than one lease may take (store.ts `leaseCapOf`): a grant
      // cut at that cap is no sign of a short key.
      const seen = seenOver(st, this.options.clock(), input.lease.ttlMs);
      const need = Math.min(input.lease.units, seen, leaseCapOf(st.rule.params));
      this.lastAsk.set(st, { ...input.lease, need, sub: toDelegate });
    }
    if (batch.length > 1) counters.batched_requests += batch.length;
    if (waiters.length > 0) this.refundWaiters.set(input, waiters);
    return input;
  }

  protected settle(
    st: KeyState,
    batch: readonly Waiting[],
    answer: CallAnswer,
    sentAtMs: number,
    keepAlive: KeepAlive,
  ): Asked[] {
    if (answer.kind === "answered") {
      const { result, attempts } = answer;
      if (result.busy === true) st.busyUntilMs = this.options.clock() + (st.leaseSettings?.ttlMs ?? 0);
      noteHot(st, result.hot, this.options.clock());
      const asked = this.lastAsk.get(st);
      const granted = result.lease?.units ?? 0;
      const endsAtMs =
        result.lease !== null
          ? this.adopt(st, result, sentAtMs, asked, keepAlive)
          : sentAtMs + (asked === undefined ? 0 : asked.ttlMs - this.spread(asked.ttlMs / 2));
      noteScarcity(this.ctx, st, shortOf(asked, granted, result.lease?.forMs ?? 0), endsAtMs, result.results);
      return batch.map((w, i): Asked => {
        const r = result.results[i] ?? { ok: false as const, error: "invalid_cost" as const };
        return {
          kind: "answered",
          result: r,
          source: "object",
          batchSize: batch.length,
          attempts,
          refund: () =>
            r.ok && r.decision.allowed ? this.refundObject(st, w.cost, r.atMs, w.keepAlive) : Promise.resolve(null),
        };
      });
    }
    const { failure, message, attempts, late } = answer;
    const now = this.options.clock();
    const answers = batch.map(
      (w, i): Asked =>
        lastKnown(this.ctx, st, failure, now) ?? {
          kind: "failed",
          failure,
          message,
          attempts,
          late: late === null ? null : lateResult(late, i),
          refund: (admittedAtMs) => this.refundObject(st, w.cost, admittedAtMs, w.keepAlive),
        },
    );
    // A late answer still charges: its lease is taken (its units used or given back), and what it admitted of a request
    // refused here from what this isolate last knew (`lastKnown`) is given back: nobody else sees that answer.
    const work = late?.then((r) => {
      if (r.lease !== null) this.adopt(st, r, sentAtMs, this.lastAsk.get(st), keepAlive, true);
      for (const [i, w] of batch.entries()) {
        const x = answers[i]?.kind === "answered" && uses("lateRefunds") ? r.results[i] : undefined;
        if (x?.ok && x.decision.allowed) void this.refundObject(st, w.cost, x.atMs, w.keepAlive);
      }
    });
    work?.catch(() => undefined); // the late call failed as well: no answer, so nothing it charged is known here
    if (work !== undefined) keepAlive?.(work);
    return answers;
  }

  /** Hold a granted lease (coalesce.ts); returns when it ends (this isolate's clock). `late`: after the budget. */
  protected abstract adopt(
    st: KeyState,
    result: CallResult,
    sentAtMs: number,
    asked: AskedLease | undefined,
    keepAlive: KeepAlive,
    late?: boolean,
  ): number;
  /** A leader answered from a lease goes now: who makes the call for the rest (coalesce.ts); `false`: none needed. */
  protected abstract leadOn(st: KeyState, rest: Waiting[], keepAlive: KeepAlive): boolean;
  /** Stop admitting from the key's lease; its unused units go back with the next call. */
  protected abstract endLease(st: KeyState): void;
  /** An answer from the key's lease. */
  protected abstract leaseAnswer(
    st: KeyState,
    lease: HeldLease,
    cost: number,
    now: number,
    keepAlive?: (work: Promise<unknown>) => void,
  ): Asked;
  /** Give an admission back with the key's next call. */
  protected abstract refundObject(
    st: KeyState,
    cost: number,
    admittedAtMs: number,
    keepAlive: KeepAlive,
  ): Promise<RefundResult>;
  /** The refunds a call carried have landed (or not): tell who waits for them (coalesce.ts). */
  protected abstract refundsLanded(st: KeyState, input: CallInput, answer: CallAnswer): void;
  /** A call ended: hand the next one on, and send the refunds waiting if nothing else will. */
  protected abstract afterCall(st: KeyState, keepAlive: KeepAlive): void;
}
