/**
 * What `simulate`, `compare` and `plan` replay: a trace in any of the forms they read, told apart by its first line.
 * - a request trace (its first line `# sluice request trace v1`): every request through the gateway's steps;
 * - a `t_ms,key[,cost]` trace: every rule alone;
 * - an access log (NGINX, Envoy or Cloudflare Logpush, recognised by its first line; NGINX in the format an
 *   nginx.conf gives, else `combined`): read as a request trace is, its unreadable lines reported and skipped, its
 *   API keys hashed as `trace from` writes them (no report shows a raw key).
 * Malformed lines of a trace are errors: each is reported with its line number (up to `MAX_REPORTED_LINES`, as
 * `TraceProblems` counts them), and no request reaches the sink after the first one; lines whose time goes back are
 * a warning. Progress is shown on a terminal.
 */
import { statSync } from "node:fs";
import { hashedApiKey } from "../replay/log_fields.ts";
import {
  awsWafParser,
  cloudflareParser,
  DEFAULT_FIELDS,
  envoyParser,
  type LogParser,
  NGINX_COMBINED,
  nginxParser,
} from "../replay/logs.ts";
import type { Outcome } from "../replay/outcomes.ts";
import { Reorder } from "../replay/reorder.ts";
import {
  columnsOf,
  emptyRequestLine,
  parseRequestLineInto,
  REQUEST_TRACE_MAGIC_V2,
  type RequestLine,
  type TraceColumns,
  traceKindOf,
  V1_COLUMNS,
} from "../replay/request_trace.ts";
import { sayReadingStdin } from "./io.ts";
import { Progress } from "./progress.ts";
import { parseTraceLineInto, readLineBatches, type TraceLineSlot, TraceProblems } from "./trace.ts";
import { BadLines } from "./trace_from.ts";

const UNKNOWN_FIRST_LINE =
  'not a trace this reads: not a request trace, nor a "t_ms,key,cost" line, nor an access log in a format it ' +
  "recognises (NGINX's combined or the nginx.conf's given by plan --from nginx:, Envoy's default, Cloudflare " +
  "Logpush); for a log_format of your own, write a request trace first: sluice trace from nginx LOG --conf nginx.conf " +
  "(Envoy's own format or JSON access log: sluice trace from envoy LOG --format FORMAT)";

/** How late a log line may come and still be put in order: `sluice trace from`'s default `--reorder`. */
const LOG_REORDER_MS = 60_000;

export interface TraceSink {
  /** A `t_ms,key,cost` line. */
  keyed(tMs: number, key: string, cost: number, outcome?: Outcome | null): void;
  /** A request (of a request trace or a log). */
  request(line: RequestLine): void;
}

export type TraceKind = "keyed" | "request" | "log";

export interface FeedOptions {
  /** For NGINX logs: the `log_format` to read them with (default `combined`). */
  readonly nginxFormat?: string;
  /** For access logs: the headers, cookies and query parameters the rules' keys read (`columnsFor`). */
  readonly columns?: TraceColumns;
  /** The progress line's label (`sluice compare`). */
  readonly label: string;
  /** Called once the kind is known, before the first request reaches the sink. */
  readonly onKind?: (kind: TraceKind) => void;
}

export interface FeedResult {
  /** `null` for an empty trace. */
  readonly kind: TraceKind | null;
  /** Malformed lines and read errors (file and line): the replay's answers are not to be trusted. */
  readonly errors: readonly string[];
}

/** Every request of the trace at `path` (standard input when undefined) into `sink`. */
export async function feedAnyTrace(
  sink: TraceSink,
  path: string | undefined,
  name: string,
  io: { stdin: NodeJS.ReadableStream; stderr: NodeJS.WritableStream },
  options: FeedOptions,
): Promise<FeedResult> {
  if (path === undefined) sayReadingStdin(io, options.label);
  const reader = new LineReader(sink, name, io.stderr, options);
  const progress = new Progress(io.stderr, options.label, path === undefined ? null : sizeOf(path));
  let bytes = 0;
  try {
    reading: for await (const batch of readLineBatches(path, io.stdin)) {
      for (const raw of batch) {
        bytes += raw.length + 1;
        if (!reader.line(raw)) break reading;
      }
      progress.update(reader.lineNo, bytes);
    }
  } catch (err) {
    reader.errors.push(`${name}: cannot read trace: ${(err as Error).message}`);
  }
  progress.done();
  reader.finish();
  return { kind: reader.kind, errors: reader.errors };
}

class LineReader {
  lineNo = 0;
  kind: TraceKind | null = null;
  private readonly problems: TraceProblems;
  private readonly keyedSlot: TraceLineSlot = { tMs: 0, key: "", cost: 1 };
  private readonly requestSlot = emptyRequestLine();
  /** A request trace's layout: version 1 until a version 2 trace's column line says otherwise. */
  private columns: TraceColumns = V1_COLUMNS;
  private log: LogParser | null = null;
  /**
   * An access log's lines back in start order: a log is written as requests end, so a request NGINX delayed comes
   * after later ones; `trace from` puts them back within its default `--reorder` window, and so does a direct read.
   */
  private readonly reorder: Reorder;
  private readonly bad: BadLines;

