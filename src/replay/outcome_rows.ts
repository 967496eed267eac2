/**
 * One rule that counts by the response or bans (outcomes.ts), decided on typed rows instead of records: exactly the
 * decisions src/protocol/outcome.ts makes on a record (a probe, a check with its `block_for` ban, a charge, a
 * refund), with the algorithm's row kernel for every piece of arithmetic and no object per request. A replayed
 * record has no rules version, no other parameters, no call ids, shares or lows, so it is its state and its ban:
 * the row is `held` (the record is not `null`), `banned` (a ban was set: the record is not `bare`), the ban's end,
 * then the kernel's fields. A peek (a decision whose new state is thrown away) runs the kernel on a copy of the row.
 * Used where the kernel says its fresh time on a row and the rule keeps no lows or slots (`outcomeRowsFor`).
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  costError,
  type Decision,
  rowPath,
  slotPolicy,
} from "../algorithms/index.ts";
import { decisionScratch } from "../algorithms/scratch.ts";
import type { DecisionScratch, RowChange, RowKernel } from "../algorithms/types.ts";
import { lowsPer } from "../protocol/late_refund.ts";
import { KeyedRows } from "./rows.ts";

const HELD = 0;
const BANNED = 1;
const BAN_UNTIL = 2;
/** Where the kernel's fields start in a row. */
const STATE = 3;

/** The rule's row path, or `null` when its records must stay records (no row kernel, fresh time, or lows, slots). */
export function outcomeRowsFor(params: AlgorithmParams, blockForMs: number): OutcomeRows | null {
  const kernel = rowPath(params)?.compile(params) ?? null;
  if (kernel?.freshAtMs === undefined) return null;
  if (lowsPer(params) !== null || slotPolicy(params) !== undefined) return null;
  return new OutcomeRows(params, kernel, blockForMs);
}

export class OutcomeRows {
  private readonly rows: KeyedRows;
  private readonly fields: number;
  /** A copy of one row's kernel fields, for peeks. */
  private readonly copy: Float64Array;
  private readonly change: RowChange = { changed: false };
  /** The last `ask`'s decision, written in place: read it before the next. */
  private readonly decision: DecisionScratch = decisionScratch();
  /** A peek's decision (internal). */
  private readonly peek: DecisionScratch = decisionScratch();

  constructor(
    private readonly params: AlgorithmParams,
    private readonly kernel: RowKernel<AlgorithmState>,
    /** `block_for`, ms; 0: no bans. */
    private readonly blockForMs: number,
  ) {
    this.fields = STATE + kernel.width;
    this.rows = new KeyedRows(this.fields);
    this.copy = new Float64Array(kernel.width);
  }

  /** `stepRecord` with `probe` (`deferred`) or `check`; `null`: an invalid cost or one above the capacity. */
  ask(key: number, cost: number, deferred: boolean, nowMs: number): Decision | null {
    if (costError(this.params, cost) !== null) return null;
    let slot = this.rows.find(key);
    if (slot < 0) slot = this.rows.insert(key);
    const at = slot * this.fields;
    const table = this.rows.table;
    const held = table[at + HELD] === 1;
    if (this.banRuns(at, nowMs)) return this.banned(at, cost, table[at + BAN_UNTIL]!, nowMs);
    const d = this.decision;
    if (deferred) {
      // A probe that fits charges nothing; one that does not is the check's refusal (which leaves the row as it was).
      this.peekAt(at, held, cost, nowMs, d);
      if (d.allowed) {
        // `probeFits`: the key's figures as it stands, a cost-1 peek (`d` itself when the cost is 1).
        if (cost !== 1) this.peekAt(at, held, 1, nowMs, this.peek);
        const remaining = cost === 1 ? d.remaining + 1 : this.peek.allowed ? this.peek.remaining + 1 : 0;
        d.remaining = remaining;
        d.resetAfterMs = this.freshInMs(at, held, nowMs);
        d.retryAfterMs = null;
        d.delayMs = 0;
        return d;
      }
    } else {
      this.kernel.into(table, at + STATE, !held, cost, nowMs, d, this.change);
      if (d.allowed) {
        table[at + HELD] = 1;
        return d;
      }
    }
    // A refusal by the algorithm (of a held key: a fresh one admits any valid cost) starts a `block_for` ban.
    if (this.blockForMs <= 0 || !held) return d;
    table[at + BANNED] = 1;
    table[at + BAN_UNTIL] = nowMs + this.blockForMs;
    return this.banned(at, cost, nowMs + this.blockForMs, nowMs);
  }

