/**
 * `sluice gen`: write a synthetic trace (CSV `t_ms,key,cost`, the simulator's input) from a few simple patterns:
 * a constant rate over a span, bursts at given times, seeded Poisson arrivals, for one key or many.
 * `generateTrace` is pure (patterns in, lines out) and deterministic: the same arguments give the same bytes.
 */
import { createWriteStream, openSync, type WriteStream } from "node:fs";
import { parseRate } from "../rules/duration.ts";
import { commandArgs, EXIT_CODES, type ParsedArgs, parseArgs, usageError } from "./args.ts";
import { type GenSpec, type Pattern, type PatternKind, traceStreams } from "./gen_streams.ts";
import { type Io, makeParentFolder } from "./io.ts";
import { parseTime } from "./time_flag.ts";
import { BufferedWriter, type TraceLine } from "./trace.ts";

export { mulberry32, traceStreams } from "./gen_streams.ts";
export type { GenSpec, Pattern, PatternKind };

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
