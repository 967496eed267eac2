/**
 * Coalesced calls and leases: how one isolate asks a key's Durable Object (docs/production.md, "Hot keys").
 *
 * - **Coalescing (exact):** per (rule, key) at most one call in flight; requests arriving meanwhile go together in the
 *   next call, in arrival order, and the object decides them one by one (store.ts `callRecord`). A lone request is sent
 *   at once, so at low traffic nothing changes.
 * - **Leases** (a rule's `lease:`, or automatic for a global rule while its object says busy): a call also asks for a
 *   slice of the budget, admitted here without a call until spent or its term (counted from the call's send) ends;
 *   each algorithm's `lease` entry states the bound (src/algorithms/types.ts `LeasePolicy`).
 * - **Hot keys:** once the object answers `hot` (or overloaded), the key's batches go to the region's delegate.
 * - **Refunds** ride with the key's next call (`giveBack`), at most `RETURN_WAIT_MS` later.
 * - **Failures:** a busy object (overloaded, or late) is refused from what this isolate last knew (`lastKnown`), never
 *   admitted uncounted; only an error or a reset, known nothing of, takes `on_error`. Retries keep the call id.
 * The transport, clock and id source are passed in (the Worker's namespace, or bench/cluster.ts's simulation).
 */
import type { CallAnswer } from "../protocol/object_call.ts";
import type { CallInput, CallResult, RefundResult } from "../protocol/store.ts";
import { OVERLOAD_BACKOFF_MS, RETURN_WAIT_MS } from "../protocol/tunables.ts";
import { type KeepAlive, KeyCalls } from "./coalesce_calls.ts";
import type { Asked, AskedLease, AskInput, HeldLease, HotMark, KeyState, Waiting } from "./coalesce_types.ts";
import { delegateFor, leaseAsk, noteHot, see, takeMark, unsee } from "./key_state.ts";
import { heldAnswer, isHot, scarceAnswer } from "./last_known.ts";

export * from "./coalesce_types.ts";

export class Coalescer extends KeyCalls {
  /** Keys tracked now, and the requests waiting now over all of them (for the bounds' tests and `/_sluice/stats`). */
  get size(): { readonly keys: number; readonly waiting: number } {
    let waiting = 0;
    for (const st of this.keys.values()) waiting += st.queue.length;
    return { keys: this.keys.size, waiting };
  }

  /** The number of keys with a lease held now (for `/_sluice/stats`). */
  get leasesHeld(): number {
    const now = this.options.clock();
    let n = 0;
    for (const st of this.keys.values()) if (st.lease !== null && now < st.lease.endsAtMs) n++;
    return n;
  }

  /** What this isolate holds of a key's budget now, for the admin API; `null` when nothing. */
  leaseOf(name: string): { readonly unitsLeft: number; readonly units: number; readonly endsInMs: number } | null {
    const lease = this.keys.get(name)?.lease ?? null;
    const now = this.options.clock();
    if (lease === null || now >= lease.endsAtMs) return null;
    return { unitsLeft: lease.unitsLeft, units: lease.units, endsInMs: lease.endsAtMs - now };
  }

  /**
   * Whether this isolate tracks the key and needs no data center's hot mark for it: a mark is read for a key it does
   * not track, and for one whose hot spell here lapsed (key_state.ts `takeMark`).
   */
  tracks(name: string): boolean {
    const st = this.keys.get(name);
    if (st === undefined) return false;
    return st.delegate === null || st.hotUntilMs === 0 || this.options.clock() < st.hotUntilMs;
  }

  /** The key as hot as this isolate knows it now (hot_marks.ts writes it for the data center); `null`: not hot. */
  markOf(name: string): HotMark | null {
    const st = this.keys.get(name);
    if (st === undefined || st.delegate === null || this.options.clock() >= st.hotUntilMs) return null;
    return { untilMs: st.hotUntilMs, spread: st.spread };
  }

  /**
   * Send the key's batches to this isolate's own shard of its region's delegate, as if the first had said it is busy:
   * its data center's mark says the region's isolates spread (hot_marks.ts `writeMark`).
   */
  spreadKey(name: string): void {
    const st = this.keys.get(name);
    if (st !== undefined && st.delegate !== null) st.spread = true;
  }

