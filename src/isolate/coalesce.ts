/**
 * Coalesced calls and leases: how one isolate asks a key's Durable Object (docs/production.md, "Hot keys").
 *
 * - **Coalescing (exact):** per (rule, key) at most one call in flight; requests arriving meanwhile go together in the
 *   next call, in arrival order, and the object decides them one by one (store.ts `callRecord`). A lone request is sent
 *   at once, so at low traffic nothing changes.
 * - **Leases** (a rule's `lease:`, or automatic for a global rule while its object says busy): a call also asks for
 *   units of the budget, admitted here without a call until spent or its term (counted from the call's send) ends;
 *   each algorithm's `lease` entry states the bound (src/algorithms/types.ts `LeasePolicy`).
 * - **Hot keys:** once the object answers `hot` (or overloaded), the key's batches go to the region's delegate.
 * - **Refunds** ride with the key's next call (`giveBack`), at most `RETURN_WAIT_MS` later.
 * - **Failures:** a busy object (overloaded, or late) is refused from what this isolate last knew (`lastKnown`), never
 *   admitted uncounted; only an error or a reset, known nothing of, takes `on_error`. Retries keep the call id.
 * The transport, clock and id source are passed in. The calls, refunds and returns: coalesce_calls.ts (`Calls`).
 */

import type { CallAnswer } from "../protocol/object_call.ts";
import type { CallResult } from "../protocol/store.ts";
import {
  afterCall,
  answered,
  answerHere,
  type Calls,
  callInput,
  endLease,
  failed,
  giveUp,
  handOff,
  type KeepAlive,
  lateRefunds,
  leaseAnswer,
  refundsLanded,
  stateOf,
} from "./coalesce_calls.ts";
import {
  type Asked,
  type AskedLease,
  type AskInput,
  COALESCE_MAX_KEYS,
  COALESCE_MAX_WAITING,
  type CoalescerOptions,
  type HeldLease,
  type HotMark,
  type KeyState,
  type Waiting,
} from "./coalesce_types.ts";
import { callTarget } from "./delegate_call.ts";
import { delegateFor, hashString, leaseAsk, nextSeed, noteHot, readMark, see, shortOf, takeMark } from "./key_state.ts";
import { lastKnown, lastKnownRefusal, noteLastKnown } from "./last_known.ts";

export * from "./coalesce_types.ts";

export class Coalescer {
  private readonly c: Calls;
  private readonly maxWaiting: number;
  /**
   * A small pseudo-random sequence, seeded from an id on first use: spreads renewals (see `spread`). Not in the
   * constructor: the Worker makes its coalescer at module load, where the runtime refuses random values.
   */
  private spreadSeed: number | null = null;

  constructor(private readonly options: CoalescerOptions) {
    const ctx = { clock: options.clock, counters: options.counters, spread: (rangeMs: number) => this.spread(rangeMs) };
    const maxKeys = options.maxKeys ?? COALESCE_MAX_KEYS;
    this.c = { options, ctx, keys: new Map(), lastAsk: new WeakMap(), refundWaiters: new WeakMap(), maxKeys };
    this.maxWaiting = options.maxWaiting ?? COALESCE_MAX_WAITING;
  }

  /** Keys tracked now, and the requests waiting now over all of them (for the bounds' tests and `/_sluice/stats`). */
  get size(): { readonly keys: number; readonly waiting: number } {
    let waiting = 0;
    for (const st of this.c.keys.values()) waiting += st.queue.length;
    return { keys: this.c.keys.size, waiting };
  }

  /** The number of keys with a lease held now (for `/_sluice/stats`). */
  get leasesHeld(): number {
    const now = this.options.clock();
    let n = 0;
    for (const st of this.c.keys.values()) if (st.lease !== null && now < st.lease.endsAtMs) n++;
    return n;
  }

  /** What this isolate holds of a key's budget now, for the admin API; `null` when nothing. */
  leaseOf(name: string): { readonly unitsLeft: number; readonly units: number; readonly endsInMs: number } | null {
    const lease = this.c.keys.get(name)?.lease ?? null;
    const now = this.options.clock();
    if (lease === null || now >= lease.endsAtMs) return null;
    return { unitsLeft: lease.unitsLeft, units: lease.units, endsInMs: lease.endsAtMs - now };
  }

