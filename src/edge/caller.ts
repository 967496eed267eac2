/**
 * The "who is calling" step of the request path: the hashes of the identities the request carries (never the raw
 * values past this point), the caller's plan, and whether its API key is verified.
 *
 * An API key is verified when it has an account record. A caller without one (an unknown key, or no key) is not an
 * identity of its own: it gets the default plan, and `identity: api_key` rules count it by its client address
 * (IPv6 grouped by prefix, as for `ip` rules) unless the rule's `unverified` says otherwise (match.ts). Made-up keys
 * therefore all land in their sender's one budget, and cost at most `KEY_LOOKUPS_PER_MIN` KV reads per address per
 * minute (key_lookups.ts).
 *
 * Refused before anything is counted (`CallerRefusal`): a request naming two identities of a kind (identity.ts, 400),
 * and a key this isolate cannot look up because its address spent its lookups (429 of type
 * `KEY_LOOKUPS_EXHAUSTED_TYPE` with Retry-After): counted as unverified, a real key would be counted more leniently
 * than itself. A known key due for a refresh keeps its last record instead of waiting.
 */

import { type Account, PLAN_LOOKUP_BUDGET_MS } from "../isolate/account_cache.ts";
import type { Isolate } from "../isolate/isolate.ts";
import { identitiesOf } from "../request/identity.ts";
import { type CompiledRule, countsByApiKey, matchesRoute, type RouteFacts } from "../request/match.ts";
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

/** The problem type of a request refused because its address spent its key lookups (429). */
export const KEY_LOOKUPS_EXHAUSTED_TYPE = "tag:sluice.dev,2026:key-lookups-exhausted";

/** A request refused while finding out who calls: the response to send, nothing counted. */
export interface CallerRefusal {
  readonly refused: {
    readonly status: 400 | 429;
    readonly body: Record<string, unknown>;
    readonly headers: [string, string][];
  };
}

/**
 * The text an unverified caller's address is hashed from: never equal to an API key's text (`:` is not in a key), so
 * an address's bucket and a key's bucket in one rule are different objects.
 */
export function unverifiedKeyText(address: string): string {
  return `unverified:${address}`;
}

const NO_OVERRIDES: ReadonlyMap<string, CompiledRule> = new Map();

/** No identity hashed: no rule's route takes the request, so no rule can count it whoever calls. */
const NOBODY = { api_key: null, ip: null, user: null } as const;

/**
 * Who calls. Only what a rule the request's route reaches can use is hashed (a SHA-256 or HMAC each): nothing when
 * no rule's route takes the request and it names no API key (an API key still gives the plan, which is forwarded),
 * and the address's unverified-caller hash only for a rule that counts by API key.
 */
export async function whoIsCalling(
  request: Request,
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
  route: RouteFacts,
): Promise<Caller | CallerRefusal> {
  const read = identitiesOf(request.headers, settings, new URL(request.url).searchParams);
  if (!read.ok) {
    const body = {
      type: "about:blank",
      title: "Bad Request",
      status: 400,
      detail: read.detail,
      error: "two_identities",
    };
    return { refused: { status: 400, body, headers: [] } };
  }
  const ids = read.ids;
  const reached = rules.filter((rule) => matchesRoute(rule, route));
  if (reached.length === 0 && ids.api_key === null) {
    return { keyHashes: NOBODY, plan: settings.defaultPlan, overrides: NO_OVERRIDES, unverified: { keyHash: null } };
  }
  const secret = settings.keyHashSecret;
  const hashOf = (v: string | null) => (v === null ? Promise.resolve(null) : keyHashOf(secret, v));
  const [apiKey, ip, user, account] = await Promise.all([
    hashOf(ids.api_key),
    hashOf(ids.ip),
    hashOf(ids.user),
    accountOf(ids.api_key, ids.ip, env, settings, isolate, rules),
  ]);
  if (typeof account === "number") return lookupsExhausted(account);
  if (account !== null) {
    const { plan, overrides } = account;
    return { keyHashes: { api_key: apiKey, ip, user }, plan, overrides, unverified: null };
  }
  const byKey = reached.some((rule) => countsByApiKey(rule.rule));
  const address = ids.ip === null || !byKey ? null : await keyHashOf(secret, unverifiedKeyText(ids.ip));
  return {
    keyHashes: { api_key: null, ip, user },
    plan: settings.defaultPlan,
    overrides: NO_OVERRIDES,
    unverified: { keyHash: address },
  };
}

function lookupsExhausted(retryAfterMs: number): CallerRefusal {
  const retryAfterS = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const body = {
    type: KEY_LOOKUPS_EXHAUSTED_TYPE,
    title: "Too Many Key Lookups",
    status: 429,
    detail:
      "This client address sent more API keys this isolate does not know than it may look up per minute " +
      "(KEY_LOOKUPS_PER_MIN); retry after Retry-After seconds.",
    retry_after_ms: retryAfterMs,
  };
  return { refused: { status: 429, body, headers: [["Retry-After", String(retryAfterS)]] } };
}

/**
 * The key's account, `null` when the key is absent or unknown, or the ms until its address may look a key up again
 * (its lookups are spent and this isolate holds no record of the key).
 */
async function accountOf(
  key: string | null,
  address: string | null,
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
): Promise<Account | null | number> {
  if (key === null) return null;
  // The account record is keyed by the plain SHA-256 of the API key, whatever KEY_HASH_SECRET says.
  const accountKey = await sha256Hex(key);
  const { stats, accounts, keyLookups } = isolate;
  const nowMs = isolate.clock();
  if (accounts.cached(accountKey, rules, nowMs)) stats.plan_cache_hits++;
  else {
    const waitMs = keyLookups.take(address ?? "", settings.keyLookupsPerMin, nowMs);
    if (waitMs !== null) {
      stats.key_lookups_refused++;
      return accounts.lastKnown(accountKey, rules) ?? waitMs;
    }
    stats.kv_reads++;
  }
  const budgetMs = settings.limiterTimeoutMs ?? PLAN_LOOKUP_BUDGET_MS;
  return accounts.accountFor(env.ACCOUNTS, accountKey, rules, settings.planCacheTtlMs, nowMs, isolate.sleep, budgetMs);
}
