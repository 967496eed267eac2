/** The coalescer's types (coalesce.ts): a request's input and answer, what an isolate keeps per key, its options. */
import { leasePolicy } from "../algorithms/index.ts";
import type { CallCounters, FailureKind, ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput, CheckResult, LeaseAsk, LeaseReturn, LimiterRule, RefundResult } from "../protocol/store.ts";
import type { LeaseSettings } from "../rules/types.ts";

export interface AskInput {
  /** How this request reaches the key's object (the Worker: its `LIMITER` namespace). */
  readonly transport: ObjectTransport;
  /** The key's object's name (names.ts). */
  readonly name: string;
  readonly rule: LimiterRule;
  readonly cost: number;
  /** The budget for one call, ms. */
  readonly timeoutMs: number;
  /** The rule's `lease:`; `null` for none. */
  readonly lease: LeaseSettings | null;
  /** Keeps the isolate alive for background work this request starts (a lease's return at its end). */
  readonly keepAlive?: (work: Promise<unknown>) => void;
  /** Sees each result of a call in the object's order, with its sending time (the blocked-key cache); no I/O. */
  readonly observe?: (result: CheckResult, sentAtMs: number) => void;
  /** This isolate's region's delegate for the key, if the Worker has one: a hot key's batches go there. */
  readonly delegate?: DelegateRoute | null;
  /** The data center's hot mark of the key (hot_marks.ts), read when this isolate does not track it (`tracks`). */
  readonly hotMark?: HotMark | null;
  /** Reads the spread of the data center's hot mark of the key now (hot_marks.ts `spreadOfMark`). */
  readonly spreadMark?: ((name: string) => Promise<number>) | null;
}

/** A hot mark: the key is hot until then (this isolate's clock), with its spread. */
export interface HotMark {
  readonly untilMs: number;
  readonly spread: number;
  /** The spread decays (`spreadDecays`): the mark is written with its time. */
  readonly decays?: boolean;
}

/** Where a hot key's batches go; `ownShard` once the key's spread is above this isolate's `draw` (absent: 0). */
export interface DelegateRoute {
  readonly transport: ObjectTransport;
  readonly name: string;
  readonly ownShard?: DelegateRoute;
  readonly draw?: number;
}

export type Asked =
  | {
      readonly kind: "answered";
      /** The decision (or an error value such as `cost_exceeds_capacity`). */
      readonly result: CheckResult;
      /** `lease`: answered here, from a lease or from what the isolate last knew. */
      readonly source: "object" | "lease";
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

/** The lease a call asked for, what this isolate expects to need of it, and whether it asked a delegate (`sub`). */
export interface AskedLease extends LeaseAsk {
  readonly need: number;
  readonly sub?: boolean;
}

/** A lease (or sub-lease) this isolate holds. */
export interface HeldLease {
  unitsLeft: number;
  readonly units: number;
  /** The granting clock when it charged the units (what a refund names). */
  readonly atMs: number;
  /** This isolate's clock when the lease ends (the sending time plus its term). */
  readonly endsAtMs: number;
  /** Once given back, refunds of its admissions go to the key's object. */
  returned: boolean;
  /** A rate sub-lease's id (`LeaseGrant.id`), which its return names. */
  readonly id?: string;
  /** The delegate whose sub-lease it is (absent: the key's object's lease): its unused units go back there. */
  readonly from?: DelegateRoute;
}

/** Units given back, noted with the delegate that lent them (the isolate's own note, never sent: delegate_call.ts). */
export interface NotedReturn extends LeaseReturn {
  readonly lender?: DelegateRoute;
}

export interface NotedCallInput extends CallInput {
  readonly giveBack?: readonly NotedReturn[];
}

export interface Waiting {
  readonly cost: number;
  readonly observe: AskInput["observe"];
  readonly keepAlive: AskInput["keepAlive"];
  /** Its answer, or `"lead"`: make the next call, in this request's own context. */
  readonly resolve: (turn: Asked | "lead") => void;
  /** Taken into a batch, chosen to lead, or given up. */
  settled: boolean;
}

/** Counters for `/_sluice/stats`. */
export interface CoalesceCounters extends CallCounters {
  /** Requests that went in a call with others (a batch of 2 or more). */
  batched_requests: number;
  /** Rule decisions answered from this isolate's lease, without a call. */
  lease_answers: number;
  leases: number;
  /** Units given back from leases that ended unused. */
  lease_units_returned: number;
  /** Requests refused because `maxWaiting` requests already waited for their key. */
  queue_overflows?: number;
  /** Rule decisions from what this isolate last knew (`lastKnown`). */
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

/** A key's lease settings: the rule's own, else `AUTO_LEASE` if its algorithm takes leases, else `null`. */
export function leaseSettingsOf(input: Pick<AskInput, "rule" | "lease">): LeaseSettings | null {
  return input.lease ?? (leasePolicy(input.rule.params.algorithm).kind !== "none" ? AUTO_LEASE : null);
}

export interface CoalescerOptions {
  /** This isolate's clock, ms. */
  readonly clock: () => number;
  /** Resolves after `ms` on the isolate's clock (call budgets, a lease's term). */
  readonly sleep: (ms: number) => Promise<void>;
  readonly counters: CoalesceCounters;
  /** A unique call id (the Worker uses `crypto.randomUUID`). */
  readonly newId: () => string;
  /** Wait for a promise another request settles, in this request's own context (resume.ts); default: `await`. */
  readonly resume?: <T>(settled: Promise<T>) => Promise<T>;
  /** Keys tracked at most (least recently used forgotten first; a key with a call in flight or a lease is kept). */
  readonly maxKeys?: number;
  /** Requests waiting for one key at most (`COALESCE_MAX_WAITING`): one more is refused as an overloaded call. */
  readonly maxWaiting?: number;
}
