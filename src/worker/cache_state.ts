/** This isolate's blocked-key cache (see blocked_cache.ts), shared by the gateway and the admin API. */
import { BlockedCache } from "./blocked_cache.ts";

export const blockedCache = new BlockedCache();

/** The cache id of a (rule, key hash). */
export function cacheIdOf(ruleId: string, keyHash: string): string {
  return `${ruleId}\u0000${keyHash}`;
}
