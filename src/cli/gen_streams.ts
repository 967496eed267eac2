/**
 * `sluice gen`'s lines: one stream per pattern over all its keys, merged in time order (gen.ts parses the command and
 * writes them). A few numbers of state per pattern, whatever the number of keys or lines.
 */
import type { Rate } from "../rules/types.ts";

export type PatternKind = "constant" | "burst" | "poisson";

export interface Pattern {
  readonly kind: PatternKind;
  /** constant, poisson: the arrival rate. */
  readonly rate: Rate | null;
  /** Requests at once (burst), else 0. */
  readonly count: number;
  /** Start, ms (burst: its instant). */
  readonly fromMs: number;
  /** End, ms, exclusive (burst: same as fromMs). */
  readonly toMs: number;
  readonly cost: number;
  /** Only this key, or `null` for every key. */
  readonly key: string | null;
}

export interface GenSpec {
  readonly patterns: readonly Pattern[];
  /** The keys of the patterns without their own: `name-1` ... `name-count`, or `name` alone (`count` null). */
  readonly keys: { readonly name: string; readonly count: number | null };
  readonly seed: number;
  readonly maxLines: number;
}

/**
 * One pattern over all its keys: its lines in order, one at a time (`tMs` is Infinity when it is done). The state is
 * a few numbers whatever the number of keys, so `gen` costs the same per line and the same memory for 20 keys as for
 * a million. At each time, a pattern's keys come in their order (each as many times as it arrives then).
 */
interface Stream {
  tMs: number;
  /** The pattern's place: breaks ties between equal times. */
  readonly order: number;
  /** The current line's key and its `,key,cost\n`. */
  key: string;
  tail: string;
  readonly cost: number;
  advance(): void;
}

/** The pattern's keys: its own, or the spec's `name-1 ... name-N` (or `name` alone). */
function keysOf(spec: GenSpec, p: Pattern): { readonly count: number; nameAt(i: number): string } {
  if (p.key !== null) {
    const key = p.key;
    return { count: 1, nameAt: () => key };
  }
  const { name, count } = spec.keys;
  return { count: count ?? 1, nameAt: count === null ? () => name : (i) => `${name}-${i + 1}` };
}

/** Keys whose line tails a stream keeps made. */
const CACHED_KEYS = 4096;

function streamOf(spec: GenSpec, p: Pattern, order: number): Stream {
  const keys = keysOf(spec, p);
  const s: Stream = { tMs: p.fromMs, order, key: "", tail: "", cost: p.cost, advance: () => {} };
  // A few keys' names and tails are made once each; past CACHED_KEYS, for each line (memory stays flat).
  const cached: { key: string; tail: string }[] = [];
  const setKey = (k: number) => {
    let line = cached[k];
    if (line === undefined) {
      const key = keys.nameAt(k);
      line = { key, tail: `,${key},${p.cost}\n` };
      if (k < CACHED_KEYS) cached[k] = line;
    }
    s.key = line.key;
    s.tail = line.tail;
  };
  if (p.kind === "burst") burstStream(s, p, keys.count, setKey);
  else if (p.kind === "constant") constantStream(s, p, keys.count, setKey);
  else poissonStream(s, p, keys.count, setKey, mulberry32(mix(spec.seed, order, 0)));
  return s;
}

/** `count` lines at `fromMs` for each key in turn. */
function burstStream(s: Stream, p: Pattern, keys: number, setKey: (k: number) => void): void {
  let k = 0;
  let left = p.count;
  setKey(0);
  s.advance = () => {
    if (--left > 0) return;
    left = p.count;
    if (++k === keys) s.tMs = Number.POSITIVE_INFINITY;
    else setKey(k);
  };
}

/**
 * Arrival i at `fromMs + floor(i × period / amount)` for every key: at each time, the arrivals `[first, end)` that
 * fall on it, for each key in turn.
 */
