// long-file: one class owns a key's in-flight call, its waiters and its lease, which share per-key state.
/**
 * Coalesced calls and leases: how one isolate asks a key's Durable Object.
 *
 * **Coalescing (exact).** Per (rule, key) an isolate has at most one call in flight. Requests that arrive while it is
 * in flight wait, and go together in the next call as one batch, in arrival order. The object decides the batch at
 * its own clock, request by request, exactly as if they had arrived together (store.ts, `callRecord`), and each
 * request gets its own decision. A lone request (nothing in flight) is sent at once, so at low traffic nothing changes.
 * Under a flood of N concurrent requests on one key, the object sees about two calls, not N.
 *
 * **Leases (opt-in per rule, `lease:` in its YAML).** With the rule's lease on (and this isolate seeing the key above
 * `lease.above`, when set), a call also asks for a slice of the budget: after the batch the object charges up to
 * `units` more (fewer if fewer are left) and this isolate admits later requests from that slice without a call, until
 * the slice is spent or its term ends (`ttl`, cut at the window's end for window rules). Unused units go back to the
 * object with the next call, or by a call of their own when the term ends. A term is counted from when the call was
 * *sent* (never later than the charge), so clock skew between the isolate and the object does not stretch it. What
 * this guarantees is each algorithm's `lease` entry (src/algorithms/types.ts `LeasePolicy`), tested in test/unit/lease.props.test.ts.
 *
 * **Failures.** A batch that fails (overloaded, reset twice, timeout, ...) fails each of its requests, and the
 * gateway applies each request's rule policy (`on_error`). A retry carries the same call id, so the object never
 * charges a batch twice.
 *
 * The transport, the clock and the id source are passed in: the Worker uses its Durable Object namespace and the
 * system clock; bench/cluster.ts runs this same code over a simulated network and clock.
 */

import {
  type CallAnswer,
  type CallCounters,
  callObject,
  type FailureKind,
  type ObjectTransport,
} from "../protocol/object_call.ts";
import type {
  CallInput,
  CallResult,
  CheckResult,
  LeaseAsk,
  LeaseReturn,
  LimiterRule,
  RefundResult,
} from "../protocol/store.ts";
import type { LeaseSettings } from "../rules/types.ts";

/** One request for one (rule, key). */
export interface AskInput {
  /** How this request reaches the object (the Worker: its `LIMITER` namespace). */
  readonly transport: ObjectTransport;
  /** The object's name (names.ts). */
  readonly name: string;
  readonly rule: LimiterRule;
  readonly cost: number;
  /** The budget for one call, ms. */
  readonly timeoutMs: number;
  /** The rule's lease setting; `null` for none. */
  readonly lease: LeaseSettings | null;
  /** Keeps the isolate alive for background work this request starts (a lease's return at its end). */
  readonly keepAlive?: (work: Promise<unknown>) => void;
  /**
   * Sees this request's result from the object, with the time its call was sent (this isolate's clock), as soon as
   * the call answers: for each request of a batch in the order the object decided them, before any of them resumes
   * (which happens in no particular order). For isolate memory that must follow a key's answers in order (the
   * blocked-key cache); it must not do I/O (it runs in the context of the request that made the call).
   */
  readonly observe?: (result: CheckResult, sentAtMs: number) => void;
}

/** Where an answer came from: the object (possibly in a batch), or this isolate's lease. */
export type AskSource = "object" | "lease";

export type Asked =
  | {
      readonly kind: "answered";
      /** The decision (or an error value such as `cost_exceeds_capacity`). */
      readonly result: CheckResult;
      readonly source: AskSource;
      /** How many requests the call that answered carried (1 for a lone request; 0 for a lease answer). */
      readonly batchSize: number;
      readonly attempts: number;
      /** Give the admission back (another rule denied the request). */
      readonly refund: () => Promise<RefundResult>;
    }
  | {
      readonly kind: "failed";
      readonly failure: FailureKind;
      readonly message: string;
      readonly attempts: number;
      /** This request's answer, if its call is still running after the budget ran out. */
      readonly late: Promise<CheckResult> | null;
      /** Refund an admission that arrived late (its `atMs`). */
      readonly refund: (admittedAtMs: number) => Promise<RefundResult>;
    };

