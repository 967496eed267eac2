/**
 * The "who is calling" step of the request path: the hashes of the identities the request carries (never the raw
 * values past this point), the caller's plan, and whether its API key is verified.
 *
 * An API key is verified when it has an account record. A caller without one (an unknown key, or no key) is not an
 * identity of its own: it gets the default plan, and `identity: api_key` rules count it by its client address
 * (IPv6 grouped by prefix, as for `ip` rules) unless the rule's `unverified` says otherwise (match.ts). Made-up keys
 * therefore all land in their sender's one budget, and cost at most `KEY_LOOKUPS_PER_MIN` KV reads per address per
 * minute (key_lookups.ts).
 */

import type { Isolate } from "../isolate/isolate.ts";
import { type Account, PLAN_LOOKUP_BUDGET_MS } from "../isolate/plan_cache.ts";
import { identitiesOf } from "../request/identity.ts";
import type { CompiledRule } from "../request/match.ts";
import type { Identity } from "../rules/types.ts";
import { keyHashOf, sha256Hex } from "./hash.ts";
import type { Env, Settings } from "./settings.ts";

export interface Caller {
  /** The hash of each identity the request carries (see hash.ts), `null` when absent; `api_key` only if verified. */
  readonly keyHashes: { readonly [K in Identity]: string | null };
  readonly plan: string;
  /** The account's own parameters for some rules (per-account overrides), by rule id. */
  readonly overrides: ReadonlyMap<string, CompiledRule>;
  /** For a caller without a verified key: the hash it is counted by (`null` without an address); else `null`. */
  readonly unverified: { readonly keyHash: string | null } | null;
}

/**
 * The text an unverified caller's address is hashed from: never equal to an API key's text (`:` is not in a key), so
 * an address's bucket and a key's bucket in one rule are different objects.
 */
export function unverifiedKeyText(address: string): string {
  return `unverified:${address}`;
}

const NO_OVERRIDES: ReadonlyMap<string, CompiledRule> = new Map();

export async function whoIsCalling(
  request: Request,
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
): Promise<Caller> {
  const ids = identitiesOf(request.headers, settings);
  const secret = settings.keyHashSecret;
  const hashOf = (v: string | null) => (v === null ? Promise.resolve(null) : keyHashOf(secret, v));
  const [apiKey, ip, user, account] = await Promise.all([
    hashOf(ids.api_key),
    hashOf(ids.ip),
    hashOf(ids.user),
    accountOf(ids.api_key, ids.ip, env, settings, isolate, rules),
  ]);
  if (account !== null) {
    const { plan, overrides } = account;
    return { keyHashes: { api_key: apiKey, ip, user }, plan, overrides, unverified: null };
  }
  const address = ids.ip === null ? null : await keyHashOf(secret, unverifiedKeyText(ids.ip));
  return {
    keyHashes: { api_key: null, ip, user },
    plan: settings.defaultPlan,
    overrides: NO_OVERRIDES,
    unverified: { keyHash: address },
  };
}

/** The key's account, `null` when the key is absent, unknown, or its address used up its lookups. */
async function accountOf(
  key: string | null,
  address: string | null,
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
): Promise<Account | null> {
  if (key === null) return null;
  // The account record is keyed by the plain SHA-256 of the API key, whatever KEY_HASH_SECRET says.
  const accountKey = await sha256Hex(key);
  const { stats, plans, keyLookups } = isolate;
  const nowMs = isolate.clock();
  if (plans.cached(accountKey, rules, nowMs)) stats.plan_cache_hits++;
  else if (keyLookups.allow(address ?? "", settings.keyLookupsPerMin, nowMs)) stats.kv_reads++;
  else {
    stats.key_lookups_refused++;
    return null;
  }
  const budgetMs = settings.limiterTimeoutMs ?? PLAN_LOOKUP_BUDGET_MS;
  return plans.accountFor(env.ACCOUNTS, accountKey, rules, settings.planCacheTtlMs, nowMs, isolate.sleep, budgetMs);
}
