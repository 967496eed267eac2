/**
 * `sluice gen`: write a synthetic trace (CSV `t_ms,key,cost`, the simulator's input) from a few simple patterns:
 * a constant rate over a span, bursts at given times, seeded Poisson arrivals, for one key or many.
 * `generateTrace` is pure (patterns in, lines out) and deterministic: the same arguments give the same bytes.
 */
import { createWriteStream, openSync, type WriteStream } from "node:fs";
import { parseRate } from "../rules/duration.ts";
import type { Rate } from "../rules/types.ts";
import { commandArgs, EXIT_CODES, type ParsedArgs, parseArgs, usageError } from "./args.ts";
import { type Io, makeParentFolder } from "./io.ts";
import { parseTime } from "./time_flag.ts";
import { BufferedWriter, type TraceLine } from "./trace.ts";

const HELP = `Usage: sluice gen PATTERN... [--key NAME] [--keys N] [--seed N] [--max-lines N] [--out FILE.csv]

Writes a trace, CSV "t_ms,key,cost" with a header line, sorted by time, to FILE.csv or standard output.
Patterns (each may be repeated; every pattern runs for every key unless it names one):
  --constant RATE,FROM,TO    evenly spaced arrivals at RATE from FROM (inclusive) to TO (exclusive):
                             arrival i is at FROM + floor(i × period / amount)
  --burst COUNT@AT           COUNT requests at the same instant AT
  --poisson RATE,FROM,TO     Poisson arrivals with mean RATE for each key (exponential gaps, from --seed), FROM
                             to TO; for N keys, one stream at N x RATE with each arrival's key drawn at random
  Each pattern may end with ",cost=N" (default 1) and ",key=NAME" (only that key).
RATE is as in rule files: 10/s, 100/min, 7/3s. Times (AT, FROM, TO) are integer ms ("2500"), a duration as in
rule files ("500ms", "3s", "min", "10min"), or a UTC clock time ("12:00:50", "12:00:50.250") on 1970-01-01.
Keys: --key NAME (default "a"); with --keys N, the keys NAME-1 ... NAME-N.
--seed N (default 1) makes Poisson arrivals reproducible: same seed, same trace.
--max-lines N (default 5000000) refuses to write a larger trace (it streams: 10 million lines take seconds).

Examples:
  sluice gen --burst 25@0 --burst 8@500ms --burst 1@2500ms
  sluice gen --constant 10/s,12:00:50,12:01:10 --out boundary.csv
  sluice gen --poisson 5/s,0,1min --keys 100 --key merchant --seed 7
${EXIT_CODES}`;

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

const DEFAULT_MAX_LINES = 5_000_000;

/** Parse one pattern argument (`--constant`, `--burst`, `--poisson` value). */
export function parsePattern(kind: PatternKind, text: string): Pattern | { readonly error: string } {
  const parts = text.split(",");
  const options = new Map<string, string>();
  while (parts.length > 0 && parts[parts.length - 1]!.includes("=")) {
    const [name, value] = splitOnce(parts.pop()!, "=");
    if (name !== "cost" && name !== "key") return { error: `unknown option "${name}=" (options: cost=N, key=NAME)` };
    if (options.has(name)) return { error: `"${name}=" given twice` };
    options.set(name, value);
  }
  const costText = options.get("cost") ?? "1";
  if (!/^[1-9]\d*$/.test(costText) || !Number.isSafeInteger(Number(costText))) {
    return { error: `cost must be a positive integer, got ${JSON.stringify(costText)}` };
  }
  const key = options.get("key") ?? null;
  if (key !== null) {
    const bad = checkKey(key);
    if (bad !== null) return { error: bad };
  }
  const common = { cost: Number(costText), key };
  if (kind === "burst") {
    if (parts.length !== 1 || !parts[0]!.includes("@"))
      return { error: `expected COUNT@AT, got ${JSON.stringify(text)}` };
    const [countText, atText] = splitOnce(parts[0]!, "@");
    if (!/^[1-9]\d*$/.test(countText))
      return { error: `COUNT must be a positive integer, got ${JSON.stringify(countText)}` };
    const at = parseTime(atText);
    if ("error" in at) return { error: `AT ${at.error}` };
    return { kind, rate: null, count: Number(countText), fromMs: at.ms, toMs: at.ms, ...common };
  }
  if (parts.length !== 3) return { error: `expected RATE,FROM,TO, got ${JSON.stringify(text)}` };
  const rate = parseRate(parts[0]!);
  if ("error" in rate) return { error: `RATE ${rate.error}` };
  const from = parseTime(parts[1]!);
  if ("error" in from) return { error: `FROM ${from.error}` };
  const to = parseTime(parts[2]!);
  if ("error" in to) return { error: `TO ${to.error}` };
  if (to.ms <= from.ms) return { error: `TO (${parts[2]}) must be after FROM (${parts[1]})` };
  return { kind, rate, count: 0, fromMs: from.ms, toMs: to.ms, ...common };
}

function splitOnce(text: string, sep: string): [string, string] {
  const i = text.indexOf(sep);
  return [text.slice(0, i), text.slice(i + 1)];
}

function checkKey(key: string): string | null {
  if (key === "") return "a key may not be empty";
  if (/[,\r\n]/.test(key)) return `a key may not contain commas or line breaks, got ${JSON.stringify(key)}`;
  return null;
}

