/**
 * The in-isolate store for `scope: local` rules, packed: per rule, a `CompactTable` of fixed-size states keyed by a
 * 64-bit hash of the key, bounded by `maxKeys` with least-recently-used eviction (as NGINX's limit_req zone).
 * The decisions come from the same pure core as the Durable Object and the simulator; how a state is kept is the
 * algorithm's to say, never a branch on its name here:
 *
 * - a state of one number (the algorithm's `packed` path): the TAT, in units of 1/rate.tokens ms relative to the
 *   table's base time;
 * - a state decided in place on a row (the algorithm's `rows` kernel), no state object per decision;
 * - a state of a fixed number of integer fields (the algorithm's `fields` layout): one row of that many fields;
 * - any other state (one that grows with the limit): a bounded Map (same LRU rule).
 *
 * Approximate by design: each isolate counts alone, and an evicted key starts again with a full allowance. A flood of
 * new keys (rotating IPs) can evict real keys; keep security-critical limits `scope: global`.
 */
import { floorDiv } from "../algorithms/arith.ts";
import type { GcraState } from "../algorithms/gcra.ts";
import {
  type AlgorithmParams,
  type AlgorithmState,
  capacityOf,
  type Decision,
  decide,
  fieldLayout,
  packedPath,
  refund,
  rowPath,
} from "../algorithms/index.ts";
import { decisionOf, decisionScratch, packedStep } from "../algorithms/scratch.ts";
import type {
  DecisionScratch,
  FieldLayout,
  PackedPath,
  PackedStep,
  RowChange,
  RowKernel,
} from "../algorithms/types.ts";
import { CompactTable } from "./compact_table.ts";
import { hash64Into } from "./hash64.ts";

/** Rebase stored times before |now − base| × rate.tokens could pass this (keeps every field below 2^53). */
const REBASE_AT = 2 ** 51;

interface Store {
  check(key: string, cost: number, nowMs: number): LocalCheckResult;
  refund(key: string, cost: number, admittedAtMs: number): void;
  peek(key: string): AlgorithmState | null;
  delete(key: string): boolean;
  readonly size: number;
  readonly bytes: number;
  readonly evictions: number;
}

/** The result of a keyed check: the decision, or why the request cannot be decided. The store keeps the state. */
export type LocalCheckResult =
  | { readonly ok: true; readonly decision: Decision }
  | { readonly ok: false; readonly error: "cost_exceeds_capacity" | "invalid_cost" };

const INVALID_COST: LocalCheckResult = Object.freeze({ ok: false, error: "invalid_cost" });
const COST_EXCEEDS_CAPACITY: LocalCheckResult = Object.freeze({ ok: false, error: "cost_exceeds_capacity" });

/** Scratch for the key hash: one per module, as checks never interleave (no await inside a check). */
const HASH = new Uint32Array(2);

/**
 * What both packed stores share: the table, and finding a key's slot by its 64-bit hash. `findSlot` leaves the hash
 * in `HASH`, so `insertSlot` right after it (with no other store call between) inserts that same key.
 */
abstract class TableStore {
  protected readonly table: CompactTable;

  constructor(fields: number, maxKeys: number) {
    this.table = new CompactTable(fields, maxKeys);
  }

  /** The key's slot, marked most recently used; -1 when absent. */
  protected findSlot(key: string): number {
    hash64Into(key, HASH);
    return this.table.find(HASH[0]!, HASH[1]!);
  }

  /** A slot for the key last passed to `findSlot` (absent then), evicting the least recently used key if full. */
  protected insertSlot(): number {
    return this.table.insert(HASH[0]!, HASH[1]!);
  }

  delete(key: string): boolean {
    hash64Into(key, HASH);
    return this.table.delete(HASH[0]!, HASH[1]!);
  }

  get size() {
    return this.table.size;
  }
  get bytes() {
    return this.table.bytes;
  }
  get evictions() {
    return this.table.evictions;
  }
}

/**
 * One-number TAT states: the algorithm's packed path.
 *
 * The stored number is the TAT in units of 1/rate.tokens ms relative to `baseMs`: exactly the pure core's
 * `(tatMs − base) × a + tatFrac`. The decision is the algorithm's own arithmetic on that number (`packed.into` in
 * src/algorithms), so a request allocates nothing but its decision; this store only keeps the number, its base and
 * its LRU order. The unit tests hold it to `gcra.check` and `leakyQueue.check` decision for decision, across rebases
 * and clock steps back.
 */
