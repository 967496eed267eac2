/**
 * Every distinct key of a replay, numbered in order of first appearance, packed: the keys' UTF-8 bytes one after
 * another in one byte array, where each starts (4 bytes) and a 32-bit hash of it (4 bytes), and an open-addressing
 * index of key numbers (4 bytes, at most half full). A key of n bytes costs about n + 16 to 24 bytes, against about
 * 100 for a string in a Map. Exact: a hash match is confirmed on the bytes, so two keys never share a number.
 */

const EMPTY = 0xffffffff;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class KeyIndex {
  private bytes = new Uint8Array(1 << 16);
  private used = 0;
  /** Key i's bytes are `bytes[starts[i] .. starts[i + 1])`. */
  private starts = new Uint32Array(1024);
  private hashes = new Uint32Array(1024);
  private count = 0;
  private index = new Uint32Array(2048).fill(EMPTY);
  /** The key being looked up, encoded. */
  private scratch = new Uint8Array(256);
  private scratchLength = 0;

  /** The key's number, assigned on first sight. */
  of(key: string): number {
    const hash = this.encode(key);
    const mask = this.index.length - 1;
    let i = hash & mask;
    for (;;) {
      const k = this.index[i]!;
      if (k === EMPTY) break;
      if (this.hashes[k] === hash && this.sameBytes(k)) return k;
      i = (i + 1) & mask;
    }
    return this.add(hash, i);
  }

  /** The key's number, or -1 when it never came. */
  find(key: string): number {
    const hash = this.encode(key);
    const mask = this.index.length - 1;
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const k = this.index[i]!;
      if (k === EMPTY) return -1;
      if (this.hashes[k] === hash && this.sameBytes(k)) return k;
    }
  }

  /** Key number `k` as the string it came as. */
  name(k: number): string {
    return decoder.decode(this.bytes.subarray(this.starts[k]!, this.end(k)));
  }

  get size(): number {
    return this.count;
  }

  /** Bytes held by the typed arrays. */
  get byteSize(): number {
    return this.bytes.byteLength + this.starts.byteLength + this.hashes.byteLength + this.index.byteLength;
  }

  private end(k: number): number {
    return k + 1 < this.count ? this.starts[k + 1]! : this.used;
  }

  /** Encodes `key` into the scratch bytes; its FNV-1a hash. */
  private encode(key: string): number {
    if (key.length * 3 > this.scratch.length) this.scratch = new Uint8Array(key.length * 3);
    const { written } = encoder.encodeInto(key, this.scratch);
    this.scratchLength = written;
    let h = 0x811c9dc5;
    for (let i = 0; i < written; i++) h = Math.imul(h ^ this.scratch[i]!, 0x01000193);
    // A final mix: the index uses the low bits, which FNV alone spreads poorly for keys that differ at the end.
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    return (h ^ (h >>> 13)) >>> 0;
  }

  private sameBytes(k: number): boolean {
    const start = this.starts[k]!;
    const n = this.scratchLength;
    if (this.end(k) - start !== n) return false;
    for (let i = 0; i < n; i++) if (this.bytes[start + i] !== this.scratch[i]) return false;
    return true;
  }

  /** Adds the scratch key at index place `i` (an empty one); its number. */
  private add(hash: number, i: number): number {
    const n = this.scratchLength;
    if (this.used + n > this.bytes.length) {
      const bytes = new Uint8Array(Math.max(this.bytes.length * 2, this.used + n));
      bytes.set(this.bytes.subarray(0, this.used));
      this.bytes = bytes;
    }
    this.bytes.set(this.scratch.subarray(0, n), this.used);
    if (this.count === this.starts.length) {
      this.starts = copyInto(new Uint32Array(this.count * 2), this.starts);
      this.hashes = copyInto(new Uint32Array(this.count * 2), this.hashes);
    }
    const k = this.count++;
    this.starts[k] = this.used;
    this.hashes[k] = hash;
    this.used += n;
    this.index[i] = k;
    if (this.count * 2 > this.index.length) this.rebuildIndex();
    return k;
  }

  private rebuildIndex(): void {
    this.index = new Uint32Array(this.index.length * 2).fill(EMPTY);
    const mask = this.index.length - 1;
    for (let k = 0; k < this.count; k++) {
      let i = this.hashes[k]! & mask;
      while (this.index[i] !== EMPTY) i = (i + 1) & mask;
      this.index[i] = k;
    }
  }
}

function copyInto(to: Uint32Array<ArrayBuffer>, from: Uint32Array): Uint32Array<ArrayBuffer> {
  to.set(from);
  return to;
}
