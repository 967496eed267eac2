/**
 * A packed table of rows keyed by a replay's key number: per row, the key (4 bytes) and `fields` float64 values (8
 * bytes each), in typed arrays, with an open-addressing index of slot numbers (4 bytes, at most half full). A row
 * costs `4 + 8 × fields` bytes plus 8 to 16 of index, and the garbage collector has nothing to walk. Rows are
 * dropped only all at once (`keepOnly`, which compacts), the way a replay sweeps states that are as good as fresh.
 * Float64 values hold integers below 2^53 exactly, so integer states stay exact.
 */

const EMPTY = 0xffffffff;

export class KeyedRows {
  private capacity: number;
  private keys: Uint32Array;
  private values: Float64Array;
  /** Slot numbers by hash of the key, or EMPTY; its length is a power of two at least twice `capacity`. */
  private index: Uint32Array;
  private shift: number;
  /** Rows in use (slots 0 .. size − 1). */
  size = 0;

  constructor(
    readonly fields: number,
    initialCapacity = 256,
  ) {
    this.capacity = initialCapacity;
    this.keys = new Uint32Array(initialCapacity);
    this.values = new Float64Array(initialCapacity * fields);
    const bits = Math.ceil(Math.log2(initialCapacity * 2));
    this.index = new Uint32Array(2 ** bits).fill(EMPTY);
    this.shift = 32 - bits;
  }

  /** Bytes held by the typed arrays. */
  get bytes(): number {
    return this.keys.byteLength + this.values.byteLength + this.index.byteLength;
  }

  /** The slot of `key`, or -1. */
  find(key: number): number {
    const mask = this.index.length - 1;
    for (let i = this.home(key); ; i = (i + 1) & mask) {
      const slot = this.index[i]!;
      if (slot === EMPTY) return -1;
      if (this.keys[slot] === key) return slot;
    }
  }

  /** A new slot for `key`, which must be absent (its fields are zero). */
  insert(key: number): number {
    if (this.size === this.capacity) this.grow(this.capacity * 2);
    const slot = this.size++;
    this.keys[slot] = key;
    this.values.fill(0, slot * this.fields, (slot + 1) * this.fields);
    this.place(slot);
    return slot;
  }

  /**
   * Take back the row `insert` just made (slot `size − 1`, nothing inserted since): it is the last one placed in its
   * probe run, so clearing its index entry leaves every other key findable.
   */
  dropLast(slot: number): void {
    const mask = this.index.length - 1;
    let i = this.home(this.keys[slot]!);
    while (this.index[i] !== slot) i = (i + 1) & mask;
    this.index[i] = EMPTY;
    this.size--;
  }

  /** The rows' values, `fields` per slot (reallocated as rows are added: read it again after `insert`). */
  get table(): Float64Array {
    return this.values;
  }

  keyAt(slot: number): number {
    return this.keys[slot]!;
  }

  get(slot: number, f: number): number {
    return this.values[slot * this.fields + f]!;
  }

  set(slot: number, f: number, value: number): void {
    this.values[slot * this.fields + f] = value;
  }

  /** Keep only the rows `keep` says yes to (slots change), and shrink to fit twice as many. */
  keepOnly(keep: (slot: number) => boolean): void {
    let to = 0;
    const { fields } = this;
    for (let from = 0; from < this.size; from++) {
      if (!keep(from)) continue;
      if (to !== from) {
        this.keys[to] = this.keys[from]!;
        this.values.copyWithin(to * fields, from * fields, (from + 1) * fields);
      }
      to++;
    }
    this.size = to;
    this.grow(Math.max(256, 2 ** Math.ceil(Math.log2(Math.max(1, to) * 2))));
  }

  /** Reallocate to `capacity` slots (at least `size`) and rebuild the index. */
  private grow(capacity: number): void {
    const keys = new Uint32Array(capacity);
    keys.set(this.keys.subarray(0, this.size));
    const values = new Float64Array(capacity * this.fields);
    values.set(this.values.subarray(0, this.size * this.fields));
    this.keys = keys;
    this.values = values;
    this.capacity = capacity;
    const bits = Math.ceil(Math.log2(capacity * 2));
    this.index = new Uint32Array(2 ** bits).fill(EMPTY);
    this.shift = 32 - bits;
    for (let slot = 0; slot < this.size; slot++) this.place(slot);
  }

  private place(slot: number): void {
    const mask = this.index.length - 1;
    let i = this.home(this.keys[slot]!);
    while (this.index[i] !== EMPTY) i = (i + 1) & mask;
    this.index[i] = slot;
  }

  /** Fibonacci hashing: key numbers are consecutive, so multiply to spread them over the index. */
  private home(key: number): number {
    return Math.imul(key, 0x9e3779b1) >>> this.shift;
  }
}
