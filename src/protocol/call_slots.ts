/** How an object stores the calls it remembers (a stored format): an entry each, in a ring of `CALL_MEMORY_MAX`. */
import { type AppliedCall, CALL_MEMORY_MAX, type LimiterRecord } from "./store.ts";

/** The storage keys of the record without its calls, and of one remembered call's slot. */
export const RECORD_KEY = "record";
export const CALL_KEY_PREFIX = "call:";

export const callKey = (slot: number): string => `${CALL_KEY_PREFIX}${slot}`;

/** The record as stored under `RECORD_KEY`: everything but its calls. */
export function storedRecord(record: LimiterRecord): LimiterRecord {
  if (record.calls === undefined) return record;
  const { calls: _calls, ...rest } = record;
  return rest;
}

/** Which slot each remembered call is in, oldest first; the slots not in use. */
export class CallSlots {
  /** Slots in use, oldest call first. */
  private readonly used: number[] = [];
  private readonly free: number[] = [];

  /** From the entries found in storage (key, call), in any order; returns the calls, oldest first. */
  static load(entries: Iterable<readonly [string, AppliedCall]>): { slots: CallSlots; calls: AppliedCall[] } {
    const found: { slot: number; call: AppliedCall }[] = [];
    for (const [key, call] of entries) {
      const slot = Number(key.slice(CALL_KEY_PREFIX.length));
      if (Number.isSafeInteger(slot) && slot >= 0 && slot < CALL_MEMORY_MAX) found.push({ slot, call });
    }
    found.sort((a, b) => a.call.atMs - b.call.atMs || a.slot - b.slot);
    return { slots: new CallSlots(found.map((f) => f.slot)), calls: found.map((f) => f.call) };
  }

  constructor(used: readonly number[] = []) {
    this.clear(used);
  }

  /** The slot for the next call: a free one, else the oldest call's (which the record forgot too). */
  next(): number {
    const slot = this.free.pop() ?? this.used.shift()!;
    this.used.push(slot);
    return slot;
  }

  /** Forget every slot but `used` (the object forgot the key). */
  clear(used: readonly number[] = []): void {
    this.used.splice(0, this.used.length, ...used);
    this.free.length = 0;
    const taken = new Set(used);
    for (let slot = CALL_MEMORY_MAX - 1; slot >= 0; slot--) if (!taken.has(slot)) this.free.push(slot);
  }
}

/** The writes a change makes: the record without its calls (`null`: delete it), and the call it applied if any. */
export function writesOf(before: LimiterRecord | null, after: LimiterRecord | null) {
  if (after === null) return { record: null, call: null };
  const last = after.calls?.at(-1);
  return { record: storedRecord(after), call: last !== undefined && last !== before?.calls?.at(-1) ? last : null };
}
