/**
 * Plans. An API key's account record lives in the `ACCOUNTS` KV namespace under the SHA-256 hex of the key (the raw
 * key is never stored), as JSON `{ "plan": "growth" }`. Records are cached in the isolate for `planCacheTtlMs`,
 * misses too, so an unknown key costs one KV read per isolate per TTL. Callers without a key, with an unknown key,
 * or with a malformed record get the default plan. A KV failure also answers the default plan (logged, not cached):
 * limiting by the default plan beats failing the request.
 */

/** The account record as stored in KV. Other fields are allowed and ignored. */
export interface AccountRecord {
  readonly plan: string;
}

interface CacheEntry {
  readonly expiresAtMs: number;
  readonly plan: Promise<string | null>;
}

/** Bounded so a flood of random keys cannot grow the isolate's memory without limit. */
const MAX_ENTRIES = 10_000;

/** One isolate's account records (and their absence), keyed by the SHA-256 hex of the API key. */
export class PlanCache {
  private readonly entries = new Map<string, CacheEntry>();

  /** The plan for a caller: its account's, or `defaultPlan`. `keyHash` is the SHA-256 hex of the API key. */
  async planFor(
    accounts: KVNamespace,
    keyHash: string | null,
    defaultPlan: string,
    ttlMs: number,
    nowMs: number,
  ): Promise<string> {
    if (keyHash === null) return defaultPlan;
    const cache = this.entries;
    const hit = cache.get(keyHash);
    if (hit !== undefined && hit.expiresAtMs > nowMs) return (await hit.plan) ?? defaultPlan;
    if (hit !== undefined) cache.delete(keyHash);
    // One KV read shared by concurrent requests of the same key. It never rejects: a failure reads as "no record".
    const plan = readPlan(accounts, keyHash).catch((error: unknown) => {
      cache.delete(keyHash);
      console.error(JSON.stringify({ event: "plan_lookup_failed", key: keyHash, error: String(error) }));
      return null;
    });
    if (ttlMs > 0) {
      if (cache.size >= MAX_ENTRIES) {
        const oldest = cache.keys().next();
        if (oldest.done !== true) cache.delete(oldest.value);
      }
      cache.set(keyHash, { expiresAtMs: nowMs + ttlMs, plan });
    }
    return (await plan) ?? defaultPlan;
  }
}

async function readPlan(accounts: KVNamespace, keyHash: string): Promise<string | null> {
  const text = await accounts.get(keyHash, "text");
  return text === null ? null : parseAccount(text, keyHash);
}

/** The plan named by a stored record, or `null` when the record is not `{ "plan": "<non-empty string>" }`. */
export function parseAccount(text: string, keyHash: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    console.warn(JSON.stringify({ event: "bad_account_record", key: keyHash, error: String(error) }));
    return null;
  }
  if (typeof value === "object" && value !== null && "plan" in value) {
    const plan = (value as { plan: unknown }).plan;
    if (typeof plan === "string" && plan.length > 0) return plan;
  }
  console.warn(JSON.stringify({ event: "bad_account_record", key: keyHash, error: "no string `plan` field" }));
  return null;
}
