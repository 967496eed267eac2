/**
 * The service binding's types, for the Worker that binds to Sluice (`import type { SluiceBinding } from
 * "sluice/client"`). Plain data only: everything here crosses the binding by JS RPC (structured clone).
 *
 * A native Rate Limiting binding (`[[ratelimits]]`) becomes a `[[services]]` binding to Sluice's `RateLimiter`
 * entrypoint, with `props = { rule = "..." }` naming the rule (README.md, "Use it from your Worker"), and
 * `const { success } = await env.MY_RATE_LIMITER.limit({ key })` keeps working on that rule: exact, global, with any
 * of Sluice's algorithms.
 */

/** What `limit` counts: like the native binding's `{ key }`, plus the rule and the cost. */
export interface LimitOptions {
  /**
   * What to count by (an API key, a user id, an address, a path...): 1 to 1,024 characters, taken as given. Sluice
   * keeps only its hash. The same key on the same rule is the same budget, whether it comes through `limit` or as
   * the identity of a request through the gateway or `check`.
   */
  readonly key: string;
  /**
   * The id of a rule in Sluice's rule set. Default: the binding's `props.rule`; one of the two is required. The rule's
   * algorithm, parameters, mode, scope and `on_error` apply; its `match` (plan, route, identity) does not, since the
   * caller chose the rule, and neither do per-account overrides (`check` applies both).
   */
  readonly rule?: string;
  /** A positive whole number of units. Default: the rule's `cost` (1 unless the rule says otherwise). */
  readonly cost?: number;
  /**
   * For a rule that counts by the response (`count_when`, `cost_header`): what the request admitted by an earlier
   * `limit({ key, rule })` came to. It is charged as the rule says (only a matching status; the cost from the named
   * header), and the answer's `success` is `false` when this charge crossed the limit. Without it, such a rule checks
   * without charging.
   */
  readonly outcome?: LimitOutcome;
}

/** What the handler answered, for `limit({ key, rule, outcome })`. */
export interface LimitOutcome {
  /** The response's status, 100 to 599. */
  readonly status: number;
  /** Its header fields, by name (any case); only those the rule reads matter. */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Why a request (or a `limit` call) was not admitted; `null` when it was. `forbidden`: a deny rule (`deny: true`)
 * matched it, and no retry will be admitted.
 */
export type Refusal = "forbidden" | "bad_request" | "unauthorized" | "cost_exceeds_capacity" | "denied" | "fail_closed";

/** What one rule's answer counted as. */
export type RuleOutcome =
  | "allowed"
  /** Admitted by this rule, denied by another, and given back. */
  | "refunded"
  | "denied"
  /** A shadow rule would have denied (it never blocks). */
  | "shadow_denied"
  /** The limiter could not answer and the rule is skipped (`on_error: open`). */
  | "fail_open"
  /** The limiter could not answer and the rule refuses (`on_error: closed`). */
  | "fail_closed"
  | "cost_exceeds_capacity"
  /** Not asked: another rule was already known to deny. */
  | "not_asked";

/** One rule's part in a decision. */
export interface RuleResult {
  readonly rule: string;
  readonly mode: "enforce" | "shadow";
  readonly outcome: RuleOutcome;
  /** Units left after this request (after any refund); `null` when the rule did not decide. */
  readonly remaining: number | null;
  /** Until the rule is back to full, ms; `null` when the rule did not decide. */
  readonly resetAfterMs: number | null;
  /** Set iff the rule denied (or would have, for a shadow rule): the exact wait before a retry can succeed, ms. */
  readonly retryAfterMs: number | null;
}

/** An RFC 9457 problem body, as the gateway answers it (`application/problem+json`). */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail?: string;
  readonly [member: string]: unknown;
}

/** A decision, with everything needed to answer it the way the gateway does. */
export interface CheckResult {
  /** Admitted: go on to the handler. */
  readonly success: boolean;
  /** The status the gateway would answer: 200 when admitted, else 429 (or the rule's status), 400, 401 or 503. */
  readonly status: number;
  readonly reason: Refusal | null;
  /**
   * Header fields for the response, admitted or not: `RateLimit-Policy` and `RateLimit` for every enforcing rule that
   * applied, `Retry-After` on a denial (or a closed failure), and others the gateway sends (`WWW-Authenticate`,
   * `Sluice-Lease`). Names as the gateway writes them.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The problem+json body of the refusal; `null` when admitted. */
  readonly problem: Problem | null;
  /** How long Sluice held an admitted request for shaping (leaky_queue rules) before answering, ms. */
  readonly delayedMs: number;
  /** On a denial: the longest exact wait among the denying rules, ms (without jitter); else `null`. */
  readonly retryAfterMs: number | null;
  /** Every rule that applied, in rule order. */
  readonly rules: readonly RuleResult[];
  /**
   * The slots an admitted request holds (concurrency rules): give them back with `release(slots)` when the work is
   * done (the middlewares do it when the response's body ends). Each comes back by itself after its rule's `slot_ttl`.
   * Absent: none held.
   */
  readonly slots?: readonly string[];
  /**
   * With `slots`: renew them (`renew(slots)`) this often while the work runs, ms: half the shortest `slot_ttl` among
   * their rules (the middlewares do it until the response's body ends).
   */
  readonly renewEveryMs?: number;
}

