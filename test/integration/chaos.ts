/**
 * Chaos for the Workers-runtime tests: a fault-injecting wrapper around the `LIMITER` Durable Object namespace, and a
 * time budget that runs out exactly when the test's calls are stuck (never by racing a real timer). Tests only.
 *
 * Each `check` call (one attempt) draws its fate from a seeded generator: answered, or one of
 * - `retryable` / `overloaded` / `reset` / `error`: thrown before the object sees the call (the structured fields
 *   the runtime puts on such errors: `retryable`, `overloaded`, `durableObjectReset`);
 * - `hang`: held until every time budget that is waiting runs out, then delivered to the object (a late answer);
 * - `lost`: applied by the object, then the answer is lost on the way back as a retryable error (the retry must not
 *   charge the key twice).
 * Refunds are passed through, and counted, like every call that reached the object.
 */
import type { SluiceLimiter } from "../../src/object/limiter.ts";
import type { CallInput, CallResult } from "../../src/protocol/store.ts";

export type Fault = "retryable" | "overloaded" | "reset" | "error" | "hang" | "lost";

export { seeded } from "../support/random.ts";

/** What happened to the calls, per object name and in total. */
export interface ChaosLedger {
  readonly injected: Record<Fault, number>;
  /**
   * Checks that reached the object, those of them that it admitted, the units given back (refunds and lease returns,
   * which ride with calls as `giveBack`), and the units given back in calls the object never applied (a fault lost
   * them: the key is short that much, never over).
   */
  readonly applied: Map<string, { checks: number; admitted: number; refunds: number; lostRefunds: number }>;
  /** Checks that reached the object after the caller's time budget had run out. */
  late: number;
  /**
   * Per object name, the requests the object admitted in calls whose answer never reached the caller (`lost` on every
   * attempt): nobody can know they were charged, so nothing gives them back (the key is short that much, never over).
   */
  unanswered(name: string): number;
  /**
   * Per object name, the requests the object admitted in calls first answered on their third copy or later (the
   * isolate sends a call whose answer was lost on both attempts once more: its answer comes late, after the requests
   * were decided without it; a refused one's admission is then given back, a let-through one's stays).
   */
  answeredLate(name: string): number;
}

const thrown = (fault: Fault, message: string) =>
  Object.assign(new Error(message), {
    retryable: fault === "retryable" || fault === "lost" || undefined,
    overloaded: fault === "overloaded" || undefined,
    durableObjectReset: fault === "reset" || undefined,
  });

/**
 * A time budget the chaos drives: `sleep(ms)` ends when no call to an object is in flight any more (checked once per
 * macrotask, so a retry about to be sent is sent first). Every call still waiting then is one the fault held: its
 * budget has run out. Use it as the isolate's sleeper for rules without shaping delays, and `start` it from the
 * test's own code, so that it runs on a timer of the test's: a timer set from a request's code may never fire (under
 * load one did not, the check it carried stayed pending, and every budget then waited until the test timed out).
 */
export class ChaosClock {
  private inFlight = 0;
  private readonly sleepers: (() => void)[] = [];
  private readonly held: (() => void)[] = [];
  private releaseHeld = false;

  readonly sleep = (_ms: number): Promise<void> =>
    new Promise<void>((wake) => {
      this.sleepers.push(wake);
    });

  /** Run `call` as a call in flight. */
  async track<T>(call: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await call();
    } finally {
      this.inFlight--;
    }
  }

  /** Resolves once every waiting time budget has run out. */
  hold(): Promise<void> {
    return new Promise<void>((go) => {
      this.held.push(go);
    });
  }

  /** Drive the clock, one check per macrotask, until the returned function is called. */
  start(): () => void {
    let running = true;
    void (async () => {
      while (running) {
        await scheduler.wait(0);
        this.tick();
      }
    })();
    return () => {
      running = false;
    };
  }

  private tick(): void {
    if (this.releaseHeld) {
      // The held calls go on only after the callers have seen their budgets run out.
      this.releaseHeld = false;
      for (const go of this.held.splice(0)) go();
      return;
    }
    if (this.inFlight > 0 || this.sleepers.length === 0) return;
    for (const wake of this.sleepers.splice(0)) wake();
    this.releaseHeld = true;
  }
}

