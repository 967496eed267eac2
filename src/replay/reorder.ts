/**
 * Access logs are written when a request ends, so a slow request's line comes after faster ones that started later.
 * `Reorder` holds the lines of the last `windowMs` (bounded memory) and lets them out in start-time order; a line
 * more than `windowMs` late goes out where it came and is counted. Lines of one instant go out in the log's order,
 * except that a request the log says its limiter refused (`answered.limited`) comes after the ones it did not: a
 * refusal is written at once and an admitted request when it ends, but within one instant a limiter admits before it
 * refuses (nothing leaks in between, and a refusal changes no state), so the log's order would replay a refusal
 * first and flip both.
 */
import type { RequestLine } from "./request_trace.ts";

interface Held {
  readonly line: RequestLine;
  readonly seq: number;
}

export class Reorder {
  private readonly heap: Held[] = [];
  private seq = 0;
  private latestMs = Number.NEGATIVE_INFINITY;
  private emittedMs = Number.NEGATIVE_INFINITY;
  /** Lines that came more than the window late (written out of order). */
  late = 0;

  constructor(
    private readonly windowMs: number,
    private readonly emit: (line: RequestLine) => void,
  ) {}

  add(line: RequestLine): void {
    if (line.tMs > this.latestMs) this.latestMs = line.tMs;
    if (line.tMs < this.emittedMs) this.late++;
    this.push({ line: { ...line }, seq: this.seq++ });
    while (this.heap.length > 0 && this.heap[0]!.line.tMs <= this.latestMs - this.windowMs) this.out(this.pop().line);
  }

  /** Everything still held, in order. */
  flush(): void {
    while (this.heap.length > 0) this.out(this.pop().line);
  }

  private out(line: RequestLine): void {
    if (line.tMs > this.emittedMs) this.emittedMs = line.tMs;
    this.emit(line);
  }

  private less(a: Held, b: Held): boolean {
    if (a.line.tMs !== b.line.tMs) return a.line.tMs < b.line.tMs;
    const refused = (h: Held) => (h.line.answered?.limited === true ? 1 : 0);
    return refused(a) !== refused(b) ? refused(a) < refused(b) : a.seq < b.seq;
  }

  private push(item: Held): void {
    const h = this.heap;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): Held {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}
