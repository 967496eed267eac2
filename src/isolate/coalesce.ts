/** How one isolate asks a key's object: coalesced calls, leases, a hot key's delegate (docs/production.md). */

import type { CallAnswer } from "../protocol/object_call.ts";
import type { LeaseGrant } from "../protocol/store.ts";
import { Calls, endLease, type KeepAlive, noteAnswer, owes, startCall } from "./coalesce_calls.ts";
import {
  type Asked,
  type AskInput,
  COALESCE_MAX_WAITING,
  type CoalescerOptions,
  type DelegateRoute,
  type HeldLease,
  type HotMark,
  type Waiting,
} from "./coalesce_types.ts";
import { callTarget } from "./delegate_call.ts";
import { type KeyState, shortOf } from "./key_state.ts";

export * from "./coalesce_types.ts";

/** A call's sending time (this isolate's clock), its requests' `keepAlive`, and the delegate it went to, if any. */
type Sent = { readonly atMs: number; readonly keepAlive: KeepAlive; readonly from?: DelegateRoute };

export class Coalescer {
  private readonly c: Calls;

  constructor(private readonly options: CoalescerOptions) {
    this.c = new Calls(options);
  }

  /** Keys tracked now, and the requests waiting now over all of them (for the bounds' tests and `/_sluice/stats`). */
  get size(): { readonly keys: number; readonly waiting: number } {
    return { keys: this.c.keys.size, waiting: [...this.c.keys.values()].reduce((n, st) => n + st.queue.length, 0) };
  }

  /** The number of keys with a lease held now (for `/_sluice/stats`). */
  get leasesHeld(): number {
    return [...this.c.keys.keys()].filter((name) => this.leaseOf(name) !== null).length;
  }

  /** What this isolate holds of a key's budget now, for the admin API; `null` when nothing. */
  leaseOf(name: string): { readonly unitsLeft: number; readonly units: number; readonly endsInMs: number } | null {
    const lease = this.c.keys.get(name)?.lease ?? null;
    const now = this.options.clock();
    if (lease === null || now >= lease.endsAtMs) return null;
    return { unitsLeft: lease.unitsLeft, units: lease.units, endsInMs: lease.endsAtMs - now };
  }

  /** Whether this isolate tracks the key and needs no hot mark for it (one whose hot spell lapsed: `takeMark`). */
  tracks(name: string): boolean {
    const st = this.c.keys.get(name);
    return st !== undefined && (st.delegate === null || st.hotUntilMs === 0 || this.options.clock() < st.hotUntilMs);
  }

  /** The key as hot as this isolate knows it now (hot_marks.ts writes it for the data center); `null`: not hot. */
  markOf(name: string): HotMark | null {
    const st = this.c.keys.get(name);
    if (st === undefined || st.delegate === null || this.options.clock() >= st.hotUntilMs) return null;
    const spread = st.spreadAt(this.options.clock());
    return { untilMs: st.hotUntilMs, spread, ...(st.spreadDecays() ? { decays: true } : {}) };
  }

  /** The data center's mark has a higher spread (hot_marks.ts `writeMark`): take it. */
  spreadTo(name: string, spread: number): void {
    const st = this.c.keys.get(name);
    if (st !== undefined && st.delegate !== null) st.spreadTo(spread, this.options.clock());
  }

  /** Forget a key's lease without giving it back (the admin API reset the key: the object forgot the charge). */
  dropLease(name: string): void {
    const st = this.c.keys.get(name);
    if (st === undefined) return;
    st.lease = null;
    st.returns = [];
  }

  ask(input: AskInput): Promise<Asked> {
    const st = this.c.stateOf(input);
    const now = this.options.clock();
    st.takeMark(input.hotMark, now);
    st.see(now);
    const here = this.c.leaseServe(st, input.cost, now, input.keepAlive) ?? this.c.refuseShort(st, now);
    return here === null ? this.wait(st, input) : Promise.resolve(here);
  }

