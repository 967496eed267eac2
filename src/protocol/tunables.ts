/** Every tuning constant of the hot-key tier: docs/production.md's tuning table (docs_tuning.test.ts) says why. */

// The key's object: when a key is hot, and its shares.
/** Calls/s from which a key's object says busy (`CallResult.busy`). */
export const BUSY_CALLS_PER_S = 100;
/** A rate share's unit: parts of the rule's rate and burst out of this many. */
export const SHARE_PARTS = 1000;
/** A share's term from its ask, ms (a window share's: cut at the window's end). */
export const SHARE_TERM_MS = 1000;
/** A settled rate share's longest term, ms (its term doubles at each settled renewal). */
export const SHARE_TERM_MAX_MS = 4 * SHARE_TERM_MS;
/** Delegates with a share in one key's record, at most (9 regions × 4 shards, and room). */
export const SHARE_DELEGATES_MAX = 40;
/** Below this demand/s (delegates and direct calls), not busy, the key goes cold. */
export const HOT_EXIT_PER_S = BUSY_CALLS_PER_S / 2;
/** A key stays hot this long after the last grant that found it hot, ms. */
export const HOT_HOLD_MS = 5 * SHARE_TERM_MS;
/** A key's object whose last this many ms had `BUSY_CALLS_PER_S`'s pace says hot (not busy: a second counts that). */
export const HOT_EARLY_MS = 300;
/** A rate share within this many parts (1% of the rate) of its fair parts, or of those it held, is settled. */
export const SETTLED_SLACK_PARTS = 10;
/** A rate share's parts stay promised this long after its term's end, ms: a late renewal finds them held (share.ts). */
export const LAPSE_GRACE_MS = 500;
/** An unsettled rate share's term is at least this many of its delegate's round trips (at most `SHARE_TERM_MS`). */
export const UNSETTLED_TERM_RTTS = 4;

// Delegates.
/** Delegates per (rule, key, region): the first, and the shards its isolates move to when it is busy. */
export const DELEGATE_SHARDS = 4;
/** Calls in a second (this or the last) from which a delegate says busy, with a spread: some isolates move. */
export const DELEGATE_BUSY_CALLS_PER_S = 250;
/** A busy delegate's spread moves as many of its calls as leave it this many a second (`countLoad`). */
export const DELEGATE_AIM_CALLS_PER_S = 200;
/** A window rule's spread (an isolate's, a hot mark's) halves every this many ms: the region's load may have fallen. */
export const SPREAD_HALF_LIFE_MS = 2_000;
/** After a share ask found the key's object overloaded, a delegate refuses batches this long, ms. */
export const DELEGATE_RENEW_BACKOFF_MS = 100;
/** A delegate's wait for the key's object, ms; past it the call fails as `overloaded` (a lost message holds nothing). */
export const DELEGATE_KEY_TIMEOUT_MS = 500;
/** A delegate's call to the key's object unanswered this long, ms, is sent again as it was (its id: applied once). */
export const DELEGATE_RESEND_MS = DELEGATE_KEY_TIMEOUT_MS / 2;
/** Call ids a delegate remembers (a retry follows its first attempt within one call budget). */
export const DELEGATE_CALL_MEMORY = 32;
/** An unanswered renewal is sent again as it was within this, ms (its share is still in the book); later, a new ask. */
export const PENDING_RESEND_MS = SHARE_TERM_MS / 4;
/** An idle delegate deletes its record after this, ms. */
export const DELEGATE_IDLE_MS = 60_000;
/** A share is renewed at most this long before its term ends, ms (a quarter of a shorter term). */
export const RENEW_LEAD_MS = 300;
/** A rate share is used at most this long after its renewal is sent, ms (`oldShareForMs`). */
export const OLD_SHARE_FOR_MS = 250;
/** What `oldShareForMs` adds to a measured round trip, ms (jitter, the key's object's queue). */
export const OLD_SHARE_MARGIN_MS = 50;
/** Units of demand per term within which a change never counts as moved (Poisson noise of a small share). */
export const RENEW_SLACK = 8;
/** Demand is counted in buckets of this many ms. */
export const DEMAND_BUCKET_MS = SHARE_TERM_MS / 2;

// Sub-leases, and what the rate bound is made of.
/** A window share's sub-lease's longest term, ms. */
export const SUBLEASE_TERM_MS = SHARE_TERM_MS / 2;
/** The rate bound's term, ms: at most `burst + rate × (t + this)` in any span `t`; `RATE_LEASE_TERM_MS` within it. */
export const RATE_BOUND_MS = 500;
/** A rate sub-lease's (and a hot rate key's lease's) longest use, ms: a token taken at `c` is admitted by `c + this`. */
export const RATE_LEASE_TERM_MS = 480;
/** A rate sub-lease's reservation waits this long past its end for a return, ms; then it is charged in full. */
export const RESERVATION_WAIT_MS = 150;
/** A rate sub-lease takes at most 1/this of what its delegate's slice holds (at least one token). */
export const SUBLEASE_OF_HELD = 2;
/** A window share whose term the window's end cuts to this or less, ms, comes with units of the next window. */
export const AHEAD_LEAD_MS = 500;
/** A shed's call to the key's object waits this long past when its parts are freed, ms (clocks, the queue). */
export const SHED_MARGIN_MS = 10;
/** Steps a late-refund staircase keeps at most (older steps merge, on the safe side). */
export const LOWS_MAX = 32;

// The isolate.
/** A hot key's refund waits this long at most for the key's next call, ms. */
export const RETURN_WAIT_MS = 1_000;
/** A busy key (overloaded, or a call past its budget) known nothing of is refused here for half to all of this, ms. */
export const OVERLOAD_BACKOFF_MS = 500;
/** After a delegate's call failed, the key's batches go to the key's object this long, ms. */
export const DELEGATE_BACKOFF_MS = 5_000;
/** After a delegate's call failed as reset, ask it again after this, ms. */
export const DELEGATE_RESET_RETRY_MS = 50;
/** A reset delegate that did not answer within the retries is avoided this long, ms (about the rest of a restart). */
export const DELEGATE_RESET_BACKOFF_MS = 150;
/** A hot mark's life once written, ms (a key that stays hot is marked again before). */
export const HOT_MARK_TTL_MS = HOT_HOLD_MS;
/** Keys this isolate remembers marking, at most (the oldest forgotten first). */
export const MARKS_REMEMBERED = 1_000;
/** A rule this fast (per second), whatever its key, has keys hot by construction (hot_marks.ts `hotByConstruction`). */
export const HOT_FROM_PER_S = 1_000;
