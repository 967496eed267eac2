/**
 * The account cache: which pricing plan (and which per-account overrides) an API key has. An API key's account record lives in the `ACCOUNTS` KV namespace under the SHA-256 hex of the key (the raw
 * key is never stored), as JSON `{ "plan": "growth", "limits": {...} }` (the format: src/rules/account.ts). Records
 * are cached in the isolate for `planCacheTtlMs`, misses too, so an unknown key costs one KV read per isolate per
 * TTL, and at most `KEY_LOOKUPS_PER_MIN` reads per client address per minute (caller.ts). Known accounts and misses
 * are kept apart, so a flood of made-up keys never evicts a real account. Callers without a key, with an unknown key,
 * or with a malformed record are unverified (the default plan, counted by their address). A KV failure also
 * answers the default plan (logged, not cached), and so does a read that takes longer than `PLAN_LOOKUP_BUDGET_MS`
 * (logged; the read goes on and is cached for the next request): limiting by the default plan beats failing the
 * request, and beats holding it for as long as KV does.
 *
 * A record's `limits` (per-account overrides) are checked against the deployed rules once per read, by the rule-file
 * validator: each valid one becomes that rule compiled with the account's parameters; an invalid one is logged
 * (`bad_override`) and the rule's own parameters apply.
 */

import { type CompiledRule, compileOverride } from "../request/match.ts";
import { readAccount } from "../rules/account.ts";
import { makeRoom } from "./bounded.ts";
import type { Sleep } from "./time.ts";

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
  /** The answer once the read has settled (`undefined` while it has not). */
  settled?: Account | null;
}

/** Entries kept per isolate at most, the oldest dropped first (bounded.ts): a flood of new keys cannot grow memory. */
export const ACCOUNT_CACHE_MAX_ENTRIES = 10_000;

/**
 * How long a request waits for its account record before it is limited by the default plan instead, ms, unless
 * `LIMITER_TIMEOUT_MS` says otherwise (it bounds every wait on Sluice's own dependencies).
 */
export const PLAN_LOOKUP_BUDGET_MS = 1_000;

const SLOW = Symbol("slow");

/**
 * One isolate's account records (and their absence), keyed by the SHA-256 hex of the API key. Known accounts and
 * misses (no record, or a read still running) are kept in two maps, each bounded on its own: a flood of made-up keys
 * fills the misses and never pushes a real account out.
 */
export class AccountCache {
  private readonly known = new Map<string, CacheEntry>();
  private readonly misses = new Map<string, CacheEntry>();

  constructor(private readonly maxEntries: number = ACCOUNT_CACHE_MAX_ENTRIES) {}

  /** Records (and pending reads) held now; never more than twice the bound. */
  get size(): number {
    return this.known.size + this.misses.size;
  }

  /** Whether `keyHash` is answered from the cache at `nowMs` for `rules` (no KV read). */
  cached(keyHash: string, rules: readonly CompiledRule[], nowMs: number): boolean {
    const hit = this.known.get(keyHash) ?? this.misses.get(keyHash);
    return hit !== undefined && hit.expiresAtMs > nowMs && hit.rules === rules;
  }

  /**
   * The last record read for a known account (`keyHash` has an account record), even when it is due for a refresh;
   * `null` when this isolate holds none for `rules`. The caller uses it when it may not read KV now (caller.ts): a
   * known key is never counted as unverified because its address spent its lookups.
   */
  lastKnown(keyHash: string, rules: readonly CompiledRule[]): Account | null {
    const hit = this.known.get(keyHash);
    return hit !== undefined && hit.rules === rules ? (hit.settled ?? null) : null;
  }

  /**
   * A caller's account, `null` without a (valid) record, or when the read takes longer than `budgetMs` on the
   * isolate's timer `sleep`. `keyHash` is the SHA-256 hex of the API key.
   */
  async accountFor(
    accounts: KVNamespace,
    keyHash: string | null,
    rules: readonly CompiledRule[],
    ttlMs: number,
    nowMs: number,
    sleep: Sleep,
    budgetMs: number = PLAN_LOOKUP_BUDGET_MS,
  ): Promise<Account | null> {
    if (keyHash === null) return null;
    const { known, misses } = this;
    const hit = known.get(keyHash) ?? misses.get(keyHash);
    if (hit !== undefined && hit.expiresAtMs > nowMs && hit.rules === rules) {
      return hit.settled !== undefined ? hit.settled : withinBudget(hit.account, keyHash, sleep, budgetMs);
    }
    known.delete(keyHash);
    misses.delete(keyHash);
    // One KV read shared by concurrent requests of the same key. It never rejects: a failure reads as "no record".
    const entry: CacheEntry = {
      expiresAtMs: nowMs + ttlMs,
      rules,
      account: readRecord(accounts, keyHash, rules).then(
        (account) => {
          entry.settled = account;
          if (account !== null && misses.get(keyHash) === entry) {
            misses.delete(keyHash);
            makeRoom(known, this.maxEntries);
            known.set(keyHash, entry);
          }
          return account;
        },
        (error: unknown) => {
          if (misses.get(keyHash) === entry) misses.delete(keyHash);
          console.error(JSON.stringify({ event: "plan_lookup_failed", key: keyHash, error: String(error) }));
          return null;
        },
      ),
    };
    if (ttlMs > 0) {
      makeRoom(misses, this.maxEntries);
      misses.set(keyHash, entry);
    }
    return withinBudget(entry.account, keyHash, sleep, budgetMs);
  }
}

/** The read's answer, or `null` (the default plan) when it takes longer than `budgetMs`. */
async function withinBudget(
  account: Promise<Account | null>,
  keyHash: string,
  sleep: Sleep,
  budgetMs: number,
): Promise<Account | null> {
  const answer = await Promise.race([account, sleep(budgetMs).then((): typeof SLOW => SLOW)]);
  if (answer !== SLOW) return answer;
  console.error(JSON.stringify({ event: "plan_lookup_slow", key: keyHash, budget_ms: budgetMs }));
  return null;
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
  const version = account.version ?? 0;
  for (const [ruleId, params] of account.limits) {
    const compiled = rules.find((c) => c.rule.id === ruleId);
    if (compiled !== undefined) overrides.set(ruleId, compileOverride(compiled, params, version));
  }
  // A versioned record stamps its version on the key's other rules too: an override it no longer has (removed) must
  // win over the one an isolate still caches, as a newer version.
  for (const compiled of rules) {
    if (version > compiled.version && compiled.rule.match.identity === "api_key" && !overrides.has(compiled.rule.id)) {
      overrides.set(compiled.rule.id, { ...compiled, version });
    }
  }
  return { plan: account.plan, overrides };
}
