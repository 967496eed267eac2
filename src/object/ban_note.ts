/** What the ban index (names.ts `BAN_INDEX_NAME`, limiter.ts `noteBan`) keeps of each ban, and how many. */

/** A ban the index lists: the key's object, its rule and hashed key, and its end (the key's object's clock, ms). */
export interface BanNote {
  readonly object: string;
  readonly rule: string;
  readonly keyHash: string;
  readonly untilMs: number;
}

/** The most bans the index keeps: when full, the one ending soonest makes room. */
export const BAN_INDEX_MAX = 1000;
