/**
 * A data center's hot marks in the cluster SIMULATION (src/isolate/hot_marks.ts has what they are): one store per
 * data center (network.ts `DATA_CENTERS_PER_REGION` in a region), as the Worker's `caches.default` is one per data
 * center. Simulated: a read or a write takes `MARK_LATENCY_MS` (the Cache API is local to the data center), a mark is
 * seen by other readers `MARK_PROPAGATION_MS` after its write and lasts `HOT_MARK_TTL_MS` from it.
 */
import type { HotMarkStore, StoredMark } from "../isolate/hot_marks.ts";
import { HOT_MARK_TTL_MS } from "../protocol/tunables.ts";
import type { EventClock } from "./event_clock.ts";
import { MARK_PROPAGATION_MS } from "./network.ts";

/** A read or write of a mark, ms. */
export const MARK_LATENCY_MS = 1;

export class SimMarks implements HotMarkStore {
  private readonly marks = new Map<
    string,
    StoredMark & { readonly visibleFromMs: number; readonly expiresAtMs: number }
  >();
  reads = 0;
  writes = 0;

  constructor(private readonly clock: EventClock) {}

  async read(name: string): Promise<StoredMark | null> {
    this.reads++;
    await this.clock.sleep(MARK_LATENCY_MS);
    if (!this.holds(name)) return null;
    const { spread, atMs } = this.marks.get(name)!;
    return atMs === undefined ? { spread } : { spread, atMs };
  }

  /** Whether a mark for `name` is live now (the bench's accounting: no read, no latency). */
  holds(name: string): boolean {
    const mark = this.marks.get(name);
    const now = this.clock.nowMs();
    return mark !== undefined && now >= mark.visibleFromMs && now < mark.expiresAtMs;
  }

  async write(name: string, mark: StoredMark): Promise<void> {
    this.writes++;
    await this.clock.sleep(MARK_LATENCY_MS);
    const now = this.clock.nowMs();
    // Rewriting a live mark does not hide it again (what it says changes at once: kept simple).
    const prev = this.marks.get(name);
    const live = prev !== undefined && now < prev.expiresAtMs;
    this.marks.set(name, {
      spread: mark.spread,
      ...(mark.atMs === undefined ? {} : { atMs: mark.atMs }),
      visibleFromMs: live ? prev.visibleFromMs : now + MARK_PROPAGATION_MS,
      expiresAtMs: now + HOT_MARK_TTL_MS,
    });
  }
}
