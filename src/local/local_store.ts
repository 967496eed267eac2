/**
 * The in-isolate store for `scope: local` rules, packed: per rule, a `CompactTable` of fixed-size states keyed by a
 * 64-bit hash of the key, bounded by `maxKeys` with least-recently-used eviction (as NGINX's limit_req zone).
 * The decisions come from the same pure core as the Durable Object and the simulator:
 *
 * - gcra, token_bucket, leaky_bucket and leaky_queue keep one number, the TAT, in units of 1/rate.tokens ms relative
 *   to the table's base time (token_bucket and leaky_bucket are decided by gcra, which makes the same decisions with
 *   the same fields; the property tests hold them to it);
 * - fixed_window keeps (window, count), sliding_counter (window, prev, curr);
 * - sliding_log's state grows with its limit, so it is kept in a bounded Map instead (same LRU rule).
 *
 * Approximate by design: each isolate counts alone, and an evicted key starts again with a full allowance. A flood of
 * new keys (rotating IPs) can evict real keys; keep security-critical limits `scope: global`.
 */
import { floorDiv } from "../algorithms/arith.ts";
import { type GcraState, gcra } from "../algorithms/gcra.ts";
import { type AlgorithmState, type DecideResult, decide, refund } from "../algorithms/index.ts";
import { leakyQueue } from "../algorithms/leaky_queue.ts";
import type { SlidingLogState } from "../algorithms/sliding_log.ts";
import { type AlgorithmParams, capacityOf, type Rate } from "../rules/types.ts";
import { CompactTable } from "./compact_table.ts";
import { hash64 } from "./hash64.ts";

/** Rebase stored times before |now − base| × rate.tokens could pass this (keeps every field below 2^53). */
const REBASE_AT = 2 ** 51;

interface Store {
  check(key: string, cost: number, nowMs: number): DecideResult;
  refund(key: string, cost: number, admittedAtMs: number): void;
  peek(key: string): AlgorithmState | null;
  delete(key: string): boolean;
  readonly size: number;
  readonly bytes: number;
  readonly evictions: number;
}

/** One-number TAT states (gcra, token_bucket, leaky_bucket as gcra; leaky_queue). */
class TatStore implements Store {
  private readonly table: CompactTable;
  private baseMs = Number.NaN;
  private readonly rate: Rate;
  private readonly decideTat: (state: GcraState | null, cost: number, nowMs: number) => { state: GcraState } & DecideOk;

  constructor(
    private readonly params: Extract<AlgorithmParams, { rate: Rate }>,
    maxKeys: number,
  ) {
    this.table = new CompactTable(1, maxKeys);
    this.rate = params.rate;
    const p = params;
    this.decideTat =
      p.algorithm === "leaky_queue"
        ? (s, c, t) => leakyQueue.check(p, s, c, t)
        : (s, c, t) => gcra.check({ rate: p.rate, burst: p.burst }, s, c, t);
  }

  check(key: string, cost: number, nowMs: number): DecideResult {
    if (!Number.isSafeInteger(cost) || cost < 1) return { ok: false, error: "invalid_cost" };
    if (cost > capacityOf(this.params)) return { ok: false, error: "cost_exceeds_capacity" };
    const now = this.clock(nowMs);
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    const before = slot >= 0 ? this.decode(this.table.get(slot, 0)) : null;
    const out = this.decideTat(before, cost, now);
    if (out.state !== before) this.table.set(slot >= 0 ? slot : this.table.insert(hi, lo), 0, this.encode(out.state));
    return { ok: true, decision: out.decision, state: out.state };
  }

  refund(key: string, cost: number): void {
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    if (slot < 0) return;
    const state = this.decode(this.table.get(slot, 0));
    // The TAT moves back by cost × T for gcra and leaky_queue alike (and this store runs token/leaky buckets as gcra).
    const back = gcra.refund({ rate: this.rate, burst: 1 }, state, cost, 0);
    this.table.set(slot, 0, this.encode(back));
  }

  peek(key: string): AlgorithmState | null {
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    return slot >= 0 ? this.decode(this.table.get(slot, 0)) : null;
  }

