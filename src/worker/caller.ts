/**
 * The "who is calling" step of the request path: the hashes of the identities the request carries (never the raw
 * values past this point) and the caller's plan.
 */
import type { Identity } from "../rules/types.ts";
import { keyHashOf, sha256Hex } from "./hash.ts";
import { identitiesOf } from "./identity.ts";
import type { Isolate } from "./isolate.ts";
import type { CompiledRule } from "./match.ts";
import { PLAN_LOOKUP_BUDGET_MS } from "./plan.ts";
import type { Env, Settings } from "./settings.ts";

export interface Caller {
  /** The hash of each identity the request carries (see hash.ts), `null` when absent. */
  readonly keyHashes: { readonly [K in Identity]: string | null };
  readonly plan: string;
  /** The account's own parameters for some rules (per-account overrides), by rule id. */
  readonly overrides: ReadonlyMap<string, CompiledRule>;
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
  // The account record is keyed by the plain SHA-256 of the API key, whatever KEY_HASH_SECRET says.
  const accountKeyOf = (v: string | null) => (v === null || secret === null ? Promise.resolve(null) : sha256Hex(v));
  const [apiKey, ip, user, accountKey] = await Promise.all([
    hashOf(ids.api_key),
    hashOf(ids.ip),
    hashOf(ids.user),
    accountKeyOf(ids.api_key),
  ]);
  const account = await isolate.plans.accountFor(
    env.ACCOUNTS,
    secret === null ? apiKey : accountKey,
    rules,
    settings.planCacheTtlMs,
    isolate.clock(),
    isolate.sleep,
    settings.limiterTimeoutMs ?? PLAN_LOOKUP_BUDGET_MS,
  );
  return {
    keyHashes: { api_key: apiKey, ip, user },
    plan: account?.plan ?? settings.defaultPlan,
    overrides: account?.overrides ?? NO_OVERRIDES,
  };
}
