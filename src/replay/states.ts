/**
 * What a replay keeps per (rule, key): the algorithm's state, with states that are as good as fresh swept away.
 * Packed where the algorithm lays its state out as a fixed number of integer fields (the algorithm table's `fields`):
 * a row of a `KeyedRows` table, `4 + 8 × fields` bytes plus its index (about 28 bytes for the two-field states of
 * most algorithms). Any other state (a sliding log, which grows with the limit), and the state of a key kept under an
 * account's own parameters, is an object in a Map. BENCHMARKS.md has the measured figures.
 */
import {
  type AlgorithmParams,
  type AlgorithmState,
  type FieldLayout,
  fieldLayout,
  freshAtMs,
} from "../algorithms/index.ts";
import { KeyedRows } from "./rows.ts";

export { KeyIndex } from "./key_index.ts";

/** Sweep no more often than every this many new live states (and not below it). */
const SWEEP_MIN_LIVE = 65_536;

/** One rule's states by key number; absent is a fresh key. */
export class RuleStates {
  private readonly rows: KeyedRows | null;
  private readonly layout: FieldLayout<AlgorithmParams, AlgorithmState> | undefined;
  private readonly objects = new Map<number, AlgorithmState>();
  private sweepAtLive = SWEEP_MIN_LIVE;

  constructor(
    /** The rule's own parameters: packed rows keep states under these. */
    private readonly params: AlgorithmParams,
    /** The parameters a key's state is kept under (a per-account override may differ from the rule's own). */
    private readonly paramsOf: (key: number) => AlgorithmParams,
  ) {
    this.layout = fieldLayout(params);
    this.rows = this.layout === undefined ? null : new KeyedRows(this.layout.count(params));
  }

  get(key: number): AlgorithmState | null {
    const object = this.objects.get(key);
    if (object !== undefined || this.rows === null) return object ?? null;
    const rows = this.rows;
    const slot = rows.find(key);
    return slot < 0 ? null : this.layout!.read(this.params, (f) => rows.get(slot, f));
  }

  /** Store `state` for `key`; now and then, drop the states that are as good as fresh at `latestMs`. */
  set(key: number, state: AlgorithmState, latestMs: number): void {
    const rows = this.packedFor(key);
    if (rows === null) {
      this.objects.set(key, state);
    } else {
      let slot = rows.find(key);
      if (slot < 0) slot = rows.insert(key);
      this.layout!.write(this.params, state, (f, value) => rows.set(slot, f, value));
    }
    if (this.size >= this.sweepAtLive) this.sweep(latestMs);
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
   * The packed rows, when `key`'s state is kept there: the rule's own parameters, a field layout, and no object
   * already kept for the key (a key keeps its state where it started; `get` looks at the objects first).
   */
  private packedFor(key: number): KeyedRows | null {
    if (this.rows === null || this.paramsOf(key) !== this.params || this.objects.has(key)) return null;
    return this.rows;
  }

  private sweep(latestMs: number): void {
    const { rows, layout, params } = this;
    if (rows !== null) {
      rows.keepOnly(
        (slot) =>
          freshAtMs(
            params,
            layout!.read(params, (f) => rows.get(slot, f)),
          ) > latestMs,
      );
    }
    for (const [key, state] of this.objects) {
      if (freshAtMs(this.paramsOf(key), state) <= latestMs) this.objects.delete(key);
    }
    this.sweepAtLive = Math.max(SWEEP_MIN_LIVE, this.size * 2);
  }
}
