/**
 * Every structure an isolate keeps between requests is bounded, and says so: flooded in process (a botnet rotating API
 * keys or addresses: a million distinct keys; the asynchronous account cache 200,000 and the coalescer's keys 50,000, as
 * each of their requests is a chain of promises; 200,000 requests waiting for one key), each stays within its bound
 * and keeps the most recent keys. The bounds: the blocked-key
 * cache (`BLOCKED_CACHE_MAX_ENTRIES`), the account cache (`ACCOUNT_CACHE_MAX_ENTRIES`), each `scope: local` rule's store
 * (`MAX_KEYS`), the account lookups per client address (`KEY_LOOKUPS_MAX_ADDRESSES`), the ring of recent denials
 * (`RECENT_DENIALS_MAX`), and the coalescer: the keys it tracks (`COALESCE_MAX_KEYS`) and the requests waiting for one
 * key (`COALESCE_MAX_WAITING`; one more is refused at once, as an overloaded object's request is: never by its rule's
 * `on_error`, so a flood is never admitted uncounted). (The Isolate's other members are counters, a clock and a sleeper.)
 */
import { describe, expect, it } from "vitest";
import { ask } from "../../src/edge/ask.ts";
import { type Env, parseSettings } from "../../src/edge/settings.ts";
import { ACCOUNT_CACHE_MAX_ENTRIES, AccountCache } from "../../src/isolate/account_cache.ts";
import { BLOCKED_CACHE_MAX_ENTRIES, BlockedCache } from "../../src/isolate/blocked_cache.ts";
import {
  type Asked,
  COALESCE_MAX_KEYS,
  COALESCE_MAX_WAITING,
  type CoalesceCounters,
  Coalescer,
} from "../../src/isolate/coalesce.ts";
import { createIsolate, type Isolate } from "../../src/isolate/isolate.ts";
import { KEY_LOOKUPS_MAX_ADDRESSES, KeyLookups } from "../../src/isolate/key_lookups.ts";
import { LocalScope } from "../../src/isolate/local_scope.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import { RECENT_DENIALS_MAX, RecentDenials } from "../../src/isolate/recent_denials.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import { type CallInput, type CallResult, callRecord, type LimiterRecord } from "../../src/protocol/store.ts";
import { type CompiledRule, compileRules } from "../../src/request/match.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { fixedWindow, gcraP } from "../support/params.ts";

const FLOOD = 1_000_000;
const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const keyOf = (i: number) => `k${i.toString(36)}`;

