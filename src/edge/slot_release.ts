/**
 * Slots held by an admitted request (concurrency rules, src/algorithms/concurrency.ts) and their release: once the
 * response's body has been read to the end, the client went away (the body was cancelled) or the request failed.
 *
 * Two small pieces, each reusable on its own: `slotsOf` (what a judgement holds) with `releaseSlots` (one call per
 * key's object, straight to it: slots never go through the coalescer or the delegate tier), and `whenBodyEnds`, the
 * gateway's after-response seam: a response whose body runs a callback once, in the request's `waitUntil`, however
 * the body ends. A release that fails is logged; the slot then comes back when its lease (`slot_ttl`) ends.
 */
import { slotPolicy } from "../algorithms/index.ts";
import type { Sleep } from "../isolate/isolate.ts";
import { logEvent } from "../isolate/metrics.ts";
import { limiterStub } from "../object/names.ts";
import { classify, messageOf } from "../protocol/object_call.ts";
import { RELEASE_RETRY_MS, type ReleaseResult } from "../protocol/slots.ts";
import type { LimiterRule } from "../protocol/store.ts";
import type { AskResult } from "./ask.ts";
import type { Env } from "./settings.ts";

/** One slot a request holds: its rule, its key's object (by the key's hash) and the slot's id. */
export interface HeldSlot {
  readonly rule: LimiterRule;
  readonly keyHash: string;
  readonly slot: number;
}

/** The slots the rules' answers took (admissions of slot-holding rules, enforced or shadow). */
export function slotsOf(outcomes: readonly AskResult[]): HeldSlot[] {
  const held: HeldSlot[] = [];
  for (const o of outcomes) {
    if (o.kind !== "decided" || o.slot === undefined) continue;
    const { compiled, keyHash } = o.app;
    held.push({
      rule: { id: compiled.rule.id, params: compiled.params, version: compiled.version },
      keyHash,
      slot: o.slot,
    });
  }
  return held;
}

/**
 * Give the slots back, one call per key's object; never throws. A release the object refused as busy (or a retryable
 * error) is retried after `RELEASE_RETRY_MS` (on `sleep`); one that still fails is logged, and the lease frees it.
 */
export function releaseSlots(
  env: Pick<Env, "LIMITER">,
  held: readonly HeldSlot[],
  sleep: Sleep,
): Promise<(ReleaseResult | null)[]> {
  return Promise.all(held.map((h) => releaseOne(env, h, sleep)));
}

async function releaseOne(env: Pick<Env, "LIMITER">, h: HeldSlot, sleep: Sleep): Promise<ReleaseResult | null> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await limiterStub(env.LIMITER, h.rule.id, h.keyHash).release({ rule: h.rule, slots: [h.slot] });
    } catch (error) {
      const { failure, retry } = classify(error);
      const waitMs = RELEASE_RETRY_MS[attempt];
      if (waitMs === undefined || !(retry || failure === "overloaded")) {
        logEvent("error", { event: "release_failed", rule: h.rule.id, key: h.keyHash, error: messageOf(error) });
        return null;
      }
      await sleep(waitMs / 2 + Math.floor((Math.random() * waitMs) / 2));
    }
  }
}

/** How the body of a response ended. */
export type BodyEnd = "read" | "cancelled" | "none";

/**
 * `response` with its body passed through a stream so that `done` runs exactly once when the body ends: read to the
 * end, cancelled (the client went away) or errored; at once for a response without a body. `keepAlive` (the request's
 * `ctx.waitUntil`) keeps the copy and `done` running after the handler has answered, and keeps the request alive while
 * the client is gone, so the copy sees the cancellation.
 */
export function whenBodyEnds(
  response: Response,
  keepAlive: (work: Promise<unknown>) => void,
  done: (end: BodyEnd) => Promise<unknown>,
): Response {
  if (response.body === null) {
    keepAlive(done("none"));
    return response;
  }
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const copied = response.body.pipeTo(writable).then(
    () => "read" as const,
    () => "cancelled" as const,
  );
  keepAlive(copied.then(done));
  return new Response(readable, response);
}

