/**
 * Everything one isolate keeps between requests, in one object that the entry point creates once and passes in:
 * the clock and the sleeper (injected, so tests drive time instead of racing it), the blocked-key cache, the
 * counters, the `scope: local` stores, the account cache and the ring of recent denials. Nothing in src/edge keeps
 * request state in a module singleton; a test that wants a clean isolate makes a new one.
 */

import { AccountCache } from "./account_cache.ts";
import { BlockedCache } from "./blocked_cache.ts";
import { Coalescer } from "./coalesce.ts";
import { KeyLookups } from "./key_lookups.ts";
import { LocalScope } from "./local_scope.ts";
import { newStats, type Stats } from "./metrics.ts";
import { RecentDenials } from "./recent_denials.ts";
import { ownContextResumer } from "./resume.ts";

import { type Clock, type Sleep, systemClock, systemSleep } from "./time.ts";

export type { Clock, Sleep };
export { systemClock, systemSleep };

export interface Isolate {
  readonly clock: Clock;
  readonly sleep: Sleep;
  /** Denials this isolate knows the objects would repeat (blocked_cache.ts). */
  readonly blocked: BlockedCache;
  /** Counters since the isolate started (the admin API's `/_sluice/stats`). */
  readonly stats: Stats;
  /** The `scope: local` rules' stores (local_scope.ts). */
  readonly local: LocalScope;
  /** Account records read from KV (plan.ts). */
  readonly accounts: AccountCache;
  /** Account lookups per client address (key_lookups.ts). */
  readonly keyLookups: KeyLookups;
  /** The most recent denials, for the dashboard (recent_denials.ts). */
  readonly denials: RecentDenials;
  /** Calls to the objects, one in flight per key, and the leases held here (coalesce.ts). */
  readonly calls: Coalescer;
  /** Binding misconfigurations already logged (a mistyped `props.rule`): each is logged once per isolate. */
  readonly bindingProblems: Set<string>;
}

export interface IsolateOptions {
  readonly clock?: Clock;
  readonly sleep?: Sleep;
  /** Requests waiting for one key's call at most (coalesce.ts, `COALESCE_MAX_WAITING` by default); for tests. */
  readonly maxWaiting?: number;
}

export function createIsolate(options: IsolateOptions = {}): Isolate {
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? systemSleep;
  const stats = newStats();
  return {
    clock,
    sleep,
    blocked: new BlockedCache(),
    stats,
    calls: new Coalescer({
      clock,
      sleep,
      counters: stats,
      newId: () => crypto.randomUUID(),
      resume: ownContextResumer(clock),
      maxWaiting: options.maxWaiting,
    }),
    local: new LocalScope(),
    accounts: new AccountCache(),
    keyLookups: new KeyLookups(),
    denials: new RecentDenials(),
    bindingProblems: new Set(),
  };
}
