/** The coalescer's types (coalesce.ts): a request's input and answer, what an isolate keeps per key, its options. */
import { leasePolicy } from "../algorithms/index.ts";
import type { CallCounters, FailureKind, ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput, CheckResult, LeaseAsk, LeaseReturn, LimiterRule, RefundResult } from "../protocol/store.ts";
import type { LeaseSettings } from "../rules/types.ts";

export interface AskInput {
  readonly transport: ObjectTransport; // how this request reaches the key's object (the Worker: its `LIMITER`)
  readonly name: string; // the key's object's name (names.ts)
  readonly rule: LimiterRule;
  readonly cost: number;
  readonly timeoutMs: number; // the budget for one call
  readonly lease: LeaseSettings | null; // the rule's `lease:`
  /** Keeps the isolate alive for background work this request starts (a lease's return at its end). */
  readonly keepAlive?: (work: Promise<unknown>) => void;
  /** Sees each result of a call in the object's order, with its sending time (the blocked-key cache); no I/O. */
  readonly observe?: (result: CheckResult, sentAtMs: number) => void;
  /** This isolate's region's delegate for the key, if the Worker has one: a hot key's batches go there. */
  readonly delegate?: DelegateRoute | null;
  /** The data center's hot mark of the key (hot_marks.ts), read when this isolate does not track it (`tracks`). */
  readonly hotMark?: HotMark | null;
  /** Reads the spread of the data center's hot mark of the key now (hot_marks.ts `spreadOfMark`; `null`: none). */
  readonly spreadMark?: ((name: string) => Promise<number | null>) | null;
}

/** A hot mark: the key is hot until then (this isolate's clock), with its spread; `decays`: written with its time. */
export type HotMark = { readonly untilMs: number; readonly spread: number; readonly decays?: boolean };

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
      readonly result: CheckResult; // the decision (or an error value such as `cost_exceeds_capacity`)
      readonly source: "object" | "lease"; // `lease`: answered here, from a lease or from what the isolate last knew
      readonly attempts: number;
      readonly refund: () => Promise<RefundResult>; // give the admission back (another rule denied the request)
    }
  | {
      readonly kind: "failed";
      readonly failure: FailureKind;
      readonly message: string;
      readonly attempts: number;
      readonly late: Promise<CheckResult> | null; // the answer, if the call still runs after the budget ran out
      readonly refund: (admittedAtMs: number) => Promise<RefundResult>; // of an admission that arrived late
    };

/** The lease a call asked for, what this isolate expects to need of it, and whether it asked a delegate (`sub`). */
export type AskedLease = LeaseAsk & { readonly need: number; readonly sub?: boolean };

/** A lease (or sub-lease) this isolate holds. */
export interface HeldLease {
  unitsLeft: number;
  readonly units: number;
  readonly atMs: number; // the granting clock when it charged the units (what a refund names)
  readonly endsAtMs: number; // this isolate's clock: the sending time plus its term
  returned: boolean; // once given back, refunds of its admissions go to the key's object
  readonly id?: string; // a rate sub-lease's id (`LeaseGrant.id`), which its return names
  /** The delegate whose sub-lease it is (absent: the key's object's lease): its unused units go back there. */
  readonly from?: DelegateRoute;
}

/** Units given back, noted with the delegate that lent them (the isolate's own note, never sent: delegate_call.ts). */
export type NotedReturn = LeaseReturn & { readonly lender?: DelegateRoute };

export interface NotedCallInput extends CallInput {
  readonly giveBack?: readonly NotedReturn[];
}

export interface Waiting {
  readonly cost: number;
  readonly observe: AskInput["observe"];
  readonly keepAlive: AskInput["keepAlive"];
  /** Its answer, or `"lead"`: make the next call, in this request's own context. */
  readonly resolve: (turn: Asked | "lead") => void;
  settled: boolean; // taken into a batch, chosen to lead, or given up
}

/** Counters for `/_sluice/stats`. */
export interface CoalesceCounters extends CallCounters {
  batched_requests: number; // requests that went in a call with others (a batch of 2 or more)
  lease_answers: number; // rule decisions answered from this isolate's lease, without a call
  leases: number;
  lease_units_returned: number; // units given back from leases that ended unused
  queue_overflows?: number; // requests refused because `maxWaiting` requests already waited for their key
  last_known_answers?: number; // rule decisions from what this isolate last knew (`lastKnown`)
  late_answers?: number; // calls past their budget whose late answer decided (`awaitLate`)
  delegate_failures?: number; // calls to a delegate that failed (the batch then went to the key's object)
}

/** Requests one isolate lets wait for one (rule, key) at most, by default (see `CoalescerOptions.maxWaiting`). */
export const COALESCE_MAX_WAITING = 1_000;
/** Keys one isolate tracks at most (least recently used forgotten first, but none with a call in flight or a lease). */
export const COALESCE_MAX_KEYS = 10_000;
/** The lease a rule without `lease:` takes while its key's object is busy. */
export const AUTO_LEASE: LeaseSettings = { ttlMs: 1_000, units: null, above: null };

/** A key's lease settings: the rule's own, else `AUTO_LEASE` if its algorithm takes leases, else `null`. */
export function leaseSettingsOf(input: Pick<AskInput, "rule" | "lease">): LeaseSettings | null {
  return input.lease ?? (leasePolicy(input.rule.params.algorithm).kind !== "none" ? AUTO_LEASE : null);
}

export interface CoalescerOptions {
  readonly clock: () => number; // this isolate's clock, ms
  readonly sleep: (ms: number) => Promise<void>; // resolves after `ms` on the isolate's clock
  readonly counters: CoalesceCounters;
  readonly newId: () => string; // a unique call id (the Worker uses `crypto.randomUUID`)
  /** Wait for a promise another request settles, in this request's own context (resume.ts); default: `await`. */
  readonly resume?: <T>(settled: Promise<T>) => Promise<T>;
  /** Requests waiting for one key at most (`COALESCE_MAX_WAITING`): one more is refused as an overloaded call. */
  readonly maxWaiting?: number;
}
