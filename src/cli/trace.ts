/**
 * Streaming trace reading: CSV lines `t_ms,key,cost` (cost optional, default 1), an optional header line first,
 * from a file or standard input, in bounded memory. Malformed lines are reported with their line number.
 */
import { createReadStream } from "node:fs";

export type { TraceLine } from "../replay/run.ts";

import type { Outcome } from "../replay/outcomes.ts";
import { outcomeOf } from "../replay/request_trace.ts";

/** Where `parseTraceLineInto` writes a parsed line: reused, so parsing a line allocates only the key. */
export interface TraceLineSlot {
  tMs: number;
  key: string;
  cost: number;
  /** The `status,duration_ms` columns, for rules that count by the response; `null` or absent: not given. */
  outcome?: Outcome | null;
}

const MAX_T_MS = 8_640_000_000_000_000;

/**
 * The value of the decimal integer `s[from, to)` (an optional minus, then ASCII digits), or NaN when it is not one.
 * Digits are accumulated exactly: at most 16 of them, so the value stays below 2^53.
 */
function integerAt(s: string, from: number, to: number): number {
  const negative = from < to && s.charCodeAt(from) === 45;
  let i = negative ? from + 1 : from;
  if (i === to) return Number.NaN;
  if (to - i > 16) return isDigits(s, i, to) ? Number.POSITIVE_INFINITY : Number.NaN;
  let value = 0;
  for (; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return Number.NaN;
    value = value * 10 + c;
  }
  return negative ? -value : value;
}

