/**
 * A data center's hot marks in the cluster SIMULATION (src/isolate/hot_marks.ts has what they are): one store per
 * region, as the Worker's `caches.default` is one per data center. Simulated: a read or a write takes
 * `MARK_LATENCY_MS` (the Cache API is local to the data center), a mark lasts `HOT_MARK_TTL_MS` from its write.
 */
import { HOT_MARK_TTL_MS, type HotMarkStore, type StoredMark } from "../isolate/hot_marks.ts";
import type { EventClock } from "./event_clock.ts";

/** A read or write of a mark, ms. */
export const MARK_LATENCY_MS = 1;

export class SimMarks implements HotMarkStore {
  private readonly marks = new Map<string, StoredMark & { readonly expiresAtMs: number }>();
  reads = 0;
  writes = 0;

  constructor(private readonly clock: EventClock) {}

  async read(name: string): Promise<StoredMark | null> {
    this.reads++;
    await this.clock.sleep(MARK_LATENCY_MS);
    const mark = this.marks.get(name);
    if (mark === undefined || this.clock.nowMs() >= mark.expiresAtMs) return null;
    return { spread: mark.spread };
  }

  /** Whether a mark for `name` is live now (the bench's accounting: no read, no latency). */
  holds(name: string): boolean {
    const mark = this.marks.get(name);
    return mark !== undefined && this.clock.nowMs() < mark.expiresAtMs;
  }

  async write(name: string, mark: StoredMark): Promise<void> {
    this.writes++;
    await this.clock.sleep(MARK_LATENCY_MS);
    this.marks.set(name, { spread: mark.spread, expiresAtMs: this.clock.nowMs() + HOT_MARK_TTL_MS });
  }
}
