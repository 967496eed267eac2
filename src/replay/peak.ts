/**
 * "The most admitted in any span of the rule's length", per key, streaming: each key keeps the admitted requests of
 * its last span (time and cost, in one flat array), and a key whose last admission is a span old holds nothing (its
 * window is swept away). Memory: about 70 bytes per (rule, key) with an admission inside its span, plus 16 bytes per
 * admitted request inside it (so a day-long window holds a day's admissions of each key).
 */

/** The admitted requests of one key within the last span: `[t0, cost0, t1, cost1, ...]` from `head`, in time order. */
export class SpanWindow {
  entries: number[] = [];
  head = 0;
  sum = 0;

  /** Time of the first admitted request inside the span. */
  firstMs(): number {
    return this.entries[this.head]!;
  }

  lastMs(): number {
    return this.entries.length > this.head ? this.entries[this.entries.length - 2]! : Number.NEGATIVE_INFINITY;
  }

  /** Adds an admitted request and drops those a span or more before the latest one. */
  add(tMs: number, cost: number, spanMs: number): void {
    const e = this.entries;
    if (e.length === this.head || e[e.length - 2]! <= tMs) {
      e.push(tMs, cost);
    } else {
      // A key whose clock steps back: insert in order (rare, so a linear scan is fine).
      let i = e.length;
      while (i > this.head && e[i - 2]! > tMs) i -= 2;
      e.splice(i, 0, tMs, cost);
    }
    this.sum += cost;
    const latest = e[e.length - 2]!;
    while (latest - e[this.head]! >= spanMs) {
      this.sum -= e[this.head + 1]!;
      this.head += 2;
    }
    if (this.head > 64 && this.head * 2 > e.length) {
      e.copyWithin(0, this.head);
      e.length -= this.head;
      this.head = 0;
    }
  }
}

const SWEEP_MIN_LIVE = 65_536;

/** One rule's span windows by key number. */
export class PeakWindows {
  private readonly windows: (SpanWindow | undefined)[] = [];
  private live = 0;
  private sweepAtLive = SWEEP_MIN_LIVE;

  constructor(private readonly spanMs: number) {}

  /** Adds an admitted request of `key`; its window after it. */
  add(key: number, tMs: number, cost: number, latestMs: number): SpanWindow {
    while (this.windows.length < key) this.windows.push(undefined);
    let w = this.windows[key];
    if (w === undefined) {
      w = new SpanWindow();
      this.windows[key] = w;
      this.live++;
    }
    w.add(tMs, cost, this.spanMs);
    if (this.live >= this.sweepAtLive) this.sweep(latestMs);
    return w;
  }

  /** Windows whose last admission is a span or more before `latestMs` can add nothing to a later span. */
  private sweep(latestMs: number): void {
    const { windows } = this;
    for (let k = 0; k < windows.length; k++) {
      const w = windows[k];
      if (w !== undefined && latestMs - w.lastMs() >= this.spanMs) {
        windows[k] = undefined;
        this.live--;
      }
    }
    this.sweepAtLive = Math.max(SWEEP_MIN_LIVE, this.live * 2);
  }
}