class TatStore extends TableStore implements Store {
  private baseMs = Number.NaN;
  private readonly packed: PackedPath<AlgorithmParams>;
  /** rate.tokens: the stored unit is 1/a ms. */
  private readonly a: number;
  private readonly capacity: number;
  /** The packed path's decision and step, written in place; the decision is copied out to the caller. */
  private readonly scratch: DecisionScratch = decisionScratch();
  private readonly step: PackedStep = packedStep();

  constructor(
    private readonly params: AlgorithmParams,
    packed: PackedPath<AlgorithmParams>,
    maxKeys: number,
  ) {
    super(1, maxKeys);
    this.packed = packed;
    this.a = packed.rate(params).tokens;
    this.capacity = capacityOf(params);
  }

  check(key: string, cost: number, nowMs: number): LocalCheckResult {
    if (!Number.isSafeInteger(cost) || cost < 1) return INVALID_COST;
    if (cost > this.capacity) return COST_EXCEEDS_CAPACITY;
    const now = this.clock(nowMs);
    const slot = this.findSlot(key);
    const stored = slot >= 0 ? this.table.get(slot, 0) : Number.NaN;
    const { scratch, step } = this;
    this.packed.into(this.params, stored, (now - this.baseMs) * this.a, cost, scratch, step);
    if (step.changed) this.table.set(slot >= 0 ? slot : this.insertSlot(), 0, step.stored);
    return { ok: true, decision: decisionOf(scratch) };
  }

  refund(key: string, cost: number): void {
    const slot = this.findSlot(key);
    if (slot < 0) return;
    this.table.set(slot, 0, this.packed.refund(this.params, this.table.get(slot, 0), cost));
  }

  peek(key: string): AlgorithmState | null {
    const slot = this.findSlot(key);
    return slot >= 0 ? this.decode(this.table.get(slot, 0)) : null;
  }

  /** Local clocks only move forward (an isolate's clock does); rebase the stored times when `now` runs far ahead. */
  private clock(nowMs: number): number {
    if (Number.isNaN(this.baseMs)) this.baseMs = nowMs;
    if (nowMs < this.baseMs) return this.baseMs;
    if ((nowMs - this.baseMs) * this.a > REBASE_AT) this.rebase(nowMs);
    return nowMs;
  }

  private rebase(nowMs: number): void {
    const states: [number, GcraState][] = [];
    this.table.forEachSlot((slot) => states.push([slot, this.decode(this.table.get(slot, 0))]));
    this.baseMs = nowMs;
    // A TAT in the past means "now" to every algorithm here, so clamping to the new base changes no decision.
    for (const [slot, s] of states)
      this.table.set(slot, 0, this.encode(s.tatMs < nowMs ? { tatMs: nowMs, tatFrac: 0 } : s));
  }

  private encode(s: GcraState): number {
    return (s.tatMs - this.baseMs) * this.a + s.tatFrac;
  }

  private decode(v: number): GcraState {
    const whole = floorDiv(v, this.a);
    return { tatMs: this.baseMs + whole, tatFrac: v - whole * this.a };
  }
}

/**
 * States decided in place on a row of the table: the algorithm's row kernel (`rows`), compiled once for the rule,
 * reads and writes the row's fields directly, so a request allocates nothing but its decision. The unit tests hold it
 * to the pure core decision for decision (local_store.rows.test.ts).
 */
class RowStore extends TableStore implements Store {
  private readonly capacity: number;
  private readonly width: number;
  private readonly change: RowChange = { changed: false };
  /** The kernel's decision, written in place; copied out to the caller. */
  private readonly scratch: DecisionScratch = decisionScratch();

  constructor(
    params: AlgorithmParams,
    private readonly kernel: RowKernel<AlgorithmState>,
    maxKeys: number,
  ) {
    super(kernel.width, maxKeys);
    this.capacity = capacityOf(params);
    this.width = kernel.width;
  }

