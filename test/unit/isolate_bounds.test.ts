/**
 * Every structure an isolate keeps between requests is bounded, and says so: flooded with a million distinct keys in
 * process (a botnet rotating API keys or addresses; the asynchronous plan cache with 200,000), each stays within its
 * bound and keeps the most recent keys. The
 * bounds: the blocked-key cache (`BLOCKED_CACHE_MAX_ENTRIES`), the plan cache (`PLAN_CACHE_MAX_ENTRIES`), and each
 * `scope: local` rule's store (`MAX_KEYS`). (The Isolate's other members are counters, a clock and a sleeper.)
 */
import { describe, expect, it } from "vitest";
import { parseRules } from "../../src/rules/yaml.ts";
import { BLOCKED_CACHE_MAX_ENTRIES, BlockedCache } from "../../src/worker/blocked_cache.ts";
import { createIsolate } from "../../src/worker/isolate.ts";
import { LocalScope } from "../../src/worker/local_scope.ts";
import { type CompiledRule, compileRules } from "../../src/worker/match.ts";
import { PLAN_CACHE_MAX_ENTRIES, PlanCache } from "../../src/worker/plan.ts";
import { gcraP } from "../support/params.ts";

const FLOOD = 1_000_000;
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const keyOf = (i: number) => `k${i.toString(36)}`;

describe("isolate structures under a flood of a million distinct keys", () => {
  it("the isolate is made of these bounded structures", () => {
    const isolate = createIsolate({ clock: () => T0, sleep: () => new Promise(() => {}) });
    expect(isolate.blocked).toBeInstanceOf(BlockedCache);
    expect(isolate.plans).toBeInstanceOf(PlanCache);
    expect(isolate.local).toBeInstanceOf(LocalScope);
  });

  it(`the blocked-key cache stays within ${BLOCKED_CACHE_MAX_ENTRIES} entries, the most recent kept`, () => {
    const cache = new BlockedCache();
    const params = gcraP(1, 60_000, 1);
    const denial = { allowed: false, remaining: 0, resetAfterMs: 60_000, retryAfterMs: 60_000, delayMs: 0 };
    let largest = 0;
    for (let i = 0; i < FLOOD; i++) {
      cache.remember(keyOf(i), "fp", params, 1, T0, denial);
      if (cache.size > largest) largest = cache.size;
    }
    expect(largest).toBe(BLOCKED_CACHE_MAX_ENTRIES);
    expect(cache.size).toBeGreaterThan(BLOCKED_CACHE_MAX_ENTRIES * 0.9); // the oldest sixteenth goes at once
    expect(cache.lookup(keyOf(FLOOD - 1), "fp", 1, T0 + 1)).not.toBeNull();
    expect(cache.lookup(keyOf(0), "fp", 1, T0 + 1)).toBeNull();
  });

  // Each lookup is a few promises: 200,000 keys (20 times the bound) keep this test to seconds on a shared machine.
  it(`the plan cache stays within ${PLAN_CACHE_MAX_ENTRIES} entries, the most recent kept`, async () => {
    const flood = 200_000;
    const plans = new PlanCache();
    let reads = 0;
    const accounts = {
      get: async () => {
        reads++;
        return null; // no account record: the default plan, cached like a record
      },
    } as unknown as KVNamespace;
    const sleep = () => new Promise<void>(() => {}); // the lookup budget never runs out here
    const noRules: readonly CompiledRule[] = []; // records are cached per rule set
    let largest = 0;
    const batch = 1_000;
    for (let start = 0; start < flood; start += batch) {
      await Promise.all(
        Array.from({ length: batch }, (_, j) =>
          plans.accountFor(accounts, keyOf(start + j), noRules, 30_000, T0, sleep),
        ),
      );
      if (plans.size > largest) largest = plans.size;
    }
    expect(reads).toBe(flood);
    expect(largest).toBe(PLAN_CACHE_MAX_ENTRIES);
    expect(plans.size).toBeGreaterThan(PLAN_CACHE_MAX_ENTRIES * 0.9);
    await plans.accountFor(accounts, keyOf(flood - 1), noRules, 30_000, T0, sleep);
    expect(reads).toBe(flood); // still cached
    await plans.accountFor(accounts, keyOf(0), noRules, 30_000, T0, sleep);
    expect(reads).toBe(flood + 1); // long evicted
  });

  it("a scope: local rule's store stays at MAX_KEYS, the most recent kept", () => {
    const { rules, errors } = parseRules(
      `- id: guard\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 1/min\n  burst: 1\n  scope: local\n`,
      "bounds.yaml",
    );
    expect(errors).toEqual([]);
    const [guard] = compileRules(rules);
    const local = new LocalScope();
    const maxKeys = 50_000;
    let largest = 0;
    for (let i = 0; i < FLOOD; i++) {
      local.check(guard!, maxKeys, keyOf(i), 1, T0);
      if ((i & 0xfff) === 0 && local.stats().keys > largest) largest = local.stats().keys;
    }
    expect(largest).toBeLessThanOrEqual(maxKeys);
    expect(local.stats()).toMatchObject({ keys: maxKeys, evictions: FLOOD - maxKeys });
    // The most recent key is still known (its one token spent), the first was evicted (fresh again).
    expect(local.check(guard!, maxKeys, keyOf(FLOOD - 1), 1, T0 + 1)).toMatchObject({ decision: { allowed: false } });
    expect(local.check(guard!, maxKeys, keyOf(0), 1, T0 + 1)).toMatchObject({ decision: { allowed: true } });
  });
});
