/**
 * What a replay keeps per (rule, key): the algorithm's state, in one array slot per key, with states that are as good
 * as fresh swept away. Memory per (rule, key) with live state: a 4-byte slot (every key that reached the rule) plus
 * the state object (about 40 bytes for one or two numbers); per distinct key once, its name and index in a Map (about
 * 60 bytes plus the name). BENCHMARKS.md has the measured figures.
 */
import { type AlgorithmParams, type AlgorithmState, freshAtMs } from "../algorithms/index.ts";

/** Every distinct key of a replay, numbered in order of first appearance. */
export class KeyIndex {
  private readonly index = new Map<string, number>();
  readonly names: string[] = [];

  /** The key's number, assigned on first sight. */
  of(key: string): number {
    let i = this.index.get(key);
    if (i === undefined) {
      i = this.names.length;
      this.index.set(key, i);
      this.names.push(key);
    }
    return i;
  }

  /** The key's number, or -1 when it never came. */
  find(key: string): number {
    return this.index.get(key) ?? -1;
  }

  get size(): number {
    return this.names.length;
  }
}

/** Sweep no more often than every this many new live states (and not below it). */
const SWEEP_MIN_LIVE = 65_536;

/** One rule's states by key number; `undefined` is a fresh key. */
export class RuleStates {
  private readonly states: (AlgorithmState | undefined)[] = [];
  private live = 0;
  private sweepAtLive = SWEEP_MIN_LIVE;

  constructor(
    /** The parameters a key's state is kept under (a per-account override may differ from the rule's own). */
    private readonly paramsOf: (key: number) => AlgorithmParams,
  ) {}

  get(key: number): AlgorithmState | null {
    return this.states[key] ?? null;
  }

  /** Store `state` for `key`; now and then, drop the states that are as good as fresh at `latestMs`. */
  set(key: number, state: AlgorithmState, latestMs: number): void {
    while (this.states.length < key) this.states.push(undefined);
    if (this.states[key] === undefined) this.live++;
    this.states[key] = state;
    if (this.live >= this.sweepAtLive) this.sweep(latestMs);
  }

  /** States held now. */
  get size(): number {
    return this.live;
  }

  private sweep(latestMs: number): void {
    const { states } = this;
    for (let k = 0; k < states.length; k++) {
      const s = states[k];
      if (s !== undefined && freshAtMs(this.paramsOf(k), s) <= latestMs) {
        states[k] = undefined;
        this.live--;
      }
    }
    this.sweepAtLive = Math.max(SWEEP_MIN_LIVE, this.live * 2);
  }
}