/** `real` with a share of its `check` calls failing as `pick` says (`null`: answered). */
export function chaosNamespace(
  real: DurableObjectNamespace<SluiceLimiter>,
  pick: () => Fault | null,
  clock: ChaosClock,
): { readonly namespace: DurableObjectNamespace<SluiceLimiter>; readonly ledger: ChaosLedger } {
  /** Per call id: the object's name and the requests its first application admitted; the ids answered, and how. */
  const admittedIn = new Map<string, { name: string; admitted: number }>();
  const answered = new Set<string>();
  const answeredLateIds = new Set<string>();
  const sends = new Map<string, number>();
  const answer = (id: string) => {
    if (!answered.has(id) && (sends.get(id) ?? 0) >= 3) answeredLateIds.add(id);
    answered.add(id);
  };
  const admittedBy = (name: string, ids: (id: string) => boolean) =>
    [...admittedIn].reduce((n, [id, a]) => n + (a.name === name && ids(id) ? a.admitted : 0), 0);
  const ledger: ChaosLedger = {
    injected: { retryable: 0, overloaded: 0, reset: 0, error: 0, hang: 0, lost: 0 },
    applied: new Map(),
    late: 0,
    unanswered: (name) => admittedBy(name, (id) => !answered.has(id)),
    answeredLate: (name) => admittedBy(name, (id) => answeredLateIds.has(id)),
  };
  const names = new Map<string, string>();
  /** Call ids the object applied, and the units given back by calls it has not applied (yet). */
  const appliedIds = new Set<string>();
  const notApplied = new Map<string, number>();
  const countsOf = (name: string) => {
    const c = ledger.applied.get(name) ?? { checks: 0, admitted: 0, refunds: 0, lostRefunds: 0 };
    ledger.applied.set(name, c);
    return c;
  };
  const namespace = {
    idFromName(name: string) {
      const id = real.idFromName(name);
      names.set(id.toString(), name);
      return id;
    },
    get(id: DurableObjectId) {
      const stub = real.get(id);
      const name = names.get(id.toString()) ?? id.toString();
      const apply = async (input: unknown) => {
        const result = (await stub.check(input as never)) as CallResult;
        const c = countsOf(name);
        const { id, giveBack } = input as CallInput;
        const back = (giveBack ?? []).reduce((n, g) => n + g.units, 0);
        if (!appliedIds.has(id) && back > 0) {
          appliedIds.add(id);
          c.refunds += back;
          c.lostRefunds -= notApplied.get(id) ?? 0;
          notApplied.delete(id);
        }
        appliedIds.add(id);
        // A call the object had already applied (a retry) applies nothing again.
        if (result.replayed) return result;
        // One call carries a batch of requests (coalesced): count each request it decided.
        let admitted = 0;
        for (const r of result.results) {
          c.checks++;
          if (r.ok && r.decision.allowed) admitted++;
        }
        c.admitted += admitted;
        admittedIn.set(id, { name, admitted });
        return result;
      };
      return {
        check: (input: unknown) => {
          const { id, giveBack } = input as CallInput;
          sends.set(id, (sends.get(id) ?? 0) + 1);
          const back = (giveBack ?? []).reduce((n, g) => n + g.units, 0);
          if (back > 0 && !appliedIds.has(id) && !notApplied.has(id)) {
            // Counted lost until the object applies it (a retry or a late answer may still).
            notApplied.set(id, back);
            countsOf(name).lostRefunds += back;
          }
          const fault = pick();
          if (fault !== null) ledger.injected[fault]++;
          if (fault === "hang") {
            // Not in flight while held: the caller's budget runs out, then the object gets the call and answers, late.
            return clock.hold().then(async () => {
              ledger.late++;
              const result = await clock.track(() => apply(input));
              answer(id);
              return result;
            });
          }
          return clock.track(async () => {
            if (fault === null) {
              const result = await apply(input);
              answer(id);
              return result;
            }
            if (fault === "lost") await apply(input);
            throw thrown(fault, fault === "lost" ? "connection lost after the call was applied" : `injected ${fault}`);
          });
        },
        refund: async (input: unknown) => {
          const result = await stub.refund(input as never);
          countsOf(name).refunds++;
          return result;
        },
        peek: (input: unknown) => stub.peek(input as never),
        reset: () => stub.reset(),
      };
    },
  };
  return { namespace: namespace as unknown as DurableObjectNamespace<SluiceLimiter>, ledger };
}
