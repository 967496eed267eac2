/**
 * The value types algorithm parameters are made of. Rule files are resolved into these (src/rules), but they belong
 * to the algorithms: this folder depends on nothing outside it.
 */

/** A rate as an exact rational: `amount` tokens per `periodMs` milliseconds. */
export interface Rate {
  /** Tokens per period, as written (e.g. 7 in `7/3s`). */
  readonly amount: number;
  /** The period in ms, as written (e.g. 3000 in `7/3s`). */
  readonly periodMs: number;
  /** `amount / gcd(amount, periodMs)`: tokens per `perMs` ms, reduced. */
  readonly tokens: number;
  /** `periodMs / gcd(amount, periodMs)`: ms per `tokens` tokens, reduced. */
  readonly perMs: number;
}

/** A window: a fixed number of ms (epoch-aligned), or UTC calendar months. */
export type Window = { readonly kind: "ms"; readonly ms: number } | { readonly kind: "month" };
