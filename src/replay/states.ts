/**
 * What a replay keeps per (rule, key), and its decisions: the algorithm's state, with states that are as good as
 * fresh swept away. Where the algorithm has a row kernel (`rows`, compiled once per rule) the state is a row of a
 * `KeyedRows` table, `4 + 8 × width` bytes plus its index (about 28 bytes for the two-field states of most
 * algorithms), decided and refunded in place: no state object per decision. A concurrency's slots are a row too (its
 * slot kernel, src/algorithms/concurrency_rows.ts), taken, given back and renewed in place. Any other state (a long
 * sliding log, more slots than a row holds), and the state of a key kept under an account's own parameters, is an
 * object in a Map, decided by `decide`. BENCHMARKS.md has the measured figures.
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  type Decision,
  decide,
  freshAtMs,
  refund,
  rowPath,
  slotPolicy,
} from "../algorithms/index.ts";
import { decisionScratch } from "../algorithms/scratch.ts";
import type { DecisionScratch, RowChange, RowKernel, SlotRowKernel } from "../algorithms/types.ts";
import { KeyedRows } from "./rows.ts";

export { KeyIndex } from "./key_index.ts";

/** Sweep no more often than every this many new live states (and not below it). */
const SWEEP_MIN_LIVE = 65_536;

/** One rule's states by key number; absent is a fresh key. */
export class RuleStates {
  private readonly rows: KeyedRows | null;
  private readonly kernel: RowKernel<AlgorithmState> | null;
  /** The same kernel when the rule's requests hold slots (concurrency): its slots are given back on the row. */
  private readonly slotKernel: SlotRowKernel<AlgorithmState> | null;
  private readonly width: number;
  private readonly capacity: number;
  private readonly change: RowChange = { changed: false };
  /** The row kernels' decisions, written in place: the last one only (`decide` returns it, read before the next). */
  private readonly scratch: DecisionScratch = decisionScratch();
  private readonly objects = new Map<number, AlgorithmState>();
  private sweepAtLive = SWEEP_MIN_LIVE;

  constructor(
    /** The rule's own parameters: packed rows keep states under these. */
    private readonly params: AlgorithmParams,
    /** The parameters a key's state is kept under (a per-account override may differ from the rule's own). */
    private readonly paramsOf: (key: number) => AlgorithmParams,
  ) {
    this.slotKernel = slotPolicy(params)?.rows?.compile(params) ?? null;
    this.kernel = rowPath(params)?.compile(params) ?? this.slotKernel;
    this.width = this.kernel?.width ?? 0;
    this.rows = this.kernel === null ? null : new KeyedRows(this.width);
    this.capacity = capacityOf(params);
  }

  /**
   * Decide `cost` for `key` at `tMs` and keep the state after it; `null` when the cost is invalid or above the
   * capacity (nothing charged). Now and then, drop the states that are as good as fresh at `latestMs`. A row's
   * decision is this rule's scratch, written again by the next call: read it at once, keep nothing of it.
   */
  decide(key: number, cost: number, tMs: number, latestMs: number): Decision | null {
    const rows = this.packedFor(key);
    let decision: Decision;
    if (rows === null) {
      const before = this.objects.get(key) ?? this.get(key);
      const r = decide(this.paramsOf(key), before, cost, tMs);
      if (!r.ok) return null;
      if (r.state !== before) this.objects.set(key, r.state);
      decision = r.decision;
    } else {
      if (!Number.isSafeInteger(cost) || cost < 1 || cost > this.capacity) return null;
      let slot = rows.find(key);
      const fresh = slot < 0;
      // A fresh key's row is taken at once (its fields zero) and given back if the request changed nothing.
      if (fresh) slot = rows.insert(key);
      this.kernel!.into(rows.table, slot * this.width, fresh, cost, tMs, this.scratch, this.change);
      decision = this.scratch;
      if (fresh && !this.change.changed) rows.dropLast(slot);
    }
    if (this.size >= this.sweepAtLive) this.sweep(latestMs);
    return decision;
  }

