/**
 * Giving back the slot an admission took (a concurrency rule's, src/algorithms/concurrency.ts) when nobody uses it:
 * another rule refused the request, or the answer came after the request was refused as busy. By the slot's id and
 * at once: a refund by time and cost may meet another request's slot taken in the same ms, or none once refunds of
 * one ms were merged, and leave the slot held until its lease (`slot_ttl`) ends.
 */
import { messageOf } from "../protocol/object_call.ts";
import type { RefundResult } from "../protocol/store.ts";
import type { KeyState } from "./coalesce_types.ts";
import { logEvent } from "./metrics.ts";

/**
 * Release `slot` of the key's object (answering `null`: the figures the caller already has), or `null` when there is
 * no slot or the transport cannot release (the caller then refunds by time and cost).
 */
export function giveSlotBack(
  st: KeyState,
  slot: number | undefined,
  keepAlive: ((work: Promise<unknown>) => void) | undefined,
): Promise<RefundResult> | null {
  const release = st.transport.release;
  if (slot === undefined || release === undefined) return null;
  const work = release(st.name, { rule: st.rule, slots: [slot] }).catch((error: unknown) => {
    // Not given back now: the slot comes back when its lease ends.
    logEvent("error", { event: "release_failed", rule: st.rule.id, error: messageOf(error) });
  });
  if (keepAlive === undefined) void work;
  else keepAlive(work);
  return Promise.resolve(null);
}
