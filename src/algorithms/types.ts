import type { Rate, Window } from "./params.ts";

/** What every check answers. All durations are integer milliseconds. */
export interface Decision {
  /** Admitted or not. */
  readonly allowed: boolean;
  /** Largest `n` such that `n` further cost-1 requests at this same instant would all be admitted. */
  readonly remaining: number;
  /** Smallest `d >= 0` such that, with no further requests, at `now + d` the key is as good as fresh. */
  readonly resetAfterMs: number;
  /** Only when denied (else `null`): smallest `d >= 1` such that the same request at `now + d` is admitted. */
  readonly retryAfterMs: number | null;
  /** leaky_queue only (else 0): how long the admitted request waits before it goes on, rounded up. */
  readonly delayMs: number;
}

/**
 * A decision's fields in a caller-owned scratch, written in place by the fast paths (`PackedPath.into`,
 * `RowKernel.into`) so a decision makes no object. It holds only the last decision written into it: a caller that
 * keeps a decision (the API's `decide` and `check`, the Durable Object, the gateway, a store's result) copies it out
 * with `decisionOf` at its boundary; the replay reads it at once and keeps nothing.
 */
export interface DecisionScratch {
  allowed: boolean;
  remaining: number;
  resetAfterMs: number;
  retryAfterMs: number | null;
  delayMs: number;
}

/** What `PackedPath.into` writes besides the decision: whether to store, and the number to store. */
export interface PackedStep {
  /** Whether the packed number changed (`false`: a denial, keep the stored one). */
  changed: boolean;
  /** The number to store when `changed`, in units of 1/rate.tokens ms from the store's base. */
  stored: number;
}

export interface CheckOutcome<S> {
  readonly decision: Decision;
  /** The state after this request; the very same object when nothing changed (e.g. a denial). */
  readonly state: S;
}

/**
 * How an algorithm reads its parameters from a rule file. The reader (src/rules) owns the syntax, the field names in
 * messages and the error list; the algorithm says which fields it takes and what makes them valid together.
 */
export interface ParamReader {
  /** The rate: `rate_per_s` or `rate` (required). */
  rate(): Rate | undefined;
  /** The window: `window_s` or `window` (required); `month` only where `month` is true. */
  window(month: boolean): Window | undefined;
  /**
   * An integer field, at least `min` (default 1) and at most 2^50; required unless `fallback` is given. `zeroHint`
   * is added to the message for a 0 where 1 is the least.
   */
  int(
    key: string,
    options?: { readonly min?: 0 | 1; readonly fallback?: number; readonly zeroHint?: string },
  ): number | undefined;
  /** A boolean field, `fallback` when absent. */
  bool(key: string, fallback: boolean): boolean | undefined;
  /** A duration field (`30s`, `2min`) in ms, `fallbackMs` when absent. */
  duration(key: string, fallbackMs: number): number | undefined;
  /** Whether the rule gives the field at all. */
  has(key: string): boolean;
  /** Report a problem with a field (the reader says where). */
  error(key: string, message: string): void;
}

/** An algorithm's rule-file parameters. */
export interface ParamSpec<P> {
  /** The parameter fields it takes; any other parameter field on a rule of this algorithm is an error. */
  readonly keys: readonly string[];
  /** The fields it takes, for messages: `rate_per_s or rate, and burst`. */
  readonly takes: string;
  /** What its capacity is, for messages: `burst`, `burst + 1`, `limit`. */
  readonly capacityName: string;
  /** The resolved parameters, or `null` when a field was invalid (reported through `r`). */
  read(r: ParamReader): P | null;
}

/** How a shell writes durations and rates for people (`describe` uses them): `10s`, `min`; `10/s`, `7/3s`. */
export interface Words {
  span(ms: number): string;
  rate(rate: Rate): string;
}

/** An algorithm's parameters without the `algorithm` tag: what its functions are called with. */
export type Own<P> = Omit<P, "algorithm">;

/** What a shell remembers of a denial, to tell whether a later request of another cost is certainly denied too. */
export interface Denied {
  /** The denied request's cost. */
  readonly cost: number;
  /** The denial's `remaining`. */
  readonly remaining: number;
  /** When the denied request would have been admitted (the denial's time plus its `retry_after_ms`), ms. */
  readonly untilMs: number;
}