/** How many lines `spec` makes (Poisson: an estimate, its mean), to refuse a runaway trace before making it. */
export function expectedLines(spec: GenSpec): number {
  let total = 0;
  for (const p of spec.patterns) {
    const keys = p.key === null ? (spec.keys.count ?? 1) : 1;
    if (p.kind === "burst") total += p.count * keys;
    else total += Math.ceil(((p.toMs - p.fromMs) * p.rate!.amount) / p.rate!.periodMs) * keys;
  }
  return total;
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

/** The whole trace as a list (tests and small traces; the command streams it with `traceStreams`). */
export function generateTrace(spec: GenSpec): TraceLine[] {
  const lines: TraceLine[] = [];
  for (const s of traceStreams(spec)) lines.push({ tMs: s.tMs, key: s.key, cost: s.cost });
  return lines;
}

/** The trace as CSV text, header first. */
export function formatTrace(lines: readonly TraceLine[]): string {
  return `t_ms,key,cost\n${lines.map((l) => `${l.tMs},${l.key},${l.cost}\n`).join("")}`;
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

const FLAGS = {
  values: ["constant", "burst", "poisson", "key", "keys", "seed", "max-lines", "out"],
  repeated: ["constant", "burst", "poisson"],
  positionals: false,
} as const;

/** The command-line arguments as a `GenSpec`, or what is wrong with them (for tests; `runGen` answers `--help`). */
export function parseGenArgs(args: string[]): { spec: GenSpec; out: string | null } | { error: string } | "help" {
  const parsed = parseArgs(args, { ...FLAGS, booleans: ["help"] });
  if (!parsed.ok) return { error: parsed.error };
  if (parsed.booleans.has("help")) return "help";
  if (parsed.positionals.length > 0) return { error: `unexpected argument "${parsed.positionals[0]}"` };
  return specOf(parsed);
}

function specOf(parsed: Extract<ParsedArgs, { ok: true }>): { spec: GenSpec; out: string | null } | { error: string } {
  const patterns: Pattern[] = [];
  // Patterns keep the order they were given in, across kinds: that order breaks ties between equal times.
  for (const { name, value } of parsed.flags) {
    if (name !== "constant" && name !== "burst" && name !== "poisson") continue;
    const p = parsePattern(name, value!);
    if ("error" in p) return { error: `--${name} ${value}: ${p.error}` };
    patterns.push(p);
  }
  if (patterns.length === 0) return { error: "give at least one pattern: --constant, --burst or --poisson" };
  const name = parsed.values.get("key")?.[0] ?? "a";
  const badKey = checkKey(name);
  if (badKey !== null) return { error: `--key: ${badKey}` };
  const keysText = parsed.values.get("keys")?.[0];
  const keyCount = keysText === undefined ? 1 : positiveInteger(keysText);
  if (keyCount === null) return { error: `--keys must be a positive integer, got ${JSON.stringify(keysText)}` };
  const keys = { name, count: keysText === undefined ? null : keyCount };
  const seedText = parsed.values.get("seed")?.[0] ?? "1";
  if (!/^\d+$/.test(seedText) || Number(seedText) > 0xffffffff) {
    return { error: `--seed must be an integer from 0 to 4294967295, got ${JSON.stringify(seedText)}` };
  }
  const maxText = parsed.values.get("max-lines")?.[0];
  const maxLines = maxText === undefined ? DEFAULT_MAX_LINES : positiveInteger(maxText);
  if (maxLines === null) return { error: `--max-lines must be a positive integer, got ${JSON.stringify(maxText)}` };
  return { spec: { patterns, keys, seed: Number(seedText), maxLines }, out: parsed.values.get("out")?.[0] ?? null };
}

function positiveInteger(text: string): number | null {
  return /^[1-9]\d*$/.test(text) && Number.isSafeInteger(Number(text)) ? Number(text) : null;
}

export async function runGen(args: string[], io: Io): Promise<number> {
  const cmd = { name: "gen", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, FLAGS);
  if (typeof parsed === "number") return parsed;
  const made = specOf(parsed);
  if ("error" in made) return usageError(cmd, made.error);
  const { spec, out } = made;
  const expected = expectedLines(spec);
  if (expected > spec.maxLines) {
    return usageError(cmd, `the patterns make about ${expected} lines, over --max-lines ${spec.maxLines}`);
  }
  if (out === null) {
    await writeTrace(spec, io.stdout);
    return 0;
  }
  let file: WriteStream;
  try {
    // Opened synchronously, so a bad path is reported here rather than as a stream error later.
    makeParentFolder(out);
    file = createWriteStream(out, { fd: openSync(out, "w") });
  } catch (err) {
    io.stderr.write(`sluice gen: cannot write ${out}: ${(err as Error).message}\n`);
    return 1;
  }
  let failure: Error | null = null;
  file.on("error", (err) => {
    failure = err;
  });
  await writeTrace(spec, file);
  await new Promise<void>((resolve) => file.end(() => resolve()));
  if (failure !== null) {
    io.stderr.write(`sluice gen: cannot write ${out}: ${(failure as Error).message}\n`);
    return 1;
  }
  return 0;
}

/** Streams the trace to `out`, header first, respecting back-pressure. */
async function writeTrace(spec: GenSpec, out: NodeJS.WritableStream): Promise<void> {
  const writer = new BufferedWriter(out);
  writer.append("t_ms,key,cost\n");
  let n = 0;
  for (const s of traceStreams(spec)) {
    writer.append(`${s.tMs}${s.tail}`);
    if (++n === 65_536) {
      n = 0;
      await writer.drained();
    }
  }
  await writer.flush();
}
