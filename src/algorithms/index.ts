/**
 * The algorithm table: one entry per `algorithm` name, and the functions every shell (Durable Object, in-isolate
 * store, simulator, charts, headers) calls. Everything per algorithm lives in its own file behind the `Algorithm`
 * interface (src/algorithms/types.ts); the names, parameter and state types below are derived from this table, so
 * adding an algorithm is one new file plus one entry here (test/unit/algorithms.contract.test.ts runs every entry
 * through the same contract; docs/adding-an-algorithm.md lists the steps).
 */
import { concurrency } from "./concurrency.ts";
import { fixedWindow } from "./fixed_window.ts";
import { gcra } from "./gcra.ts";
import { leakyBucket } from "./leaky_bucket.ts";
import { leakyQueue } from "./leaky_queue.ts";
import type { Window } from "./params.ts";
import { slidingCounter } from "./sliding_counter.ts";
import { slidingLog } from "./sliding_log.ts";
import { tokenBucket } from "./token_bucket.ts";
import type {
  Algorithm,
  Decision,
  Denied,
  FieldLayout,
  LeasePolicy,
  PackedPath,
  RowPath,
  SlotPolicy,
  Words,
} from "./types.ts";

export type { Rate, Window } from "./params.ts";
export type { Decision, Denied, FieldLayout, LeasePolicy, Words } from "./types.ts";

const TABLE = {
  token_bucket: tokenBucket,
  gcra,
  leaky_bucket: leakyBucket,
  leaky_queue: leakyQueue,
  fixed_window: fixedWindow,
  sliding_log: slidingLog,
  sliding_counter: slidingCounter,
  concurrency,
} as const;

type Table = typeof TABLE;
export type AlgorithmName = keyof Table;
/** Each algorithm's parameters, tagged by `algorithm`. */
export type ParamsOf<K extends AlgorithmName> = Table[K] extends Algorithm<infer P, infer _S> ? P : never;
/** Any algorithm's parameters: what the pure core needs of a rule. */
export type AlgorithmParams = { [K in AlgorithmName]: ParamsOf<K> }[AlgorithmName];
export type StateOf = { [K in AlgorithmName]: Table[K] extends Algorithm<infer _P, infer S> ? S : never };
/** Any algorithm's state. Which one it is follows from the rule it was made under. */
export type AlgorithmState = StateOf[AlgorithmName];

/** Every algorithm name, in table order. */
export const ALGORITHMS = Object.keys(TABLE) as readonly AlgorithmName[];

/** The algorithm for a rule's parameters, typed loosely enough to call with any of its states. */
export function algorithmFor(params: {
  readonly algorithm: AlgorithmName;
}): Algorithm<AlgorithmParams, AlgorithmState> {
  return TABLE[params.algorithm] as unknown as Algorithm<AlgorithmParams, AlgorithmState>;
}

/** The algorithm's own parameters from a rule (which carries other fields too), in a fixed key order. */
export function projectParams(rule: AlgorithmParams): AlgorithmParams {
  return algorithmFor(rule).project(rule);
}

/** Fingerprints by parameters object: a rule's parameters are read once and never changed. */
const FINGERPRINTS = new WeakMap<AlgorithmParams, string>();

/**
 * The parameters' fingerprint: equal iff a state made under one means the same under the other. Remembered per
 * parameters object (the Durable Object and the replay ask it on every record they step).
 */
export function fingerprintOf(params: AlgorithmParams): string {
  let fingerprint = FINGERPRINTS.get(params);
  if (fingerprint === undefined) {
    fingerprint = JSON.stringify(projectParams(params));
    FINGERPRINTS.set(params, fingerprint);
  }
  return fingerprint;
}

/** The most requests of cost 1 a fresh key admits at once; a cost above it is an error. */
export function capacityOf(params: AlgorithmParams): number {
  return algorithmFor(params).capacity(params);
}

export type DecideResult =
  | { readonly ok: true; readonly decision: Decision; readonly state: AlgorithmState }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

/**
 * Decide one request: `cost` of a key whose state is `state` (`null` = fresh), at `nowMs`.
 * A cost above the rule's capacity can never succeed: it is an error value and changes no state.
 */