/** The state line a chart draws: one number per instant (floating point is fine: it only draws). */
export interface Level<P, S> {
  /** What the line measures, for labels: `tokens`, `queued`, `estimate`. */
  readonly name: string;
  /** The capacity line's label: `burst 20`, `limit 100`. */
  label(params: P): string;
  /** The level at `tMs` with no request in between (`null`: a fresh key). */
  at(params: P, state: S | null, tMs: number): number;
  /** The epoch-aligned window the count starts again on, whose boundaries a chart marks (absent: none). */
  window?(params: P): Window;
}

/**
 * A one-number state kept in a shell's packed store (the in-isolate store's typed arrays): the TAT in units of
 * 1/rate.tokens ms relative to a base time the store chooses. The decision is the algorithm's own arithmetic; the
 * store only keeps the number.
 */
export interface PackedPath<P> {
  /** The parameters the packed state means (token and leaky buckets keep GCRA's, which decides the same). */
  stateParams(params: P): { readonly algorithm: string };
  /** The rate whose `tokens` scale the packed number. */
  rate(params: Own<P>): PackedRate;
  /**
   * Decide on the packed number: `stored` is the key's TAT (`null`: fresh), `nowScaled` now, both in units of
   * 1/rate.tokens ms from the store's base. Returns the decision and the number to store (`null`: unchanged).
   */
  check(
    params: Own<P>,
    stored: number | null,
    nowScaled: number,
    cost: number,
  ): { readonly decision: Decision; readonly stored: number | null };
  /**
   * `check` with no object made: the decision into `decision`, whether and what to store into `step`. `stored`
   * is NaN for a fresh key. The one copy of the arithmetic; `check` is `into` and a copy.
   */
  into(
    params: Own<P>,
    stored: number,
    nowScaled: number,
    cost: number,
    decision: DecisionScratch,
    step: PackedStep,
  ): void;
  /** The packed number after refunding `cost`. */
  refund(params: Own<P>, stored: number, cost: number): number;
}

/**
 * A state of a fixed number of integer fields, as a shell's packed store keeps it (a row of the in-isolate store's
 * typed arrays): how many fields, and the state to and from them. Only the layout: the decisions stay `check`'s.
 */
export interface FieldLayout<P, S> {
  /** How many fields a state under these parameters takes. */
  count(params: P): number;
  /** The state from its fields (`get(i)`, `0 <= i < count`). */
  read(params: P, get: (i: number) => number): S;
  /** The state's fields, in the order `read` takes them. */
  write(params: P, state: S, set: (i: number, value: number) => void): void;
}

/**
 * A state kept as a row of a shell's typed table and decided there in place: the algorithm's own arithmetic on the
 * row's fields, no state object made per decision (the in-isolate store's fast path where the state is not one
 * number). `compile` fixes the parameters once per rule; the kernel it returns is what a shell calls per request.
 */
export interface RowPath<P, S> {
  /** The kernel for these parameters, or `null` where a row would be too wide (the shell then keeps objects). */
  compile(params: P): RowKernel<S> | null;
}

/** Whether the last `RowKernel.check` changed the row (a shell keeps a fresh key only then). */
export interface RowChange {
  changed: boolean;
}

/** One rule's row kernel: its width and its decisions on a row at offset `at` of a Float64Array. */
export interface RowKernel<S> {
  /** Fields per row. */
  readonly width: number;
  /**
   * Decide a request of a valid `cost` (1..capacity) on the row (`fresh`: no state yet; its fields are zero): exactly
   * `check`'s decision, the row then holding `check`'s next state. Sets `out.changed`.
   */
  check(row: Float64Array, at: number, fresh: boolean, cost: number, nowMs: number, out: RowChange): Decision;
  /**
   * `check` with no object made: the decision written into `decision` (read it before the next call with the same
   * scratch). The one copy of the kernel's arithmetic; `check` is `into` and a copy (`decisionOf`).
   */
  into(
    row: Float64Array,
    at: number,
    fresh: boolean,
    cost: number,
    nowMs: number,
    decision: DecisionScratch,
    out: RowChange,
  ): void;
  /** `refund` in place. */
  refund(row: Float64Array, at: number, cost: number, admittedAtMs: number): void;
  /** The state the row holds. */
  read(row: Float64Array, at: number): S;
  /** `freshAtMs` of the row's state (absent: read the state and ask the algorithm). */
  readonly freshAtMs?: (row: Float64Array, at: number) => number;
}

