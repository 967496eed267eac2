/**
 * The coalescer's types and settings (coalesce.ts): one request's input and answer, what an isolate keeps per key
 * (`KeyState`), its counters, and the bounds and timings it works with.
 */
import { leasePolicy } from "../algorithms/index.ts";
import type { CallCounters, FailureKind, ObjectTransport } from "../protocol/object_call.ts";
import type { CheckResult, LeaseAsk, LeaseReturn, LimiterRule, RefundResult } from "../protocol/store.ts";
import type { LeaseSettings } from "../rules/types.ts";

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
  /**
   * What this isolate's data center says of the key (hot_marks.ts: another isolate found it hot), taken only when this
   * isolate does not track the key yet: its batches go to the delegate (its own shard if `spread`) from the first.
   */
  readonly hotMark?: HotMark | null;
  /**
   * Reads whether this isolate's data center's mark of the key says spread now (hot_marks.ts `spreadOfMark`). Asked
   * once per hot spell before the key's first call to the delegate, when no mark was read for it then: at a cold start
   * an isolate learns the key hot from the key's object, and the mark (written meanwhile by an isolate the first shard
   * told busy) sends it to its own shard at once instead of one more call to the first.
   */
  readonly spreadMark?: ((name: string) => Promise<boolean>) | null;
}

/** A key known hot (hot_marks.ts): until when (this isolate's clock), and whether its delegate is busy (spread). */
export interface HotMark {
  readonly untilMs: number;
  readonly spread: boolean;
}

/** Where a hot key's batches go: a delegate's transport and name. */
export interface DelegateRoute {
  readonly transport: ObjectTransport;
  readonly name: string;
  /**
   * This isolate's own shard of the region's delegate (names.ts `DELEGATE_SHARDS`, chosen by a hash of the isolate),
   * where its batches go once the first delegate said it is busy; absent: this isolate's shard is the first.
   */
  readonly spread?: DelegateRoute;
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

/** The lease a call asked for: what this isolate expects to need of it, and whether a delegate was asked (a sub-lease). */
export interface AskedLease extends LeaseAsk {
  readonly need: number;
  readonly sub?: boolean;
}

/** What this isolate holds of a key's budget. */
export interface HeldLease {
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

export interface Waiting {
  readonly cost: number;
  readonly observe: AskInput["observe"];
  /** Its own request's `keepAlive` (a refund it makes may start a call that outlives it). */
  readonly keepAlive: AskInput["keepAlive"];
  /** Its answer, or `"lead"`: make the next call, in this request's own context. */
  readonly resolve: (turn: Asked | "lead") => void;
  /** Taken into a batch, chosen to lead, or given up. */
  settled: boolean;
}

/** The last lease granted here, kept after it ends: the key counts as hot here a term after it (`isHot`). */
export interface LastGrant {
  readonly units: number;
  /** The object's clock when it charged them. */
  readonly atMs: number;
  /** Its term, ms, and when it ended or ends (this isolate's clock). */
  readonly termMs: number;
  readonly endsAtMs: number;
}

/** A key's arrivals at this isolate, per bucket of the lease ttl, and its current run of them. */
export interface Arrivals {
  /** The current bucket's index (time / ttl), and the arrivals in it and in the one before. */
  bucket: number;
  curr: number;
  prev: number;
  /** When this isolate's current run of arrivals of the key began (after a quiet bucket), and how many it has had. */
  runStartMs: number;
  runCount: number;
  /** The last arrival of the key here (this isolate's clock), ms. */
  lastMs: number;
}

export interface KeyState {
  readonly name: string;
  transport: ObjectTransport;
  rule: LimiterRule;
  timeoutMs: number;
  /**
   * The rule's lease setting, or `AUTO_LEASE` (see `autoLease`): the rule has no `lease:` of its own, and leases only
   * while the object says it is busy.
   */
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
  /** Arrivals this isolate saw (key_state.ts `see`): for `lease.above` and lease sizing. */
  seen: Arrivals;
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
  /** The region's delegate for the key, if any (`AskInput.delegate`). */
  delegate: DelegateRoute | null;
  /** Until when the key is hot (this isolate's clock): batches go to the delegate. 0: not hot. */
  hotUntilMs: number;
  /** Until when the delegate is avoided after a failed call (batches go to the key's object). */
  delegateDownUntilMs: number;
  /** The first delegate said it is busy (or was overloaded): batches go to `delegate.spread` until the key is cold. */
  spread: boolean;
  /** The data center's mark was read for this hot spell (a mark taken at the start counts; so does no way to read). */
  markRead: boolean;
  /** How to read the mark (the first `AskInput.spreadMark`: one store per isolate, per region in the simulation). */
  spreadMark: ((name: string) => Promise<boolean>) | null;
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