  check(key: string, cost: number, nowMs: number): LocalCheckResult {
    if (!Number.isSafeInteger(cost) || cost < 1) return INVALID_COST;
    if (cost > this.capacity) return COST_EXCEEDS_CAPACITY;
    let slot = this.findSlot(key);
    const fresh = slot < 0;
    // A fresh key's row is taken at once (its fields zero) and given back if the request changed nothing.
    if (fresh) slot = this.insertSlot();
    this.kernel.into(this.table.rows, slot * this.width, fresh, cost, nowMs, this.scratch, this.change);
    if (fresh && !this.change.changed) this.table.deleteSlot(slot);
    return { ok: true, decision: decisionOf(this.scratch) };
  }

  refund(key: string, cost: number, admittedAtMs: number): void {
    const slot = this.findSlot(key);
    if (slot >= 0) this.kernel.refund(this.table.rows, slot * this.width, cost, admittedAtMs);
  }

  peek(key: string): AlgorithmState | null {
    const slot = this.findSlot(key);
    return slot >= 0 ? this.kernel.read(this.table.rows, slot * this.width) : null;
  }
}

/** States of a fixed number of integer fields, laid out as the algorithm says (its `fields`). */
class FieldsStore extends TableStore implements Store {
  constructor(
    private readonly params: AlgorithmParams,
    private readonly layout: FieldLayout<AlgorithmParams, AlgorithmState>,
    maxKeys: number,
  ) {
    super(layout.count(params), maxKeys);
  }

  check(key: string, cost: number, nowMs: number): LocalCheckResult {
    const slot = this.findSlot(key);
    const before = slot >= 0 ? this.read(slot) : null;
    const out = decide(this.params, before, cost, nowMs);
    if (!out.ok) return out;
    if (out.state !== before) this.write(slot >= 0 ? slot : this.insertSlot(), out.state);
    return { ok: true, decision: out.decision };
  }

  refund(key: string, cost: number, admittedAtMs: number): void {
    const slot = this.findSlot(key);
    if (slot >= 0) this.write(slot, refund(this.params, this.read(slot), cost, admittedAtMs));
  }

  peek(key: string): AlgorithmState | null {
    const slot = this.findSlot(key);
    return slot >= 0 ? this.read(slot) : null;
  }

  private read(slot: number): AlgorithmState {
    return this.layout.read(this.params, (i) => this.table.get(slot, i));
  }

  private write(slot: number, state: AlgorithmState): void {
    this.layout.write(this.params, state, (i, value) => this.table.set(slot, i, value));
  }
}

/** Any other state (of a size that varies): kept in a Map, whose insertion order is the LRU order. */
class MapStore implements Store {
  private readonly map = new Map<string, AlgorithmState>();
  evictions = 0;

  constructor(
    private readonly params: AlgorithmParams,
    private readonly maxKeys: number,
  ) {}

  check(key: string, cost: number, nowMs: number): LocalCheckResult {
    const before = this.take(key);
    const out = decide(this.params, before, cost, nowMs);
    const after = out.ok ? out.state : before;
    if (after !== null) this.put(key, after);
    return out;
  }

  refund(key: string, cost: number, admittedAtMs: number): void {
    const before = this.take(key);
    if (before !== null) this.put(key, refund(this.params, before, cost, admittedAtMs));
  }

  peek(key: string): AlgorithmState | null {
    return this.map.get(key) ?? null;
  }

  delete(key: string): boolean {
    return this.map.delete(key);
  }

  get size() {
    return this.map.size;
  }
  get bytes() {
    return 0;
  }

  private take(key: string): AlgorithmState | null {
    const s = this.map.get(key);
    if (s === undefined) return null;
    this.map.delete(key);
    return s;
  }

  private put(key: string, state: AlgorithmState): void {
    if (this.map.size >= this.maxKeys) {
      const oldest = this.map.keys().next();
      if (oldest.done !== true) {
        this.map.delete(oldest.value);
        this.evictions++;
      }
    }
    this.map.set(key, state);
  }
}

/** A bounded local store for one rule's parameters: packed where the algorithm's state is one number, a row or fields. */
export function createLocalStore(params: AlgorithmParams, maxKeys: number): Store {
  const packed = packedPath(params);
  if (packed !== undefined) return new TatStore(params, packed, maxKeys);
  const kernel = rowPath(params)?.compile(params) ?? null;
  if (kernel !== null) return new RowStore(params, kernel, maxKeys);
  const layout = fieldLayout(params);
  return layout !== undefined ? new FieldsStore(params, layout, maxKeys) : new MapStore(params, maxKeys);
}

export type LocalStore = Store;