  delete(key: string): boolean {
    const [hi, lo] = hash64(key);
    return this.table.delete(hi, lo);
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

  /** Local clocks only move forward (an isolate's clock does); rebase the stored times when `now` runs far ahead. */
  private clock(nowMs: number): number {
    if (Number.isNaN(this.baseMs)) this.baseMs = nowMs;
    if (nowMs < this.baseMs) return this.baseMs;
    if ((nowMs - this.baseMs) * this.rate.tokens > REBASE_AT) this.rebase(nowMs);
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
    return (s.tatMs - this.baseMs) * this.rate.tokens + s.tatFrac;
  }

  private decode(v: number): GcraState {
    const a = this.rate.tokens;
    const whole = floorDiv(v, a);
    return { tatMs: this.baseMs + whole, tatFrac: v - whole * a };
  }
}

type DecideOk = { decision: Extract<DecideResult, { ok: true }>["decision"] };

/** Window states of a fixed number of integer fields. */
class FieldsStore implements Store {
  private readonly table: CompactTable;

  constructor(
    private readonly params: Extract<AlgorithmParams, { algorithm: "fixed_window" | "sliding_counter" }>,
    maxKeys: number,
  ) {
    this.table = new CompactTable(params.algorithm === "fixed_window" ? 2 : 3, maxKeys);
  }

  check(key: string, cost: number, nowMs: number): DecideResult {
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    const before = slot >= 0 ? this.read(slot) : null;
    const out = decide(this.params, before, cost, nowMs);
    if (out.ok && out.state !== before) this.write(slot >= 0 ? slot : this.table.insert(hi, lo), out.state);
    return out;
  }

  refund(key: string, cost: number, admittedAtMs: number): void {
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    if (slot >= 0) this.write(slot, refund(this.params, this.read(slot), cost, admittedAtMs));
  }

  peek(key: string): AlgorithmState | null {
    const [hi, lo] = hash64(key);
    const slot = this.table.find(hi, lo);
    return slot >= 0 ? this.read(slot) : null;
  }

  delete(key: string): boolean {
    const [hi, lo] = hash64(key);
    return this.table.delete(hi, lo);
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

  private read(slot: number): AlgorithmState {
    const t = this.table;
    return this.params.algorithm === "fixed_window"
      ? { window: t.get(slot, 0), count: t.get(slot, 1) }
      : { window: t.get(slot, 0), prev: t.get(slot, 1), curr: t.get(slot, 2) };
  }

  private write(slot: number, state: AlgorithmState): void {
    const s = state as { window: number; count?: number; prev?: number; curr?: number };
    this.table.set(slot, 0, s.window);
    if (this.params.algorithm === "fixed_window") this.table.set(slot, 1, s.count ?? 0);
    else {
      this.table.set(slot, 1, s.prev ?? 0);
      this.table.set(slot, 2, s.curr ?? 0);
    }
  }
}

/** sliding_log: variable-size state in a Map, whose insertion order is the LRU order. */
class MapStore implements Store {
  private readonly map = new Map<string, SlidingLogState>();
  evictions = 0;

  constructor(
    private readonly params: Extract<AlgorithmParams, { algorithm: "sliding_log" }>,
    private readonly maxKeys: number,
  ) {}

  check(key: string, cost: number, nowMs: number): DecideResult {
    const before = this.take(key);
    const out = decide(this.params, before, cost, nowMs);
    const after = out.ok ? (out.state as SlidingLogState) : before;
    if (after !== null) this.put(key, after);
    return out;
  }

  refund(key: string, cost: number, admittedAtMs: number): void {
    const before = this.take(key);
    if (before !== null) this.put(key, refund(this.params, before, cost, admittedAtMs) as SlidingLogState);
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

  private take(key: string): SlidingLogState | null {
    const s = this.map.get(key);
    if (s === undefined) return null;
    this.map.delete(key);
    return s;
  }

  private put(key: string, state: SlidingLogState): void {
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

/** A bounded local store for one rule's parameters. */
export function createLocalStore(params: AlgorithmParams, maxKeys: number): Store {
  switch (params.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
    case "leaky_queue":
      return new TatStore(params, maxKeys);
    case "fixed_window":
    case "sliding_counter":
      return new FieldsStore(params, maxKeys);
    case "sliding_log":
      return new MapStore(params, maxKeys);
    default: {
      const never: never = params;
      return never;
    }
  }
}

export type LocalStore = Store;