/** What this isolate holds of a key's budget. */
interface HeldLease {
  /** Units still to admit from. */
  unitsLeft: number;
  readonly units: number;
  /** The object's clock when it charged the units (what a refund names). */
  readonly atMs: number;
  /** This isolate's clock when the lease ends (the sending time plus its term). */
  readonly endsAtMs: number;
  /** Once given back, refunds of its admissions go to the object. */
  returned: boolean;
}

interface Waiting {
  readonly cost: number;
  readonly observe: AskInput["observe"];
  /** Its answer, or `"lead"`: make the next call, in this request's own context. */
  readonly resolve: (turn: Asked | "lead") => void;
  /** Taken into a batch, chosen to lead, or given up. */
  settled: boolean;
}

interface KeyState {
  readonly name: string;
  transport: ObjectTransport;
  rule: LimiterRule;
  timeoutMs: number;
  leaseSettings: LeaseSettings | null;
  inFlight: boolean;
  /** When the call in flight was started (this isolate's clock), ms. */
  inFlightSinceMs: number;
  queue: Waiting[];
  lease: HeldLease | null;
  /** Leases ended or replaced, whose unused units go back with the next call. */
  returns: HeldLease[];
  /**
   * Until when (this isolate's clock) the key is scarce: the object granted less than this isolate asked for, so
   * requests beyond the lease are refused here, with a retry at that time, instead of each making a call. It is the
   * lease's end (when this isolate asks again), or later when the object's own denial said so. 0: not scarce.
   */
  scarceUntilMs: number;
  /** What a refusal while scarce tells the client to wait for (at least `scarceUntilMs`): see `scarceAnswer`. */
  scarceRetryAtMs: number;
  /** Arrivals this isolate saw, per bucket of the lease ttl: for `lease.above` and lease sizing. */
  seenBucket: number;
  seenCurr: number;
  seenPrev: number;
  /** When this isolate's current run of arrivals of the key began (after a quiet bucket), and how many it has had. */
  runStartMs: number;
  runCount: number;
  /** The last arrival of the key here (this isolate's clock), ms. */
  lastSeenMs: number;
  /** Until when the key's object said it is busy (`CallResult.busy`): lease even below `above`. 0: not. */
  busyUntilMs: number;
}

/** Counters for `/_sluice/stats`. */
export interface CoalesceCounters extends CallCounters {
  /** Requests that went in a call with others (a batch of 2 or more). */
  batched_requests: number;
  /** Rule decisions answered from this isolate's lease, without a call. */
  lease_answers: number;
  /** Leases granted to this isolate. */
  leases: number;
  /** Units given back to objects from leases that ended unused. */
  lease_units_returned: number;
  /** Requests refused because `maxWaiting` requests already waited for their key (answered as an overloaded call). */
  queue_overflows?: number;
}

/** Requests one isolate lets wait for one (rule, key) at most, by default (see `CoalescerOptions.maxWaiting`). */
export const COALESCE_MAX_WAITING = 1_000;
/** Keys one isolate tracks at most, by default (see `CoalescerOptions.maxKeys`). */
export const COALESCE_MAX_KEYS = 10_000;

export interface CoalescerOptions {
  /** This isolate's clock, ms. */
  readonly clock: () => number;
  /** Resolves after `ms` on the isolate's clock (call budgets, a lease's term). */
  readonly sleep: (ms: number) => Promise<void>;
  readonly counters: CoalesceCounters;
  /** A unique call id (the Worker uses `crypto.randomUUID`). */
  readonly newId: () => string;
  /**
   * Wait for a promise that another request settles, and continue in this request's own context. In the Workers
   * runtime the continuation of a promise settled by another request runs in that request's I/O context, where this
   * request's I/O fails ("Cannot perform I/O on behalf of a different request"); the Worker passes `resumeInOwnContext`
   * (resume.ts). Default: plain `await` (simulation and tests).
   */
  readonly resume?: <T>(settled: Promise<T>) => Promise<T>;
  /** Keys tracked at most (least recently used forgotten first; a key with a call in flight or a lease is kept). */
  readonly maxKeys?: number;
  /**
   * Requests waiting for one key at most (default `COALESCE_MAX_WAITING`). One more is not queued: it fails at once as
   * an overloaded call would (`failure: "overloaded"`), and the gateway applies its rule's `on_error` (fail-open skips
   * the rule, fail-closed answers 503 problem+json), so a flood on one key never grows this isolate's memory.
   */
  readonly maxWaiting?: number;
}

