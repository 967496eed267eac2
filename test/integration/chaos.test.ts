/**
 * Chaos at load: hundreds of requests over a few keys, in waves of concurrent ones, while a share of the Durable Object calls throw
 * (`retryable`, `overloaded`, reset, a plain error), hang past the time budget, or lose their answer after the object
 * applied them (chaos.ts). Whatever happens:
 * - every outcome follows its rule's `on_error`: an `open` rule that failed is skipped (200 without its decision), a
 *   `closed` one answers 503 temporary-reduced-capacity naming only closed rules; nothing else is ever a 5xx;
 * - no key is admitted more than its limit;
 * - every request is charged at most once, and a request that is not admitted is charged nothing once its refunds,
 *   late answers included, have landed: what each object holds equals what the responses say it admitted, but for
 *   refunds carried by a call that a fault kept from the object (they ride with calls: the key is short that much);
 * - with the delegate tier on, a window share's holder may also hold units charged for it and not used yet, a rate
 *   share's the tokens its grant moved out of the direct slice, and a delegate refunds given to it for its next ask:
 *   never more than the key's object's book says its live shares were charged or moved, plus what its delegates'
 *   records keep to give back, and all given back once their terms end.
 * Time is frozen (`Date`) and the time budget runs out when the held calls are the only ones left (ChaosClock).
 */