  /**
   * Hold a granted lease until spent or its term (from the call's send) ends; returns its end. Renewals are spread: a
   * full term cut by up to a half, a cut one followed by a hold of up to a quarter ttl. A clock that stepped back
   * since the send counts the whole budget as gone (for a `late` answer, the whole term). At its end, renew it if the
   * key was used within a ttl, else give its units back (unless a call is out).
   */
  private adopt(st: KeyState, grant: LeaseGrant, sent: Sent, late = false): number {
    this.options.counters.leases++;
    const asked = st.lastAsk;
    const askedTtlMs = asked?.ttlMs ?? grant.forMs;
    const cut = grant.forMs < askedTtlMs;
    const now = this.options.clock();
    const fromMs = now >= sent.atMs ? sent.atMs : now - (late ? grant.forMs : st.timeoutMs);
    // Not a sub-lease: sized to its term, its units would go back unused (into a bucket maybe full by then).
    const endsAtMs = fromMs + grant.forMs - (cut || asked?.sub === true ? 0 : this.c.spread(grant.forMs / 2));
    const { units, atMs, id } = grant;
    const from = sent.from === undefined ? {} : { from: sent.from };
    const named = id === undefined ? {} : { id };
    const held: HeldLease = { unitsLeft: units, units, atMs, endsAtMs, returned: false, ...from, ...named };
    endLease(st);
    st.lease = held;
    st.grantHotUntilMs = held.endsAtMs + Math.max(0, held.endsAtMs - fromMs);
    const { sleep, clock } = this.options;
    const wait = Math.max(0, held.endsAtMs - clock());
    const holdMs = cut ? this.c.spread(Math.min(askedTtlMs / 4, st.timeoutMs)) : 0;
    const ended = sleep(wait).then(async () => {
      if (st.lease !== held) return; // ended before its term (replaced by the next call, which gave it back)
      // A delegate's sub-lease that admitted nothing is not renewed (a lease from the key's object is, within its ttl).
      const used = asked?.sub !== true || held.unitsLeft < held.units;
      endLease(st);
      if (holdMs > 0 && !st.inFlight) {
        startCall(st, clock()); // as if a call were in flight: requests meanwhile wait for the renewal
        await sleep(holdMs);
        st.inFlight = false;
      }
      const now = clock();
      const ttlMs = st.leaseSettings?.ttlMs ?? 0;
      const renew = used && now - st.seen.lastMs < ttlMs && st.leaseAsk(now, st.delegateFor(now) !== null) !== null;
      if (st.inFlight) return;
      if (!renew && !owes(st)) return this.c.handOff(st); // requests that waited through a hold go on as usual
      startCall(st, clock());
      await this.flush(st, null, sent.keepAlive, renew);
    });
    sent.keepAlive?.(ended);
    return held.endsAtMs;
  }

  /** Queue the request; wait for its answer or its turn to lead (docs/production.md, "Why a waiting request polls"). */
  private async wait(st: KeyState, input: AskInput): Promise<Asked> {
    if (st.queue.length >= (this.options.maxWaiting ?? COALESCE_MAX_WAITING)) {
      this.options.counters.queue_overflows = (this.options.counters.queue_overflows ?? 0) + 1;
      // As an overloaded call (`lastKnown`), without the backoff: the requests waiting still go to the object.
      return this.c.lastKnown(st, "overloaded", this.options.clock(), false)!;
    }
    let waiting: Waiting | undefined;
    const turn = new Promise<Asked | "lead">((resolve) => {
      waiting = { cost: input.cost, observe: input.observe, keepAlive: input.keepAlive, resolve, settled: false };
    });
    const me = waiting!;
    // Nothing in flight or waiting: it leads, handed the lead by itself (a plain await resumes it in its own context).
    const leadsNow = !st.inFlight && st.queue.length === 0;
    st.queue.push(me);
    // A cancelled leader never hands over: give up after two budgets (the call in flight's, then its own). Until its
    // turn, a timer of its own stays pending: the runtime cancels a request that waits on nothing of its own.
    const { sleep } = this.options;
    let turnCame = false;
    if (!leadsNow) {
      void (async () => {
        await sleep(st.timeoutMs);
        if (!me.settled) await sleep(st.timeoutMs);
        this.c.giveUp(st, me);
        while (!turnCame) await sleep(st.timeoutMs);
      })();
    }
    if (!st.inFlight) this.c.handOff(st);
    const got = await (leadsNow ? turn : (this.options.resume?.(turn) ?? turn));
    turnCame = true;
    return got === "lead" ? (await this.flush(st, me, input.keepAlive))! : got;
  }

