/**
 * The resolved rule: what validation turns `rules/*.yaml` into. Every default is filled in,
 * every duration and rate is an exact integer pair; nothing after validation sees raw YAML.
 */

import type { AlgorithmName, ParamsOf } from "../algorithms/index.ts";
import type { Rate } from "../algorithms/params.ts";
import type { KeyMissing, KeyPart } from "./key.ts";

export type { AlgorithmName, AlgorithmParams } from "../algorithms/index.ts";
export type { Rate, Window } from "../algorithms/params.ts";
export type { KeyMissing, KeyPart } from "./key.ts";

export type Identity = "api_key" | "ip" | "user";
export type Mode = "enforce" | "shadow";
export type Scope = "global" | "local";
export type OnError = "open" | "closed";
export type Unverified = "by_address" | "skip" | "reject";

/** `"METHOD /path"` from `match.route`, kept as written and compiled for matching. */
export interface RoutePattern {
  /** As written in the rule, e.g. `POST /v1/labels:batch`. */
  readonly source: string;
  /** Upper-case method, or `*` for any. */
  readonly method: string;
  /** Path segments; `*` matches one segment; a final `**` matches any rest (including none). */
  readonly segments: readonly string[];
}

/**
 * One `match.header`, `match.cookie` or `match.query` condition (src/rules/match_conditions.ts reads it,
 * src/request/match.ts tests it). A value that is absent passes no value test, `not` included (Envoy's
 * `invert_match`): only `present` tests for it.
 */
export interface MatchCondition {
  /**
   * What it reads: a request header, a cookie or a query parameter (the first one of that name), or a field of
   * `request.cf` (`cf`: country, asn, colo, ja4), where Cloudflare says the client is.
   */
  readonly in: "header" | "cookie" | "query" | "cf";
  /** The header's name, lower-case; a cookie's or query parameter's, as written (they are case-sensitive). */
  readonly name: string;
  readonly test: "equals" | "prefix" | "suffix" | "contains" | "matches" | "present";
  /** What the value is compared with (a regular expression's source for `matches`); `""` for `present`. */
  readonly value: string;
  /** Compare letters case-insensitively. */
  readonly ignoreCase: boolean;
  /** The value is present and fails the test; with `present`, it is absent. */
  readonly not: boolean;
  /**
   * A value test reads a value not sent as `""` (so `not` passes it), as NGINX reads a missing header and Envoy's
   * `treat_missing_header_as_empty` does; without it, a value not sent passes no value test.
   */
  readonly missingAsEmpty?: true;
}

/**
 * A range of client addresses (`match.address`, `match.except_address`): as written, and as eight 16-bit groups
 * (an IPv4 range as IPv4-mapped IPv6, `::ffff:0:0/96` and up) with its prefix length in bits.
 */
export interface AddressRange {
  readonly source: string;
  readonly groups: readonly number[];
  readonly bits: number;
}