export function decide(
  params: AlgorithmParams,
  state: AlgorithmState | null,
  cost: number,
  nowMs: number,
): DecideResult {
  const error = costError(params, cost);
  if (error !== null) return error === "invalid_cost" ? INVALID_COST : EXCEEDS_CAPACITY;
  const out = algorithmFor(params).check(params, state, cost, nowMs);
  return { ok: true, decision: out.decision, state: out.state };
}

const INVALID_COST = { ok: false, error: "invalid_cost" } as const;
const EXCEEDS_CAPACITY = { ok: false, error: "cost_exceeds_capacity" } as const;

/** Why `decide` refuses `cost` whatever the state (an invalid cost, or one above the capacity), or `null`. */
export function costError(params: AlgorithmParams, cost: number): "invalid_cost" | "cost_exceeds_capacity" | null {
  if (!Number.isSafeInteger(cost) || cost < 1) return "invalid_cost";
  return cost > algorithmFor(params).capacity(params) ? "cost_exceeds_capacity" : null;
}

/** Give back what an admitted request of `cost` at `admittedAtMs` charged. */
export function refund(
  params: AlgorithmParams,
  state: AlgorithmState,
  cost: number,
  admittedAtMs: number,
): AlgorithmState {
  return algorithmFor(params).refund(params, state, cost, admittedAtMs);
}

/**
 * A bucket's distance from full at `nowMs`, in 1/rate.perMs of a request (exact); `null` for the other algorithms.
 * With `scaledRefund`, what a late refund needs (src/protocol/late_refund.ts).
 */
export function scaledDeficit(params: AlgorithmParams, state: AlgorithmState | null, nowMs: number): number | null {
  const scaled = (algorithmFor(params) as Algorithm<AlgorithmParams, AlgorithmState>).scaled;
  return scaled === undefined ? null : scaled.deficit(params, state, nowMs);
}

/** `state` with `scaled` 1/rate.perMs of a request given back, never past full (a bucket's; others: unchanged). */
export function scaledRefund(params: AlgorithmParams, state: AlgorithmState, scaled: number): AlgorithmState {
  const algorithm = algorithmFor(params) as Algorithm<AlgorithmParams, AlgorithmState>;
  return algorithm.scaled === undefined ? state : algorithm.scaled.refund(params, state, scaled);
}

/** When `state` is as good as no state (an alarm may delete it then). */
export function freshAtMs(params: AlgorithmParams, state: AlgorithmState): number {
  return algorithmFor(params).freshAtMs(params, state);
}

/**
 * Rule changes across a redeploy: the state under `next` equivalent to `state` under `prev` at `nowMs`, or `null`
 * to start fresh (another algorithm; otherwise what each algorithm's `carryOver` says; docs/rules.md sums them up).
 * Never in the client's favour beyond what the new rule allows. Conversions may pass 2^53, so they use BigInt; this
 * runs once per key per change.
 */
export function carryOver(
  prev: AlgorithmParams,
  next: AlgorithmParams,
  state: AlgorithmState,
  nowMs: number,
): AlgorithmState | null {
  if (prev.algorithm !== next.algorithm) return null;
  if (fingerprintOf(prev) === fingerprintOf(next)) return state;
  return algorithmFor(next).carryOver(prev, next, state, nowMs);
}

/** `w` of the RateLimit-Policy header, ms: the window, or the time to refill the whole capacity from empty. */
export function headerWindowMs(params: AlgorithmParams, nowMs: number): number {
  return algorithmFor(params).headerWindowMs(params, nowMs);
}

/** Whether a denial changes the state (a shell must then not answer from a remembered denial). */
export function denialsCount(params: AlgorithmParams): boolean {
  return algorithmFor(params).denialsCount(params);
}

/** Until when a request of `cost` is certainly denied after `denied`, with no request in between; `null`: unknown. */
export function deniedUntilMs(params: AlgorithmParams, denied: Denied, cost: number): number | null {
  if (cost >= denied.cost) return denied.untilMs;
  return algorithmFor(params).smallerDeniedUntilMs(params, denied, cost);
}

/** What the chart's state line measures for this rule (`tokens`, `estimate`). */
export function levelName(params: AlgorithmParams): string {
  return algorithmFor(params).level.name;
}

