/**
 * A key's state in this isolate's coalescer (coalesce_types.ts `KeyState`): made new, and the arrivals it counts per
 * lease ttl (`see`), from which the lease to ask for is sized (`leaseAsk`). Pure functions of the state and the time.
 */
import { type AlgorithmParams, leasePolicy, leaseTermMs } from "../algorithms/index.ts";
import { type CallInput, type CallResult, type CheckResult, leaseCapOf } from "../protocol/store.ts";
import { subleaseTermMs } from "../protocol/sublease.ts";
import { HOT_HOLD_MS } from "../protocol/tunables.ts";
import {
  type AskedLease,
  type AskInput,
  AUTO_LEASE,
  type DelegateRoute,
  type HotMark,
  type KeyState,
  leaseSettingsOf,
} from "./coalesce_types.ts";

/** A key this isolate has not tracked yet (or forgot). */
export function newKeyState(input: AskInput): KeyState {
  return {
    name: input.name,
    transport: input.transport,
    rule: input.rule,
    timeoutMs: input.timeoutMs,
    leaseSettings: leaseSettingsOf(input),
    inFlight: false,
    inFlightSinceMs: 0,
    queue: [],
    lease: null,
    returns: [],
    lastKnownUntilMs: 0,
    lastKnownRetryAtMs: 0,
    seen: { bucket: 0, curr: 0, prev: 0, runStartMs: 0, runCount: 0, lastMs: 0 },
    busyUntilMs: 0,
    refunds: [],
    refundWaiters: [],
    returnsArmed: false,
    returnsNotBeforeMs: 0,
    overloadedUntilMs: 0,
    lastGrant: null,
    delegate: input.delegate ?? null,
    hotUntilMs: input.delegate == null ? 0 : (input.hotMark?.untilMs ?? 0),
    delegateDownUntilMs: 0,
    ownShard: input.delegate != null && input.hotMark?.ownShard === true,
    hotMarkRead: input.hotMark != null || input.ownShardMark == null,
    ownShardMark: input.ownShardMark ?? null,
  };
}

/** Count an arrival, in buckets of the lease ttl (1 s without a lease). */
export function see(st: KeyState, now: number): void {
  roll(st, now);
  if (st.seen.prev === 0 && st.seen.curr === 0) {
    // The key was quiet here for a whole bucket: a new run of arrivals starts now.
    st.seen.runStartMs = now;
    st.seen.runCount = 0;
  }
  st.seen.curr++;
  st.seen.runCount++;
  st.seen.lastMs = now;
}

/**
 * Uncount an arrival whose admission was given back (another rule denied it): it used none of the key's budget, so
 * the demand a lease is sized by is the arrivals that keep their admission. Taken off this bucket's count, or the
 * last one's when this one has none (a refund lands soon after its admission).
 */
export function unsee(st: KeyState, now: number): void {
  roll(st, now);
  if (st.seen.curr > 0) st.seen.curr--;
  else if (st.seen.prev > 0) st.seen.prev--;
  if (st.seen.runCount > 0) st.seen.runCount--;
}

export function roll(st: KeyState, now: number): void {
  const bucket = Math.floor(now / (st.leaseSettings?.ttlMs ?? 1000));
  if (bucket !== st.seen.bucket) {
    st.seen.prev = bucket === st.seen.bucket + 1 ? st.seen.curr : 0;
    st.seen.curr = 0;
    st.seen.bucket = bucket;
  }
}

/**
 * Arrivals this isolate sees of the key in one lease ttl: the larger of the last full bucket and this one; and in
 * a run younger than one ttl (a key that just became hot, a cold start), once it has seen 3, its count so far
 * extrapolated to one ttl (over at least a tenth of it), so a hot key leases within its first tenth of a ttl
 * instead of making a call per round trip until its bucket fills.
 */
export function seenPerTtl(st: KeyState, now: number): number {
  roll(st, now);
  const seen = Math.max(st.seen.prev, st.seen.curr);
  const ttlMs = st.leaseSettings?.ttlMs ?? 1000;
  const elapsedMs = now - st.seen.runStartMs;
  if (st.seen.runCount < 3 || elapsedMs >= ttlMs) return seen;
  return Math.max(seen, Math.floor(((st.seen.runCount - 1) * ttlMs) / Math.max(elapsedMs, ttlMs / 10)));
}