describe("isolate structures under a flood of a million distinct keys", () => {
  it("the isolate is made of these bounded structures", () => {
    const isolate = createIsolate({ clock: () => T0, sleep: () => new Promise(() => {}) });
    expect(isolate.blocked).toBeInstanceOf(BlockedCache);
    expect(isolate.accounts).toBeInstanceOf(AccountCache);
    expect(isolate.local).toBeInstanceOf(LocalScope);
    expect(isolate.keyLookups).toBeInstanceOf(KeyLookups);
    expect(isolate.denials).toBeInstanceOf(RecentDenials);
    expect(isolate.calls).toBeInstanceOf(Coalescer);
  });

  it(`the account lookups per address stay within ${KEY_LOOKUPS_MAX_ADDRESSES} addresses, the most recent kept`, () => {
    const lookups = new KeyLookups();
    let largest = 0;
    let refused = 0;
    for (let i = 0; i < FLOOD; i++) {
      if (lookups.take(keyOf(i), 1, T0) !== null) refused++; // each new address has its one lookup
      if ((i & 0xfff) === 0 && lookups.size > largest) largest = lookups.size;
    }
    expect(refused).toBe(0);
    expect(Math.max(largest, lookups.size)).toBeLessThanOrEqual(KEY_LOOKUPS_MAX_ADDRESSES);
    expect(lookups.size).toBe(KEY_LOOKUPS_MAX_ADDRESSES);
    expect(lookups.take(keyOf(FLOOD - 1), 1, T0)).toBe(60_000); // remembered: its budget is spent for a minute
    expect(lookups.take(keyOf(0), 1, T0)).toBeNull(); // long forgotten: fresh again
  });

  it(`the ring of recent denials keeps the last ${RECENT_DENIALS_MAX}`, () => {
    const ring = new RecentDenials();
    const flood = 200_000; // a ring of fixed size: 2,000 times round it is plenty
    for (let i = 0; i < flood; i++)
      ring.record({ atMs: T0 + i, rule: "r", key: keyOf(i), retryAfterMs: 1000, source: "object" });
    const keys = ring.list().map((d) => d.key);
    expect(keys).toHaveLength(RECENT_DENIALS_MAX);
    expect(keys).toContain(keyOf(flood - 1));
    expect(keys).not.toContain(keyOf(flood - 1 - RECENT_DENIALS_MAX));
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
  it(`the account cache stays within ${ACCOUNT_CACHE_MAX_ENTRIES} entries, the most recent kept`, async () => {
    const flood = 200_000;
    const plans = new AccountCache();
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
    expect(largest).toBe(ACCOUNT_CACHE_MAX_ENTRIES);
    expect(plans.size).toBeGreaterThan(ACCOUNT_CACHE_MAX_ENTRIES * 0.9);
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

/** Objects deciding each batch with the real store (`callRecord`); their calls can be held (a hung object). */
function objects(params = fixedWindow(100, 60_000)) {
  const records = new Map<string, LimiterRecord | null>();
  const held: (() => void)[] = [];
  const calls: CallInput[] = [];
  let hold = false;
  const decide = (name: string, input: CallInput): CallResult => {
    const { result, record } = callRecord(records.get(name) ?? null, input, T0);
    records.set(name, record);
    return result;
  };
  const transport: ObjectTransport = {
    call: (name, input) => {
      calls.push(input);
      if (!hold) return Promise.resolve(decide(name, input));
      return new Promise((resolve) => held.push(() => resolve(decide(name, input))));
    },
    refund: async () => null,
  };
  return {
    transport,
    rule: { id: "flood", params },
    calls,
    hold: (on: boolean) => {
      hold = on;
    },
    release: () => {
      for (const answer of held.splice(0)) answer();
    },
  };
}

const counters = (): CoalesceCounters => newStats();
/** A budget that never runs out: the flood, not a timeout, is what is tested. */
const never = () => new Promise<void>(() => {});
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("the coalescer under a flood", () => {
  it(`keeps at most ${COALESCE_MAX_WAITING} requests waiting for one key; the rest are refused at once`, async () => {
    const o = objects();
    const stats = counters();
    let id = 0;
    const calls = new Coalescer({ clock: () => T0, sleep: never, counters: stats, newId: () => `c${id++}` });
    const one = () =>
      calls.ask({ transport: o.transport, name: "flood:k", rule: o.rule, cost: 1, timeoutMs: 250, lease: null });
    o.hold(true); // the object hangs: nothing that waits is answered until it is released
    const leader = one();
    await settle();
    expect(o.calls).toHaveLength(1); // the first request's call is in flight
    const waiting: Promise<Asked>[] = [];
    for (let i = 0; i < COALESCE_MAX_WAITING; i++) waiting.push(one());
    expect(calls.size).toEqual({ keys: 1, waiting: COALESCE_MAX_WAITING });
    // 200,000 more on the same key while the call hangs: each is answered at once, none is queued.
    let refused = 0;
    const chunk = 10_000;
    const flood = 200_000; // 200 times the bound; each refusal is a few promises, so this keeps the test to seconds
    for (let start = 0; start < flood; start += chunk) {
      const got = await Promise.all(Array.from({ length: chunk }, one));
      for (const a of got) {
        if (a.kind === "answered" && a.result.ok && !a.result.decision.allowed && a.attempts === 0) refused++;
      }
      expect(calls.size.waiting).toBe(COALESCE_MAX_WAITING);
    }
    expect(refused).toBe(flood);
    expect(stats.queue_overflows).toBe(flood);
    expect(o.calls).toHaveLength(1); // the refused requests cost the object nothing
    // Released: the waiting requests go in one call and each gets its own decision (100 allowed in all: the limit).
    o.hold(false);
    o.release();
    const answers = await Promise.all([leader, ...waiting]);
    expect(o.calls.map((c) => c.costs.length)).toEqual([1, COALESCE_MAX_WAITING]);
    expect(answers.filter((a) => a.kind === "answered")).toHaveLength(1 + COALESCE_MAX_WAITING);
    expect(answers.filter((a) => a.kind === "answered" && a.result.ok && a.result.decision.allowed)).toHaveLength(100);
    expect(calls.size).toEqual({ keys: 1, waiting: 0 });
  });

  it("refuses each request beyond the bound whatever its rule's on_error: a flood is never admitted uncounted", async () => {
    const { rules, errors } = parseRules(
      [
        "- id: open-rule\n  match: { identity: ip }\n  algorithm: fixed_window\n  limit: 100\n  window: min\n",
        "- id: closed-rule\n  match: { identity: ip }\n  algorithm: fixed_window\n  limit: 100\n  window: min\n  on_error: closed\n",
      ].join(""),
      "flood.yaml",
    );
    expect(errors).toEqual([]);
    const o = objects();
    const namespace = {
      idFromName: (name: string) => name,
      get: (name: string) => ({ check: (input: CallInput) => o.transport.call(name, input), refund: async () => null }),
    };
    const stats = newStats();
    const isolate: Isolate = {
      ...createIsolate({ clock: () => T0, sleep: never }),
      stats,
      calls: new Coalescer({ clock: () => T0, sleep: never, counters: stats, newId: () => crypto.randomUUID() }),
    };
    const cx = { env: { LIMITER: namespace } as unknown as Env, settings: parseSettings({} as never), isolate };
    const compiled = compileRules(rules);
    expect(compiled.map((c) => c.rule.onError)).toEqual(["open", "closed"]);
    for (const rule of compiled) {
      const app = { compiled: rule, keyHash: "k", cost: 1 };
      o.hold(true);
      const leader = ask(cx, app, null);
      await settle(); // its call is in flight, and hangs
      const queued = [leader, ...Array.from({ length: COALESCE_MAX_WAITING }, () => ask(cx, app, null))];
      const refused = await Promise.all(Array.from({ length: 3 }, () => ask(cx, app, null)));
      for (const outcome of refused) {
        expect(outcome).toMatchObject({ kind: "decided", source: "lease", decision: { allowed: false } });
      }
      o.hold(false);
      o.release();
      const answered = await Promise.all(queued);
      expect(answered.filter((a) => a.kind === "decided")).toHaveLength(COALESCE_MAX_WAITING + 1);
    }
    expect(stats.queue_overflows).toBe(6);
  });

  it(`tracks at most ${COALESCE_MAX_KEYS} keys`, async () => {
    const o = objects(gcraP(1, 60_000, 1));
    const stats = counters();
    let id = 0;
    const calls = new Coalescer({ clock: () => T0, sleep: never, counters: stats, newId: () => `c${id++}` });
    const flood = 50_000; // each request is a call (a dozen promises): 5 times the bound keeps this to seconds
    let largest = 0;
    for (let start = 0; start < flood; start += 1_000) {
      await Promise.all(
        Array.from({ length: 1_000 }, (_, j) =>
          calls.ask({
            transport: o.transport,
            name: keyOf(start + j),
            rule: o.rule,
            cost: 1,
            timeoutMs: 250,
            lease: null,
          }),
        ),
      );
      largest = Math.max(largest, calls.size.keys);
    }
    expect(stats.object_calls).toBe(flood);
    expect(largest).toBeLessThanOrEqual(COALESCE_MAX_KEYS);
    expect(calls.size).toEqual({ keys: COALESCE_MAX_KEYS, waiting: 0 });
  });
});