/** How a slot-holding algorithm names and gives back its slots. */
export interface SlotPolicy<P, S> {
  /** The id of the slot the admission that made `state` took. */
  taken(state: S): number;
  /** `state` with the slot `slotId` given back; the very same object when no such slot is held (idempotent). */
  release(params: P, state: S, slotId: number, nowMs: number): S;
  /**
   * `state` with the slot `slotId`'s lease started again at `nowMs` (its request still runs); the very same object
   * when no such slot is held: a lease that ended is never revived (its capacity may be another request's by now).
   */
  renew(params: P, state: S, slotId: number, nowMs: number): S;
  /** How long a slot is held without a release or a renewal, ms (`slot_ttl`). */
  leaseMs(params: P): number;
  /** The cost held in slots at `nowMs` (`null`: a fresh key). */
  heldAt(params: P, state: S | null, nowMs: number): number;
  /**
   * The slots on a typed row, decided and given back in place (the replay's fast path), or `null` where a row would
   * be too wide (the shell then keeps objects). Not the in-isolate store's: it keeps objects for slot algorithms.
   */
  readonly rows?: { compile(params: P): SlotRowKernel<S> | null };
}

/** A slot-holding algorithm's row kernel: `RowKernel` plus the slot operations, each exactly `SlotPolicy`'s, in place. */
export interface SlotRowKernel<S> extends RowKernel<S> {
  /** `taken` of the row's state: the id the row's last admission took. */
  taken(row: Float64Array, at: number): number;
  /** `release` in place: nothing changes when no slot `slotId` is held. */
  release(row: Float64Array, at: number, slotId: number, nowMs: number): void;
  /** `renew` in place: nothing changes when no live slot `slotId` is held (an ended lease is not revived). */
  renew(row: Float64Array, at: number, slotId: number, nowMs: number): void;
  /** `heldAt` of the row's state. */
  heldAt(row: Float64Array, at: number, nowMs: number): number;
}

/** The two fields of a rate the packed path scales by. */
export interface PackedRate {
  readonly tokens: number;
  readonly perMs: number;
}

/**
 * Leases (src/isolate/coalesce.ts): the object charges a lease's units of a key's budget at one instant, exactly as
 * that many cost-1 requests then, and an isolate admits from it locally for a while. Whether that keeps the
 * algorithm's promise, for how long a lease may be used, and what the promise then is, is the algorithm's to say:
 *
 * - `window`: every unit is used in the window it was charged in (a lease ends at its window's end at the latest), so
 *   no window ever admits more than its limit;
 * - `rate`: a unit is used at most `ttl` after it was charged, so any span `t` admits at most
 *   `burst + rate × (t + ttl)` (the algorithm's own `burst + rate × t`, over the span stretched back by `ttl`);
 * - `none`: a lease cannot be used later than it was charged without breaking the promise (`why`).
 */
export type LeasePolicy<P> =
  | {
      readonly kind: "window";
      /** The most cost admitted per window. */
      limit(params: Own<P>): number;
      /** The index of the window containing `atMs`. */
      windowOf(params: Own<P>, atMs: number): number;
      /** How long a lease charged at `atMs` may be used, ms: `ttlMs`, cut at its window's end. */
      termMs(params: Own<P>, atMs: number, ttlMs: number): number;
    }
  | {
      readonly kind: "rate";
      /** Whether `count` cost admitted within a span of `spanMs` keeps within `burst + rate × (spanMs + ttlMs)`. */
      withinBound(params: Own<P>, count: number, spanMs: number, ttlMs: number): boolean;
      /** Whole units the key regains over `spanMs` with no requests (`rate × spanMs`, rounded down). */
      refillOver(params: Own<P>, spanMs: number): number;
      /**
       * The parameters of a rate share (src/protocol/share.ts): `num/den` of the rate, and of the burst (rounded down,
       * at least 1), with the rate kept as an exact reduced rational; `null` when `num` is 0 or the slice would pass
       * exact arithmetic (`MAX_SCALED`). Shares whose parts add up to `den` add up to the rule (plus at most one unit of
       * burst per share, from rounding up to 1).
       */
      slice(params: P, num: number, den: number): P | null;
    }
  | { readonly kind: "none"; readonly why: string };