/** The capacity line's label on a chart (`burst 20`, `limit 100`). */
export function capacityLabel(params: AlgorithmParams): string {
  return algorithmFor(params).level.label(params);
}

/** The level a chart draws for `state` at `tMs` (no request in between). */
export function levelAt(params: AlgorithmParams, state: AlgorithmState | null, tMs: number): number {
  return algorithmFor(params).level.at(params, state, tMs);
}

/** The window whose boundaries a chart marks for this rule, or `null` (no epoch-aligned window). */
export function chartWindowOf(params: AlgorithmParams): Window | null {
  return algorithmFor(params).level.window?.(params) ?? null;
}

/** The span a report measures "the most admitted in any span of the rule's length" over, ms. */
export function peakSpanMs(params: AlgorithmParams): number {
  return algorithmFor(params).peakSpanMs(params);
}

/** The rule's algorithm and parameters in one short line, in rule-file terms, with durations and rates as `words` writes them. */
export function describeParams(params: AlgorithmParams, words: Words): string {
  return algorithmFor(params).describe(params, words);
}

/** The algorithm's packed one-number fast path, if it has one. */
export function packedPath(params: AlgorithmParams): PackedPath<AlgorithmParams> | undefined {
  return algorithmFor(params).packed;
}

/** The algorithm's layout of its state as a fixed number of integer fields, if it has one. */
export function fieldLayout(params: AlgorithmParams): FieldLayout<AlgorithmParams, AlgorithmState> | undefined {
  return (algorithmFor(params) as unknown as Algorithm<AlgorithmParams, AlgorithmState>).fields;
}

/** The algorithm's row kernel (a state decided in place on a shell's typed row), if it has one. */
export function rowPath(params: AlgorithmParams): RowPath<AlgorithmParams, AlgorithmState> | undefined {
  return (algorithmFor(params) as unknown as Algorithm<AlgorithmParams, AlgorithmState>).rows;
}

/** Whether isolates may hold leases of a key's budget under this algorithm, and what it then promises. */
export function leasePolicy(algorithm: AlgorithmName): LeasePolicy<AlgorithmParams> {
  return (TABLE[algorithm] as unknown as Algorithm<AlgorithmParams, AlgorithmState>).lease;
}

/** The algorithms that take leases, in table order. */
export const LEASE_ALGORITHMS = ALGORITHMS.filter((name) => leasePolicy(name).kind !== "none");

/**
 * How long a lease charged at `atMs` may be used, ms: `ttlMs` for rate algorithms, cut at the window's end for window
 * algorithms (so every unit is used in the window it was charged in); 0 for algorithms that take no leases.
 */
export function leaseTermMs(params: AlgorithmParams, atMs: number, ttlMs: number): number {
  const lease = leasePolicy(params.algorithm);
  switch (lease.kind) {
    case "rate":
      return ttlMs;
    case "window":
      return lease.termMs(params, atMs, ttlMs);
    case "none":
      return 0;
    default: {
      const never: never = lease;
      return never;
    }
  }
}

/**
 * What a key can hand out as leases over the next `ttlMs`, beyond what it holds now, when it is shared by demand: a
 * rate algorithm's refill over that time. `null` for a window algorithm: its remaining units go first come, as its own
 * exact requests would (a window does not refill within it, and sharing its last units across a ttl would hand them
 * out later than the single writer does).
 */
export function leaseRefillOver(params: AlgorithmParams, ttlMs: number): number | null {
  const lease = leasePolicy(params.algorithm);
  return lease.kind === "rate" ? lease.refillOver(params, ttlMs) : null;
}

/**
 * The parameters of a rate share: `num/den` of the rule's rate and burst (`LeasePolicy.slice`); `null` for an algorithm without rate shares (a window or no leases), for `num` 0, or where
 * the slice would not stay exact.
 */
export function sliceParams(params: AlgorithmParams, num: number, den: number): AlgorithmParams | null {
  const lease = leasePolicy(params.algorithm);
  return lease.kind === "rate" ? lease.slice(params, num, den) : null;
}

/** How the rule's algorithm names and gives back slots, if its requests hold one until they end (concurrency). */
export function slotPolicy(params: {
  readonly algorithm: AlgorithmName;
}): SlotPolicy<AlgorithmParams, AlgorithmState> | undefined {
  return algorithmFor(params).slots;
}
