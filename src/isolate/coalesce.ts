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
 * **Hot keys without hand-tuning.** A `scope: global` rule of an algorithm that takes leases but has no `lease:` of its
 * own leases the key with the default ttl (1 s) while, and only while, the key's object says it is busy
 * (`CallResult.busy`): at low traffic nothing changes.
 *
 * **Refunds** (another rule denied the request) ride with the key's next call as `giveBack`, never one call each:
 * while a call is in flight, or the key is hot here (a lease, a busy object), they wait for the next call (at most
 * `RETURN_WAIT_MS`, then one call carries all of them); a cold key's refund with nothing in flight starts that call at
 * once, as a lone request would.
 *
 * **Failures.** When the object cannot decide a batch, each request is decided from what this isolate last knew, and
 * only what is left takes its rule's `on_error` (`lastKnown`): an overloaded object (or a key with `maxWaiting`
 * requests already waiting here) never admits without counting. A retry carries the same call id, so the object never
 * charges a batch twice.
 *
 * The transport, the clock and the id source are passed in: the Worker uses its Durable Object namespace and the
 * system clock; bench/cluster.ts runs this same code over a simulated network and clock.
 */
import { leasePolicy } from "../algorithms/index.ts";
import {
  type CallAnswer,
  type CallCounters,
  callObject,
  type FailureKind,
  type ObjectTransport,
} from "../protocol/object_call.ts";
import { HOT_HOLD_MS } from "../protocol/share.ts";
import {
  type CallInput,
  type CallResult,
  type CheckResult,
  type LeaseAsk,
  type LeaseReturn,
  type LimiterRule,
  leaseCapOf,
  type RefundResult,
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
  /**
   * This isolate's region's delegate for the key (src/object/delegate.ts), if the Worker has one: while the key's
   * object says the key is hot, batches go there instead (same call, same answer); `null` or absent: never.
   */
  readonly delegate?: DelegateRoute | null;
}

/** Where a hot key's batches go: a delegate's transport and name. */
export interface DelegateRoute {
  readonly transport: ObjectTransport;
  readonly name: string;
}

/** Where an answer came from: the object (possibly in a batch), or this isolate's lease (or what it last knew). */
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
  /** Its own request's `keepAlive` (a refund it makes may start a call that outlives it). */
  readonly keepAlive: AskInput["keepAlive"];
  /** Its answer, or `"lead"`: make the next call, in this request's own context. */
  readonly resolve: (turn: Asked | "lead") => void;
  /** Taken into a batch, chosen to lead, or given up. */
  settled: boolean;
}

/** The last lease granted here, kept after it ends: what this isolate last knew of its share (`lastKnown`). */
interface LastGrant {
  readonly units: number;
  /** The object's clock when it charged them. */
  readonly atMs: number;
  /** Its term, ms, and when it ended or ends (this isolate's clock). */
  readonly termMs: number;
  readonly endsAtMs: number;
  /** Already decided from once (a share is reused at most once: the bound in `lastKnown`). */
  reused: boolean;
}

interface KeyState {
  readonly name: string;
  transport: ObjectTransport;
  rule: LimiterRule;
  timeoutMs: number;
  /** The rule's lease setting, or `AUTO_LEASE` (see `autoLease`). */
  leaseSettings: LeaseSettings | null;
  /** The rule has no `lease:` of its own: lease (with `AUTO_LEASE`) only while the object says it is busy. */
  autoLease: boolean;
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
  /** Refunds waiting for the key's next call (merged by the admission's `atMs`). */
  refunds: LeaseReturn[];
  /** Who waits for `refunds` to land (a cold key's refund answers with the figures after it). */
  refundWaiters: ((result: RefundResult) => void)[];
  /** A timer is set to send `refunds` (and `returns`) if no call takes them first. */
  returnsArmed: boolean;
  /** An overloaded object sent refunds back: none go in a call of their own before this (this isolate's clock). */
  returnsNotBeforeMs: number;
  /** Until when the key's object is known overloaded (one lease ttl after its last overloaded answer here). */
  overloadedUntilMs: number;
  lastGrant: LastGrant | null;
  /** A share this isolate decides from while the object cannot be asked (never charged, never given back). */
  fallback: HeldLease | null;
  /** The region's delegate for the key, if any (`AskInput.delegate`). */
  delegate: DelegateRoute | null;
  /** Until when the key is hot (this isolate's clock): batches go to the delegate. 0: not hot. */
  hotUntilMs: number;
  /** Until when the delegate is avoided after a failed call (batches go to the key's object). */
  delegateDownUntilMs: number;
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
  /** Rule decisions made from what this isolate last knew because the object could not decide (`lastKnown`). */
  last_known_answers?: number;
  /** Calls to a delegate that failed (the batch then went to the key's object). */
  delegate_failures?: number;
}