/**
 * The lease to ask for with the next call, if any. `toDelegate`: the call goes to the key's delegate, which grants
 * sub-leases (src/protocol/sublease.ts) while the key is hot, whatever `above` and the busy mark say.
 */
export function leaseAsk(st: KeyState, now: number, toDelegate = false): CallInput["lease"] {
  const settings = st.leaseSettings;
  if (settings === null) return null;
  if (toDelegate) return subleaseAsk(st, now);
  const seen = seenPerTtl(st, now);
  // Above `above` = more than tokens per perMs ms: seen / ttl > tokens / perMs, in integers. A busy object (many
  // isolates, each under `above`) asks for leases all the same.
  const busy = now < st.busyUntilMs;
  if (st.leaseSettings === AUTO_LEASE && !busy) return null;
  const above = settings.above;
  if (above !== null && !busy && seen * above.perMs <= above.tokens * settings.ttlMs) return null;
  // What it saw in one ttl, with a margin for chance (two standard deviations of a Poisson count), so that a lease
  // rarely runs out before its term while the key has room.
  return { units: settings.units ?? seen + 2 * Math.ceil(Math.sqrt(seen)) + 1, ttlMs: settings.ttlMs };
}

/**
 * What this isolate expects to need of the key over `ttlMs`: its arrivals per lease ttl (`seenPerTtl`), scaled to it
 * (rounded up).
 */
export function seenOver(st: KeyState, now: number, ttlMs: number): number {
  const settingsTtlMs = st.leaseSettings?.ttlMs ?? 1000;
  return Math.ceil((seenPerTtl(st, now) * ttlMs) / settingsTtlMs);
}

/**
 * A sub-lease to ask a delegate for: over the sub-lease's term (sublease.ts `SUBLEASE_TERM_MS`), what this
 * isolate saw in that time, with no margin (one that runs out calls its delegate again, 10 ms away; units held and
 * not used would be missing from the delegate's bucket meanwhile); at most the rule's own `units` and a quarter of a
 * window rule's limit (`leaseCapOf`); none below 2 requests a term (a lease would save no call).
 */
export function subleaseAsk(st: KeyState, now: number): CallInput["lease"] {
  const settings = st.leaseSettings;
  const kind = leasePolicy(st.rule.params.algorithm).kind;
  if (settings === null || kind === "none") return null;
  const full = subleaseTermMs(settings.ttlMs, kind);
  const ttlMs = kind === "window" ? windowSubleaseTermMs(st.rule.params, now, full) : full;
  // None the window's end would cut short: near it, batches are decided by the delegate itself, so that no units sit
  // with isolates when the window ends (and a delegate that cuts one anyway makes it shorter and smaller).
  if (leaseTermMs(st.rule.params, now, ttlMs) < ttlMs) return null;
  const need = seenOver(st, now, ttlMs);
  if (need < 2) return null;
  const units = Math.min(need, settings.units ?? need, leaseCapOf(st.rule.params));
  return { units, ttlMs };
}

/**
 * A window rule's sub-lease term at `now`, ms: a quarter of the time left in the window, between half of `fullMs` and
 * `fullMs` (so shorter only in its last 4 terms, and only in a window that lasted 8 before them). Units held by isolates are lost with an isolate that dies (at a
 * redeploy, every one: about 3,000 units at 1,000 isolates and 10k req/s) and are stranded if unused at the window's
 * end, and a window binds near its end. In the cluster simulation (3 seeds) this took hot-window/1000/10000/redeploy
 * from 2.57% to 1.09% of a window under-admitted in the 2 s after it, with a few more delegate calls in those seconds.
 */
export function windowSubleaseTermMs(params: AlgorithmParams, now: number, fullMs: number): number {
  // Only in a window that has lasted 8 terms already: in a short window (1 s) every term would be short.
  const policy = leasePolicy(params.algorithm);
  if (policy.kind !== "window" || policy.windowOf(params, now - 8 * fullMs) !== policy.windowOf(params, now)) {
    return fullMs;
  }
  const toEndMs = leaseTermMs(params, now, 4 * fullMs);
  return Math.min(fullMs, Math.max(Math.ceil(fullMs / 2), Math.floor(toEndMs / 4)));
}