  /** One call for everything queued (the leader first) and the units to give back; returns the leader's answer. */
  private async flush(st: KeyState, leader: Waiting | null, keepAlive: KeepAlive, renew = false) {
    const { clock } = this.options;
    const queued = st.queue.splice(0);
    for (const w of queued) w.settled = true;
    const { batch, mine } = this.c.answerHere(st, queued, leader);
    if (leader !== null && mine !== null && (batch.length > 0 || owes(st))) {
      // The leader was answered from a lease that came while it waited: it goes now, the first request left leads the
      // call for the rest (a call runs in the context of a request it carries), or the units go back in the background.
      for (const w of batch) w.settled = w === batch[0];
      st.queue.unshift(...batch);
      if (batch.length === 0) keepAlive?.(this.flush(st, null, keepAlive));
      else batch[0]!.resolve("lead");
      return mine;
    }
    if (batch.length === 0 && !owes(st) && !renew) {
      st.inFlight = false;
      this.c.handOff(st);
      return mine;
    }
    endLease(st);
    let delegate = st.delegateFor(clock());
    if (delegate !== null && delegate === st.delegate && !st.hotMarkRead) delegate = await st.readMark(clock);
    const input = this.c.callInput(st, batch, renew, delegate !== null);
    const sent: Sent = { atMs: clock(), keepAlive, from: delegate ?? undefined };
    let answers: Asked[] = [];
    try {
      const answer = await callTarget(this.options, st, delegate, input, keepAlive);
      this.c.refundsLanded(st, input, answer);
      answers = this.settle(st, batch, answer, sent);
    } finally {
      this.c.afterCall(st, keepAlive);
    }
    let leaderAnswer = mine;
    batch.forEach((w, i) => {
      const a = answers[i]!;
      if (a.kind === "answered") w.observe?.(a.result, sent.atMs);
      if (w === leader) leaderAnswer = a;
      else w.resolve(a);
    });
    return leaderAnswer;
  }

  private settle(st: KeyState, batch: readonly Waiting[], answer: CallAnswer, sent: Sent): Asked[] {
    // A call the object applied twice (sent again, its first copy forgotten): the copy not taken admitted for nobody.
    void answer.duplicate?.then((d) => this.c.giveBackAll(st, batch, d.results));
    if (answer.kind === "answered") {
      const { result, attempts } = answer;
      noteAnswer(st, result, this.options.clock());
      const asked = st.lastAsk;
      const granted = result.lease?.units ?? 0;
      const endsAtMs =
        result.lease !== null
          ? this.adopt(st, result.lease, sent)
          : sent.atMs + (asked === undefined ? 0 : asked.ttlMs - this.c.spread(asked.ttlMs / 2));
      // A sub-lease ask granted nothing: known short only until the delegate's slice refills what it asked.
      const waitMs = result.leaseWaitMs;
      const emptyUntilMs =
        granted === 0 && typeof waitMs === "number" && waitMs >= 0 ? Math.min(endsAtMs, sent.atMs + waitMs) : endsAtMs;
      this.c.noteLastKnown(st, shortOf(asked, granted, result.lease?.forMs ?? 0), emptyUntilMs, result.results);
      return this.c.answered(st, batch, result, attempts);
    }
    const answers = this.c.failed(st, batch, answer);
    const { late } = answer;
    // A late answer still charges: its lease is taken, and its admissions of requests refused here go back.
    const work = late
      ?.then((r) => {
        if (r.lease !== null) this.adopt(st, r.lease, sent, true);
        this.c.giveBackAll(st, batch, r.results, answers);
      })
      .catch(() => undefined); // failed as well: nothing it charged is known here
    if (work !== undefined) sent.keepAlive?.(work);
    return answers;
  }
}