/** Requests one isolate lets wait for one (rule, key) at most, by default (see `CoalescerOptions.maxWaiting`). */
export const COALESCE_MAX_WAITING = 1_000;
/** Keys one isolate tracks at most, by default (see `CoalescerOptions.maxKeys`). */
export const COALESCE_MAX_KEYS = 10_000;
/** How long a refund of a hot key waits for the key's next call, at most, ms (then one call takes all waiting). */
export const RETURN_WAIT_MS = 1_000;
/**
 * After an overloaded call with nothing known to decide from, how long this isolate refuses the key without asking,
 * ms: between a half and the whole of this (spread, so isolates do not come back together).
 */
export const OVERLOAD_BACKOFF_MS = 500;
/** After a delegate's call failed, how long this isolate sends the key's batches to the key's object instead, ms. */
export const DELEGATE_BACKOFF_MS = 5_000;
/** The lease a rule without `lease:` takes while its key's object is busy. */
export const AUTO_LEASE: LeaseSettings = { ttlMs: 1_000, units: null, above: null };

/** Whether a rule without its own `lease:` leases automatically (while busy): its algorithm takes leases. */
export function autoLease(rule: LimiterRule, settings: LeaseSettings | null): boolean {
  return settings === null && leasePolicy(rule.params.algorithm).kind !== "none";
}

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
  /** Who waits for the refunds each call in flight carries (`refundObject`). */
  private readonly refundWaiters = new WeakMap<CallInput, ((result: RefundResult) => void)[]>();
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
      return Promise.resolve(this.leaseAnswer(st, lease, input.cost, now, input.keepAlive));
    }
    const fallback = st.fallback;
    if (fallback !== null && now < fallback.endsAtMs && fallback.unitsLeft >= input.cost) {
      fallback.unitsLeft -= input.cost;
      this.countLastKnown();
      return Promise.resolve(this.shareAnswer(st, fallback, input.cost, now));
    }
    if (now < st.scarceUntilMs) {
      this.options.counters.lease_answers++;
      return Promise.resolve(this.scarceAnswer(st, now));
    }
    return this.wait(st, input);
  }

  private countLastKnown(): void {
    const { counters } = this.options;
    counters.last_known_answers = (counters.last_known_answers ?? 0) + 1;
  }

  /** This isolate holds or held a share of the key lately, or the key's object says it is busy. */
  private isHot(st: KeyState, now: number): boolean {
    const g = st.lastGrant;
    return (
      now < st.hotUntilMs ||
      now < st.busyUntilMs ||
      now < st.overloadedUntilMs ||
      st.lease !== null ||
      (g !== null && now < g.endsAtMs + g.termMs)
    );
  }

  /**
   * A request the object could not decide (`failure`), decided from what this isolate last knew; `null` leaves it to
   * its rule's `on_error`. In order:
   *
   * 1. A rate rule's last share, reused once: the units of the last lease granted here, for at most one more term
   *    after it ended (never charged, never given back). Each isolate thus admits at most its last share once more,
   *    as if the object had granted it again when it ended; over all isolates that is what the object granted in the
   *    last two terms, at most `burst + rate × 2·ttl` beyond the lease bound, once per outage. Window rules never
   *    reuse a share (a window's units are counted exactly).
   * 2. A key known to be short here (`scarceUntilMs`): refused, as before the failure.
   * 3. An overloaded object: refused, and the key refused here without asking for a short, spread backoff
   *    (`OVERLOAD_BACKOFF_MS`), so the object is not asked more while it drowns. A request beyond `maxWaiting` here:
   *    refused (no backoff: the requests already waiting still go to the object). An overload thus never admits
   *    anything uncounted; it under-admits for that backoff at most.
   * 4. Any other failure (unreachable, timeout, an error) of a key that is not hot here: its rule's `on_error`.
   *    A hot key (a share held lately, or a busy object) was decided by 1 or 2 when they apply; and its call that
   *    times out (or any call within a lease ttl of an overloaded answer that does) is taken for what it most likely
   *    is, an overloaded object whose queue outlasted the budget, and decided as 3.
   */
  private lastKnown(st: KeyState, failure: FailureKind, cost: number, now: number, backoff = true): Asked | null {
    if (failure === "overloaded") st.overloadedUntilMs = now + (st.leaseSettings?.ttlMs ?? AUTO_LEASE.ttlMs);
    const hot = this.isHot(st, now);
    const overloaded = failure === "overloaded" || (failure === "timeout" && hot);
    if (!overloaded && !hot) return null;
    const share = this.fallbackShare(st, now);
    if (share !== null && share.unitsLeft >= cost) {
      share.unitsLeft -= cost;
      this.countLastKnown();
      return this.shareAnswer(st, share, cost, now);
    }
    if (now >= st.scarceUntilMs) {
      if (!overloaded) return null;
      if (!backoff) {
        this.countLastKnown();
        return this.scarceAnswer(st, now);
      }
      const backoffMs = OVERLOAD_BACKOFF_MS / 2 + this.spread(OVERLOAD_BACKOFF_MS / 2);
      st.scarceUntilMs = now + backoffMs;
      st.scarceRetryAtMs = Math.max(st.scarceRetryAtMs, st.scarceUntilMs);
    }
    this.countLastKnown();
    return this.scarceAnswer(st, now);
  }

  /** The share to decide from while the object cannot be asked (see `lastKnown`, 1), or `null`. */
  private fallbackShare(st: KeyState, now: number): HeldLease | null {
    if (st.fallback !== null && now < st.fallback.endsAtMs) return st.fallback;
    const g = st.lastGrant;
    if (g === null || g.reused || leasePolicy(st.rule.params.algorithm).kind !== "rate") return null;
    if (now >= g.endsAtMs + g.termMs) return null;
    g.reused = true;
    st.fallback = { unitsLeft: g.units, units: g.units, atMs: g.atMs, endsAtMs: g.endsAtMs + g.termMs, returned: true };
    return st.fallback;
  }

  /** An admission from the share this isolate decides from (`fallbackShare`): a refund goes back into it, if live. */
  private shareAnswer(st: KeyState, share: HeldLease, cost: number, now: number): Asked {
    return {
      kind: "answered",
      result: {
        ok: true,
        atMs: now,
        decision: {
          allowed: true,
          remaining: share.unitsLeft,
          resetAfterMs: Math.max(0, share.endsAtMs - now),
          retryAfterMs: null,
          delayMs: 0,
        },
      },
      source: "lease",
      batchSize: 0,
      attempts: 0,
      refund: () => {
        if (st.fallback === share && this.options.clock() < share.endsAtMs) share.unitsLeft += cost;
        return Promise.resolve(null);
      },
    };
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
      // As an overloaded call: decided from what this isolate last knew (never `on_error`, see `lastKnown`), without
      // the backoff: the object is not the one overloaded, and the requests already waiting still go to it.
      return this.lastKnown(st, "overloaded", input.cost, this.options.clock(), false)!;
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
        leaseSettings: input.lease ?? (autoLease(input.rule, input.lease) ? AUTO_LEASE : null),
        autoLease: autoLease(input.rule, input.lease),
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
        refunds: [],
        refundWaiters: [],
        returnsArmed: false,
        returnsNotBeforeMs: 0,
        overloadedUntilMs: 0,
        lastGrant: null,
        fallback: null,
        delegate: input.delegate ?? null,
        hotUntilMs: 0,
        delegateDownUntilMs: 0,
      };
      this.evict();
    } else {
      this.keys.delete(input.name); // re-inserted below: the map's order is least recently used first
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

  private evict(): void {
    if (this.keys.size < this.maxKeys) return;
    for (const [name, st] of this.keys) {
      if (this.keys.size < this.maxKeys) return;
      if (st.inFlight || st.lease !== null || st.returns.length > 0 || st.refunds.length > 0) continue;
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
    if (st.autoLease && !busy) return null;
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
    const { clock } = this.options;
    const queued = st.queue.splice(0);
    for (const w of queued) w.settled = true;
    const { batch, mine } = this.answerHere(st, queued, leader, clock());
    if (batch.length === 0 && st.returns.length === 0 && st.refunds.length === 0 && !renew) {
      st.inFlight = false;
      this.handOff(st);
      return mine;
    }
    if (st.lease !== null) this.endLease(st);
    const delegate = this.delegateFor(st, clock());
    const input = this.callInput(st, batch, renew && delegate === null, delegate !== null);
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
        answer(w, this.leaseAnswer(st, lease, w.cost, now, w.keepAlive));
        served++;
      }
    }
    const batch = queued.slice(served);
    if (batch.length === 0 || now >= st.scarceUntilMs) return { batch, mine };
    for (const w of batch) answer(w, this.scarceAnswer(st, now));
    return { batch: [], mine };
  }

  /** The delegate to send the key's next call to: while the key is hot and the delegate was not failing lately. */
  private delegateFor(st: KeyState, now: number): DelegateRoute | null {
    if (st.delegate === null || now >= st.hotUntilMs || now < st.delegateDownUntilMs) return null;
    return st.delegate;
  }

  /**
   * Make the call: to the delegate, when there is one, and to the key's object if the delegate fails (the delegate is
   * then avoided for `DELEGATE_BACKOFF_MS`). The fallback carries no refunds unless the delegate certainly did not
   * apply them (it was overloaded): a refund applied twice would admit more than the rule allows.
   */
  private async callTarget(st: KeyState, delegate: DelegateRoute | null, input: CallInput): Promise<CallAnswer> {
    const isolate = { sleep: this.options.sleep, stats: this.options.counters };
    if (delegate === null) return callObject(st.transport, st.name, input, st.timeoutMs, isolate);
    const answer = await callObject(delegate.transport, delegate.name, input, st.timeoutMs, isolate);
    if (answer.kind === "answered") return answer;
    const { counters } = this.options;
    counters.delegate_failures = (counters.delegate_failures ?? 0) + 1;
    st.delegateDownUntilMs = this.options.clock() + DELEGATE_BACKOFF_MS;
    const applied = answer.failure !== "overloaded";
    const direct: CallInput = { ...input, id: this.options.newId(), ...(applied ? { giveBack: [] } : {}) };
    return callObject(st.transport, st.name, direct, st.timeoutMs, isolate);
  }

  /** The call for `batch`: its costs, the held units to give back, and a lease to ask for (remembered for `settle`). */
  private callInput(st: KeyState, batch: readonly Waiting[], renew: boolean, toDelegate = false): CallInput {
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
      // A delegate grants no leases: it decides every batch itself.
      lease: !toDelegate && (batch.length > 0 || renew) ? this.leaseAsk(st) : null,
    };
    if (input.lease == null) this.lastAsk.delete(st);
    else {
      // What this isolate needs of one ttl, but never more than one lease may take (store.ts `leaseCapOf`): a grant
      // cut at that cap is no sign of a short key.
      const need = Math.min(input.lease.units, this.seenPerTtl(st), leaseCapOf(st.rule.params));
      this.lastAsk.set(st, { ...input.lease, need });
    }
    if (batch.length > 1) counters.batched_requests += batch.length;
    if (waiters.length > 0) this.refundWaiters.set(input, waiters);
    return input;
  }

  /**
   * The refunds a call carried have landed (or not: `null`); tell who waits for them. An overloaded object never saw
   * the call: what it carried goes back in the queue for a later call (never sooner than a backoff). Any other
   * failure may have been applied (a timeout's late answer, an error after the write), so what it carried is not
   * sent again: the key is short that much, never over.
   */
  private refundsLanded(st: KeyState, input: CallInput, answer: CallAnswer): void {
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
    if (st.returns.length === 0 && st.refunds.length === 0 && !renew) {
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
      st.fallback = null; // the object decides again
      if (result.busy === true) st.busyUntilMs = this.options.clock() + (st.leaseSettings?.ttlMs ?? 0);
      this.noteHot(st, result.hot);
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
          refund: () =>
            r.ok && r.decision.allowed ? this.refundObject(st, w.cost, r.atMs, w.keepAlive) : Promise.resolve(null),
        };
      });
    }
    const { failure, message, attempts, late } = answer;
    // A lease that arrives too late is still a charge: take it, so its units are used or given back.
    late?.then(
      (r) => (r.lease === null ? undefined : this.adopt(st, r, sentAtMs, this.lastAsk.get(st), keepAlive)),
      () => undefined,
    );
    const now = this.options.clock();
    return batch.map(
      (w, i): Asked =>
        this.lastKnown(st, failure, w.cost, now) ?? {
          kind: "failed",
          failure,
          message,
          attempts,
          late: late === null ? null : lateResult(late, i),
          refund: (admittedAtMs) => this.refundObject(st, w.cost, admittedAtMs, w.keepAlive),
        },
    );
  }

  /** The key's object (or delegate) said the key is hot (go to the delegate) or cold (`false`: back to the object). */
  private noteHot(st: KeyState, hot: boolean | undefined): void {
    if (hot === true) st.hotUntilMs = this.options.clock() + HOT_HOLD_MS;
    else if (hot === false) st.hotUntilMs = 0;
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
    st.lastGrant = {
      units: grant.units,
      atMs: grant.atMs,
      termMs: Math.max(0, held.endsAtMs - sentAtMs),
      endsAtMs: held.endsAtMs,
      reused: false,
    };
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

  private leaseAnswer(
    st: KeyState,
    lease: HeldLease,
    cost: number,
    now: number,
    keepAlive?: (work: Promise<unknown>) => void,
  ): Asked {
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
        return this.refundObject(st, cost, lease.atMs, keepAlive);
      },
    };
  }

  /**
   * Give an admission back with the key's next call (`giveBack`). A cold key with no call in flight sends it at once
   * (with any other refunds waiting), and its figures after the refund come back; otherwise it waits for the next
   * call, at most `RETURN_WAIT_MS` (then one call takes every refund waiting), and the caller gets `null` (the figures
   * it already has, one unit short: the safe side).
   */
  private refundObject(
    st: KeyState,
    cost: number,
    admittedAtMs: number,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
  ): Promise<RefundResult> {
    const same = st.refunds.findIndex((r) => r.atMs === admittedAtMs);
    if (same === -1) st.refunds.push({ units: cost, atMs: admittedAtMs });
    else st.refunds[same] = { units: st.refunds[same]!.units + cost, atMs: admittedAtMs };
    const now = this.options.clock();
    if (this.isHot(st, now) || now < st.returnsNotBeforeMs) {
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
  private async sendReturns(
    st: KeyState,
    keepAlive: ((work: Promise<unknown>) => void) | undefined,
  ): Promise<RefundResult> {
    st.inFlight = true;
    st.inFlightSinceMs = this.options.clock();
    try {
      const delegate = this.delegateFor(st, this.options.clock());
      const input = this.callInput(st, [], false, delegate !== null);
      const answer = await this.callTarget(st, delegate, input);
      this.refundsLanded(st, input, answer);
      if (answer.kind !== "answered") return null; // not given back: the key is short that much, never over
      if (answer.result.busy === true) st.busyUntilMs = this.options.clock() + (st.leaseSettings?.ttlMs ?? 0);
      this.noteHot(st, answer.result.hot);
      return answer.result.refunded ?? null;
    } finally {
      this.afterCall(st, keepAlive);
    }
  }

  /**
   * A call ended: the next call goes to the first request waiting; with none, the refunds that came meanwhile go now
   * in one call of their own, unless the key is hot here (then they wait for the next call, `armReturns`).
   */
  private afterCall(st: KeyState, keepAlive: ((work: Promise<unknown>) => void) | undefined): void {
    st.inFlight = false;
    this.handOff(st);
    if (st.inFlight || st.refunds.length === 0) return;
    const now = this.options.clock();
    if (this.isHot(st, now) || now < st.returnsNotBeforeMs) this.armReturns(st, keepAlive);
    else {
      const work = this.sendReturns(st, keepAlive);
      keepAlive?.(work);
    }
  }

  /** Make sure the refunds waiting reach the object: with the next call, or in one of their own after a wait. */
  private armReturns(st: KeyState, keepAlive: ((work: Promise<unknown>) => void) | undefined): void {
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
}

/**
 * Request `i`'s result from a call that answered after its budget ran out. A late call that fails is nobody's
 * concern unless its caller looks (the gateway refunds a late admission only when the request was refused): the
 * rejection is marked handled here, and still reaches whoever awaits the result.
 */
function lateResult(late: Promise<CallResult>, i: number): Promise<CheckResult> {
  const result = late.then((r): CheckResult => r.results[i] ?? { ok: false, error: "invalid_cost" });
  result.catch(() => undefined);
  return result;
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