/**
 * Whether a grant of `units` for `forMs` is short of what this isolate asked (`asked`): fewer units than it needs. A
 * delegate's sub-lease is short only at a slower pace than its need over its term: a delegate cuts the term of a
 * smaller sub-lease in proportion (sublease.ts `shorter`), and this isolate asks again when the units run out.
 */
export function shortOf(asked: AskedLease | undefined, units: number, forMs: number): boolean {
  if (asked === undefined) return false;
  if (asked.sub !== true || units === 0) return units < asked.need;
  return units * asked.ttlMs < asked.need * forMs;
}

/**
 * The delegate to send the key's next call to: while the key is hot and the delegate was not failing lately; this
 * isolate's own shard once the first said it is busy (`noteDelegateBusy`).
 */
export function delegateFor(st: KeyState, now: number): DelegateRoute | null {
  if (st.delegate === null || now >= st.hotUntilMs || now < st.delegateDownUntilMs) return null;
  return st.ownShard ? (st.delegate.ownShard ?? st.delegate) : st.delegate;
}

/**
 * Before a hot key's call to its first delegate, when no mark was read for this hot spell (`KeyState.hotMarkRead`):
 * read the data center's mark, move to its own shard if it says so, and return the delegate to call (`delegateFor`).
 */
export async function readMark(st: KeyState, clock: () => number): Promise<DelegateRoute | null> {
  st.hotMarkRead = true;
  if (st.ownShardMark !== null && (await st.ownShardMark(st.name).catch(() => false))) st.ownShard = true;
  return delegateFor(st, clock());
}

/** A delegate answered busy, or was overloaded: this isolate moves to its own shard (until the key goes cold). */
export function noteDelegateBusy(st: KeyState, busy: boolean): void {
  if (busy) st.ownShard = true;
}

/**
 * A hot spell that lapsed here (no answer said hot for `HOT_HOLD_MS`: an isolate with few requests for the key)
 * renewed by the data center's mark read for this request (coalesce.ts `tracks`), or ended by its absence (`null`):
 * its next call then goes to the key's object, which says whether the key is still hot. `undefined`: none was read.
 */
export function takeMark(st: KeyState, mark: HotMark | null | undefined, now: number): void {
  if (mark === undefined || st.delegate === null || st.hotUntilMs === 0 || now < st.hotUntilMs) return;
  st.hotUntilMs = mark?.untilMs ?? 0;
  if (mark?.ownShard === true) st.ownShard = true;
}

/** The key's object (or delegate) said the key is hot (go to the delegate) or cold (`false`: back to the object). */
export function noteHot(st: KeyState, hot: boolean | undefined, now: number): void {
  if (hot === true) st.hotUntilMs = now + HOT_HOLD_MS;
  else if (hot === false) {
    st.hotUntilMs = 0;
    st.ownShard = false;
    st.hotMarkRead = st.ownShardMark === null;
  }
}

/**
 * Request `i`'s result from a call that answered after its budget ran out. A late call that fails is nobody's
 * concern unless its caller looks (the gateway refunds a late admission only when the request was refused): the
 * rejection is marked handled here, and still reaches whoever awaits the result.
 */
export function lateResult(late: Promise<CallResult>, i: number): Promise<CheckResult> {
  const result = late.then((r): CheckResult => r.results[i] ?? { ok: false, error: "invalid_cost" });
  result.catch(() => undefined);
  return result;
}

/** FNV-1a of a string, as an unsigned 32-bit seed (never 0). */
/** The next of a small xorshift sequence (never 0): how a coalescer spreads renewals (coalesce.ts `spread`). */
export function nextSeed(seed: number): number {
  let x = seed;
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return x >>> 0 || 1;
}

export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0 || 1;
}

/**
 * Which of `shards` a text (an isolate's id) picks: from the high bits of its hash. FNV-1a's low bits depend only on
 * its input's low bits (the multiply carries upward only), so ids that differ in a few digits land unevenly by the
 * low bits: isolates `isolate-0` to `isolate-4999` put 76 to 243 of a region's ~555 on one of 4 shards that way.
 */
export function shardOf(text: string, shards: number): number {
  return (hashString(text) >>> 16) % shards;
}
