/**
 * A delegate's credit at adoption (delegate.ts `adoptGrant`) for a rate grant's flight: the key's object takes the
 * parts it grants out of its direct slice at the grant, the delegate starts them when the answer arrives, so their
 * refill in between went to nobody (a first grant's, and a renewal's that grows a share). What a credit longer than
 * the flight costs the rate bound: docs/production.md (the design note) and docs/rules.md. Pure, whole tokens.
 */
import { type AlgorithmParams, sliceParams } from "../algorithms/index.ts";
import { emptyState } from "./share.ts";
import { peekState } from "./store.ts";
import { FLIGHT_CREDIT_MAX_MS, SHARE_PARTS } from "./tunables.ts";

/** A delegate's rate share as the credit needs it: its parts, its term's end, its last renewal's round trip. */
interface Held {
  readonly kind: "rate" | "window";
  readonly parts: number;
  readonly endsAtMs: number;
  readonly rttMs?: number;
}

/**
 * How long the answer to an ask sent at `sentAtMs` and taken at `nowMs` was on its way, ms: half the smaller of this
 * round trip and the last renewal's (`old.rttMs`; the clocks differ), so that a queue at the object counts only when
 * both asks met one.
 */
export function flightMs(old: Held | null, sentAtMs: number, nowMs: number): number {
  const rttMs = Math.max(0, nowMs - sentAtMs);
  const last = old?.rttMs;
  const smallest = last !== undefined && last >= 0 ? Math.min(rttMs, last) : rttMs;
  return Math.min(FLIGHT_CREDIT_MAX_MS, Math.floor(smallest / 2));
}

/**
 * Tokens a rate grant of `parts` (under `params`) adds to its delegate's new slice for the answer's flight (`flightMs`
 * before `nowMs`): the refill of the parts beyond those the delegate held (`old`; all of them when it held none) over
 * the flight, and of the parts it held, up to `parts`, from when its old share ended if that was during the flight.
 * 0 when it gains none.
 */
export function flightCredit(
  params: AlgorithmParams,
  parts: number,
  old: Held | null,
  sentAtMs: number,
  nowMs: number,
): number {
  const ms = flightMs(old, sentAtMs, nowMs);
  const fromMs = nowMs - ms;
  const endedMs = old !== null && old.kind === "rate" ? Math.max(fromMs, Math.min(nowMs, old.endsAtMs)) : fromMs;
  const held = old !== null && old.kind === "rate" ? Math.min(old.parts, parts) : 0;
  return refill(params, parts - held, ms, nowMs) + refill(params, held, nowMs - endedMs, nowMs);
}

/** The refill of `parts` of the rate under `params` over the `ms` before `nowMs`, whole tokens (at most a burst). */
export function refill(params: AlgorithmParams, parts: number, ms: number, nowMs: number): number {
  if (parts <= 0 || ms <= 0) return 0;
  const slice = sliceParams(params, parts, SHARE_PARTS);
  return slice === null ? 0 : peekState(slice, emptyState(slice, nowMs - ms), nowMs).remaining;
}
