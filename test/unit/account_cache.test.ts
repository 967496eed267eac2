/** The account cache keeps known accounts apart from misses: a flood of made-up keys never evicts a real account. */
import { describe, expect, it } from "vitest";
import { AccountCache } from "../../src/isolate/account_cache.ts";
import type { CompiledRule } from "../../src/request/match.ts";

const RULES: readonly CompiledRule[] = [];
/** A lookup budget that never runs out: these tests are about what is cached. */
const NEVER = () => new Promise<void>(() => {});

function fakeKv(records: Map<string, string>): { kv: KVNamespace; reads: () => number } {
  let reads = 0;
  const kv = {
    get: async (key: string) => {
      reads += 1;
      return records.get(key) ?? null;
    },
  } as unknown as KVNamespace;
  return { kv, reads: () => reads };
}

describe("AccountCache", () => {
  it("20,000 misses do not evict 10 known accounts; the misses stay bounded", async () => {
    const records = new Map(Array.from({ length: 10 }, (_, i) => [`known-${i}`, JSON.stringify({ plan: "growth" })]));
    const { kv, reads } = fakeKv(records);
    const cache = new AccountCache();
    for (const key of records.keys())
      expect((await cache.accountFor(kv, key, RULES, 30_000, 0, NEVER))?.plan ?? null).toBe("growth");
    for (let i = 0; i < 20_000; i++)
      expect((await cache.accountFor(kv, `made-up-${i}`, RULES, 30_000, 1, NEVER))?.plan ?? null).toBeNull();
    const before = reads();
    for (const key of records.keys()) {
      expect(cache.cached(key, RULES, 2)).toBe(true);
      expect((await cache.accountFor(kv, key, RULES, 30_000, 2, NEVER))?.plan ?? null).toBe("growth");
    }
    expect(reads()).toBe(before);
    // The oldest misses were evicted (bounded), the newest are still cached.
    expect(cache.cached("made-up-0", RULES, 2)).toBe(false);
    expect(cache.cached("made-up-19999", RULES, 2)).toBe(true);
  });

  it("entries expire after the TTL; a TTL of 0 caches nothing", async () => {
    const { kv, reads } = fakeKv(new Map([["k", JSON.stringify({ plan: "scale" })]]));
    const cache = new AccountCache();
    (await cache.accountFor(kv, "k", RULES, 1000, 0, NEVER))?.plan ?? null;
    expect(cache.cached("k", RULES, 999)).toBe(true);
    expect(cache.cached("k", RULES, 1000)).toBe(false);
    const none = new AccountCache();
    await none.accountFor(kv, "k", RULES, 0, 0, NEVER);
    expect(none.cached("k", RULES, 0)).toBe(false);
    expect(reads()).toBe(2);
  });
});
