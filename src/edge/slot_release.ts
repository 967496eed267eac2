/**
 * Slots held by an admitted request (concurrency rules, src/algorithms/concurrency.ts) and their release: once the
 * response's body has been read to the end, the client went away (the body was cancelled) or the request failed.
 *
 * Two small pieces, each reusable on its own: `slotsOf` (what a judgement holds) with `releaseSlots` (one call per
 * key's object, straight to it: slots never go through the coalescer or the delegate tier), and `whenBodyEnds`, the
 * gateway's after-response seam: a response whose body runs a callback once, in the request's `waitUntil`, however
 * the body ends. A release that fails is logged; the slot then comes back when its lease (`slot_ttl`) ends.
 */
import { logEvent } from "../isolate/metrics.ts";
import { limiterStub } from "../object/names.ts";
import { messageOf } from "../protocol/object_call.ts";
import type { ReleaseResult } from "../protocol/slots.ts";
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

/** Give the slots back, one call per key's object; never throws (a failure is logged, and the lease frees the slot). */
export function releaseSlots(env: Pick<Env, "LIMITER">, held: readonly HeldSlot[]): Promise<(ReleaseResult | null)[]> {
  return Promise.all(held.map((h) => releaseOne(env, h)));
}

async function releaseOne(env: Pick<Env, "LIMITER">, h: HeldSlot): Promise<ReleaseResult | null> {
  try {
    return await limiterStub(env.LIMITER, h.rule.id, h.keyHash).release({ rule: h.rule, slots: [h.slot] });
  } catch (error) {
    logEvent("error", { event: "release_failed", rule: h.rule.id, key: h.keyHash, error: messageOf(error) });
    return null;
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
}

/** The hold for `held` (nothing to do when it is empty). */
export function holdSlots(env: Pick<Env, "LIMITER">, ctx: ExecutionContext, held: readonly HeldSlot[]): SlotHold {
  if (held.length === 0) return { during: (r) => Promise.resolve(r), after: (r) => r };
  let ended: (() => void) | undefined;
  ctx.waitUntil(
    new Promise<void>((resolve) => {
      ended = resolve;
    }),
  );
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await releaseSlots(env, held);
    ended?.();
  };
  const keepAlive = (work: Promise<unknown>) => ctx.waitUntil(work);
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
  };
}
