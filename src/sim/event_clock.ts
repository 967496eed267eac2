/**
 * A discrete-event clock: simulated time that jumps from event to event, for running the real isolate code (the
 * coalescer, leases, call budgets) over a simulated network, in bench/cluster.ts and in tests. Between two events
 * every pending promise continuation runs (a macrotask turn), so `await` chains settle at the instant they belong to.
 */
interface Event {
  readonly atMs: number;
  readonly seq: number;
  fn: (() => void) | null;
}

export class EventClock {
  private heap: Event[] = [];
  private seq = 0;
  private now: number;

  constructor(startMs: number) {
    this.now = startMs;
  }

  nowMs(): number {
    return this.now;
  }

  /** The clock as a function (the isolate's `clock`). */
  readonly clock = (): number => this.now;

  /** Resolves after `ms` of simulated time (the isolate's `sleep`). */
  readonly sleep = (ms: number): Promise<void> => new Promise((resolve) => this.after(ms, resolve));

  after(ms: number, fn: () => void): () => void {
    const event: Event = { atMs: this.now + Math.max(0, ms), seq: this.seq++, fn };
    this.push(event);
    return () => {
      event.fn = null;
    };
  }

  /** Run every event up to and including `untilMs` (in time order, ties in scheduling order), then stop there. */
  async runUntil(untilMs: number): Promise<void> {
    await settle();
    for (;;) {
      const next = this.heap[0];
      if (next === undefined || next.atMs > untilMs) break;
      this.pop();
      if (next.fn === null) continue;
      this.now = next.atMs;
      next.fn();
      await settle();
    }
    this.now = Math.max(this.now, untilMs);
  }

  /** Events still scheduled (cancelled ones included until their time comes). */
  get pending(): number {
    return this.heap.length;
  }

  private push(e: Event): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}

function before(a: Event, b: Event): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}

/** Let every pending promise continuation run (a macrotask turn drains the microtask queue). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
