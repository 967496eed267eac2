/**
 * "The most admitted in any span of the rule's length", per key, streaming: each key keeps the admitted requests of
 * its last span, and a key whose last admission is a span old holds nothing (its window is swept away). Memory: about
 * 50 bytes per (rule, key) with one admission inside its span, plus 16 bytes per further admission inside it (so a
 * day-long window holds a day's admissions of each key).
 */

/**
 * The admitted requests of one key within the last span, in time order: the first one inline (most keys have one
 * admission in a short span, and an object with two numbers is a quarter of one holding an array), the others, when
 * there are more, in one flat array `[t0, cost0, t1, cost1, ...]` from `head`.
 */
export class SpanWindow {
  private t = 0;
  private c = 0;
  sum = 0;
  private more: number[] | null = null;
  private head = 0;

  /** Time of the first admitted request inside the span. */
  firstMs(): number {
    return this.more === null ? this.t : this.more[this.head]!;
  }

  lastMs(): number {
    if (this.more !== null) return this.more[this.more.length - 2]!;
    return this.sum === 0 ? Number.NEGATIVE_INFINITY : this.t;
  }

  /** Adds an admitted request and drops those a span or more before the latest one. */
  add(tMs: number, cost: number, spanMs: number): void {
    if (this.more === null) {
      if (this.sum === 0 || tMs - this.t >= spanMs) {
        this.t = tMs;
        this.c = cost;
        this.sum = cost;
        return;
      }
      this.more = [this.t, this.c];
      this.head = 0;
    }
    this.addToList(this.more, tMs, cost, spanMs);
  }

  private addToList(e: number[], tMs: number, cost: number, spanMs: number): void {
    if (e[e.length - 2]! <= tMs) {
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
    if (e.length - this.head === 2) {
      // One left: back inline, the array dropped.
      this.t = e[this.head]!;
      this.c = e[this.head + 1]!;
      this.more = null;
    } else if (this.head > 64 && this.head * 2 > e.length) {
      e.copyWithin(0, this.head);
      e.length -= this.head;
      this.head = 0;
    }
  }
}

const SWEEP_MIN_LIVE = 16_384;

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
