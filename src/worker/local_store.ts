/**
 * The in-isolate store for `scope: local` rules: the same records and pure core as the Durable Object, kept in this
 * isolate's memory only. Approximate by design: each isolate (and each Cloudflare location) counts on its own, and a
 * key evicted from the bounded map starts again with a full allowance (as NGINX does when its zone fills). Pick it
 * for coarse, high-volume protection where a round trip per request costs more than exactness is worth.
 */
import {
  type CheckInput,
  type CheckResult,
  checkRecord,
  type LimiterRecord,
  type RefundInput,
  type RefundResult,
  recordFreshAtMs,
  refundRecord,
} from "./store.ts";

const MAX_KEYS = 100_000;

export class LocalStore {
  private readonly records = new Map<string, LimiterRecord>();

  constructor(private readonly maxKeys: number = MAX_KEYS) {}

  check(name: string, input: CheckInput, nowMs: number): CheckResult {
    const before = this.get(name, nowMs);
    const { result, record } = checkRecord(before, input, nowMs);
    if (record !== before) this.set(name, record);
    return result;
  }

  refund(name: string, input: RefundInput, nowMs: number): RefundResult {
    const before = this.get(name, nowMs);
    const { result, record } = refundRecord(before, input, nowMs);
    if (record !== before) this.set(name, record);
    return result;
  }

  get size(): number {
    return this.records.size;
  }

  private get(name: string, nowMs: number): LimiterRecord | null {
    const record = this.records.get(name);
    if (record === undefined) return null;
    // Least recently used goes first: re-insert to move the key to the back of the map's order.
    this.records.delete(name);
    if (nowMs >= recordFreshAtMs(record)) return null;
    this.records.set(name, record);
    return record;
  }

  private set(name: string, record: LimiterRecord | null): void {
    this.records.delete(name);
    if (record === null) return;
    if (this.records.size >= this.maxKeys) {
      const oldest = this.records.keys().next();
      if (oldest.done !== true) this.records.delete(oldest.value);
    }
    this.records.set(name, record);
  }
}

/** This isolate's store. */
export const localStore = new LocalStore();