  /** Forget a key's lease without giving it back (the admin API reset the key: the object forgot the charge). */
  dropLease(name: string): void {
    const st = this.keys.get(name);
    if (st === undefined) return;
    st.lease = null;
    st.returns = [];
  }

  ask(input: AskInput): Promise<Asked> {
    const st = this.stateOf(input);
    const now = this.options.clock();
    takeMark(st, input.hotMark, now);
    see(st, now);
    const lease = st.lease;
    if (lease !== null && !lease.returned && now < lease.endsAtMs && lease.unitsLeft >= input.cost) {
      lease.unitsLeft -= input.cost;
      this.options.counters.lease_answers++;
      return Promise.resolve(this.leaseAnswer(st, lease, input.cost, now, input.keepAlive));
    }
    if (now < st.scarceUntilMs) {
      this.options.counters.lease_answers++;
      return Promise.resolve(scarceAnswer(st, now));
    }
    return this.wait(st, input);
  }

  /**
   * At a lease's end: while the key is still hot here, renew it (one call gives the unused units back and asks for
   * the next lease, with whatever requests are waiting); else give the unused units back by a call of their own.
   * Nothing while a call is in flight (the units go back with it).
   */
  protected async renewOrReturn(
    st: KeyState,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
    used = true,
  ): Promise<void> {
    // Renew only a key requested here within the last ttl (and `used`, below), so an idle key's lease is given back,
    // not kept alive.
    const ttlMs = st.leaseSettings?.ttlMs ?? 0;
    const now = this.options.clock();
    const renew = used && now - st.lastSeenMs < ttlMs && leaseAsk(st, now, delegateFor(st, now) !== null) !== null;
    if (st.inFlight) return;
    if (st.returns.length === 0 && st.refunds.length === 0 && !renew) {
      this.handOff(st); // requests that waited through a hold go on as usual
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
  protected override adopt(
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
    if (st.lease !== null) this.endLease(st);
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
      this.endLease(st);
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
  protected override leadOn(st: KeyState, rest: Waiting[], keepAlive: KeepAlive): boolean {
    if (rest.length === 0 && st.returns.length === 0 && st.refunds.length === 0) return false;
    for (const w of rest) w.settled = w === rest[0];
    st.queue.unshift(...rest);
    if (rest.length === 0) keepAlive?.(this.flush(st, null, keepAlive));
    else rest[0]!.resolve("lead");
    return true;
  }

  /** Stop admitting from the key's lease; its unused units go back with the next call. */
  protected override endLease(st: KeyState): void {
    const held = st.lease;
    if (held === null) return;
    st.lease = null;
    if (held.unitsLeft > 0) st.returns.push(held);
    else held.returned = true;
  }

  protected override leaseAnswer(
    st: KeyState,
    lease: HeldLease,
    cost: number,
    now: number,
    keepAlive?: (work: Promise<unknown>) => void,
  ): Asked {
    // What this isolate's slice still holds, and when it ends: the honest figures for an answer from a lease.
    const resetAfterMs = Math.max(0, lease.endsAtMs - now);
    const decision = { allowed: true, remaining: lease.unitsLeft, resetAfterMs, retryAfterMs: null, delayMs: 0 };
    return heldAnswer(lease.atMs, decision, () => {
      const at = this.options.clock();
      unsee(st, at);
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

  /**
   * Give an admission back with the key's next call (`giveBack`). A cold key with no call in flight sends it at once
   * (with any other refunds waiting), and its figures after the refund come back; otherwise it waits for the next
   * call, at most `RETURN_WAIT_MS` (then one call takes every refund waiting), and the caller gets `null` (the figures
   * it already has, one unit short: the safe side).
   */
  protected override refundObject(
    st: KeyState,
    cost: number,
    admittedAtMs: number,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
    unseen = true,
  ): Promise<RefundResult> {
    if (unseen) unsee(st, this.options.clock());
    const same = st.refunds.findIndex((r) => r.atMs === admittedAtMs);
    if (same === -1) st.refunds.push({ units: cost, atMs: admittedAtMs });
    else st.refunds[same] = { units: st.refunds[same]!.units + cost, atMs: admittedAtMs };
    const now = this.options.clock();
    if (isHot(st, now) || now < st.returnsNotBeforeMs) {
      this.armReturns(st, keepAlive);
      return Promise.resolve(null);
    }
    if (!st.inFlight) return this.sendReturns(st, keepAlive);
    // A call is in flight: this refund goes with the next one (`afterCall`), and answers when it lands, or after two
    // call budgets at most (its own timer: a request waiting on nothing of its own is cancelled by the runtime).
    const landed = new Promise<RefundResult>((resolve) => st.refundWaiters.push(resolve));
    const { sleep, resume } = this.options;
    const bounded = sleep(2 * st.timeoutMs).then(() => null);
    return Promise.race([resume?.(landed) ?? landed, bounded]);
  }

  /** Send the refunds and lease returns waiting, in a call of their own (nothing else to carry them). */
  protected async sendReturns(
    st: KeyState,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
  ): Promise<RefundResult> {
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    try {
      const delegate = delegateFor(st, this.options.clock());
      const input = this.callInput(st, [], false, delegate !== null);
      const answer = await this.callTarget(st, delegate, input);
      this.refundsLanded(st, input, answer);
      if (answer.kind !== "answered") return null; // not given back: the key is short that much, never over
      if (answer.result.busy === true) st.busyUntilMs = this.options.clock() + (st.leaseSettings?.ttlMs ?? 0);
      noteHot(st, answer.result.hot, this.options.clock());
      return answer.result.refunded ?? null;
    } finally {
      this.afterCall(st, keepAlive);
    }
  }

  /**
   * A call ended: the next call goes to the first request waiting; with none, the refunds that came meanwhile go now
   * in one call of their own, unless the key is hot here (then they wait for the next call, `armReturns`).
   */
  protected override afterCall(st: KeyState, keepAlive: ((work: Promise<unknown>) => void) | undefined): void {
    st.inFlight = false;
    this.handOff(st);
    if (st.inFlight || st.refunds.length === 0) return;
    const now = this.options.clock();
    if (isHot(st, now) || now < st.returnsNotBeforeMs) this.armReturns(st, keepAlive);
    else {
      const work = this.sendReturns(st, keepAlive);
      keepAlive?.(work);
    }
  }

  /** Make sure the refunds waiting reach the object: with the next call, or in one of their own after a wait. */
  protected armReturns(st: KeyState, keepAlive: ((work: Promise<unknown>) => void) | undefined): void {
    if (st.returnsArmed) return;
    st.returnsArmed = true;
    const work = this.options.sleep(RETURN_WAIT_MS).then(async () => {
      st.returnsArmed = false;
      if (st.refunds.length === 0) return;
      if (st.inFlight) {
        this.armReturns(st, keepAlive);
        return;
      }
      await this.sendReturns(st, keepAlive);
    });
    keepAlive?.(work);
  }

  /**
   * The refunds a call carried have landed (or not: `null`); tell who waits for them. An overloaded object never saw
   * the call: what it carried goes back in the queue for a later call (never sooner than a backoff). Any other
   * failure may have been applied (a timeout's late answer, an error after the write), so what it carried is not
   * sent again: the key is short that much, never over.
   */
  protected override refundsLanded(st: KeyState, input: CallInput, answer: CallAnswer): void {
    if (answer.kind === "failed" && answer.failure === "overloaded" && (input.giveBack?.length ?? 0) > 0) {
      st.refunds.unshift(...(input.giveBack ?? []));
      st.refundWaiters.unshift(...(this.refundWaiters.get(input) ?? []));
      this.refundWaiters.delete(input);
      st.returnsNotBeforeMs = this.options.clock() + OVERLOAD_BACKOFF_MS;
      return;
    }
    const waiters = this.refundWaiters.get(input);
    if (waiters === undefined) return;
    this.refundWaiters.delete(input);
    const refunded = answer.kind === "answered" ? (answer.result.refunded ?? null) : null;
    for (const resolve of waiters) resolve(refunded);
  }
}