  /**
   * Whether this isolate tracks the key and needs no data center's hot mark for it: a mark is read for a key it does
   * not track, and for one whose hot spell here lapsed (key_state.ts `takeMark`).
   */
  tracks(name: string): boolean {
    const st = this.c.keys.get(name);
    if (st === undefined) return false;
    return st.delegate === null || st.hotUntilMs === 0 || this.options.clock() < st.hotUntilMs;
  }

  /** The key as hot as this isolate knows it now (hot_marks.ts writes it for the data center); `null`: not hot. */
  markOf(name: string): HotMark | null {
    const st = this.c.keys.get(name);
    if (st === undefined || st.delegate === null || this.options.clock() >= st.hotUntilMs) return null;
    return { untilMs: st.hotUntilMs, ownShard: st.ownShard };
  }

  /**
   * Send the key's batches to this isolate's own shard of its region's delegate, as if the first had said it is busy:
   * its data center's mark says the region's isolates moved to their own shards (hot_marks.ts `writeMark`).
   */
  moveToOwnShard(name: string): void {
    const st = this.c.keys.get(name);
    if (st !== undefined && st.delegate !== null) st.ownShard = true;
  }

  /** Forget a key's lease without giving it back (the admin API reset the key: the object forgot the charge). */
  dropLease(name: string): void {
    const st = this.c.keys.get(name);
    if (st === undefined) return;
    st.lease = null;
    st.returns = [];
  }

  ask(input: AskInput): Promise<Asked> {
    const st = stateOf(this.c, input);
    const now = this.options.clock();
    takeMark(st, input.hotMark, now);
    see(st, now);
    const lease = st.lease;
    if (lease !== null && !lease.returned && now < lease.endsAtMs && lease.unitsLeft >= input.cost) {
      lease.unitsLeft -= input.cost;
      this.options.counters.lease_answers++;
      return Promise.resolve(leaseAnswer(this.c, st, lease, input.cost, now, input.keepAlive));
    }
    if (now < st.lastKnownUntilMs) {
      this.options.counters.lease_answers++;
      return Promise.resolve(lastKnownRefusal(st, now));
    }
    return this.wait(st, input);
  }

  /**
   * At a lease's end: while the key is still hot here, renew it (one call gives the unused units back and asks for
   * the next lease, with whatever requests are waiting); else give the unused units back by a call of their own.
   * Nothing while a call is in flight (the units go back with it).
   */
  private async renewOrReturn(
    st: KeyState,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
    used = true,
  ): Promise<void> {
    // Renew only a key requested here within the last ttl (and `used`, below), so an idle key's lease is given back,
    // not kept alive.
    const ttlMs = st.leaseSettings?.ttlMs ?? 0;
    const now = this.options.clock();
    const renew = used && now - st.seen.lastMs < ttlMs && leaseAsk(st, now, delegateFor(st, now) !== null) !== null;
    if (st.inFlight) return;
    if (st.returns.length === 0 && st.refunds.length === 0 && !renew) {
      handOff(this.c, st); // requests that waited through a hold go on as usual
      return;
    }
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    await this.flush(st, null, keepAlive, renew);
  }

