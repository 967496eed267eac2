/**
 * Streaming trace reading: CSV lines `t_ms,key,cost` (cost optional, default 1), an optional header line first,
 * from a file or standard input, in bounded memory. Malformed lines are reported with their line number.
 */
import { createReadStream } from "node:fs";

export interface TraceLine {
  readonly tMs: number;
  readonly key: string;
  readonly cost: number;
}

export type ParsedLine = TraceLine | { readonly error: string } | null;

const INTEGER = /^-?\d+$/;

/** Parse one trace line (without its newline). `null` for a blank line or the header. */
export function parseTraceLine(raw: string, isFirst: boolean): ParsedLine {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  if (line.trim() === "") return null;
  if (isFirst && (line === "t_ms,key,cost" || line === "t_ms,key")) return null;
  const c1 = line.indexOf(",");
  if (c1 < 0) return { error: `expected "t_ms,key[,cost]", got ${JSON.stringify(clip(line))}` };
  const c2 = line.indexOf(",", c1 + 1);
  if (c2 >= 0 && line.indexOf(",", c2 + 1) >= 0) {
    return { error: `too many fields (keys may not contain commas): ${JSON.stringify(clip(line))}` };
  }
  const tText = line.slice(0, c1);
  const key = c2 < 0 ? line.slice(c1 + 1) : line.slice(c1 + 1, c2);
  const costText = c2 < 0 ? "" : line.slice(c2 + 1);
  if (!INTEGER.test(tText))
    return { error: `t_ms must be an integer number of milliseconds, got ${JSON.stringify(clip(tText))}` };
  const tMs = Number(tText);
  if (!Number.isSafeInteger(tMs) || tMs < 0 || tMs > 8_640_000_000_000_000) {
    return { error: `t_ms must be between 0 and 8640000000000000, got ${tText}` };
  }
  if (costText === "") return { tMs, key, cost: 1 };
  if (!INTEGER.test(costText))
    return { error: `cost must be a positive integer, got ${JSON.stringify(clip(costText))}` };
  const cost = Number(costText);
  if (!Number.isSafeInteger(cost) || cost < 1) return { error: `cost must be a positive integer, got ${costText}` };
  return { tMs, key, cost };
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Raw lines of a file (or stdin when `path` is undefined), streamed. Line numbers start at 1. */
export async function* readLines(path: string | undefined, stdin: NodeJS.ReadableStream): AsyncGenerator<string> {
  const stream = path === undefined ? stdin : createReadStream(path, { highWaterMark: 1 << 20 });
  stream.setEncoding("utf8");
  let rest = "";
  for await (const chunk of stream as AsyncIterable<string>) {
    const text = rest + chunk;
    let start = 0;
    let nl = text.indexOf("\n", start);
    while (nl >= 0) {
      yield text.slice(start, nl);
      start = nl + 1;
      nl = text.indexOf("\n", start);
    }
    rest = text.slice(start);
  }
  if (rest !== "") yield rest;
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

  async flush(): Promise<void> {
    if (this.buffer === "") return;
    const ok = this.out.write(this.buffer);
    this.buffer = "";
    if (!ok) await new Promise<void>((resolve) => this.out.once("drain", () => resolve()));
  }
}
