/**
 * The replay's charges not yet due (outcomes.ts): (due time, rule, key, units), taken out in (due, arrival) order. A
 * binary heap over typed arrays, so queueing a charge makes no object; the arrival number breaks ties, so two charges
 * due at the same millisecond come out in the order they went in. The slots to give back use one too: the units are
 * the slot's id, and `untilMs` (NaN for a release) the end of a renewal's response.
 */
export class DueQueue {
  private dueMs = new Float64Array(64);
  private seq = new Float64Array(64);
  private rule = new Uint32Array(64);
  private key = new Uint32Array(64);
  private cost = new Float64Array(64);
  private until = new Float64Array(64);
  private next = 0;
  /** Entries queued. */
  size = 0;
  /** The entry `pop` took out last. */
  poppedRule = 0;
  poppedKey = 0;
  poppedCost = 0;
  poppedDueMs = 0;
  poppedUntilMs = Number.NaN;

  /** The earliest due time queued; +Infinity when empty. */
  get firstDueMs(): number {
    return this.size === 0 ? Number.POSITIVE_INFINITY : this.dueMs[0]!;
  }

  push(dueMs: number, rule: number, key: number, cost: number, untilMs = Number.NaN): void {
    if (this.size === this.dueMs.length) this.grow();
    const seq = this.next++;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(dueMs, seq, parent)) break;
      this.move(parent, i);
      i = parent;
    }
    this.dueMs[i] = dueMs;
    this.seq[i] = seq;
    this.rule[i] = rule;
    this.key[i] = key;
    this.cost[i] = cost;
    this.until[i] = untilMs;
  }

  /** Take out the first entry (the queue must not be empty) into the `popped*` fields. */
  pop(): void {
    this.poppedDueMs = this.dueMs[0]!;
    this.poppedRule = this.rule[0]!;
    this.poppedKey = this.key[0]!;
    this.poppedCost = this.cost[0]!;
    this.poppedUntilMs = this.until[0]!;
    const last = --this.size;
    if (last === 0) return;
    const dueMs = this.dueMs[last]!;
    const seq = this.seq[last]!;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= last) break;
      const right = left + 1;
      const child = right < last && this.earlier(right, left) ? right : left;
      if (this.before(dueMs, seq, child)) break;
      this.move(child, i);
      i = child;
    }
    this.move(last, i);
  }

  /** Whether (dueMs, seq) comes before entry `j`. */
  private before(dueMs: number, seq: number, j: number): boolean {
    const d = this.dueMs[j]!;
    return dueMs < d || (dueMs === d && seq < this.seq[j]!);
  }

  private earlier(i: number, j: number): boolean {
    return this.before(this.dueMs[i]!, this.seq[i]!, j);
  }

  private move(from: number, to: number): void {
    this.dueMs[to] = this.dueMs[from]!;
    this.seq[to] = this.seq[from]!;
    this.rule[to] = this.rule[from]!;
    this.key[to] = this.key[from]!;
    this.cost[to] = this.cost[from]!;
    this.until[to] = this.until[from]!;
  }

  private grow(): void {
    const n = this.dueMs.length * 2;
    const grown = <T extends Float64Array | Uint32Array>(a: T, b: T): T => {
      b.set(a);
      return b;
    };
    this.dueMs = grown(this.dueMs, new Float64Array(n));
    this.seq = grown(this.seq, new Float64Array(n));
    this.rule = grown(this.rule, new Uint32Array(n));
    this.key = grown(this.key, new Uint32Array(n));
    this.cost = grown(this.cost, new Float64Array(n));
    this.until = grown(this.until, new Float64Array(n));
  }
}