  /**
   * Hold a granted lease until it is spent or its term ends; a lease held before is given back with the next call.
   * Returns when the lease ends (this isolate's clock).
   *
   * A full term is shortened by up to a half, pseudo-randomly, so that isolates whose leases began together do
   * not all renew together again (not a delegate's sub-lease: see below). A term cut at a window's end cannot be shortened into a useful lease (the next
   * renewal would still meet the others at the boundary), so this isolate then waits up to a quarter of the ttl
   * (at most the call budget) past the end before it renews, and requests meanwhile wait for that call.
   *
   * The term counts from the call's send. A clock that reads earlier now than at the send stepped back meanwhile, by
   * an unknown amount, so the time since the send is unknown too: the call's whole budget counts as gone (an answer
   * came within it), and for a late answer (`late`, after the budget) the whole term.
   */
  private adopt(
    st: KeyState,
    result: CallResult,
    sentAtMs: number,
    asked: AskedLease | undefined,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
    late = false,
  ): number {
    const grant = result.lease;
    if (grant === null) return sentAtMs;
    this.options.counters.leases++;
    const askedTtlMs = asked?.ttlMs ?? grant.forMs;
    const cut = grant.forMs < askedTtlMs;
    const now = this.options.clock();
    const fromMs = now >= sentAtMs ? sentAtMs : now - (late ? grant.forMs : st.timeoutMs);
    const held: HeldLease = {
      unitsLeft: grant.units,
      units: grant.units,
      atMs: grant.atMs,
      // A delegate's sub-lease is not shortened: sized to its term, its units would go back unused (into a small
      // bucket that may be full by then); isolates ask their delegate at their own times anyway.
      endsAtMs: fromMs + grant.forMs - (cut || asked?.sub === true ? 0 : this.spread(grant.forMs / 2)),
      returned: false,
    };
    if (st.lease !== null) endLease(st);
    st.lease = held;
    st.lastGrant = {
      units: grant.units,
      atMs: grant.atMs,
      termMs: Math.max(0, held.endsAtMs - fromMs),
      endsAtMs: held.endsAtMs,
    };
    const { sleep } = this.options;
    const wait = Math.max(0, held.endsAtMs - this.options.clock());
    const holdMs = cut ? this.spread(Math.min(askedTtlMs / 4, st.timeoutMs)) : 0;
    const ended = sleep(wait).then(async () => {
      if (st.lease !== held) return; // ended before its term (replaced by the next call, which gave it back)
      // A delegate's sub-lease that admitted nothing is not renewed (a lease from the key's object is, within its ttl).
      const used = asked?.sub !== true || held.unitsLeft < held.units;
      endLease(st);
      if (holdMs > 0 && !st.inFlight) {
        // Hold the key as if a call were in flight, so the requests meanwhile wait for the renewal.
        st.inFlight = true;
        st.inFlightSinceMs = this.options.clock();
        await sleep(holdMs);
        st.inFlight = false;
      }
      return this.renewOrReturn(st, keepAlive, used);
    });
    keepAlive?.(ended);
    return held.endsAtMs;
  }

  /**
   * The leader of a call was answered from a lease that came while it waited: it goes now, not when a call for the
   * rest returns (its lease's term runs meanwhile). The first request left leads that call (a call is made in the
   * context of a request it carries); with none, the units to give back go in the background.
   */
  private leadOn(st: KeyState, rest: Waiting[], keepAlive: KeepAlive): boolean {
    if (rest.length === 0 && st.returns.length === 0 && st.refunds.length === 0) return false;
    for (const w of rest) w.settled = w === rest[0];
    st.queue.unshift(...rest);
    if (rest.length === 0) keepAlive?.(this.flush(st, null, keepAlive));
    else rest[0]!.resolve("lead");
    return true;
  }

  /**
   * Queue the request, and wait for its answer or its turn to lead. A call is always made in the context of a request
   * it carries (the first of its batch): the Workers runtime forbids using one request's I/O (a stub, a timer) from
   * another, so a request that finds nothing in flight calls itself, and when a call ends, it hands the next call to
   * the first request waiting.
   */
  private async wait(st: KeyState, input: AskInput): Promise<Asked> {
    if (st.queue.length >= this.maxWaiting) {
      const { counters } = this.options;
      counters.queue_overflows = (counters.queue_overflows ?? 0) + 1;
      // As an overloaded call: decided from what this isolate last knew (never `on_error`, see `lastKnown`), without
      // the backoff: the object is not the one overloaded, and the requests already waiting still go to it.
      return lastKnown(this.c.ctx, st, "overloaded", this.options.clock(), false)!;
    }
    let waiting: Waiting | undefined;
    const turn = new Promise<Asked | "lead">((resolve) => {
      waiting = { cost: input.cost, observe: input.observe, keepAlive: input.keepAlive, resolve, settled: false };
    });
    const me = waiting!;
    const leadsNow = !st.inFlight && st.queue.length === 0;
    st.queue.push(me);
    // Nothing in flight or waiting: this request leads the call, handed the lead by itself (so a plain await resumes it
    // in its own context: no timer), after the requests of the same turn have joined it.
    if (leadsNow) {
      handOff(this.c, st);
      await turn;
      return (await this.flush(st, me, input.keepAlive))!;
    }
    // A leader whose request was cancelled never hands over: after two budgets, give up waiting for it.
    // (Two waits of one budget each: one for the call in flight, one for this request's own.)
    // Then, until its turn comes, the request keeps a timer of its own pending: while another request's call carries
    // it, it has no I/O of its own, and the Workers runtime cancels a request that waits on nothing of its own ("the
    // Worker's code had hung") when the runtime itself resumes it (resume.ts, `ownContextResumer`).
    const { sleep } = this.options;
    let turnCame = false;
    void (async () => {
      await sleep(st.timeoutMs);
      if (!me.settled) await sleep(st.timeoutMs);
      giveUp(this.c, st, me);
      while (!turnCame) await sleep(st.timeoutMs);
    })();
    if (!st.inFlight) handOff(this.c, st);
    const got = await (this.options.resume?.(turn) ?? turn);
    turnCame = true;
    if (got !== "lead") return got;
    return (await this.flush(st, me, input.keepAlive))!;
  }