function constantStream(s: Stream, p: Pattern, keys: number, setKey: (k: number) => void): void {
  const { amount, periodMs } = p.rate!;
  const at = (i: number) => p.fromMs + Math.floor((i * periodMs) / amount);
  let first = 0;
  let end = 0;
  let i = 0;
  let k = 0;
  const group = () => {
    const t = at(first);
    end = first + 1;
    while (at(end) === t) end++;
    i = first;
    k = 0;
    s.tMs = t < p.toMs ? t : Number.POSITIVE_INFINITY;
    setKey(0);
  };
  group();
  s.advance = () => {
    if (++i < end) return;
    i = first;
    if (++k < keys) return setKey(k);
    first = end;
    group();
  };
}

/**
 * Poisson arrivals at `rate` for each key. With one key, exponential gaps of mean 1 / rate; with N, the N processes
 * as one (a sum of independent Poisson processes is one, at N × rate, each arrival's key uniform and independent of
 * the rest): gaps of mean 1 / (N × rate), and a key drawn for each arrival. Same distribution, one generator.
 */
function poissonStream(s: Stream, p: Pattern, keys: number, setKey: (k: number) => void, random: () => number): void {
  const meanGapMs = p.rate!.periodMs / p.rate!.amount / keys;
  let t = p.fromMs;
  s.advance = () => {
    // 1 - U is in (0, 1], so the logarithm is finite.
    t += -Math.log(1 - random()) * meanGapMs;
    const ms = Math.floor(t);
    s.tMs = ms < p.toMs ? ms : Number.POSITIVE_INFINITY;
    if (keys > 1) setKey(Math.floor(random() * keys));
  };
  setKey(0);
  s.advance();
}

const before = (a: Stream, b: Stream) => a.tMs < b.tMs || (a.tMs === b.tMs && a.order < b.order);

/**
 * The trace `spec` describes, sorted by time, one line at a time: a k-way merge of one stream per pattern (a binary
 * heap), so memory is one small record per pattern whatever the trace's length or its number of keys. Requests at the
 * same ms keep the order of the patterns, then (constant and burst) of the keys. Deterministic: Poisson arrivals come
 * from a seeded generator, one per pattern. Yields the stream whose line is next (read `tMs`, `key`, `cost`, `tail`
 * at once).
 */
export function* traceStreams(spec: GenSpec): Generator<Readonly<Stream>> {
  const heap: Stream[] = [];
  spec.patterns.forEach((p, order) => {
    const s = streamOf(spec, p, order);
    if (s.tMs !== Number.POSITIVE_INFINITY) heap.push(s);
  });
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(heap, i);
  while (heap.length > 0) {
    const top = heap[0]!;
    yield top;
    top.advance();
    if (top.tMs === Number.POSITIVE_INFINITY) {
      const last = heap.pop()!;
      if (heap.length === 0) break;
      heap[0] = last;
    }
    siftDown(heap, 0);
  }
}

function siftDown(heap: Stream[], from: number): void {
  let i = from;
  const item = heap[i]!;
  for (;;) {
    let child = 2 * i + 1;
    if (child >= heap.length) break;
    if (child + 1 < heap.length && before(heap[child + 1]!, heap[child]!)) child++;
    if (!before(heap[child]!, item)) break;
    heap[i] = heap[child]!;
    i = child;
  }
  heap[i] = item;
}

/**
 * A 32-bit seed from the user's seed and the pattern's place (`keyIndex` is 0: the one stream of a pattern; it was the
 * key's place when each key had a stream, and stays so that a one-key trace keeps its bytes).
 */
function mix(seed: number, patternIndex: number, keyIndex: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ (patternIndex + 0x632be5ab), 0xc2b2ae35);
  h = Math.imul(h ^ (keyIndex + 0x27d4eb2f), 0x165667b1);
  return (h ^ (h >>> 15)) >>> 0;
}

/** mulberry32: a small, fast, well-mixed 32-bit generator; values in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
