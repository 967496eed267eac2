/**
 * A first-in, first-out queue of admissions `(tMs, key, cost)`, packed: chunks of `CHUNK` entries, 20 bytes each
 * (time and cost as float64, key as uint32), in typed arrays. The chunks between the one being read and the one being
 * written are held in memory up to `memoryChunks`; past that they go to a `ChunkSpill` when one is given (the CLI gives
 * a temporary file), so a day-long window over a day of traffic holds a few megabytes however many admissions it
 * spans. Without a spill everything stays in memory.
 */

/** Entries per chunk. */
export const CHUNK = 8192;
/** Bytes per chunk: time and cost (float64), key (uint32). */
export const CHUNK_BYTES = CHUNK * 20;

/** Where chunks go when memory is full: written once, read back once, in any order, then freed. */
export interface ChunkSpill {
  /** Stores a chunk's bytes; a handle to read them back. */
  write(bytes: Uint8Array): number;
  /** Reads the chunk `handle` back into `into` and frees it. */
  read(handle: number, into: Uint8Array): void;
}

/** One chunk: its bytes in memory, or where the spill keeps them. */
interface Chunk {
  bytes: Uint8Array<ArrayBuffer> | null;
  handle: number;
}

function views(bytes: Uint8Array<ArrayBuffer>): { t: Float64Array; cost: Float64Array; key: Uint32Array } {
  const { buffer, byteOffset } = bytes;
  return {
    t: new Float64Array(buffer, byteOffset, CHUNK),
    cost: new Float64Array(buffer, byteOffset + CHUNK * 8, CHUNK),
    key: new Uint32Array(buffer, byteOffset + CHUNK * 16, CHUNK),
  };
}

export class AdmissionQueue {
  /** Chunks from the head (being read) to the tail (being written). */
  private readonly chunks: Chunk[] = [];
  private inMemory = 0;
  /** Read position in the head chunk, write position in the tail chunk. */
  private headAt = 0;
  private tailAt = CHUNK;
  private head: ReturnType<typeof views> | null = null;
  private tail: ReturnType<typeof views> | null = null;
  /** A freed chunk's bytes, reused for the next one. */
  private spare: Uint8Array<ArrayBuffer> | null = null;
  /** Entries held. */
  length = 0;

  constructor(
    private readonly spill: ChunkSpill | null = null,
    private readonly memoryChunks = 16,
  ) {}

  push(tMs: number, key: number, cost: number): void {
    if (this.tailAt === CHUNK) this.newTail();
    const tail = this.tail!;
    tail.t[this.tailAt] = tMs;
    tail.key[this.tailAt] = key;
    tail.cost[this.tailAt] = cost;
    this.tailAt++;
    this.length++;
  }

  /** The oldest entry's time; call only when `length > 0`. */
  headTime(): number {
    return this.readHead().t[this.headAt]!;
  }

  headKey(): number {
    return this.readHead().key[this.headAt]!;
  }

  headCost(): number {
    return this.readHead().cost[this.headAt]!;
  }

  /** Drops the oldest entry. */
  shift(): void {
    this.readHead();
    this.advance(1);
  }

  /**
   * Drops the entries at or before `limitMs`, oldest first, taking each one's cost off `sums[key]`, and stops before
   * the first of key `stopKey` (-1: none): `true` when it stopped there (that entry is then the head).
   */
  dropUpTo(limitMs: number, sums: Float64Array, stopKey: number): boolean {
    while (this.length > 0) {
      const { t, key, cost } = this.readHead();
      const end = this.chunks.length === 1 ? this.tailAt : CHUNK;
      const from = this.headAt;
      let at = from;
      let stopped = false;
      for (; at < end && t[at]! <= limitMs; at++) {
        const k = key[at]!;
        if (k === stopKey) {
          stopped = true;
          break;
        }
        sums[k] = sums[k]! - cost[at]!;
      }
      if (at > from) this.advance(at - from);
      if (stopped || at < end) return stopped;
    }
    return false;
  }

  /** Moves the head `n` entries on, within the head chunk, freeing it when it is done. */
  private advance(n: number): void {
    this.headAt += n;
    this.length -= n;
    const onlyChunk = this.chunks.length === 1;
    if (this.headAt === CHUNK || (onlyChunk && this.length === 0)) {
      const done = this.chunks.shift()!;
      this.spare = done.bytes;
      this.inMemory--;
      this.head = null;
      this.headAt = 0;
      if (onlyChunk) {
        this.tail = null;
        this.tailAt = CHUNK;
      }
    }
  }

  private readHead(): ReturnType<typeof views> {
    if (this.head !== null) return this.head;
    const chunk = this.chunks[0]!;
    if (chunk.bytes === null) {
      chunk.bytes = this.takeBytes();
      this.spill!.read(chunk.handle, chunk.bytes);
      this.inMemory++;
    }
    this.head = views(chunk.bytes);
    return this.head;
  }

  private newTail(): void {
    // The last full chunk goes to the spill when memory is full, unless it is the head (being read).
    const full = this.chunks.length - 1;
    if (this.spill !== null && full > 0 && this.inMemory >= this.memoryChunks) {
      const chunk = this.chunks[full]!;
      chunk.handle = this.spill.write(chunk.bytes!);
      this.spare = chunk.bytes;
      chunk.bytes = null;
      this.inMemory--;
    }
    const bytes = this.takeBytes();
    this.chunks.push({ bytes, handle: -1 });
    this.inMemory++;
    this.tail = views(bytes);
    this.tailAt = 0;
  }

  private takeBytes(): Uint8Array<ArrayBuffer> {
    const bytes = this.spare ?? new Uint8Array(CHUNK_BYTES);
    this.spare = null;
    return bytes;
  }
}
