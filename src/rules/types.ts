/**
 * The resolved rule: what validation turns `rules/*.yaml` into. Every default is filled in,
 * every duration and rate is an exact integer pair; nothing after validation sees raw YAML.
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

export type Identity = "api_key" | "ip" | "user";
export type Mode = "enforce" | "shadow";
export type Scope = "global" | "local";
export type OnError = "open" | "closed";

export const ALGORITHMS = [
  "token_bucket",
  "gcra",
  "leaky_bucket",
  "leaky_queue",
  "fixed_window",
  "sliding_log",
  "sliding_counter",
] as const;
export type AlgorithmName = (typeof ALGORITHMS)[number];

/** `"METHOD /path"` from `match.route`, kept as written and compiled for matching. */
export interface RoutePattern {
  /** As written in the rule, e.g. `POST /v1/labels:batch`. */
  readonly source: string;
  /** Upper-case method, or `*` for any. */
  readonly method: string;
  /** Path segments; `*` matches one segment; a final `**` matches any rest (including none). */
  readonly segments: readonly string[];
}

export interface RuleMatch {
  /** Plans the rule applies to; `null` means any plan. */
  readonly plans: readonly string[] | null;
  /** Route the rule applies to; `null` means any route. */
  readonly route: RoutePattern | null;
  /** Whose budget this is: the API key, the client IP, or the authenticated user. */
  readonly identity: Identity;
}

/**
 * A rule's `timeout_ms` when it names none, and the fallback for a malformed `LIMITER_TIMEOUT_MS`. 250 ms: a key's
 * object lives near where it was first used, so a client on another continent is a cross-region round trip away, and
 * a cold object needs a moment; a tighter default would fail open on ordinary days.
 */
export const DEFAULT_TIMEOUT_MS = 250;

export interface RuleCommon {
  readonly id: string;
  /** The file the rule came from, for messages. */
  readonly file: string;
  readonly match: RuleMatch;
  /** `enforce` (default) or `shadow`: shadow rules only log would-be denials. */
  readonly mode: Mode;
  /** `global` (default): one Durable Object per key, exact. `local`: per-isolate memory, approximate. */
  readonly scope: Scope;
  /** What to do when the limiter itself fails: `open` (default, forward) or `closed` (503). */
  readonly onError: OnError;
  /** How long to wait for a decision before applying `onError`, ms. Default `DEFAULT_TIMEOUT_MS` (250). */
  readonly timeoutMs: number;
  /** HTTP status for a denial. Default 429. */
  readonly status: number;
  /** Cost of a request when no `costByRoute` entry matches. Default 1. */
  readonly cost: number;
  /** Per-route costs, checked in order; the first matching route wins. */
  readonly costByRoute: readonly { readonly route: RoutePattern; readonly cost: number }[];
  /** Max extra whole seconds added to `Retry-After` per client (deterministic per key). Default 0 (off). */
  readonly retryJitterS: number;
}

export interface TokenBucketRule extends RuleCommon {
  readonly algorithm: "token_bucket";
  readonly rate: Rate;
  readonly burst: number;
}
export interface GcraRule extends RuleCommon {
  readonly algorithm: "gcra";
  readonly rate: Rate;
  readonly burst: number;
}
export interface LeakyBucketRule extends RuleCommon {
  readonly algorithm: "leaky_bucket";
  readonly rate: Rate;
  readonly burst: number;
}
export interface LeakyQueueRule extends RuleCommon {
  readonly algorithm: "leaky_queue";
  readonly rate: Rate;
  readonly burst: number;
  /** Requests beyond the first `delay` queued ones wait; `nodelay: true` resolves to `delay = burst`. Default 0. */
  readonly delay: number;
}
export interface FixedWindowRule extends RuleCommon {
  readonly algorithm: "fixed_window";
  readonly limit: number;
  readonly window: Window;
}
export interface SlidingLogRule extends RuleCommon {
  readonly algorithm: "sliding_log";
  readonly limit: number;
  readonly windowMs: number;
}
export interface SlidingCounterRule extends RuleCommon {
  readonly algorithm: "sliding_counter";
  readonly limit: number;
  readonly windowMs: number;
  /** Count denied requests too (Cloudflare's variant). Default false. */
  readonly countDenied: boolean;
  /**
   * Sub-windows per window, k >= 1 (`windowMs` is a whole multiple of it). Default 1: the two-counter estimate.
   * With k >= 2 the last k sub-windows count whole and only the one before is weighted.
   */
  readonly buckets: number;
}

export type ResolvedRule =
  | TokenBucketRule
  | GcraRule
  | LeakyBucketRule
  | LeakyQueueRule
  | FixedWindowRule
  | SlidingLogRule
  | SlidingCounterRule;

/** The algorithm parameters alone: what the pure core needs. */
export type AlgorithmParams =
  | Pick<TokenBucketRule, "algorithm" | "rate" | "burst">
  | Pick<GcraRule, "algorithm" | "rate" | "burst">
  | Pick<LeakyBucketRule, "algorithm" | "rate" | "burst">
  | Pick<LeakyQueueRule, "algorithm" | "rate" | "burst" | "delay">
  | Pick<FixedWindowRule, "algorithm" | "limit" | "window">
  | Pick<SlidingLogRule, "algorithm" | "limit" | "windowMs">
  | Pick<SlidingCounterRule, "algorithm" | "limit" | "windowMs" | "countDenied" | "buckets">;

/** The most requests of cost 1 a fresh key admits at once; a cost above it is an error. */
export function capacityOf(p: AlgorithmParams): number {
  switch (p.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
      return p.burst;
    case "leaky_queue":
      return p.burst + 1;
    case "fixed_window":
    case "sliding_log":
    case "sliding_counter":
      return p.limit;
    default: {
      const never: never = p;
      return never;
    }
  }
}
