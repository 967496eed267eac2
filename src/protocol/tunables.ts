/**
 * Every tuning constant of the hot-key tier, in one place (as envoy ratelimit keeps its settings in
 * src/settings/settings.go). docs/production.md's tuning table gives each its unit, why it is what it is and what the
 * ablation (BENCHMARKS.md section 8a) says of it; test/unit/docs_tuning.test.ts holds the table to these values.
 * Constants only: nothing here reads the environment.
 */

// The key's object: when a key is hot, and its shares.
/** Calls per second for one key beyond which its object tells isolates it is busy (`CallResult.busy`). */
export const BUSY_CALLS_PER_S = 100;
/** A rate share's unit: parts of the rule's rate and burst out of this many. */
export const SHARE_PARTS = 1000;
/** How long a share lasts from its delegate's ask, ms (a window share: cut at the window's end). */
export const SHARE_TERM_MS = 1000;
/** The longest term of a settled rate share, ms: its term doubles at each settled renewal, up to this. */
export const SHARE_TERM_MAX_MS = 4 * SHARE_TERM_MS;
/** Delegates with a share one key's record keeps at most (9 regions × 4 shards, and room). */
export const SHARE_DELEGATES_MAX = 40;
/** Below this demand per second (all delegates and direct calls) the key is no longer hot, unless its object is busy. */
export const HOT_EXIT_PER_S = BUSY_CALLS_PER_S / 2;
/** How long a key stays hot after the last grant that found it hot, ms. */
export const HOT_HOLD_MS = 5 * SHARE_TERM_MS;
/** A rate share's parts may differ from its fair parts, or from those it held, by this many (1% of the rate) and settle. */
export const SETTLED_SLACK_PARTS = 10;
/** Units of an unasked lease a direct call to a hot rate key gets, per request it carries (`withHotLease`). */
export const HOT_LEASE_PER_REQUEST = 4;
/**
 * Delegates per (rule, key, region) at most: the first, and the shards its isolates move to when the first is busy
 * (each isolate to its own, by a hash of the isolate). 9 regions × 4 delegates fit the key's object's book (share.ts
 * `SHARE_DELEGATES_MAX`), and renew about 36 times a second.
 */
export const DELEGATE_SHARDS = 4;
/**
 * Calls in a second (the current or the last) from which a delegate says it is busy (`CallResult.busy`): its isolates
 * then move to their own shards of their region (`DELEGATE_SHARDS`, each shard a delegate with its own share).
 */
export const DELEGATE_BUSY_CALLS_PER_S = 250;
/**
 * After a share ask found the key's object overloaded, how long a delegate refuses batches instead, ms. Short: a key's
 * object overloads at a cold start, for about the round trip of the isolates' first calls, and a delegate that holds
 * off longer refuses its whole region after that has passed (cluster simulation, hot-rate 1,000 isolates at 10k req/s:
 * the object overloaded from 50 to 150 ms, and delegates holding off 250 ms refused 782 requests in the first 500 ms).
 * Not shorter: at 50 ms, delegates' grants took the direct slice's tokens while the isolates' first batches were still
 * reaching the object (hot-rate 1,000 isolates at 200k req/s: 1.4 points of admission less than at 250 ms).
 */
export const DELEGATE_RENEW_BACKOFF_MS = 100;
/**
 * How long a delegate waits for the key's object (a batch passed through, a share ask), ms. A call or answer lost on
 * the way would otherwise hold the one renewal every batch waits for, for ever. Past it the call fails as
 * `overloaded` (the object is taken for busy): the renewal backs off, and a batch's isolates decide from what they
 * know (coalescer `lastKnown`), never admitting uncounted. About three round trips to the farthest region.
 */
export const DELEGATE_KEY_TIMEOUT_MS = 500;
/** Call ids a delegate remembers (a retry follows its first attempt within one call budget). */
export const DELEGATE_CALL_MEMORY = 32;
/**
 * How long an unanswered renewal is sent again as it was, ms: within a quarter term its share is still in the key's
 * object's book (the shortest term is a quarter), so the object answers it from there. Older, a new ask replaces it
 * (what it charged or gave back stays so: short, never over).
 */
export const PENDING_RESEND_MS = SHARE_TERM_MS / 4;
/** How long an idle delegate keeps its record before deleting it, ms. */
export const DELEGATE_IDLE_MS = 60_000;
/** How long before its term ends a share is renewed at most, ms (a quarter of a shorter term). */
export const RENEW_LEAD_MS = 300;
/** How long a rate share is used after its renewal is sent, ms, at most (`oldShareForMs`). */
export const OLD_SHARE_FOR_MS = 250;
/** What `oldShareForMs` adds to a measured round trip, ms (the next one's jitter, and the key's object's queue). */
export const OLD_SHARE_MARGIN_MS = 50;
/** Units of demand per term within which a change never counts as moved (Poisson noise of a small share). */
export const RENEW_SLACK = 8;
/**
 * Demand is counted in buckets of this many ms. Half a term: a region's demand moving to another shard (or surging)
 * shows within half a term, not a whole one (measured, the cluster simulation's hot-rate at 200 isolates: a whole
 * term's lag cost 5-30% of admissions in the second the shards start); not a quarter, since isolates holding
 * sub-leases ask in lumps (a quarter term's estimate then moved by half often enough to renew 1.6x as often, for
 * 3 points of admission less).
 */