/**
 * A request's slots from its admission to the end of its response: `during` asks the origin (a failure gives the
 * slots back at once), `after` gives them back when the response's body ends. Until then the request is kept alive
 * (`waitUntil`), so a client that goes away while the origin works does not stop the release.
 */
export interface SlotHold {
  during(response: Promise<Response> | Response): Promise<Response>;
  after(response: Response): Response;
  /** Give the slots back now: the request failed between `during` and `after` (its renewals stop too). */
  abandon(): void;
}

/**
 * The hold for `held` (nothing to do when it is empty). While it lasts, the slots' leases are renewed every half of
 * the shortest `slot_ttl` among them (`renewWhile`), so a request that runs longer than its lease keeps its slot;
 * `sleep` is the isolate's (tests drive it).
 */
export function holdSlots(
  env: Pick<Env, "LIMITER">,
  ctx: ExecutionContext,
  held: readonly HeldSlot[],
  sleep: Sleep,
): SlotHold {
  if (held.length === 0) return { during: (r) => Promise.resolve(r), after: (r) => r, abandon: () => undefined };
  let ended: (() => void) | undefined;
  ctx.waitUntil(
    new Promise<void>((resolve) => {
      ended = resolve;
    }),
  );
  let stop: (() => void) | undefined;
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    stop?.();
    await releaseSlots(env, held, sleep);
    ended?.();
  };
  const keepAlive = (work: Promise<unknown>) => ctx.waitUntil(work);
  void renewWhile(env, held, sleep, stopped);
  return {
    async during(response) {
      try {
        return await response;
      } catch (error) {
        keepAlive(release());
        throw error;
      }
    },
    after: (response) => whenBodyEnds(response, keepAlive, release),
    abandon: () => keepAlive(release()),
  };
}

/** How often a hold renews its slots' leases: every half of the shortest `slot_ttl` among them, ms. */
export function renewEveryMs(held: readonly HeldSlot[]): number {
  let ttlMs = Number.POSITIVE_INFINITY;
  for (const h of held) ttlMs = Math.min(ttlMs, slotPolicy(h.rule.params)?.leaseMs(h.rule.params) ?? ttlMs);
  return ttlMs / 2;
}

/**
 * Renew the slots' leases every `renewEveryMs` until `stopped` (the request's release). Not itself in `waitUntil`:
 * the hold keeps the request alive until its release, and a renewal left waiting then must not. A renewal that fails
 * is logged; the next one tries again, and an isolate that died renews nothing, so its slots come back with the lease.
 */
async function renewWhile(
  env: Pick<Env, "LIMITER">,
  held: readonly HeldSlot[],
  sleep: Sleep,
  stopped: Promise<void>,
): Promise<void> {
  const everyMs = renewEveryMs(held);
  for (;;) {
    const stop = await Promise.race([sleep(everyMs).then(() => false), stopped.then(() => true)]);
    if (stop) return;
    await renewSlots(env, held);
  }
}

/** Renew the slots' leases, one call per slot; never throws (a failure is logged: the next renewal tries again). */
export function renewSlots(env: Pick<Env, "LIMITER">, held: readonly HeldSlot[]): Promise<(ReleaseResult | null)[]> {
  return Promise.all(held.map((h) => renewOne(env, h)));
}

async function renewOne(env: Pick<Env, "LIMITER">, h: HeldSlot): Promise<ReleaseResult | null> {
  try {
    return await limiterStub(env.LIMITER, h.rule.id, h.keyHash).renew({ rule: h.rule, slots: [h.slot] });
  } catch (error) {
    logEvent("error", { event: "renew_failed", rule: h.rule.id, key: h.keyHash, error: messageOf(error) });
    return null;
  }
}