function isDigits(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/**
 * Parse one trace line (without its newline) into `slot`. Returns `true` when parsed, `null` for a blank line or
 * the header, or the error message.
 */
export function parseTraceLineInto(raw: string, isFirst: boolean, slot: TraceLineSlot): true | null | string {
  const end = raw.length > 0 && raw.charCodeAt(raw.length - 1) === 13 ? raw.length - 1 : raw.length;
  const line = end === raw.length ? raw : raw.slice(0, end);
  if (line.length === 0 || (line.charCodeAt(0) <= 32 && line.trim() === "")) return null;
  if (isFirst && (line === "t_ms,key,cost" || line === "t_ms,key" || line === "t_ms,key,cost,status,duration_ms")) {
    return null;
  }
  const c1 = line.indexOf(",");
  if (c1 < 0) return `expected "t_ms,key[,cost]", got ${JSON.stringify(clip(line))}`;
  const c2 = line.indexOf(",", c1 + 1);
  const c3 = c2 < 0 ? -1 : line.indexOf(",", c2 + 1);
  // Where the cost field ends: the line's end, or the status field's comma.
  let costEnd = line.length;
  let outcome: Outcome | null = null;
  if (c3 >= 0) {
    // t_ms,key,cost,status,duration_ms: what the origin answered, for rules that count by the response.
    const c4 = line.indexOf(",", c3 + 1);
    if (c4 < 0 || line.indexOf(",", c4 + 1) >= 0) {
      return `too many fields (keys may not contain commas): ${JSON.stringify(clip(line))}`;
    }
    const read = outcomeAt(line, c3, c4);
    if (typeof read === "string") return read;
    outcome = read;
    costEnd = c3;
  }
  const tMs = integerAt(line, 0, c1);
  if (Number.isNaN(tMs)) {
    return `t_ms must be an integer number of milliseconds, got ${JSON.stringify(clip(line.slice(0, c1)))}`;
  }
  if (tMs < 0 || tMs > MAX_T_MS) return `t_ms must be between 0 and ${MAX_T_MS}, got ${line.slice(0, c1)}`;
  let cost = 1;
  if (c2 >= 0 && c2 + 1 < costEnd) {
    cost = integerAt(line, c2 + 1, costEnd);
    if (Number.isNaN(cost)) {
      return `cost must be a positive integer, got ${JSON.stringify(clip(line.slice(c2 + 1, costEnd)))}`;
    }
    if (!Number.isSafeInteger(cost) || cost < 1) {
      return `cost must be a positive integer, got ${line.slice(c2 + 1, costEnd)}`;
    }
  }
  slot.tMs = tMs;
  slot.key = c2 < 0 ? line.slice(c1 + 1, costEnd) : line.slice(c1 + 1, c2);
  slot.cost = cost;
  slot.outcome = outcome;
  return true;
}

/**
 * The `status,duration_ms` fields after the commas at `c3` and `c4`, read in place (a trace of a million lines would
 * otherwise slice both, and test each with a pattern, per line); anything but the plain forms goes to `outcomeOf`,
 * which says what is wrong with it.
 */
function outcomeAt(line: string, c3: number, c4: number): Outcome | null | string {
  const first = line.charCodeAt(c3 + 1);
  const digits = line.length - (c4 + 1);
  if (c4 - c3 === 4 && first >= 49 && first <= 53 && isDigits(line, c3 + 1, c4) && digits <= 12) {
    if (digits === 0) return { status: integerAt(line, c3 + 1, c4), durationMs: null };
    if (isDigits(line, c4 + 1, line.length)) {
      return { status: integerAt(line, c3 + 1, c4), durationMs: integerAt(line, c4 + 1, line.length) };
    }
  }
  return outcomeOf(line.slice(c3 + 1, c4), line.slice(c4 + 1));
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/**
 * Raw lines of a file (or stdin when `path` is undefined), streamed a chunk at a time. A UTF-8 byte order mark at the
 * start (spreadsheets and Windows editors write one) is not part of the first line.
 */
export async function* readLineBatches(
  path: string | undefined,
  stdin: NodeJS.ReadableStream,
): AsyncGenerator<string[]> {
  const stream = path === undefined ? stdin : createReadStream(path, { highWaterMark: 1 << 16 });
  stream.setEncoding("utf8");
  let rest = "";
  let first = true;
  for await (const chunk of stream as AsyncIterable<string>) {
    const text = first && chunk.startsWith("\uFEFF") ? chunk.slice(1) : rest + chunk;
    first = false;
    const lines = text.split("\n");
    rest = lines.pop() ?? "";
    yield lines;
  }
  if (rest !== "") yield [rest];
}

/** Malformed lines reported at most per run; reading stops at the next one. */
export const MAX_REPORTED_LINES = 20;

/**
 * What a trace reader found wrong with a trace: every malformed line (up to `MAX_REPORTED_LINES`, each with its line
 * number), and the lines whose time goes back (a trace merged out of order), summed up in one warning.
 */
export class TraceProblems {
  readonly errors: string[] = [];
  private latestMs = Number.NEGATIVE_INFINITY;
  private backwards = 0;
  private firstBackwards = "";

  constructor(private readonly name: string) {}

  /** Records a malformed line; false when the limit is reached and reading should stop. */
  malformed(lineNo: number, message: string): boolean {
    if (this.errors.length === MAX_REPORTED_LINES) {
      this.errors.push(`${this.name}: stopped at line ${lineNo}, after ${MAX_REPORTED_LINES} malformed lines`);
      return false;
    }
    this.errors.push(`${this.name}:${lineNo}: ${message}`);
    return true;
  }

  /** Notes a well-formed line's time. */
  time(lineNo: number, tMs: number): void {
    if (tMs >= this.latestMs) {
      this.latestMs = tMs;
      return;
    }
    if (this.backwards === 0) this.firstBackwards = `line ${lineNo}: ${tMs} after ${this.latestMs}`;
    this.backwards++;
  }

  /** One line on lines out of time order, or null. */
  warning(): string | null {
    if (this.backwards === 0) return null;
    const lines = this.backwards === 1 ? "1 line goes" : `${this.backwards} lines go`;
    return `${this.name}: warning: ${lines} back in time (first at ${this.firstBackwards}); a trace is replayed in file order, each key at the latest time seen for it`;
  }
}

/**
 * Every line of a trace into `sink` (`compare`, `plan`): the malformed lines' messages (file and line, up to
 * `MAX_REPORTED_LINES`) or a read error; empty when the trace is good. Lines out of time order are a warning, written
 * to `stderr`.
 */
export async function feedTrace(
  sink: { add(tMs: number, key: string, cost: number): void },
  path: string | undefined,
  name: string,
  stdin: NodeJS.ReadableStream,
  stderr: NodeJS.WritableStream,
): Promise<readonly string[]> {
  const line: TraceLineSlot = { tMs: 0, key: "", cost: 1 };
  const problems = new TraceProblems(name);
  let lineNo = 0;
  try {
    reading: for await (const batch of readLineBatches(path, stdin)) {
      for (const raw of batch) {
        lineNo++;
        const parsed = parseTraceLineInto(raw, lineNo === 1, line);
        if (parsed === null) continue;
        if (parsed !== true) {
          if (!problems.malformed(lineNo, parsed)) break reading;
          continue;
        }
        problems.time(lineNo, line.tMs);
        if (problems.errors.length === 0) sink.add(line.tMs, line.key, line.cost);
      }
    }
  } catch (err) {
    return [...problems.errors, `${name}: cannot read trace: ${(err as Error).message}`];
  }
  const warning = problems.warning();
  if (warning !== null && problems.errors.length === 0) stderr.write(`${warning}\n`);
  return problems.errors;
}

/** Buffered writing that respects back-pressure. */
export class BufferedWriter {
  private buffer = "";
  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly limit = 1 << 16,
  ) {}

  async write(s: string): Promise<void> {
    this.buffer += s;
    if (this.buffer.length >= this.limit) await this.flush();
  }

  /** Whether the stream asked us to wait (a write returned false) since the last `drained`. */
  private full = false;

  /** Append without awaiting: a full buffer is handed to the stream at once; call `drained` now and then. */
  append(s: string): void {
    this.buffer += s;
    if (this.buffer.length >= this.limit) {
      if (!this.out.write(this.buffer)) this.full = true;
      this.buffer = "";
    }
  }

  /** Wait until the stream has taken what `append` handed it (bounded memory: call once per input chunk). */
  async drained(): Promise<void> {
    if (!this.full) return;
    this.full = false;
    await new Promise<void>((resolve) => this.out.once("drain", () => resolve()));
  }

  async flush(): Promise<void> {
    if (this.buffer === "") return;
    const ok = this.out.write(this.buffer);
    this.buffer = "";
    if (!ok) await new Promise<void>((resolve) => this.out.once("drain", () => resolve()));
  }
}
