/**
 * A data center's hot marks: what one isolate learned about a hot key, for the others of its data center to know
 * without a call. Without them every isolate's first request for a key is a call to the key's object, which answers
 * `hot` (or refuses as overloaded): at a redeploy (every isolate new) a second cold start, about one call per isolate
 * in the first second (781-989 calls/s at 1,000 isolates in the cluster simulation) and 4.8-32% of a window lost.
 * With them, an isolate that does not track a key yet (or whose hot spell there lapsed: no answer for 5 s, coalesce.ts
 * `tracks`) looks for its mark first and, marked, sends its batches to
 * its region's delegate from the first (to its own shard when the mark says the first is busy). An isolate writes the
 * mark when it learns the key is hot or moved to its own shard, and again before it expires while the key stays hot.
 *
 * The Worker keeps marks in the Workers Cache API (`caches.default`: one per data center, not replicated, absent on
 * `*.workers.dev`: then every isolate learns from its own first call); the simulation keeps one per data center. A
 * mark is a hint: a stale one meets a delegate that answers `hot: false`, and the isolate goes back to the key's
 * object. A fast `key: global` rule's key needs no mark: it is hot by construction (`hotByConstruction`).
 */

import { type AlgorithmParams, leasePolicy } from "../algorithms/index.ts";
import { GLOBAL_HOT_FROM_PER_S, HOT_MARK_TTL_MS, MARKS_REMEMBERED } from "../protocol/tunables.ts";
import type { HotMark } from "./coalesce_types.ts";

/** A data center's marks: read one (`null`: none, or it could not be read), write one (best effort). */
export interface HotMarkStore {
  read(name: string): Promise<StoredMark | null>;
  write(name: string, mark: StoredMark): Promise<void>;
}

/**
 * What a mark holds: whether the key's first delegate is busy (isolates moved to their own shards). Stored as
 * `{ spread }` in the Cache API (hot_mark_cache.ts): the stored word stays, so marks read across a deploy.
 */
export interface StoredMark {
  readonly spread: boolean;
}

/**
 * The mark an isolate takes from a stored one at `nowMs` (its own clock): hot for the mark's ttl. A key hot by
 * construction (`hotByConstruction`) is taken as marked without a stored mark (not own shard): its first batch goes to
 * the region's delegate, not to the key's object; a delegate that finds the key cold answers `hot: false`, and the
 * isolate sends its next batches to the key's object (coalesce.ts), without looking for a mark again.
 */
export function markFrom(stored: StoredMark | null, nowMs: number, hot = false): HotMark | null {
  if (stored === null && !hot) return null;
  return { untilMs: nowMs + HOT_MARK_TTL_MS, ownShard: stored?.spread === true };
}

/**
 * Whether a rule's key is hot by construction: a `key: global` rule (`key` is `[]`: one key for every caller,
 * docs/rules.md "Keys") whose rate, or limit per window, is at least `GLOBAL_HOT_FROM_PER_S` per second. Its key's
 * object would otherwise take one first call from every isolate that sees it before any mark could reach them (a
 * mark is seen some 100 ms after its write): 476 calls in the first second at 5,000 isolates and 10k req/s in the
 * cluster simulation, 149 from the start at the delegates.
 */
export function hotByConstruction(keyGlobal: boolean, params: AlgorithmParams): boolean {
  if (!keyGlobal) return false;
  const policy = leasePolicy(params.algorithm);
  if (policy.kind === "rate") return policy.refillOver(params, 1000) >= GLOBAL_HOT_FROM_PER_S;
  if (policy.kind !== "window") return false;
  // Windows are aligned to the epoch: the first one's length, from 0, is every one's (a month's, 31 days).
  const windowMs = policy.termMs(params, 0, 31 * 86_400_000);
  return policy.limit(params) * 1000 >= GLOBAL_HOT_FROM_PER_S * windowMs;
}

/**
 * Whether an isolate that knows `mark` (coalesce.ts `markOf`) should write it, having last written `last` (its
 * `ownShard`, and when, on its clock): when it wrote none, when the key moved to its own shard since, or when half the
 * ttl has passed (so a key that stays hot stays marked).
 */
export function markDue(
  mark: HotMark | null,
  last: { readonly ownShard: boolean; readonly atMs: number } | undefined,
  nowMs: number,
): boolean {
  if (mark === null) return false;
  if (last === undefined || (mark.ownShard && !last.ownShard)) return true;
  return nowMs - last.atMs >= HOT_MARK_TTL_MS / 2;
}

/**
 * Write this isolate's `mark` of `name` to its data center's `store` (best effort). A mark that says own shard is
 * written as it is. One that does not is written only when the stored one does not say so either: once a region's
 * isolates moved to their own shards (the first delegate was busy), an isolate still on the first shard (it never saw
 * it busy, because the others had left it) must not turn the mark back, or the isolates that start next (a redeploy's:
 * all of them) send every batch to the first shard, whose share is small, while the other shards' shares go unused
 * until the first says busy again (hot-rate, 1,000 isolates, redeploy in the cluster simulation: 4.95% of a window
 * under-admitted in the 2 s after it, 2.43% with this). It moves to its own shard instead (`moveHere`), and its next
 * mark says so.
 */
export async function writeMark(store: HotMarkStore, name: string, mark: HotMark, moveHere: () => void): Promise<void> {
  if (!mark.ownShard && (await store.read(name))?.spread === true) {
    moveHere();
    return;
  }
  await store.write(name, { spread: mark.ownShard });
}

/**
 * How an isolate reads whether `store`'s mark of a key says own shard (`AskInput.ownShardMark`: once per hot spell,
 * before the key's first call to the delegate when no mark was read for it). The Worker and the simulation both pass
 * this.
 */
export function ownShardOfMark(store: HotMarkStore): (name: string) => Promise<boolean> {
  return async (name) => (await store.read(name))?.spread === true;
}

/** What one isolate wrote lately, by key (to write each mark once per half ttl, not on every request). */
export class WrittenMarks {
  private readonly written = new Map<string, { readonly ownShard: boolean; readonly atMs: number }>();

  /** Whether to write `mark` for `name` now; if so, remembered as written. */
  take(name: string, mark: HotMark | null, nowMs: number): boolean {
    const last = this.written.get(name);
    if (!markDue(mark, last, nowMs) || mark === null) return false;
    this.written.delete(name);
    this.written.set(name, { ownShard: mark.ownShard, atMs: nowMs });
    if (this.written.size > MARKS_REMEMBERED) {
      const oldest = this.written.keys().next().value;
      if (oldest !== undefined) this.written.delete(oldest);
    }
    return true;
  }
}