  /** Give back what an admitted request of `cost` at `admittedAtMs` charged (`refund`), in place. */
  refund(key: number, cost: number, admittedAtMs: number): void {
    const object = this.objects.get(key);
    if (object !== undefined) {
      this.objects.set(key, refund(this.paramsOf(key), object, cost, admittedAtMs));
      return;
    }
    const slot = this.rows?.find(key) ?? -1;
    if (slot >= 0) this.kernel!.refund(this.rows!.table, slot * this.width, cost, admittedAtMs);
  }

  /** The slot the key's last admission took, when the rule's requests hold one (concurrency), else `null`. */
  lastSlot(key: number): number | null {
    const state = this.objects.get(key);
    if (state === undefined) {
      const slot = this.slotRow(key);
      return slot < 0 ? null : this.slotKernel!.taken(this.rows!.table, slot * this.width);
    }
    const policy = slotPolicy(this.paramsOf(key));
    return policy === undefined ? null : policy.taken(state);
  }

  /** Give back `slot` of `key` at `atMs` (its request's response ended); a slot no longer held changes nothing. */
  release(key: number, slot: number, atMs: number): void {
    const state = this.objects.get(key);
    if (state === undefined) {
      const row = this.slotRow(key);
      if (row >= 0) this.slotKernel!.release(this.rows!.table, row * this.width, slot, atMs);
      return;
    }
    const params = this.paramsOf(key);
    const policy = slotPolicy(params);
    if (policy !== undefined) this.objects.set(key, policy.release(params, state, slot, atMs));
  }

  /** Renew `slot` of `key`'s lease at `atMs` (its request still runs); a slot no longer held changes nothing. */
  renew(key: number, slot: number, atMs: number): void {
    const state = this.objects.get(key);
    if (state === undefined) {
      const row = this.slotRow(key);
      if (row >= 0) this.slotKernel!.renew(this.rows!.table, row * this.width, slot, atMs);
      return;
    }
    const params = this.paramsOf(key);
    const policy = slotPolicy(params);
    if (policy !== undefined) this.objects.set(key, policy.renew(params, state, slot, atMs));
  }

  /** The key's row when its slots are kept on one (no object kept for it), else -1. */
  private slotRow(key: number): number {
    return this.slotKernel === null ? -1 : this.rows!.find(key);
  }

  /** The key's state now (a new object for a row; for charts and tests, not per decision). */
  get(key: number): AlgorithmState | null {
    const object = this.objects.get(key);
    if (object !== undefined || this.rows === null) return object ?? null;
    const slot = this.rows.find(key);
    return slot < 0 ? null : this.kernel!.read(this.rows.table, slot * this.width);
  }

  /** States held now. */
  get size(): number {
    return (this.rows?.size ?? 0) + this.objects.size;
  }

  /** Bytes of the packed rows (the objects are not counted). */
  get packedBytes(): number {
    return this.rows?.bytes ?? 0;
  }

  /**
   * The packed rows, when `key`'s state is kept there: a row kernel, the rule's own parameters, and no object
   * already kept for the key (a key keeps its state where it started; `get` looks at the objects first).
   */
  private packedFor(key: number): KeyedRows | null {
    if (this.rows === null || (this.objects.size > 0 && this.objects.has(key))) return null;
    return this.paramsOf(key) === this.params ? this.rows : null;
  }

  private sweep(latestMs: number): void {
    const { rows, kernel, params, width } = this;
    if (rows !== null) {
      rows.keepOnly((slot) => freshAtMs(params, kernel!.read(rows.table, slot * width)) > latestMs);
    }
    for (const [key, state] of this.objects) {
      if (freshAtMs(this.paramsOf(key), state) <= latestMs) this.objects.delete(key);
    }
    this.sweepAtLive = Math.max(SWEEP_MIN_LIVE, this.size * 2);
  }
}
