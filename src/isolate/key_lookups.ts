/**
 * How many account lookups (KV reads for API keys this isolate has not cached) one client address may cause: a GCRA
 * budget of `perMinute` per minute, burst `perMinute`, per address, in this isolate's memory (the same packed store
 * and pure core as `scope: local` rules, bounded with least-recently-used eviction). A caller rotating made-up keys
 * from one address therefore costs at most that many KV reads a minute per isolate; past it, a new key is simply
 * unverified (counted by its address under the default plan) until the budget refills. Known keys already cached are
 * never charged, and real accounts stay in the plan cache (plan.ts keeps them apart from misses).
 */

import { rateOf } from "../rules/duration.ts";
import { createLocalStore, type LocalStore } from "./local_store.ts";

/** Addresses remembered per isolate (least recently used forgotten first). */
export const KEY_LOOKUPS_MAX_ADDRESSES = 100_000;

export class KeyLookups {
  private store: LocalStore | null = null;
  private perMinute = 0;
  /** The latest time seen: a clock that steps back must not turn earlier lookups into a debt. */
  private latestMs = Number.NEGATIVE_INFINITY;

  /** Addresses remembered now. */
  get size(): number {
    return this.store?.size ?? 0;
  }

  /** Spend one lookup for `address` (`""` without one) at `nowMs`; `false` when its budget is used up. */
  allow(address: string, perMinute: number, nowMs: number): boolean {
    if (this.store === null || this.perMinute !== perMinute) {
      this.perMinute = perMinute;
      this.store = createLocalStore(
        { algorithm: "gcra", rate: rateOf(perMinute, 60_000), burst: perMinute },
        KEY_LOOKUPS_MAX_ADDRESSES,
      );
    }
    this.latestMs = Math.max(this.latestMs, nowMs);
    const result = this.store.check(address, 1, this.latestMs);
    return result.ok && result.decision.allowed;
  }
}
