/**
 * Giving back the slot an admission took (a concurrency rule's) when nobody uses it, by its id and at once: a refund
 * by time and cost may meet another request's slot taken in the same ms and leave this one held until `slot_ttl`.
 */
import { messageOf } from "../protocol/object_call.ts";
import type { RefundResult } from "../protocol/store.ts";
import type { KeyState } from "./key_state.ts";
import { logEvent } from "./metrics.ts";

/** Release `slot` (answering `null`: the figures the caller has), or `null` when there is none or no way to release. */
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