import {
  createExecutionContext,
  env,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { capacityOf } from "../../src/algorithms/index.ts";
import { sha256Hex } from "../../src/edge/hash.ts";
import { TEMPORARY_REDUCED_CAPACITY_TYPE } from "../../src/edge/refusals.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import type { SluiceLimiter } from "../../src/object/limiter.ts";
import { objectNameOf } from "../../src/object/names.ts";
import type { DelegateRecord } from "../../src/protocol/delegate.ts";
import type { LimiterRecord } from "../../src/protocol/store.ts";
import type { CompiledRule } from "../../src/request/match.ts";
import { ChaosClock, chaosNamespace, type Fault, seeded } from "./chaos.ts";
import { bearer, knownKey, limiterFor, req, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: chaos-closed
  match: { route: "GET /closed", identity: api_key }
  algorithm: fixed_window
  limit: 30
  window: h
  on_error: closed
- id: chaos-open
  match: { route: "GET /open", identity: api_key }
  algorithm: token_bucket
  rate: 1/h
  burst: 30
- id: pair-closed
  match: { route: "GET /pair", identity: api_key }
  algorithm: gcra
  rate: 1/h
  burst: 25
  on_error: closed
- id: pair-open
  match: { route: "GET /pair", identity: api_key }
  algorithm: sliding_log
  limit: 35
  window: h
`);
const ruleById = new Map(rules.map((c) => [c.rule.id, c]));
const ROUTES: Record<string, readonly string[]> = {
  "/closed": ["chaos-closed"],
  "/open": ["chaos-open"],
  "/pair": ["pair-closed", "pair-open"],
};

interface Sent {
  readonly path: string;
  readonly key: string;
  readonly status: number;
  readonly body: {
    readonly type?: string;
    readonly "violated-policies"?: string[];
    readonly decisions?: { rule: string; allowed?: boolean; error?: string }[];
  };
}

/** Concurrent requests per wave. */
const WAVE = 8;

/** Send `count` requests in concurrent waves, spread over `keys` and the routes in a seeded order, through a chaotic namespace. */
async function flood(
  keys: readonly string[],
  count: number,
  faults: readonly [Fault, number][],
  seed: number,
  tier = false,
) {
  setNow(T0);
  vi.spyOn(console, "error").mockImplementation(() => {});
  vi.spyOn(console, "log").mockImplementation(() => {});
  const random = seeded(seed);
  const clock = new ChaosClock();
  const pick = (): Fault | null => {
    let u = random();
    for (const [fault, share] of faults) {
      if (u < share) return fault;
      u -= share;
    }
    return null;
  };
  const { namespace, ledger } = chaosNamespace(env.LIMITER, pick, clock);
  // With the delegate tier (`tier`) or without. Its delegates call the key's objects around the chaotic namespace
  // (unseen by the ledger: no faults there, the tier's faults are tier.test.ts's) and hold window units charged for
  // their shares (`sharesOf`).
  const chaotic = { ...env, LIMITER: namespace, ...(tier ? {} : { DELEGATE: undefined }) };
  const isolate = createIsolate({ sleep: clock.sleep });
  const paths = Object.keys(ROUTES);
  const plan = Array.from({ length: count }, () => ({
    path: paths[Math.floor(random() * paths.length)]!,
    // Skewed: the first key gets half the requests and runs out; the last ones get few and never does (its late answers
    // admit, and must be given back when the request was refused).
    key: keys[Math.min(keys.length - 1, Math.floor(-Math.log2(1 - random())))]!,
  }));
  // In waves of WAVE concurrent requests: an isolate sends one call per key at a time and coalesces the requests that
  // arrive meanwhile (coalesce.ts), so one wave of hundreds would be only a few calls, and few faults.
  const one = async ({ path, key }: { path: string; key: string }): Promise<Sent> => {
    const ctx = createExecutionContext();
    const response = await handleRequest(req("GET", path, bearer(key)), chaotic, ctx, rules, isolate);
    const body = (await response.json()) as Sent["body"];
    await waitOnExecutionContext(ctx); // late refunds land here
    return { path, key, status: response.status, body };
  };
  const sent: Sent[] = [];
  const stop = clock.start();
  try {
    for (let i = 0; i < plan.length; i += WAVE) sent.push(...(await Promise.all(plan.slice(i, i + WAVE).map(one))));
    // Work the requests left running (a copy of a call whose outcome was unknown, held by a `hang`; a hot key's refund
    // waiting for its next call or `RETURN_WAIT_MS`) goes on as the clock turns: its sleeps end when nothing is in
    // flight, and held calls go then. A few dozen turns see it through, as the runtime's timers would.
    for (let turn = 0; turn < 50; turn++) await scheduler.wait(1);
  } finally {
    stop();
  }
  return { sent, ledger, isolateStats: isolate.stats };
}

/** What the key's object holds for the rule now: cost charged and not given back (time is frozen: nothing refills). */
async function chargedBy(rule: CompiledRule, key: string): Promise<number> {
  const peek = await (await limiterFor(rule.rule.id, key)).peek({ rule: { id: rule.rule.id, params: rule.params } });
  return capacityOf(rule.params) - peek.remaining;
}

/**
 * The key's object's stored record: units its book charged to live window shares and tokens their grants moved to live
 * rate shares (the most their delegates can still hold unused: they hold them until the share's term ends, which the
 * frozen clock never reaches), its holders, and the units their delegates' records keep to give back with their next
 * ask (`parked`: refunds an isolate sent a delegate; its alarm gives them back at the latest).
 */
async function sharesOf(
  rule: CompiledRule,
  key: string,
): Promise<{ held: number; moved: number; parked: number; holders: string[]; endsAtMs: number }> {
  const stub = await limiterFor(rule.rule.id, key);
  const record = await runInDurableObject(stub, (_instance: SluiceLimiter, state) =>
    state.storage.kv.get<LimiterRecord>("record"),
  );
  const entries = record?.shares?.entries ?? [];
  const holders = entries.map((e) => e.holder);
  let parked = 0;
  const name = objectNameOf(rule.rule.id, await sha256Hex(key));
  for (const holder of holders) {
    const d = env.DELEGATE!.get(env.DELEGATE!.idFromName(`${name}@${holder}`));
    const kept = await runInDurableObject(d, (_i: unknown, state) => state.storage.kv.get<DelegateRecord>("delegate"));
    parked += (kept?.giveBack ?? []).reduce((n, b) => n + b.units, 0);
  }
  return {
    held: entries.reduce((n, e) => n + e.units, 0),
    moved: entries.reduce((n, e) => n + (e.tokens ?? 0), 0),
    parked,
    holders,
    endsAtMs: Math.max(0, ...entries.map((e) => e.endsAtMs)),
  };
}

/**
 * Past the end of every share of (rule, key), run each holder's alarm (a window share's unused units go back then:
 * delegate.ts), and come back to the frozen time.
 */
async function endShares(rule: CompiledRule, key: string, holders: readonly string[], endsAtMs: number) {
  const name = objectNameOf(rule.rule.id, await sha256Hex(key));
  setNow(endsAtMs + 1);
  try {
    for (const holder of holders) {
      const stub = env.DELEGATE!.get(env.DELEGATE!.idFromName(`${name}@${holder}`));
      expect(await runDurableObjectAlarm(stub)).toBe(true);
    }
  } finally {
    setNow(T0);
  }
}

function expectOutcomesFollowOnError(sent: readonly Sent[]): void {
  for (const s of sent) {
    expect([200, 429, 503]).toContain(s.status);
    const ruleIds = ROUTES[s.path]!;
    if (s.status === 503) {
      expect(s.body.type).toBe(TEMPORARY_REDUCED_CAPACITY_TYPE);
      const violated = s.body["violated-policies"] ?? [];
      expect(violated.length).toBeGreaterThan(0);
      for (const id of violated) {
        expect(ruleIds).toContain(id);
        expect(ruleById.get(id)!.rule.onError).toBe("closed");
      }
    }
    if (s.status === 200) {
      // Every rule that applies either admitted the request, or failed and is `open`.
      expect(s.body.decisions?.map((d) => d.rule).sort()).toEqual([...ruleIds].sort());
      for (const d of s.body.decisions ?? []) {
        if (d.error !== undefined) {
          expect(d.error).toBe("fail_open");
          expect(ruleById.get(d.rule)!.rule.onError).toBe("open");
        } else expect(d.allowed).toBe(true);
      }
    }
  }
}

const admittedBy = (sent: readonly Sent[], ruleId: string, key: string) =>
  sent.filter((s) => s.key === key && s.status === 200 && s.body.decisions?.some((d) => d.rule === ruleId && d.allowed))
    .length;
const passed = (sent: readonly Sent[], path: string, key: string) =>
  sent.filter((s) => s.key === key && s.path === path && s.status === 200).length;

/**
 * 400 requests in concurrent waves over 4 keys, 35% of the key's objects' calls failing (`seed`: the faults' and the
 * requests' order; `tier`: with the delegate tier on): see the file's comment for what it checks.
 */
async function chaosAtLoad(seed: number, tier: boolean): Promise<void> {
  const keys = [
    await knownKey("sk_chaos"),
    await knownKey("sk_chaos"),
    await knownKey("sk_chaos"),
    await knownKey("sk_chaos"),
  ];
  const faults: [Fault, number][] = [
    ["retryable", 0.07],
    ["overloaded", 0.07],
    ["reset", 0.07],
    ["error", 0.07],
    ["hang", 0.07],
  ];
  const { sent, ledger, isolateStats } = await flood(keys, 400, faults, seed, tier);

  // The chaos happened: every kind of fault, late answers, admissions and denials.
  for (const [fault] of faults) expect(ledger.injected[fault]).toBeGreaterThan(0);
  expect(ledger.late).toBe(ledger.injected.hang);
  const statuses = new Set(sent.map((s) => s.status));
  expect(statuses.has(200) && statuses.has(429)).toBe(true);
  // And `on_error` was taken: a 503 (closed) or a fail-open. Either needs an error or a reset on a call with nothing
  // known to refuse from; since a timeout is a busy object's (refused from what the isolate knows, never on_error),
  // one of the two was missing in 3 of 7 runs on main (2026-12-04), so the run asks for one of them, not both.
  const failOpen = sent.some((s) => s.body.decisions?.some((d) => d.error === "fail_open"));
  expect(statuses.has(503) || failOpen).toBe(true);

  expectOutcomesFollowOnError(sent);
  for (const key of keys) {
    for (const rule of rules) {
      const limit = capacityOf(rule.params);
      const admitted = admittedBy(sent, rule.rule.id, key);
      expect(admitted).toBeLessThanOrEqual(limit);
      const charged = await chargedBy(rule, key);
      const path = Object.keys(ROUTES).find((p) => ROUTES[p]!.includes(rule.rule.id))!;
      const name = objectNameOf(rule.rule.id, await sha256Hex(key));
      const lost = ledger.applied.get(name)?.lostRefunds ?? 0;
      const seen = `${rule.rule.id} key ${keys.indexOf(key)}: charged ${charged}, passed ${passed(sent, path, key)}, admitted ${admitted}, lost ${lost}, ${JSON.stringify(ledger.applied.get(name))}`;
      // Every admitted request was admitted by this rule, once (closed); admitted with its decision: charged, admitted
      // while it failed: charged at most once, a late answer (open). Every other one was given back (late ones too),
      // unless the call carrying its refund failed before the object saw it; or, with the tier, its units are held
      // by a delegate's share (a window share's units, a rate share's tokens moved with its grant: not used yet),
      // never more than its charge in the book, or kept by its delegate to give back with its next ask. Once unknown
      // outcomes were sent again (`resendUnknown`), seed 38 made its key hot in most runs, and both showed: a rate
      // share's token (pair-closed key 0 charged 13, passed 8, lost 4, moved 1; 4 runs in 6) and a refund parked at
      // the delegate (charged 12, passed 8, lost 3, parked 1; 1 in 24; in 14 of another 24 runs parked 1 as well,
      // within the bound with it); each given back once the share ended.
      expect(charged, seen).toBeGreaterThanOrEqual(rule.rule.onError === "closed" ? passed(sent, path, key) : admitted);
      const { held, moved, parked, holders, endsAtMs } = await sharesOf(rule, key);
      if (!tier) expect(holders, seen).toEqual([]);
      if (charged > passed(sent, path, key) + lost + held + moved + parked) {
        // Enough to diagnose a failure (1 in about 50 runs of the tier-on cases under load, 2026-12-06): the key's
        // record, what each of its requests was answered, and the isolate's counters.
        const stub = await limiterFor(rule.rule.id, key);
        const record = await runInDurableObject(stub, (_i: SluiceLimiter, state) => state.storage.kv.get("record"));
        const answers = sent.filter((s) => s.key === key && s.path === path).map((s) => [s.status, s.body.decisions]);
        const more = JSON.stringify({ record, answers, stats: isolateStats });
        const also = `held ${held}, moved ${moved}, parked ${parked}`;
        expect.fail(`${seen}, ${also}: charged more than passed + lost + held + moved + parked; ${more}`);
      }
      if (holders.length > 0) {
        // Held, not lost: once the shares' terms end, their delegates give the units back.
        await endShares(rule, key, holders, endsAtMs);
        expect(await chargedBy(rule, key), `${seen}, shares ended`).toBeLessThanOrEqual(passed(sent, path, key) + lost);
      }
    }
  }
  // The late answers that admitted a request nobody was let through for were refunded.
  const refunds = [...ledger.applied.values()].reduce((n, c) => n + c.refunds, 0);
  expect(refunds).toBeGreaterThan(0);
}

describe("chaos at load", () => {
  // Deterministic without the delegate tier (flood): 45 seeds of this case, and whole-suite runs, all pass. With the
  // tier, two causes held more than admitted + lost refunds. (1) A hot key's call timed out (the delegate's calls are
  // not the ledger's, so the budget ends while they run), its requests were refused from what the isolate last knew,
  // and the delegate's pass-through admitted them late, never given back: a bug, fixed in coalesce_calls.ts `settle`
  // (coalesce.test.ts pins it; seed 14 showed it 3 times in 4, then 0 in 4). (2) A delegate's window share keeps the
  // units charged for it until its term ends, which a frozen clock never reaches (seeds 36, 38 of 45 after the fix:
  // chaos-closed charged 8, passed 5, lost 1, the share holding 3): held capacity, bounded by the share's charge and
  // given back at its term's end (the tier-on cases below check both). Short, never over. With the tier the runs are
  // not deterministic (the delegates' calls race the chaos) and keys here rarely get hot (100 calls a second at one
  // key's object, where a limit of 25-35 is spent first): 0-3 batches per run go to a delegate. In 10 runs of seeds 36
  // and 38 (2026-12-01) shares were out at the end in 4, holding units in 2 (seed 36: charged 12, passed 9, lost 1,
  // held 2; and 9, 6, 1, 3), which the old check (charged <= passed + lost) failed; each was given back at the end.
  it("400 requests in concurrent waves over 4 keys, 35% of object calls failing: on_error holds, no key over its limit, each request charged at most once", async () => {
    await chaosAtLoad(13, false);
  });

  for (const seed of [36, 38]) {
    it(`with the delegate tier on (seed ${seed}): the same, and units a share holds are given back at its term's end`, async () => {
      await chaosAtLoad(seed, true);
    });
  }

  it("a call whose answer is lost on both attempts is sent once more: a refused request's charge is given back, a passed one's stays", async () => {
    // A real limiter object behind a namespace that loses the answers of the first two sends of the second request's
    // call (the object applied them: a connection dropped on the way back, twice). The other rule (local: no call)
    // refuses the second request in one case and admits it in the other. Before the copy was sent (delegate_call.ts
    // `resendUnknown`), the refused request stayed charged.
    for (const otherLimit of [1, 2]) {
      const twoRules = rulesFrom(`
- id: lost-answers-${otherLimit}
  match: { route: "GET /twice", identity: api_key }
  algorithm: fixed_window
  limit: 10
  window: h
- id: local-gate-${otherLimit}
  match: { route: "GET /twice", identity: api_key }
  algorithm: fixed_window
  limit: ${otherLimit}
  window: h
  scope: local
`);
      const key = await knownKey("sk_twice");
      setNow(T0);
      vi.spyOn(console, "error").mockImplementation(() => {});
      vi.spyOn(console, "log").mockImplementation(() => {});
      const clock = new ChaosClock();
      let draws = 0;
      // The first request's call answered; the second's first two sends lost after being applied; its copy answered.
      const { namespace, ledger } = chaosNamespace(
        env.LIMITER,
        () => (++draws === 2 || draws === 3 ? "lost" : null),
        clock,
      );
      const isolate = createIsolate({ sleep: clock.sleep });
      const chaotic = { ...env, LIMITER: namespace, DELEGATE: undefined };
      const stop = clock.start();
      const statuses: number[] = [];
      try {
        for (let i = 0; i < 2; i++) {
          const ctx = createExecutionContext();
          const response = await handleRequest(req("GET", "/twice", bearer(key)), chaotic, ctx, twoRules, isolate);
          statuses.push(response.status);
          await response.arrayBuffer();
          await waitOnExecutionContext(ctx);
        }
      } finally {
        stop();
      }
      const rule = twoRules[0]!;
      const name = objectNameOf(rule.rule.id, await sha256Hex(key));
      // Sends: the first request's, the second's two lost and its copy, and (refused) its refund in a call of its own.
      expect([otherLimit, draws, ledger.injected.lost]).toEqual([otherLimit, otherLimit === 1 ? 5 : 4, 2]);
      expect([ledger.answeredLate(name), ledger.applied.get(name)?.refunds]).toEqual([1, otherLimit === 1 ? 1 : 0]);
      // Refused by the local rule: charged for the first request only. Admitted (the lost rule failed open): both.
      expect([otherLimit, statuses, await chargedBy(rule, key)]).toEqual(
        otherLimit === 1 ? [1, [200, 429], 1] : [2, [200, 200], 2],
      );
    }
  });

  it("answers lost after the object applied them (retried with the same call id): no key over its limit, none charged twice", async () => {
    // Most keys stay under their limits, where a second charge would show.
    const keys = [
      await knownKey("sk_lost"),
      await knownKey("sk_lost"),
      await knownKey("sk_lost"),
      await knownKey("sk_lost"),
    ];
    const { sent, ledger } = await flood(keys, 200, [["lost", 0.3]], 7);
    expect(ledger.injected.lost).toBeGreaterThan(0);
    expectOutcomesFollowOnError(sent);
    let answeredLateInAll = 0;
    for (const key of keys) {
      for (const rule of rules) {
        const limit = capacityOf(rule.params);
        expect(admittedBy(sent, rule.rule.id, key)).toBeLessThanOrEqual(limit);
        const name = objectNameOf(rule.rule.id, await sha256Hex(key));
        const applied = ledger.applied.get(name);
        expect(applied?.admitted ?? 0).toBeLessThanOrEqual(limit + (applied?.refunds ?? 0));
        // Each admitted request charged once, however many times its call was sent, and every refused one given back,
        // except where nobody could know: a call whose answer was lost on every copy (the object applied it) keeps what
        // it admitted, whatever became of its requests: let through without the rule (fail open), refused by the other
        // rule (429: 1 run in 6 under load on 5ca77f6, seed 7 pair-open key 1: charged 26, 21 admitted + 5
        // unanswered, passed 25) or closed (503). A call whose answer was lost on both attempts is sent once more
        // (delegate_call.ts `resendUnknown`): answered then, its admissions of requests refused meanwhile are given
        // back and those of requests let through stay (`answeredLate`: at most that many). Short, never over.
        const admitted = admittedBy(sent, rule.rule.id, key);
        const unanswered = ledger.unanswered(name);
        const late = ledger.answeredLate(name);
        const charged = await chargedBy(rule, key);
        const seen = `${rule.rule.id} key ${keys.indexOf(key)}: charged ${charged}, admitted ${admitted}, unanswered ${unanswered}, answered late ${late}, ${JSON.stringify(applied)}`;
        expect(charged, seen).toBeGreaterThanOrEqual(admitted + unanswered);
        expect(charged, seen).toBeLessThanOrEqual(admitted + unanswered + late);
        answeredLateInAll += late;
      }
    }
    // Some answers were lost on both attempts (about 1 call in 11) and came with the third copy. (Lost on all three,
    // about 1 in 37, `unanswered` may be none in a run.)
    expect(answeredLateInAll).toBeGreaterThan(0);
  });
});