/** `limit`'s answer: the native binding's `{ success }`, and what it cannot say. */
export interface LimitResult extends CheckResult {
  /** The rule that decided. */
  readonly rule: string;
  /** Units left on that rule after this call; `null` if it did not decide (its limiter failed). */
  readonly remaining: number | null;
  /** Until that rule is back to full, ms; `null` if it did not decide. */
  readonly resetAfterMs: number | null;
  /** With `outcome`: the units charged (0 when the outcome did not count, or the charge could not be made). */
  readonly charged?: number;
  /** A concurrency rule that admitted: the slot held, for `release(slot)` when the work is done. Absent: none. */
  readonly slot?: string;
}

/** What `release` did. */
export interface ReleaseResult {
  /** How many of the slots named were held and are now given back (a slot released twice, or after its lease: 0). */
  readonly released: number;
}

/**
 * A request as `check` reads it: its URL (absolute), method and headers, and for a `POST` the start of its body.
 * `requestForCheck(request)` makes one from a `Request` and leaves the body readable for the handler;
 * `requestLike(request)` makes one without any body.
 */
export interface RequestLike {
  readonly url: string;
  /** Default `GET`. */
  readonly method?: string;
  /** Header fields; repeated names already joined with ", " (as `Headers` does). */
  readonly headers?: Readonly<Record<string, string>> | ReadonlyArray<readonly [string, string]>;
  /**
   * The first bytes of the body (at most `CHECK_BODY_MAX_BYTES`), as sent (still encoded), for the upstreams that
   * route a `POST` by a `_method` field in a urlencoded or JSON body (or one without a `Content-Type`). Absent on a
   * `POST` whose header fields announce such a body (a length other than 0, chunked framing, or a form or JSON type
   * without a length): Sluice cannot see the field, and counts the request against every method `_method` can name
   * (docs/rules.md, "Your upstream").
   */
  readonly body?: ArrayBuffer | ArrayBufferView | string;
}

/**
 * The most body bytes `check` takes: Sluice reads `_method` from at most 65,536 bytes of a body (its
 * `BODY_READ_MAX_BYTES`), and one byte more tells it the body is larger than that.
 */
export const CHECK_BODY_MAX_BYTES = 65_537;

/**
 * The binding as the consumer sees it (`entrypoint = "RateLimiter"`). Bad input (a missing or unknown rule, an
 * empty or over-long key, a cost that is not a positive whole number, a request without an absolute URL) rejects
 * with a `TypeError` or `RangeError` whose message says what to fix; the limiter's own failures follow each rule's
 * `on_error` and come back as a result.
 */
export interface SluiceBinding {
  /** Count `cost` units of `key` against one rule, as the native binding's `limit` does, and answer at once. */
  limit(options: LimitOptions): Promise<LimitResult>;
  /**
   * Apply every rule of Sluice's rule set that matches the request (plan, route, identity, costs, composition and
   * refunds, shadow rules, failure policy), exactly as the gateway does.
   */
  check(request: RequestLike): Promise<CheckResult>;
  /**
   * Give back slots (`LimitResult.slot`, `CheckResult.slots`) of concurrency rules: idempotent; a slot whose lease
   * ended is not released again, nor anyone else's.
   */
  release(slots: string | readonly string[]): Promise<ReleaseResult>;
  /**
   * Start the leases of slots still held again (their work still runs): call it every half `slot_ttl` for work that
   * may outlast the lease. A slot whose lease ended is not revived (`renewed` does not count it).
   */
  renew(slots: string | readonly string[]): Promise<RenewResult>;
}

/** What `renew` did. */
export interface RenewResult {
  /** How many of the slots named were held and now have a new lease of `slot_ttl`. */
  readonly renewed: number;
}

/** The longest `limit` key Sluice accepts, in UTF-16 code units. */
export const MAX_LIMIT_KEY_CHARS = 1024;

/** A `RequestLike` of `request`: URL, method and headers, never the body (which stays readable). */
export function requestLike(request: Request): RequestLike {
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { url: request.url, method: request.method, headers };
}

const BODY_TYPES = /^(?:application\/x-www-form-urlencoded|application\/(?:[\w.+-]+\+)?json)\s*(;|$)|^\s*$/i;

/**
 * A `RequestLike` of `request` for `check`: `requestLike`, and for a `POST` with a urlencoded or JSON body (or one
 * without a `Content-Type`, which Rack reads as a form) the first
 * `CHECK_BODY_MAX_BYTES` of it, read from a copy (`request.clone()`): the handler still reads the whole body, and
 * no more than that prefix is held here.
 */
export async function requestForCheck(request: Request): Promise<RequestLike> {
  const like = requestLike(request);
  const type = request.headers.get("content-type") ?? "";
  if (request.method.toUpperCase() !== "POST" || request.body === null || !BODY_TYPES.test(type)) return like;
  return { ...like, body: await bodyStart(request.clone().body!, CHECK_BODY_MAX_BYTES) };
}

/** The first `maxBytes` of `stream` (all of it when shorter); the rest is cancelled unread. */
async function bodyStart(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const reader = stream.getReader();
  const out = new Uint8Array(maxBytes);
  let total = 0;
  while (total < maxBytes) {
    const { done, value } = await reader.read();
    if (done) return out.slice(0, total);
    const take = Math.min(value.byteLength, maxBytes - total);
    out.set(value.subarray(0, take), total);
    total += take;
  }
  // Not awaited: a tee branch's cancel settles only once the other branch (the handler's) is read too.
  void reader.cancel();
  return out;
}
