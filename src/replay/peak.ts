/**
 * "The most admitted in any span of the rule's length", per key, streaming, packed: one queue of the rule's admitted
 * requests inside the last span (admission_queue.ts, 20 bytes each, spilled beyond a few megabytes when a spill is
 * given) and, per key number, their sum (one float64 in an array indexed by the key's number: 8 bytes per key the
 * rule admitted, with no hashing on the way; key numbers are dense, key_index.ts). An admission adds to its key's sum;
 * one a span old leaves the queue and subtracts from it. A key's sum right after its admission at `t`
 * is what it admitted in `(t - span, t]`; the largest such sum is the peak (the first reached, on a tie).
 *
 * The span runs on the trace's clock: a line earlier than one before it (a trace out of time order, which the CLI
 * reports) counts at the latest time seen.
 */
import { AdmissionQueue, type ChunkSpill } from "./admission_queue.ts";
import type { Peak } from "./run.ts";

export class PeakWindows {
  /** Each key number's admitted cost inside the span (grown to cover the largest key number seen). */
  private sums = new Float64Array(1024);
  private readonly queue: AdmissionQueue;
  private clockMs = Number.NEGATIVE_INFINITY;
  /** The oldest queued admission's time (Infinity when none). */
  private headMs = Number.POSITIVE_INFINITY;
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
    // Nothing leaves the span before the oldest admission's time plus the span.
    if (t - this.spanMs >= this.headMs) this.evictUpTo(t - this.spanMs);
    if (this.queue.length === 0) this.headMs = t;
    if (key >= this.sums.length) this.grow(key);
    const sum = this.sums[key]! + cost;
    this.sums[key] = sum;
    this.queue.push(t, key, cost);
    // Strictly more: on a tie, the span reached first in the trace stays.
    if (this.best === null || sum > this.best.cost) {
      // A sum of this one cost is the key's only admission inside the span: it starts there.
      this.best = { cost: sum, key: name, startMs: sum === cost ? t : null };
      this.pendingKey = sum === cost ? -1 : key;
    }
  }

  private grow(key: number): void {
    const sums = new Float64Array(Math.max(this.sums.length * 2, key + 1));
    sums.set(this.sums);
    this.sums = sums;
  }

  /** The peak so far; `null` when nothing was admitted. Call once, at the end (it consumes the queue). */
  finish(): Peak | null {
    if (this.best === null) return null;
    while (this.pendingKey >= 0 && this.queue.length > 0) this.dropHead();
    return { cost: this.best.cost, key: this.best.key, startMs: this.best.startMs! };
  }

  /** Admissions at or before `limitMs` leave the span. */
  private evictUpTo(limitMs: number): void {
    // The best peak's key's first entry still queued starts its span: stop there to note it, then go on.
    while (this.queue.dropUpTo(limitMs, this.sums, this.pendingKey)) this.dropHead();
    this.headMs = this.queue.length > 0 ? this.queue.headTime() : Number.POSITIVE_INFINITY;
  }

  private dropHead(): void {
    const { queue } = this;
    const key = queue.headKey();
    // The best peak's key's first entry still queued was its first inside the span then.
    if (key === this.pendingKey) {
      this.best!.startMs = queue.headTime();
      this.pendingKey = -1;
    }
    this.sums[key] = this.sums[key]! - queue.headCost();
    queue.shift();
  }
}
