/**
 * How many account lookups (KV reads for API keys this isolate has not cached) one client address may cause: a GCRA
 * budget of `perMinute` per minute, burst `perMinute`, per address, in this isolate's memory (the same packed store
 * and pure core as `scope: local` rules, bounded with least-recently-used eviction). A caller rotating made-up keys
 * from one address therefore costs at most that many KV reads a minute per isolate. Past it, a key this isolate has
 * never seen is not looked up and its request is refused (429, caller.ts), never counted as unverified: a real key
 * would then be counted more leniently than itself (by an address, or not at all under `unverified: skip`). Known
 * keys already cached are never charged, and a known key whose record is due for a refresh keeps its last record
 * while its address is out of lookups (account_cache.ts keeps real accounts apart from misses).
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

  /**
   * Spend one lookup for `address` (`""` without one) at `nowMs`: `null` when spent, else the ms until one is
   * available (its budget is used up, nothing was spent).
   */
  take(address: string, perMinute: number, nowMs: number): number | null {
    if (this.store === null || this.perMinute !== perMinute) {
      this.perMinute = perMinute;
      this.store = createLocalStore(
        { algorithm: "gcra", rate: rateOf(perMinute, 60_000), burst: perMinute },
        KEY_LOOKUPS_MAX_ADDRESSES,
      );
    }
    this.latestMs = Math.max(this.latestMs, nowMs);
    const result = this.store.check(address, 1, this.latestMs);
    if (!result.ok) return 60_000;
    return result.decision.allowed ? null : Math.max(1, result.decision.retryAfterMs ?? 60_000);
  }
}
