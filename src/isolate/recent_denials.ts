/**
 * The most recent denials this isolate answered, for the dashboard (`/_sluice/` and `/_sluice/denials`): a ring of
 * fixed size, so memory stays bounded whatever the traffic. Keys are the hashes the gateway already uses, never raw.
 *
 * A flood from one blocked key would push every other denial out of a plain ring, so a denial of the same (rule,
 * key) as the newest entry is folded into it (its count grows and its time and retry move on) instead of taking a
 * new slot. Counts are per isolate, like every other counter here.
 */

/** One denial as the dashboard shows it. */
export interface DenialEntry {
  /** When the (latest folded) denial happened, ms since the epoch. */
  readonly atMs: number;
  readonly rule: string;
  /** The hashed key (SHA-256 or HMAC-SHA256 hex). */
  readonly key: string;
  /** How long the client was told to wait, ms (`null` when it was refused for another reason). */
  readonly retryAfterMs: number | null;
  /** Where the denial came from: the rule's object, this isolate's blocked-key cache, or local scope. */
  readonly source: string;
  /** Consecutive denials of this (rule, key) folded into this entry. */
  readonly count: number;
}

/** Entries the ring keeps by default: a screenful, a few kilobytes. */
export const RECENT_DENIALS_MAX = 100;

export class RecentDenials {
  private readonly slots: (DenialEntry | undefined)[];
  /** Index of the next slot to write. */
  private next = 0;
  private size = 0;

  constructor(readonly capacity = RECENT_DENIALS_MAX) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be >= 1, got ${capacity}`);
    this.slots = new Array<DenialEntry | undefined>(capacity);
  }

  record(denial: Omit<DenialEntry, "count">): void {
    const newestAt = (this.next + this.capacity - 1) % this.capacity;
    const newest = this.size > 0 ? this.slots[newestAt] : undefined;
    if (newest !== undefined && newest.rule === denial.rule && newest.key === denial.key) {
      this.slots[newestAt] = { ...denial, count: newest.count + 1 };
      return;
    }
    this.slots[this.next] = { ...denial, count: 1 };
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.size + 1, this.capacity);
  }

  /** Newest first. */
  list(): DenialEntry[] {
    const out: DenialEntry[] = [];
    for (let i = 1; i <= this.size; i++) out.push(this.slots[(this.next - i + this.capacity) % this.capacity]!);
    return out;
  }
}