export class Coalescer {
  private readonly keys = new Map<string, KeyState>();
  /** The lease each key's call in flight asked for, and what this isolate expected to need of it (seen per ttl). */
  private readonly lastAsk = new WeakMap<KeyState, LeaseAsk & { readonly need: number }>();
  private readonly maxKeys: number;
  private readonly maxWaiting: number;
  /**
   * A small pseudo-random sequence, seeded from an id on first use: spreads renewals (see `spread`). Not in the
   * constructor: the Worker makes its coalescer at module load, where the runtime refuses random values.
   */
  private spreadSeed: number | null = null;

  constructor(private readonly options: CoalescerOptions) {
    this.maxKeys = options.maxKeys ?? COALESCE_MAX_KEYS;
    this.maxWaiting = options.maxWaiting ?? COALESCE_MAX_WAITING;
  }

  /**
   * A deterministic pseudo-random integer in [0, rangeMs): how much this isolate shortens a lease's term, or waits
   * past a window's end before renewing. Isolates whose leases were synchronized (a cold start, a window's end) thus
   * renew at different instants, so the object's queue never takes them all at once.
   */
  private spread(rangeMs: number): number {
    if (rangeMs < 1) return 0;
    // xorshift32
    let x = this.spreadSeed ?? hashString(this.options.newId());
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.spreadSeed = x >>> 0 || 1;
    return this.spreadSeed % Math.floor(rangeMs);
  }

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
    this.see(st, now);
    const lease = st.lease;
    if (lease !== null && !lease.returned && now < lease.endsAtMs && lease.unitsLeft >= input.cost) {
      lease.unitsLeft -= input.cost;
      this.options.counters.lease_answers++;
      return Promise.resolve(this.leaseAnswer(st, lease, input.cost, now));
    }
    if (now < st.scarceUntilMs) {
      this.options.counters.lease_answers++;
      return Promise.resolve(this.scarceAnswer(st, now));
    }
    return this.wait(st, input);
  }

  /**
   * A refusal while the key is scarce. Its retry is honest: this isolate admits nothing before its lease ends (when it
   * asks the object again), nor before the key reopens if the object's own denial said when (a window's end).
   */
  private scarceAnswer(st: KeyState, now: number): Asked {
    const waitMs = Math.max(1, st.scarceRetryAtMs - now);
    return {
      kind: "answered",
      result: {
        ok: true,
        atMs: now,
        decision: { allowed: false, remaining: 0, resetAfterMs: waitMs, retryAfterMs: waitMs, delayMs: 0 },
      },
      source: "lease",
      batchSize: 0,
      attempts: 0,
      refund: () => Promise.resolve(null),
    };
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
      return {
        kind: "failed",
        failure: "overloaded",
        message: `${st.queue.length} requests already wait for this key in this isolate (the bound)`,
        attempts: 0,
        late: null,
        refund: () => Promise.resolve(null),
      };
    }
    let waiting: Waiting | undefined;
    const turn = new Promise<Asked | "lead">((resolve) => {
      waiting = { cost: input.cost, observe: input.observe, resolve, settled: false };
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
    const answer = await this.flush(st, me, input.keepAlive);
    return answer!;
  }

  /** Let the first waiting request make the next call. */
  private handOff(st: KeyState): void {
    const next = st.queue[0];
    if (st.inFlight || next === undefined) return;
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    next.settled = true;
    next.resolve("lead");
  }

  private giveUp(st: KeyState, me: Waiting): void {
    if (me.settled) return;
    me.settled = true;
    st.queue.splice(st.queue.indexOf(me), 1);
    const message = `no call for this key ended within ${2 * st.timeoutMs} ms`;
    me.resolve({
      kind: "failed",
      failure: "timeout",
      message,
      attempts: 0,
      late: null,
      refund: () => Promise.resolve(null),
    });
    if (st.inFlight && this.options.clock() - st.inFlightSinceMs >= 2 * st.timeoutMs) {
      st.inFlight = false;
      this.handOff(st);
    }
  }

  private stateOf(input: AskInput): KeyState {
    let st = this.keys.get(input.name);
    if (st === undefined) {
      st = {
        name: input.name,
        transport: input.transport,
        rule: input.rule,
        timeoutMs: input.timeoutMs,
        leaseSettings: input.lease,
        inFlight: false,
        inFlightSinceMs: 0,
        queue: [],
        lease: null,
        returns: [],
        scarceUntilMs: 0,
        scarceRetryAtMs: 0,
        seenBucket: 0,
        seenCurr: 0,
        seenPrev: 0,
        runStartMs: 0,
        runCount: 0,
        lastSeenMs: 0,
        busyUntilMs: 0,
      };
      this.evict();
    } else {
      this.keys.delete(input.name); // re-inserted below: the map's order is least recently used first
      st.transport = input.transport;
      st.rule = input.rule;
      st.timeoutMs = input.timeoutMs;
      st.leaseSettings = input.lease;
    }
    this.keys.set(input.name, st);
    return st;
  }

  private evict(): void {
    if (this.keys.size < this.maxKeys) return;
    for (const [name, st] of this.keys) {
      if (this.keys.size < this.maxKeys) return;
      if (st.inFlight || st.lease !== null || st.returns.length > 0) continue;
      this.keys.delete(name);
    }
  }

  /** Count an arrival, in buckets of the lease ttl (1 s without a lease). */
  private see(st: KeyState, now: number): void {
    this.roll(st, now);
    if (st.seenPrev === 0 && st.seenCurr === 0) {
      // The key was quiet here for a whole bucket: a new run of arrivals starts now.
      st.runStartMs = now;
      st.runCount = 0;
    }
    st.seenCurr++;
    st.runCount++;
    st.lastSeenMs = now;
  }

  private roll(st: KeyState, now: number): void {
    const bucket = Math.floor(now / (st.leaseSettings?.ttlMs ?? 1000));
    if (bucket !== st.seenBucket) {
      st.seenPrev = bucket === st.seenBucket + 1 ? st.seenCurr : 0;
      st.seenCurr = 0;
      st.seenBucket = bucket;
    }
  }

  /**
   * Arrivals this isolate sees of the key in one lease ttl: the larger of the last full bucket and this one; and in
   * a run younger than one ttl (a key that just became hot, a cold start), once it has seen 3, its count so far
   * extrapolated to one ttl (over at least a tenth of it), so a hot key leases within its first tenth of a ttl
   * instead of making a call per round trip until its bucket fills.
   */
  private seenPerTtl(st: KeyState): number {
    const now = this.options.clock();
    this.roll(st, now);
    const seen = Math.max(st.seenPrev, st.seenCurr);
    const ttlMs = st.leaseSettings?.ttlMs ?? 1000;
    const elapsedMs = now - st.runStartMs;
    if (st.runCount < 3 || elapsedMs >= ttlMs) return seen;
    return Math.max(seen, Math.floor(((st.runCount - 1) * ttlMs) / Math.max(elapsedMs, ttlMs / 10)));
  }

  /** The lease to ask for with the next call, if any. */
  private leaseAsk(st: KeyState): CallInput["lease"] {
    const settings = st.leaseSettings;
    if (settings === null) return null;
    const seen = this.seenPerTtl(st);
    // Above `above` = more than tokens per perMs ms: seen / ttl > tokens / perMs, in integers. A busy object (many
    // isolates, each under `above`) asks for leases all the same.
    const busy = this.options.clock() < st.busyUntilMs;
    const above = settings.above;
    if (above !== null && !busy && seen * above.perMs <= above.tokens * settings.ttlMs) return null;
    // What it saw in one ttl, with a margin for chance (two standard deviations of a Poisson count), so that a lease
    // rarely runs out before its term while the key has room.
    return { units: settings.units ?? seen + 2 * Math.ceil(Math.sqrt(seen)) + 1, ttlMs: settings.ttlMs };
  }

  /**
   * Make one call for everything queued (the leader first) and whatever leases are to be given back; answer every
   * request in it, and return the leader's answer (`null` without a leader: a call that only gives units back).
   * `st.inFlight` is already set; it is cleared here, and the next call handed to the first request waiting.
   */
  private async flush(
    st: KeyState,
    leader: Waiting | null,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
    renew = false,
  ): Promise<Asked | null> {
    const { clock, counters } = this.options;
    const queued = st.queue.splice(0);
    for (const w of queued) w.settled = true;
    const { batch, mine } = this.answerHere(st, queued, leader, clock());
    if (batch.length === 0 && st.returns.length === 0 && !renew) {
      st.inFlight = false;
      this.handOff(st);
      return mine;
    }
    if (st.lease !== null) this.endLease(st);
    const input = this.callInput(st, batch, renew);
    const sentAtMs = clock();
    let answers: Asked[] = [];
    try {
      const answer = await callObject(st.transport, st.name, input, st.timeoutMs, {
        sleep: this.options.sleep,
        stats: counters,
      });
      answers = this.settle(st, batch, answer, sentAtMs, keepAlive);
    } finally {
      st.inFlight = false;
      this.handOff(st);
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
  private answerHere(
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
        answer(w, this.leaseAnswer(st, lease, w.cost, now));
        served++;
      }
    }
    const batch = queued.slice(served);
    if (batch.length === 0 || now >= st.scarceUntilMs) return { batch, mine };
    for (const w of batch) answer(w, this.scarceAnswer(st, now));
    return { batch: [], mine };
  }

  /** The call for `batch`: its costs, the held units to give back, and a lease to ask for (remembered for `settle`). */
  private callInput(st: KeyState, batch: readonly Waiting[], renew: boolean): CallInput {
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
    const input: CallInput = {
      rule: st.rule,
      id: this.options.newId(),
      costs: batch.map((w) => w.cost),
      giveBack,
      lease: batch.length > 0 || renew ? this.leaseAsk(st) : null,
    };
    if (input.lease == null) this.lastAsk.delete(st);
    else this.lastAsk.set(st, { ...input.lease, need: Math.min(input.lease.units, this.seenPerTtl(st)) });
    if (batch.length > 1) counters.batched_requests += batch.length;
    return input;
  }

  /**
   * At a lease's end: while the key is still hot here, renew it (one call gives the unused units back and asks for
   * the next lease, with whatever requests are waiting); else give the unused units back by a call of their own.
   * Nothing while a call is in flight (the units go back with it).
   */
  private async renewOrReturn(st: KeyState, keepAlive: ((work: Promise<unknown>) => void) | undefined): Promise<void> {
    // Renew only a key requested here within the last ttl, so an idle key's lease is given back, not kept alive.
    const ttlMs = st.leaseSettings?.ttlMs ?? 0;
    const renew = this.options.clock() - st.lastSeenMs < ttlMs && this.leaseAsk(st) !== null;
    if (st.inFlight) return;
    if (st.returns.length === 0 && !renew) {
      this.handOff(st); // requests that waited through a hold go on as usual
      return;
    }
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    await this.flush(st, null, keepAlive, renew);
  }

  private settle(
    st: KeyState,
    batch: readonly Waiting[],
    answer: CallAnswer,
    sentAtMs: number,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
  ): Asked[] {
    if (answer.kind === "answered") {
      const { result, attempts } = answer;
      if (result.busy === true) st.busyUntilMs = this.options.clock() + (st.leaseSettings?.ttlMs ?? 0);
      const asked = this.lastAsk.get(st);
      const granted = result.lease?.units ?? 0;
      const endsAtMs =
        result.lease !== null
          ? this.adopt(st, result, sentAtMs, asked, keepAlive)
          : sentAtMs + (asked === undefined ? 0 : asked.ttlMs - this.spread(asked.ttlMs / 2));
      this.noteScarcity(st, asked !== undefined && granted < asked.need, endsAtMs, result.results);
      return batch.map((w, i): Asked => {
        const r = result.results[i] ?? { ok: false as const, error: "invalid_cost" as const };
        return {
          kind: "answered",
          result: r,
          source: "object",
          batchSize: batch.length,
          attempts,
          refund: () => (r.ok && r.decision.allowed ? this.refundObject(st, w.cost, r.atMs) : Promise.resolve(null)),
        };
      });
    }
    const { failure, message, attempts, late } = answer;
    // A lease that arrives too late is still a charge: take it, so its units are used or given back.
    late?.then(
      (r) => (r.lease === null ? undefined : this.adopt(st, r, sentAtMs, this.lastAsk.get(st), keepAlive)),
      () => undefined,
    );
    return batch.map(
      (w, i): Asked => ({
        kind: "failed",
        failure,
        message,
        attempts,
        late: late === null ? null : late.then((r) => r.results[i] ?? { ok: false, error: "invalid_cost" }),
        refund: (admittedAtMs) => this.refundObject(st, w.cost, admittedAtMs),
      }),
    );
  }

  /**
   * Got less than this isolate expects to need in one ttl (its ask without the margin): the key's budget is short;
   * this isolate makes do with its share until its lease ends, and asks again then (so units given back meanwhile are
   * not lost). Its refusals tell the client the later of that and when the object's own denial in this call said the
   * key reopens. (Granted what it needs but not the margin: it calls again if it runs out.)
   */
  private noteScarcity(st: KeyState, short: boolean, endsAtMs: number, results: readonly CheckResult[]): void {
    st.scarceUntilMs = 0;
    st.scarceRetryAtMs = 0;
    if (!short) return;
    const now = this.options.clock();
    let reopensAtMs = endsAtMs;
    for (const r of results) {
      if (r.ok && !r.decision.allowed && r.decision.retryAfterMs !== null) {
        reopensAtMs = Math.max(reopensAtMs, now + r.decision.retryAfterMs);
      }
    }
    st.scarceUntilMs = endsAtMs;
    st.scarceRetryAtMs = reopensAtMs;
  }

  /**
   * Hold a granted lease until it is spent or its term ends; a lease held before is given back with the next call.
   * Returns when the lease ends (this isolate's clock).
   *
   * A full term is shortened by up to a half, pseudo-randomly, so that isolates whose leases began together do
   * not all renew together again. A term cut at a window's end cannot be shortened into a useful lease (the next
   * renewal would still meet the others at the boundary), so this isolate then waits up to a quarter of the ttl
   * (at most the call budget) past the end before it renews, and requests meanwhile wait for that call.
   */
  private adopt(
    st: KeyState,
    result: CallResult,
    sentAtMs: number,
    asked: LeaseAsk | undefined,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
  ): number {
    const grant = result.lease;
    if (grant === null) return sentAtMs;
    this.options.counters.leases++;
    const askedTtlMs = asked?.ttlMs ?? grant.forMs;
    const cut = grant.forMs < askedTtlMs;
    const held: HeldLease = {
      unitsLeft: grant.units,
      units: grant.units,
      atMs: grant.atMs,
      endsAtMs: sentAtMs + grant.forMs - (cut ? 0 : this.spread(grant.forMs / 2)),
      returned: false,
    };
    if (st.lease !== null) this.endLease(st);
    st.lease = held;
    const { sleep } = this.options;
    const wait = Math.max(0, held.endsAtMs - this.options.clock());
    const holdMs = cut ? this.spread(Math.min(askedTtlMs / 4, st.timeoutMs)) : 0;
    const ended = sleep(wait).then(async () => {
      if (st.lease !== held) return; // ended before its term (replaced by the next call, which gave it back)
      this.endLease(st);
      if (holdMs > 0 && !st.inFlight) {
        // Hold the key as if a call were in flight, so the requests meanwhile wait for the renewal.
        st.inFlight = true;
        st.inFlightSinceMs = this.options.clock();
        await sleep(holdMs);
        st.inFlight = false;
      }
      return this.renewOrReturn(st, keepAlive);
    });
    keepAlive?.(ended);
    return held.endsAtMs;
  }

  /** Stop admitting from the key's lease; its unused units go back with the next call. */
  private endLease(st: KeyState): void {
    const held = st.lease;
    if (held === null) return;
    st.lease = null;
    if (held.unitsLeft > 0) st.returns.push(held);
    else held.returned = true;
  }

  private leaseAnswer(st: KeyState, lease: HeldLease, cost: number, now: number): Asked {
    return {
      kind: "answered",
      result: {
        ok: true,
        atMs: lease.atMs,
        decision: {
          allowed: true,
          // What this isolate's slice still holds, and when it ends: the honest figures for an answer from a lease.
          remaining: lease.unitsLeft,
          resetAfterMs: Math.max(0, lease.endsAtMs - now),
          retryAfterMs: null,
          delayMs: 0,
        },
      },
      source: "lease",
      batchSize: 0,
      attempts: 0,
      refund: () => {
        const at = this.options.clock();
        if (st.lease === lease && at < lease.endsAtMs) {
          lease.unitsLeft += cost;
          return Promise.resolve({ remaining: lease.unitsLeft, resetAfterMs: lease.endsAtMs - at });
        }
        if (!lease.returned) {
          // Ended but not yet given back: it goes back with its other unused units.
          lease.unitsLeft += cost;
          return Promise.resolve(null);
        }
        return this.refundObject(st, cost, lease.atMs);
      },
    };
  }

  private refundObject(st: KeyState, cost: number, admittedAtMs: number): Promise<RefundResult> {
    return st.transport.refund(st.name, { rule: st.rule, cost, admittedAtMs });
  }
}

/** FNV-1a of a string, as an unsigned 32-bit seed (never 0). */
function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0 || 1;
}