export const DEMAND_BUCKET_MS = SHARE_TERM_MS / 2;
/**
 * The longest a sub-lease may be used, ms: half a share term. Longer, its units are away from the delegate's share
 * longer (a rate slice's small bucket fills meanwhile, and what comes back finds it full; a window's units sit with
 * isolates that may not use them), and at the rules' limits more are lost than calls saved (bench/cluster.ts).
 */
export const SUBLEASE_TERM_MS = SHARE_TERM_MS / 2;
/**
 * The rate bound's term, ms: a rate rule's key never admits more than `burst + rate × (t + RATE_BOUND_MS)` in any span
 * `t`, through every path of the tier (docs/production.md, "The bound, in a line"). At 500 ms, the most beyond the exact
 * single writer over 10 s at or above the limit is `rate × 500 ms / (burst + rate × 10 s)`: under 5%, for any rate and
 * burst. What makes it up: a rate sub-lease's (or a hot rate key's lease's) term, `RATE_LEASE_TERM_MS`; a grant's flight
 * credit, `FLIGHT_CREDIT_MAX_MS` (test/unit/share_fed.test.ts
 * adds them up). Nothing per share: every slice holds a whole unit of the burst or admits nothing (share.ts
 * `honestSlice`).
 */
export const RATE_BOUND_MS = 500;
/**
 * The longest a rate share's sub-lease, or a lease from a hot rate key's object, may be used, ms: a token taken out of
 * a bucket at `c` is admitted by `c + RATE_LEASE_TERM_MS`, so any span admits at most that much of the rate more than
 * the buckets held. It was 500 ms for sub-leases and a rule's `lease.ttl` (1 s while busy) for leases. Shorter loses
 * accuracy fast (cluster simulation, hot-rate 1,000 isolates at 5,000/s: 250 ms lost 15 points after the first second,
 * 400 ms 9, 450 ms 1; isolates ask their delegate more often, delegates say busy sooner, and demand estimates jump).
 */
export const RATE_LEASE_TERM_MS = 480;
/**
 * A rate sub-lease takes at most 1/this of the tokens its delegate's slice holds (at least one): one isolate's ask no
 * longer empties a small slice, stranding its tokens with that isolate while the next asks and batches are refused
 * (cluster simulation, 7 rows x 3 seeds, with `CallResult.leaseWaitMs`: 0.6 points closer to exact after the first
 * second on average, against 1/1).
 */
export const SUBLEASE_OF_HELD = 2;
/**
 * The longest flight a rate grant's credit counts, ms (flight_credit.ts): the parts a delegate gains refill its bucket
 * from at most this long before the answer's arrival, however long its round trip. A credit is half the smaller round
 * trip: longer than the answer's own way back only by the difference of the legs, which this caps.
 */
export const FLIGHT_CREDIT_MAX_MS = 20;
/**
 * A window share whose term the window's end cuts to this or less (ms) comes with units of the next window. Its
 * delegate renews in its term's last quarter, at most 300 ms before its end (delegate_demand.ts `RENEW_LEAD_MS`): every
 * delegate's last renewal before the window's end falls within this.
 */
export const AHEAD_LEAD_MS = 500;
/**
 * Steps the staircase keeps at most (older steps merge, on the safe side: a refund of a charge between two merged
 * steps gives back at most the older one's deficit). 8 cut up to 9 of 40 refunds short in a scratch replay of 40
 * charges and refunds 0-3 ms apart (gcra 1/h, burst 25); 32 at most one ε of refill: about 1 KB more per record.
 */
export const LOWS_MAX = 32;
/** How long a refund of a hot key waits for the key's next call, at most, ms (then one call takes all waiting). */
export const RETURN_WAIT_MS = 1_000;
/**
 * After an overloaded call with nothing known to decide from, how long this isolate refuses the key without asking,
 * ms: between a half and the whole of this (spread, so isolates do not come back together).
 */
export const OVERLOAD_BACKOFF_MS = 500;
/** After a delegate's call failed, how long this isolate sends the key's batches to the key's object instead, ms. */
export const DELEGATE_BACKOFF_MS = 5_000;
/** After a delegate's call failed as reset, how long this isolate waits before asking it again, ms. */
export const DELEGATE_RESET_RETRY_MS = 50;
/**
 * After a reset delegate did not answer within the retries, how long it is avoided, ms: about the rest of a restart
 * (some 100 ms). At 500 ms, every isolate of a region whose retries ran out sent all its batches to the key's object
 * for half a second after the delegates were back (cluster simulation, hot-window 1,000 isolates at 10k req/s, every
 * delegate restarting: 182 calls in a second at the key's object, 129 with 150 ms).
 */
export const DELEGATE_RESET_BACKOFF_MS = 150;
/** How long a mark lasts once written, ms (a key that stays hot is marked again before it ends). */
export const HOT_MARK_TTL_MS = HOT_HOLD_MS;
/** Marks this isolate wrote lately, at most this many keys (the oldest forgotten first). */
export const MARKS_REMEMBERED = 1_000;
/**
 * A `key: global` rule whose rate is at least this, per second, is hot by construction: an isolate sends its first
 * batch to its region's delegate, not to the key's object (src/isolate/hot_marks.ts `hotByConstruction`). 1,000/s is
 * about what one Durable Object decides in a second. A slower rule stays exact until its object says busy: sent to
 * the delegates from the start, the shipped search-origin (200/s) lost 4-7 points of accuracy in the cluster
 * simulation (a rate that small, sliced over a region's delegates, leaves each share a few tokens a second).
 */
export const GLOBAL_HOT_FROM_PER_S = 1_000;