/**
 * One rate-limiting algorithm: everything the project knows about it, in its own file. The decisions are pure
 * functions of (params, state, cost, now): no clock, no storage, no I/O. The Durable Object, the in-isolate store
 * and the simulator are shells around these, and every shell that needs something per algorithm (its capacity, its
 * header window, a packed fast path, the level a chart draws) asks here rather than switching on the name.
 * `state === null` means a fresh key. `cost` is an integer in [1, capacity] (checked by `decide`).
 */
export interface Algorithm<P extends { readonly algorithm: string }, S> {
  /** Its rule-file parameters: which fields, and how they resolve. */
  readonly params: ParamSpec<P>;
  /**
   * The algorithm's own parameters from a rule (which carries other fields too), in a fixed key order: what the
   * limiter runs, stores and fingerprints.
   */
  project(rule: P): P;
  /** The most requests of cost 1 a fresh key admits at once; a cost above it is an error. */
  capacity(params: Own<P>): number;
  check(params: Own<P>, state: S | null, cost: number, nowMs: number): CheckOutcome<S>;
  /**
   * Undo the charge of a request admitted at `admittedAtMs` with `cost` (used when another rule denied it).
   * Applied right after the admission it restores the state exactly as it was before.
   */
  refund(params: Own<P>, state: S, cost: number, admittedAtMs: number): S;
  /** The earliest time (ms) from which this state is as good as no state at all, and may be dropped. */
  freshAtMs(params: Own<P>, state: S): number;
  /**
   * State under `next` equivalent to `state` under `prev` at `nowMs` (the rule changed across a redeploy), or `null`
   * to start fresh; never in the client's favour beyond what the new rule allows.
   */
  carryOver(prev: P, next: P, state: S, nowMs: number): S | null;
  /** The span `q` describes in the RateLimit-Policy header (`w`), ms: the window, or the time to refill `q`. */
  headerWindowMs(params: Own<P>, nowMs: number): number;
  /** Whether a denial changes the state (then a shell must not answer later requests from a remembered denial). */
  denialsCount(params: Own<P>): boolean;
  /**
   * Until when a request of `cost`, smaller than the denied one, is certainly denied too, with no request in
   * between; `null` when nothing is certain. (A cost at least the denied one's is denied until `denied.untilMs`.)
   */
  smallerDeniedUntilMs(params: Own<P>, denied: Denied, cost: number): number | null;
  readonly level: Level<Own<P>, S>;
  /** The span over which a report measures "the most admitted in any span of the rule's length", ms. */
  peakSpanMs(params: Own<P>): number;
  /** The algorithm and its parameters in one short line, in rule-file terms: `token_bucket 10/s, burst 20`. */
  describe(params: P, words: Words): string;
  /** A packed one-number fast path, where the state is one number. */
  readonly packed?: PackedPath<P>;
  /**
   * Where the state is a fixed number of integer fields: its layout (a store with both prefers `packed`, one number;
   * the replay keeps every such state as its fields, src/replay/states.ts).
   */
  readonly fields?: FieldLayout<Own<P>, S>;
  /** A row kept in place, where the state is not one number (a shell with both prefers `packed`). */
  readonly rows?: RowPath<Own<P>, S>;
  /** Whether isolates may hold leases of a key's budget, and what the algorithm then promises. */
  readonly lease: LeasePolicy<P>;
  /**
   * Algorithms whose admitted requests hold a slot until it is given back (concurrency): the shells return the slot's
   * id with the admission and give it back by id (src/protocol/slots.ts).
   */
  readonly slots?: SlotPolicy<Own<P>, S>;
  /**
   * The buckets: how far from full the key is at `nowMs`, and a refund of part of a request, both in units of
   * 1/rate.perMs of a request (exact): for a refund that lands late (src/protocol/late_refund.ts).
   */
  readonly scaled?: {
    deficit(params: Own<P>, state: S | null, nowMs: number): number;
    /** `state` with `scaled` given back, never past full. */
    refund(params: Own<P>, state: S, scaled: number): S;
  };
}
