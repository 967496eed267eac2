/**
 * Plans. An API key's account record lives in the `ACCOUNTS` KV namespace under the SHA-256 hex of the key (the raw
 * key is never stored), as JSON `{ "plan": "growth", "limits": {...} }` (the format: src/rules/account.ts). Records
 * are cached in the isolate for `planCacheTtlMs`, misses too, so an unknown key costs one KV read per isolate per
 * TTL. Callers without a key, with an unknown key, or with a malformed record get the default plan. A KV failure also
 * answers the default plan (logged, not cached): limiting by the default plan beats failing the request.
 *
 * A record's `limits` (per-account overrides) are checked against the deployed rules once per read, by the rule-file
 * validator: each valid one becomes that rule compiled with the account's parameters; an invalid one is logged
 * (`bad_override`) and the rule's own parameters apply.
 */
import { readAccount } from "../rules/account.ts";
import { type CompiledRule, compileOverride } from "./match.ts";

/** A caller's account as the gateway uses it. */
export interface Account {
  readonly plan: string;
  /** Rule id -> the rule compiled with this account's own parameters. */
  readonly overrides: ReadonlyMap<string, CompiledRule>;
}

interface CacheEntry {
  readonly expiresAtMs: number;
  /** The rules the record was read against (a test may run one isolate with several rule sets). */
  readonly rules: readonly CompiledRule[];
  readonly account: Promise<Account | null>;
}

/** Bounded so a flood of random keys cannot grow the isolate's memory without limit. */
const MAX_ENTRIES = 10_000;

/** One isolate's account records (and their absence), keyed by the SHA-256 hex of the API key. */
export class PlanCache {
  private readonly entries = new Map<string, CacheEntry>();

  /** A caller's account, `null` without a (valid) record. `keyHash` is the SHA-256 hex of the API key. */
  async accountFor(
    accounts: KVNamespace,
    keyHash: string | null,
    rules: readonly CompiledRule[],
    ttlMs: number,
    nowMs: number,
  ): Promise<Account | null> {
    if (keyHash === null) return null;
    const cache = this.entries;
    const hit = cache.get(keyHash);
    if (hit !== undefined && hit.expiresAtMs > nowMs && hit.rules === rules) return hit.account;
    if (hit !== undefined) cache.delete(keyHash);
    // One KV read shared by concurrent requests of the same key. It never rejects: a failure reads as "no record".
    const account = readRecord(accounts, keyHash, rules).catch((error: unknown) => {
      cache.delete(keyHash);
      console.error(JSON.stringify({ event: "plan_lookup_failed", key: keyHash, error: String(error) }));
      return null;
    });
    if (ttlMs > 0) {
      if (cache.size >= MAX_ENTRIES) {
        const oldest = cache.keys().next();
        if (oldest.done !== true) cache.delete(oldest.value);
      }
      cache.set(keyHash, { expiresAtMs: nowMs + ttlMs, rules, account });
    }
    return account;
  }
}

async function readRecord(
  accounts: KVNamespace,
  keyHash: string,
  rules: readonly CompiledRule[],
): Promise<Account | null> {
  const text = await accounts.get(keyHash, "text");
  return text === null ? null : parseAccount(text, keyHash, rules);
}

/**
 * A stored record read against `rules`: `null` (logged) when it names no valid plan; else its plan and its valid
 * overrides, each invalid override logged with the validator's messages (`<key hash>: <rule id>.<field>: ...`).
 */
export function parseAccount(text: string, keyHash: string, rules: readonly CompiledRule[]): Account | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    console.warn(JSON.stringify({ event: "bad_account_record", key: keyHash, error: String(error) }));
    return null;
  }
  const { account, recordErrors, limitErrors } = readAccount(
    value,
    rules.map((c) => c.rule),
    keyHash,
  );
  if (account.plan === null) {
    console.warn(JSON.stringify({ event: "bad_account_record", key: keyHash, error: recordErrors.join("; ") }));
    return null;
  }
  if (limitErrors.length > 0) {
    console.warn(JSON.stringify({ event: "bad_override", key: keyHash, errors: limitErrors }));
  }
  const overrides = new Map<string, CompiledRule>();
  for (const [ruleId, params] of account.limits) {
    const compiled = rules.find((c) => c.rule.id === ruleId);
    if (compiled !== undefined) overrides.set(ruleId, compileOverride(compiled, params));
  }
  return { plan: account.plan, overrides };
}