  /** `chargeRecord`'s state change (its decision is not read): charge what fits; one that does not fit bans. */
  charge(key: number, cost: number, nowMs: number): void {
    if (costError(this.params, cost) !== null) return;
    let slot = this.rows.find(key);
    if (slot < 0) slot = this.rows.insert(key);
    const at = slot * this.fields;
    const table = this.rows.table;
    let held = table[at + HELD] === 1;
    this.peekAt(at, held, 1, nowMs, this.peek);
    const fits = this.peek.allowed ? this.peek.remaining + 1 : 0;
    const take = Math.min(cost, fits);
    let charged = 0;
    if (take >= 1) {
      this.kernel.into(table, at + STATE, !held, take, nowMs, this.peek, this.change);
      if (this.peek.allowed) {
        table[at + HELD] = 1;
        held = true;
        charged = take;
      }
    }
    if (charged < cost && this.blockForMs > 0 && held && !this.banRuns(at, nowMs)) {
      table[at + BANNED] = 1;
      table[at + BAN_UNTIL] = nowMs + this.blockForMs;
    }
  }

  /** `refundRecord` of a rule without lows: a state as good as fresh drops a record with no ban. */
  refund(key: number, cost: number, admittedAtMs: number, nowMs: number): void {
    const slot = this.rows.find(key);
    if (slot < 0) return;
    const at = slot * this.fields;
    const table = this.rows.table;
    if (table[at + HELD] !== 1) return;
    this.kernel.refund(table, at + STATE, cost, admittedAtMs);
    if (this.freshInMs(at, true, nowMs) > 0) return;
    // Dropped (`null`) or a state fresh at any time (`freshState`); either way the kernel's fields start from zero.
    table.fill(0, at + STATE, at + this.fields);
    if (table[at + BANNED] !== 1) {
      table[at + HELD] = 0;
      return;
    }
    // `freshState`: one unit charged and given back at time 0.
    this.kernel.into(table, at + STATE, true, 1, 0, this.peek, this.change);
    this.kernel.refund(table, at + STATE, 1, 0);
  }

  /** The key's state (`null`: no record), for a chart's state track. */
  stateOf(key: number): AlgorithmState | null {
    const slot = this.rows.find(key);
    if (slot < 0) return null;
    const at = slot * this.fields;
    const table = this.rows.table;
    return table[at + HELD] === 1 ? this.kernel.read(table, at + STATE) : null;
  }

  /** `bannedResult`: a refusal during a ban that ends at `untilMs`. */
  private banned(at: number, cost: number, untilMs: number, nowMs: number): Decision {
    const waitMs = untilMs - nowMs;
    this.peekAt(at, true, cost, nowMs, this.peek);
    const ownRetryMs = this.peek.allowed ? 0 : (this.peek.retryAfterMs ?? 0);
    const d = this.decision;
    d.allowed = false;
    d.remaining = 0;
    d.resetAfterMs = Math.max(waitMs, this.freshInMs(at, true, nowMs));
    d.retryAfterMs = Math.max(waitMs, ownRetryMs);
    d.delayMs = 0;
    return d;
  }

  /** Whether the row's ban runs at `nowMs` (`activeBan`: it ends at its end exactly). */
  private banRuns(at: number, nowMs: number): boolean {
    const table = this.rows.table;
    return table[at + BANNED] === 1 && nowMs < table[at + BAN_UNTIL]!;
  }

  /** The kernel's decision of `cost` on the row without changing it (`decide` on the record's state). */
  private peekAt(at: number, held: boolean, cost: number, nowMs: number, d: DecisionScratch): void {
    const { copy, rows } = this;
    const table = rows.table;
    // A loop, not `set(subarray(...))`: a subarray is an object per peek.
    for (let i = 0; i < copy.length; i++) copy[i] = table[at + STATE + i]!;
    this.kernel.into(copy, 0, !held, cost, nowMs, d, this.change);
  }

  /** Until the row's state is as good as fresh, ms (`freshInMs`). */
  private freshInMs(at: number, held: boolean, nowMs: number): number {
    return held ? Math.max(0, this.kernel.freshAtMs!(this.rows.table, at + STATE) - nowMs) : 0;
  }
}
