/**
 * The blocked-key cache: after a Durable Object denies a (rule, key), this isolate remembers until when that key is
 * *certainly* denied, and answers those requests itself, without a call: a flood from one blocked key costs about one
 * object call per retry period. A request the object would admit is never refused here: a denial of cost `c` at `t`
 * with `retry_after_ms = R` proves (absent refunds) that a cost `c' >= c` is denied until `t + R`; for a smaller cost
 * each algorithm says what its denial proves (`smallerDeniedUntilMs`), and an algorithm whose denials change its
 * state (`denialsCount`), or whose slots a release frees at any time (concurrency), is not cached. `t` is this isolate's clock when the call was *sent*, so the deadline is early
 * rather than late and clock skew does not matter.
 *
 * A refund or an admin reset makes the object more generous than a cached denial: this isolate forgets the entry when
 * it refunds or resets that (rule, key) or the object admits it; another isolate's refund or reset reaches this cache
 * only when the entry expires, at most `R` later. A denial answered to a call sent before this isolate's last refund of
 * that (rule, key) is not remembered: the object may have decided it before the refund arrived, and a call in flight
 * while the refund went out would otherwise write it back after the refund forgot the entry. A ban (`block_for`) answers any cost, for at most `BAN_CACHE_MS`.
 */
import { type Decision, denialsCount, deniedUntilMs, slotPolicy } from "../algorithms/index.ts";
import type { AlgorithmParams } from "../rules/types.ts";
import { makeRoom } from "./bounded.ts";

/**
 * How long this isolate answers from a ban (src/protocol/outcome.ts) before asking the key's object again, ms: a ban
 * may last hours, and an admin reset (in another isolate) lifts it.
 */
export const BAN_CACHE_MS = 10_000;

/** Entries kept per isolate at most, the least recently used evicted first (a sixteenth at a time, bounded.ts). */
export const BLOCKED_CACHE_MAX_ENTRIES = 10_000;

/**
 * What another enforcing rule of a denied request said (after its refund), kept with the denial so that an answer from
 * this cache carries the same RateLimit items as the object's answer did: one per enforcing rule (docs/rules.md).
 */
export interface Companion {
  readonly remaining: number;
  readonly resetAfterMs: number;
  /** This isolate's clock when it was known, ms. */
  readonly atMs: number;
}

interface Entry {
  /** Other rules' figures from the denied response, by their object name (rule and key). */
  readonly companions?: ReadonlyMap<string, Companion>;
  readonly fingerprint: string;
  readonly params: AlgorithmParams;
  /** The denied cost. */
  readonly cost: number;
  /** The denial's `remaining`. */
  readonly remaining: number;
  /** This isolate's clock when the call was sent, ms. */
  readonly sentAtMs: number;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  /** A ban's denial: every cost is refused until `sentAtMs + retryAfterMs`; the entry lapses at `sentAtMs + BAN_CACHE_MS`. */
  readonly banned?: true;
}

/** Whether a rule's denials may be cached at all. */
export function cacheable(params: AlgorithmParams): boolean {
  // A slot-holding rule's denial lasts only until a release, which no isolate sees coming.
  return !denialsCount(params) && slotPolicy(params) === undefined;
}

export class BlockedCache {
  private readonly entries = new Map<string, Entry>();
  /** This isolate's clock at its last refund of each (rule, key) (`forgetRefunded`), bounded as the entries are. */
  private readonly refundedAtMs = new Map<string, number>();

  constructor(private readonly maxEntries: number = BLOCKED_CACHE_MAX_ENTRIES) {}

  /** Remember a denial the object answered to a call sent at `sentAtMs`. Admissions and other values are ignored. */
  remember(
    id: string,
    fingerprint: string,
    params: AlgorithmParams,
    cost: number,
    sentAtMs: number,
    decision: Decision,
    banned = false,
  ): void {
    if (decision.allowed || decision.retryAfterMs === null || !cacheable(params)) return;
    const refundedAtMs = this.refundedAtMs.get(id);
    if (refundedAtMs !== undefined && sentAtMs <= refundedAtMs) return;
    this.refundedAtMs.delete(id);
    this.entries.delete(id);
    makeRoom(this.entries, this.maxEntries);
    this.entries.set(id, {
      fingerprint,
      params,
      cost,
      remaining: decision.remaining,
      sentAtMs,
      retryAfterMs: decision.retryAfterMs,
      resetAfterMs: decision.resetAfterMs,
      ...(banned ? { banned } : {}),
    });
  }

  /** The object's certain answer to a request of `cost` at `nowMs`, when it is a denial; else `null` (ask it). */
  lookup(id: string, fingerprint: string, cost: number, nowMs: number): Decision | null {
    const entry = this.entries.get(id);
    if (entry === undefined) return null;
    const lapsed = entry.banned === true && nowMs >= entry.sentAtMs + BAN_CACHE_MS;
    if (entry.fingerprint !== fingerprint || nowMs >= entry.sentAtMs + entry.retryAfterMs || lapsed) {
      // Another rule under this id (a redeploy), or expired for every cost: it can prove nothing more.
      this.entries.delete(id);
      return null;
    }
    // A clock that stepped back proves nothing: ask the object.
    if (nowMs < entry.sentAtMs) return null;
    // How far a smaller cost is certainly denied is the algorithm's to say.
    const denied = { cost: entry.cost, remaining: entry.remaining, untilMs: entry.sentAtMs + entry.retryAfterMs };
    const untilMs = entry.banned === true ? denied.untilMs : deniedUntilMs(entry.params, denied, cost);
    if (untilMs === null || nowMs >= untilMs) return null;
    this.entries.delete(id);
    this.entries.set(id, entry);
    return {
      allowed: false,
      remaining: entry.remaining,
      resetAfterMs: Math.max(0, entry.resetAfterMs - (nowMs - entry.sentAtMs)),
      retryAfterMs: untilMs - nowMs,
      delayMs: 0,
    };
  }

  /**
   * The other enforcing rules' figures in the response that denied `id` (by object name); nothing when `id` is not
   * cached.
   */
  accompany(id: string, companions: ReadonlyMap<string, Companion>): void {
    const entry = this.entries.get(id);
    if (entry !== undefined) this.entries.set(id, { ...entry, companions });
  }

  /**
   * What the response that denied `deniedId` said of `otherId` (another rule's object name), aged to `nowMs`; null
   * when it did not name it.
   */
  companion(deniedId: string, otherId: string, nowMs: number): { remaining: number; resetAfterMs: number } | null {
    const known = this.entries.get(deniedId)?.companions?.get(otherId);
    if (known === undefined) return null;
    return { remaining: known.remaining, resetAfterMs: Math.max(0, known.resetAfterMs - (nowMs - known.atMs)) };
  }

  /** Whether this isolate answers a ban of `id` from memory now (it met the ban less than `BAN_CACHE_MS` ago). */
  holdsBan(id: string): boolean {
    return this.entries.get(id)?.banned === true;
  }

  /** Forget a (rule, key): it was refunded, reset, or admitted. */
  forget(id: string): void {
    this.entries.delete(id);
  }

  /** Forget a (rule, key) this isolate refunds at `nowMs`, and any denial answered to a call sent until then. */
  forgetRefunded(id: string, nowMs: number): void {
    this.entries.delete(id);
    this.refundedAtMs.delete(id);
    makeRoom(this.refundedAtMs, this.maxEntries);
    this.refundedAtMs.set(id, nowMs);
  }

  get size(): number {
    return this.entries.size;
  }
}
