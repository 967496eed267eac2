/**
 * A bounded, packed hash table of per-key algorithm state with exact least-recently-used eviction, for
 * `scope: local` rules. Everything lives in typed arrays, so a key costs a fixed number of bytes and the garbage
 * collector has nothing to walk:
 *
 *   per slot: 64-bit key hash (8 B) + `fields` float64 of state (8 B each) + LRU links (8 B)
 *   index:    open addressing over uint32 slot numbers, 1.5 entries per slot (6 B per key)
 *
 * A one-field state (a TAT) is 30 B per key when full.
 * Keys are identified by their 64-bit hash alone: two keys colliding (about 1 in 2^64 per pair) would share state,
 * acceptable for a store that is approximate by design. Float64 fields hold integers below 2^53 only, so they are exact.
 */

const EMPTY = 0xffffffff;

export class CompactTable {
  /** Slots in use. */
  private used = 0;
  private capacity: number;
  private hashHi: Uint32Array;
  private hashLo: Uint32Array;
  /** `fields` float64 values per slot. */
  private values: Float64Array;
  /** LRU list: prev and next slot per slot; `head` is the most recently used. */
  private prev: Uint32Array;
  private next: Uint32Array;
  private head = EMPTY;
  private tail = EMPTY;
  /** Open-addressing index: slot number or EMPTY. */
  private index: Uint32Array;
  /** Slots freed by `delete`, reused first. */
  private free: number[] = [];
  /** How many keys were evicted to make room (for metrics). */
  evictions = 0;

  constructor(
    readonly fields: number,
    readonly maxKeys: number,
    initialCapacity = 1024,
  ) {
    if (!Number.isInteger(maxKeys) || maxKeys < 1 || maxKeys >= EMPTY) throw new RangeError("maxKeys out of range");
    this.capacity = Math.min(maxKeys, initialCapacity);
    this.hashHi = new Uint32Array(this.capacity);
    this.hashLo = new Uint32Array(this.capacity);
    this.values = new Float64Array(this.capacity * fields);
    this.prev = new Uint32Array(this.capacity);
    this.next = new Uint32Array(this.capacity);
    this.index = new Uint32Array(indexSize(this.capacity)).fill(EMPTY);
  }

  get size(): number {
    return this.used - this.free.length;
  }

  /** Bytes held by the typed arrays. */
  get bytes(): number {
    return (
      this.hashHi.byteLength +
      this.hashLo.byteLength +
      this.values.byteLength +
      this.prev.byteLength +
      this.next.byteLength +
      this.index.byteLength
    );
  }

  /** The slot of key (hi, lo), marked most recently used; -1 when absent. */
  find(hi: number, lo: number): number {
    const slot = this.lookup(hi, lo);
    if (slot >= 0) this.touch(slot);
    return slot;
  }

  /**
   * The fields of every slot, `fields` per slot (slot s from `s × fields`): for a kernel that decides on a row in
   * place. Valid until the next `insert` (which may grow the table).
   */
  get rows(): Float64Array {
    return this.values;
  }

  /** Read field `f` of `slot`. */
  get(slot: number, f: number): number {
    return this.values[slot * this.fields + f]!;
  }

  set(slot: number, f: number, value: number): void {
    this.values[slot * this.fields + f] = value;
  }

  /** The slot for key (hi, lo), inserted (fields zeroed) if absent, evicting the least recently used key if full. */
  insert(hi: number, lo: number): number {
    const existing = this.find(hi, lo);
    if (existing >= 0) return existing;
    if (this.size >= this.maxKeys) {
      this.evictions++;
      this.deleteSlot(this.tail);
    } else if (this.free.length === 0 && this.used === this.capacity) this.grow();
    const slot = this.free.length > 0 ? (this.free.pop() as number) : this.used++;
    this.hashHi[slot] = hi;
    this.hashLo[slot] = lo;
    this.values.fill(0, slot * this.fields, (slot + 1) * this.fields);
    this.linkHead(slot);
    const mask = this.index.length;
    let i = startOf(hi, lo, mask);
    while (this.index[i] !== EMPTY) i = i + 1 === mask ? 0 : i + 1;
    this.index[i] = slot;
    return slot;
  }

