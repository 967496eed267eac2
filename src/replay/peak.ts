/**
 * "The most admitted in any span of the rule's length", per key, streaming, packed: one queue of the rule's admitted
 * requests inside the last span (admission_queue.ts, 20 bytes each, spilled beyond a few megabytes when a spill is
 * given) and, per key with admissions inside it, their sum (a `KeyedRows` row, about 24 bytes). An admission adds to
 * its key's sum; one a span old leaves the queue and subtracts from it. A key's sum right after its admission at `t`
 * is what it admitted in `(t - span, t]`; the largest such sum is the peak (the first reached, on a tie).
 *
 * The span runs on the trace's clock: a line earlier than one before it (a trace out of time order, which the CLI
 * reports) counts at the latest time seen.
 */
import { AdmissionQueue, type ChunkSpill } from "./admission_queue.ts";
import { KeyedRows } from "./rows.ts";
import type { Peak } from "./run.ts";

/** Drop the keys whose sum fell to 0 no more often than every this many new keys (and not below it). */
const SWEEP_MIN_KEYS = 16_384;

export class PeakWindows {
  private readonly sums = new KeyedRows(1);
  private readonly queue: AdmissionQueue;
  private clockMs = Number.NEGATIVE_INFINITY;
  private sweepAtKeys = SWEEP_MIN_KEYS;
  private best: { cost: number; key: string; startMs: number | null } | null = null;
  /** The best peak's key number while its start is not known yet (it is its key's first entry in the queue). */
  private pendingKey = -1;

  constructor(
    private readonly spanMs: number,
    spill: ChunkSpill | null = null,
    /** Chunks of admissions held in memory before the spill takes them. */
    memoryChunks?: number,
  ) {
    this.queue = new AdmissionQueue(spill, memoryChunks);
  }

  /** Adds an admitted request of key number `key` (named `name`) at `tMs` costing `cost`. */
  add(key: number, name: string, tMs: number, cost: number): void {
    const t = Math.max(tMs, this.clockMs);
    this.clockMs = t;
    this.evictUpTo(t - this.spanMs);
    let slot = this.sums.find(key);
    if (slot < 0) slot = this.sums.insert(key);
    const sum = this.sums.get(slot, 0) + cost;
    this.sums.set(slot, 0, sum);
    this.queue.push(t, key, cost);
    // Strictly more: on a tie, the span reached first in the trace stays.
    if (this.best === null || sum > this.best.cost) {
      // A sum of this one cost is the key's only admission inside the span: it starts there.
      this.best = { cost: sum, key: name, startMs: sum === cost ? t : null };
      this.pendingKey = sum === cost ? -1 : key;
    }
    if (this.sums.size >= this.sweepAtKeys) {
      this.sums.keepOnly((s) => this.sums.get(s, 0) > 0);
      this.sweepAtKeys = Math.max(SWEEP_MIN_KEYS, this.sums.size * 2);
    }
  }

  /** The peak so far; `null` when nothing was admitted. Call once, at the end (it consumes the queue). */
  finish(): Peak | null {
    if (this.best === null) return null;
    while (this.pendingKey >= 0 && this.queue.length > 0) this.dropHead();
    return { cost: this.best.cost, key: this.best.key, startMs: this.best.startMs! };
  }

  /** Admissions at or before `limitMs` leave the span. */
  private evictUpTo(limitMs: number): void {
    while (this.queue.length > 0 && this.queue.headTime() <= limitMs) this.dropHead();
  }

  private dropHead(): void {
    const { queue } = this;
    const key = queue.headKey();
    // The best peak's key's first entry still queued was its first inside the span then.
    if (key === this.pendingKey) {
      this.best!.startMs = queue.headTime();
      this.pendingKey = -1;
    }
    const slot = this.sums.find(key);
    this.sums.set(slot, 0, this.sums.get(slot, 0) - queue.headCost());
    queue.shift();
  }
}