  /**
   * Make one call for everything queued (the leader first) and whatever leases are to be given back; answer every
   * request in it, and return the leader's answer (`null` without a leader: a call that only gives units back).
   * `st.inFlight` is already set; it is cleared here, and the next call handed to the first request waiting.
   */
  private async flush(
    st: KeyState,
    leader: Waiting | null,
    keepAlive: KeepAlive,
    renew = false,
  ): Promise<Asked | null> {
    const { clock } = this.options;
    const queued = st.queue.splice(0);
    for (const w of queued) w.settled = true;
    const { batch, mine } = answerHere(this.c, st, queued, leader, clock());
    if (leader !== null && mine !== null && this.leadOn(st, batch, keepAlive)) return mine;
    if (batch.length === 0 && st.returns.length === 0 && st.refunds.length === 0 && !renew) {
      st.inFlight = false;
      handOff(this.c, st);
      return mine;
    }
    if (st.lease !== null) endLease(st);
    let delegate = delegateFor(st, clock());
    if (delegate !== null && !st.ownShard && !st.hotMarkRead) delegate = await readMark(st, clock);
    const input = callInput(this.c, st, batch, renew, delegate !== null);
    const sentAtMs = clock();
    let answers: Asked[] = [];
    try {
      const answer = await callTarget(this.options, st, delegate, input);
      refundsLanded(this.c, st, input, answer);
      answers = this.settle(st, batch, answer, sentAtMs, keepAlive);
    } finally {
      afterCall(this.c, st, keepAlive);
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

  private settle(
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
      const asked = this.c.lastAsk.get(st);
      const granted = result.lease?.units ?? 0;
      const endsAtMs =
        result.lease !== null
          ? this.adopt(st, result, sentAtMs, asked, keepAlive)
          : sentAtMs + (asked === undefined ? 0 : asked.ttlMs - this.spread(asked.ttlMs / 2));
      // A sub-lease ask granted nothing: known short only until the delegate's slice refills what it asked.
      const waitMs = result.leaseWaitMs;
      const emptyUntilMs =
        granted === 0 && typeof waitMs === "number" && waitMs >= 0 ? Math.min(endsAtMs, sentAtMs + waitMs) : endsAtMs;
      noteLastKnown(this.c.ctx, st, shortOf(asked, granted, result.lease?.forMs ?? 0), emptyUntilMs, result.results);
      return answered(this.c, st, batch, result, attempts);
    }
    const answers = failed(this.c, st, batch, answer);
    const { late } = answer;
    // A late answer still charges: its lease is taken (its units used or given back), and what it admitted of a request
    // refused here from what this isolate last knew (`lastKnown`) is given back: nobody else sees that answer.
    const work = late?.then((r) => {
      if (r.lease !== null) this.adopt(st, r, sentAtMs, this.c.lastAsk.get(st), keepAlive, true);
      lateRefunds(this.c, st, batch, answers, r.results);
    });
    work?.catch(() => undefined); // the late call failed as well: no answer, so nothing it charged is known here
    if (work !== undefined) keepAlive?.(work);
    return answers;
  }

  /**
   * A deterministic pseudo-random integer in [0, rangeMs): how much this isolate shortens a lease's term, or waits past
   * a window's end before renewing, so isolates synchronized (a cold start, a window's end) renew at different instants.
   */
  private spread(rangeMs: number): number {
    if (rangeMs < 1) return 0;
    this.spreadSeed = nextSeed(this.spreadSeed ?? hashString(this.options.newId()));
    return this.spreadSeed % Math.floor(rangeMs);
  }
}