  delete(hi: number, lo: number): boolean {
    const slot = this.lookup(hi, lo);
    if (slot < 0) return false;
    this.deleteSlot(slot);
    return true;
  }

  /** Keys from least to most recently used, as [hi, lo] (for tests and sweeps). */
  *lruOrder(): Generator<[number, number, number]> {
    for (let s = this.tail; s !== EMPTY; s = this.prev[s]!) yield [this.hashHi[s]!, this.hashLo[s]!, s];
  }

  /** Apply `fn` to every slot in use (e.g. to rebase stored times). */
  forEachSlot(fn: (slot: number) => void): void {
    for (let s = this.head; s !== EMPTY; s = this.next[s]!) fn(s);
  }

  private lookup(hi: number, lo: number): number {
    const size = this.index.length;
    let i = startOf(hi, lo, size);
    for (;;) {
      const slot = this.index[i]!;
      if (slot === EMPTY) return -1;
      if (this.hashLo[slot] === lo && this.hashHi[slot] === hi) return slot;
      i = i + 1 === size ? 0 : i + 1;
    }
  }

  /** Free `slot` (a slot in use): its key is gone. */
  deleteSlot(slot: number): void {
    const size = this.index.length;
    let i = startOf(this.hashHi[slot]!, this.hashLo[slot]!, size);
    while (this.index[i] !== slot) i = i + 1 === size ? 0 : i + 1;
    // Backward-shift deletion keeps every probe chain unbroken without tombstones.
    let j = i;
    for (;;) {
      j = j + 1 === size ? 0 : j + 1;
      const s = this.index[j]!;
      if (s === EMPTY) break;
      const home = startOf(this.hashHi[s]!, this.hashLo[s]!, size);
      const between = i <= j ? home > i && home <= j : home > i || home <= j;
      if (!between) {
        this.index[i] = s;
        i = j;
      }
    }
    this.index[i] = EMPTY;
    this.unlink(slot);
    this.free.push(slot);
  }

  private touch(slot: number): void {
    if (this.head === slot) return;
    this.unlink(slot);
    this.linkHead(slot);
  }

  private linkHead(slot: number): void {
    this.prev[slot] = EMPTY;
    this.next[slot] = this.head;
    if (this.head !== EMPTY) this.prev[this.head] = slot;
    this.head = slot;
    if (this.tail === EMPTY) this.tail = slot;
  }

  private unlink(slot: number): void {
    const p = this.prev[slot]!;
    const n = this.next[slot]!;
    if (p !== EMPTY) this.next[p] = n;
    else this.head = n;
    if (n !== EMPTY) this.prev[n] = p;
    else this.tail = p;
  }

  private grow(): void {
    const capacity = Math.min(this.maxKeys, this.capacity * 2);
    const copy = <T extends Uint32Array | Float64Array>(from: T, make: (n: number) => T, per = 1): T => {
      const to = make(capacity * per);
      to.set(from);
      return to;
    };
    this.hashHi = copy(this.hashHi, (n) => new Uint32Array(n));
    this.hashLo = copy(this.hashLo, (n) => new Uint32Array(n));
    this.values = copy(this.values, (n) => new Float64Array(n), this.fields);
    this.prev = copy(this.prev, (n) => new Uint32Array(n));
    this.next = copy(this.next, (n) => new Uint32Array(n));
    this.capacity = capacity;
    const size = indexSize(capacity);
    this.index = new Uint32Array(size).fill(EMPTY);
    for (let s = this.head; s !== EMPTY; s = this.next[s]!) {
      let i = startOf(this.hashHi[s]!, this.hashLo[s]!, size);
      while (this.index[i] !== EMPTY) i = i + 1 === size ? 0 : i + 1;
      this.index[i] = s;
    }
  }
}

/** 1.5 index entries per slot: a load factor of at most 2/3 keeps linear probes short. */
function indexSize(capacity: number): number {
  return Math.ceil(capacity * 1.5) + 1;
}

function startOf(hi: number, lo: number, size: number): number {
  // The hash is uniform: reduce (hi ^ lo) into [0, size) by multiply-shift, with no division.
  return Math.floor(((hi ^ lo) >>> 0) * (size / 4294967296));
}