  constructor(
    private readonly sink: TraceSink,
    private readonly name: string,
    private readonly stderr: NodeJS.WritableStream,
    private readonly options: FeedOptions,
  ) {
    this.bad = new BadLines(name, stderr);
    this.problems = new TraceProblems(name);
    this.reorder = new Reorder(LOG_REORDER_MS, (line) => {
      this.time(line.tMs);
      this.sink.request(line);
    });
  }

  get errors(): string[] {
    return this.problems.errors;
  }

  /** One raw line; `false` to stop reading. */
  line(raw: string): boolean {
    this.lineNo++;
    if (this.kind === null) {
      if (raw.trim() === "") return true;
      const kind = this.kindOf(raw);
      if (kind === null) return false;
      this.kind = kind;
      this.options.onKind?.(kind);
    }
    if (this.kind === "keyed") return this.keyed(raw);
    if (this.kind === "request") return this.request(raw);
    return this.logLine(raw);
  }

  private kindOf(first: string): TraceKind | null {
    const kind = traceKindOf(first);
    if (typeof kind !== "string") {
      this.errors.push(`${this.name}:${this.lineNo}: ${kind.error}`);
      return null;
    }
    if (kind === "request") return "request";
    const keyed = parseTraceLineInto(first, true, this.keyedSlot);
    if (keyed !== true && keyed !== null && /^t_ms,key/.test(first) === false) {
      this.log = logParserFor(first, this.options.nginxFormat, this.options.columns);
      if (this.log !== null) {
        for (const w of this.log.warnings) this.stderr.write(`${this.name}: warning: ${w}\n`);
        return "log";
      }
      // Neither: most often an access log in a format of its own, which only `trace from --conf/--format` reads. A
      // line that starts as a `t_ms,...` one is a malformed keyed trace, reported as such.
      if (!/^\s*-?[0-9.]+\s*(?:,|$)/.test(first)) {
        this.errors.push(`${this.name}:${this.lineNo}: ${UNKNOWN_FIRST_LINE}`);
        return null;
      }
    }
    return "keyed";
  }

  /**
   * Said once: the headers, cookies and query parameters the rules' keys read that the trace has no column for. Every
   * request then reads them as missing (one shared budget under `key_missing: empty`), which is rarely what was meant.
   */
  private warnMissingColumns(columns: TraceColumns): void {
    const missing = (this.options.columns?.extras ?? []).filter((c) => !columns.extras.includes(c));
    if (missing.length === 0) return;
    const them = missing.length === 1 ? "it read it" : "them read them";
    this.stderr.write(
      `${this.name}: warning: the trace has no ${missing.join(", ")} column: rules keyed on ${them} as missing ` +
        "(sluice trace from --rules writes the columns the rules name)\n",
    );
  }

  private keyed(raw: string): boolean {
    const parsed = parseTraceLineInto(raw, this.lineNo === 1, this.keyedSlot);
    if (parsed === null) return true;
    if (parsed !== true) return this.malformed(parsed);
    this.time(this.keyedSlot.tMs);
    const { tMs, key, cost, outcome } = this.keyedSlot;
    if (this.errors.length === 0) this.sink.keyed(tMs, key, cost, outcome ?? null);
    return true;
  }

  private request(raw: string): boolean {
    if (raw.startsWith(REQUEST_TRACE_MAGIC_V2)) this.columns = { version: 2, extras: [] };
    if (raw.startsWith("t_ms,")) {
      const columns = columnsOf(raw, this.columns.version);
      if (typeof columns === "string") return this.malformed(columns);
      this.columns = columns;
      this.warnMissingColumns(columns);
      return true;
    }
    const parsed = parseRequestLineInto(raw, this.requestSlot, this.columns);
    if (parsed === null) return true;
    if (parsed !== true) return this.malformed(parsed);
    this.time(this.requestSlot.tMs);
    if (this.errors.length === 0) this.sink.request(this.requestSlot);
    return true;
  }

  private logLine(raw: string): boolean {
    const parsed = this.log!.parse(raw, this.requestSlot);
    if (parsed === null) return true;
    if (parsed !== true) {
      this.bad.add(this.lineNo, parsed);
      return true;
    }
    this.requestSlot.key = hashedApiKey(this.requestSlot.key);
    this.reorder.add(this.requestSlot);
    return true;
  }

  private malformed(message: string): boolean {
    return this.problems.malformed(this.lineNo, message);
  }

  private time(tMs: number): void {
    this.problems.time(this.lineNo, tMs);
  }

  finish(): void {
    this.reorder.flush();
    this.bad.summary(this.lineNo, this.log?.expected);
    const warning = this.problems.warning();
    if (warning !== null && this.errors.length === 0) this.stderr.write(`${warning}\n`);
  }
}

/** The log parser whose format reads `first`, or `null` when none does. */
export function logParserFor(first: string, nginxFormat: string | undefined, columns?: TraceColumns): LogParser | null {
  const fields = columns === undefined ? DEFAULT_FIELDS : { ...DEFAULT_FIELDS, columns };
  const candidates: LogParser[] = [];
  const nginx = nginxParser(nginxFormat ?? NGINX_COMBINED, fields);
  if (!("error" in nginx)) candidates.push(nginx);
  const envoy = envoyParser(undefined, fields);
  if (!("error" in envoy)) candidates.push(envoy);
  if (first.trimStart().startsWith("{")) candidates.push(cloudflareParser(fields), awsWafParser(fields));
  const slot = emptyRequestLine();
  return candidates.find((p) => p.parse(first, slot) === true) ?? null;
}

function sizeOf(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}