export interface RuleMatch {
  /** Plans the rule applies to; `null` means any plan. */
  readonly plans: readonly string[] | null;
  /** Route the rule applies to; `null` means any route. With `match.route` as a list, the first of them. */
  readonly route: RoutePattern | null;
  /** `match.route` as a list: the routes after the first; a request matching any one of them is matched. Default `[]`. */
  readonly moreRoutes: readonly RoutePattern[];
  /** `match.except`: routes the rule never applies to, even where `match.route` matches. Default `[]`. */
  readonly except: readonly RoutePattern[];
  /**
   * `match.header`, `match.cookie` and `match.query`: conditions on what the request carries, all of which must hold;
   * absent when the rule gives none.
   */
  readonly conditions?: readonly MatchCondition[];
  /** The client addresses (`CF-Connecting-IP`) the rule applies to; absent: any, a request without one included. */
  readonly addresses?: readonly AddressRange[];
  /** The client addresses the rule never applies to (an allowlist). */
  readonly exceptAddresses?: readonly AddressRange[];
  /**
   * Whose budget this is: the API key, the client IP, or the authenticated user; `null` when the rule gives `key:`
   * instead (the short spelling of `key: [<identity>]`, see src/rules/key.ts).
   */
  readonly identity: Identity | null;
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
  /** Isolates may hold a slice of a hot key's budget (see src/algorithms/types.ts `LeasePolicy`). Default `null` (off). */
  readonly lease: LeaseSettings | null;
  /**
   * `identity: api_key` rules only: what the rule does with a caller whose API key has no account record, or who sends
   * none. `by_address` (default): counts it by its client address (IPv6 by prefix), under the default plan;
   * `skip`: does not apply to it; `reject`: refuses it with 401 at the edge.
   */
  readonly unverified: Unverified;
  /** What the rule is for, in a sentence, for people (the dashboard, `sluice plan`). Default `""`. */
  readonly description: string;
  /**
   * The parts of the rule's key (`key:`): `[]` is `key: global`, one state for every caller. Default `null`: the rule
   * counts by `match.identity`.
   */
  readonly key: readonly KeyPart[] | null;
  /** `key:` rules: what a request without a value for a part gets. Default `empty` (`match.identity` rules skip it). */
  readonly keyMissing: KeyMissing;
  /** `key:` rules: `accept` silences the warning for a key the client can rotate. Default `warn`. */
  readonly keyClientChosen: "warn" | "accept";
  /**
   * Count by the response: the rule is checked before forwarding without charging, and charged after the origin
   * answers, only when the response matches (src/rules/outcome.ts). Default `null`: every admitted request is charged
   * when it is admitted.
   */
  readonly countWhen: CountWhen | null;
  /**
   * Charge what the origin says a request cost: the name of a response header holding a whole number of units (at
   * most the rule's capacity), charged after the origin answers. Default `null`: the rule's own costs.
   */
  readonly costHeader: string | null;
  /** Once the rule refuses a key, the key stays refused this long, ms (the key's object holds the ban). Default `null`. */
  readonly blockForMs: number | null;
}

/**
 * A deny rule (`deny: true`, src/rules/deny.ts): it refuses every request it applies to, at the edge, and counts
 * nothing: a blocklist. Its `match` has no identity (`identity: null`): it applies to whoever its match names.
 */
export interface DenyRule {
  readonly id: string;
  readonly file: string;
  readonly match: RuleMatch;
  /** `shadow`: only logs the requests it would refuse. */
  readonly mode: Mode;
  /** The status of its refusal. Default 403 (`DENY_STATUS`). */
  readonly status: number;
  readonly description: string;
}

/** A status (`401`) or a class of statuses (`5xx`) a `count_when` names. */
export type StatusMatch = number | `${1 | 2 | 3 | 4 | 5}xx`;

/** A rule's `count_when`: a response counts when every part given holds. */
export interface CountWhen {
  /** The response's status is one of these; `null`: any status. */
  readonly status: readonly StatusMatch[] | null;
  /** The response carries this header (any value), as written; `null`: no header needed. */
  readonly header: string | null;
}

/** A rule's `lease` setting. */
export interface LeaseSettings {
  /** How long an isolate may admit from one lease, ms. Default 1000. */
  readonly ttlMs: number;
  /** Units per lease; `null` (default): what this isolate saw of the key in one `ttlMs`, at least 1. */
  readonly units: number | null;
  /** Lease only while this isolate sees the key above this rate; `null` (default): always. */
  readonly above: Rate | null;
}

/** A rule for one algorithm: what every rule has, and that algorithm's parameters. */
export type RuleOf<K extends AlgorithmName> = RuleCommon & ParamsOf<K>;

/** A resolved rule: every default filled in, its algorithm's parameters beside the common fields. */
export type ResolvedRule = { [K in AlgorithmName]: RuleOf<K> }[AlgorithmName];
