/**
 * `sluice trace from nginx|envoy|cloudflare LOG`: an access log as a request trace, streaming in bounded memory. Bad
 * lines are counted and reported with their line numbers (the first `MAX_SHOWN` one by one), never fatal; lines a
 * slow request logged late are put back in start order within a window.
 */
import { createWriteStream, existsSync, statSync } from "node:fs";
import { type Directive, NginxSyntaxError, readNginxConfig } from "../migrate/nginx_conf.ts";
import { hashedApiKey } from "../replay/log_fields.ts";
import {
  awsWafParser,
  cloudflareParser,
  envoyParser,
  type FieldOptions,
  type LogParser,
  NGINX_COMBINED,
  nginxParser,
} from "../replay/logs.ts";
import { Reorder } from "../replay/reorder.ts";
import {
  columnsFor,
  emptyRequestLine,
  formatRequestLineIn,
  OUTCOME_COLUMNS,
  type RequestLine,
  requestTraceHeader,
  type TraceColumns,
} from "../replay/request_trace.ts";
import { loadRules } from "../rules/load.ts";
import { commandArgs, EXIT_CODES, inputError, usageError } from "./args.ts";
import type { Io } from "./io.ts";
import { Progress } from "./progress.ts";
import { BufferedWriter, readLineBatches } from "./trace.ts";

const HELP = `Usage: sluice trace from nginx|envoy|cloudflare|aws-waf LOG [--out TRACE.csv] [--rules PATH]... [options]

Turns an access log into a request trace v2 (docs/rules.md, "Request traces") that sluice simulate, compare and plan
replay through the whole rule set. Streams: a day of logs in bounded memory. LOG "-" (or none) is standard input.
The trace carries what the log has of the host, the client's country, ASN, data center and JA4, and of the headers,
cookies and query parameters that the rules' keys name (--rules, default rules/ when it exists). Secrets are never
written raw: the API key, the user, every cookie and a header or query parameter named like a credential (token, session, key,
auth, ...) become sha256:<hex> of their value; a replay decides alike.
Lines that cannot be read are counted and reported on standard error with their line numbers; they never stop the
run. Lines written late by slow requests are put back in start order (within --reorder, default 60s).

  nginx        the format of a log_format line: --format 'TEXT', or --conf nginx.conf [--log-format NAME] (the
               format its access_log uses), default "combined". Log $msec (and $request_time) for milliseconds;
               $time_local and $time_iso8601 are whole seconds (a warning says so).
  envoy        Envoy's default access log format, or --format 'TEXT' (%START_TIME%, %REQ(:METHOD)%, %REQ(:PATH)%,
               %DOWNSTREAM_REMOTE_ADDRESS%, %REQ(X-API-KEY)%), or --format '{JSON}': the json_format object of a
               JSON access log ({"start":"%START_TIME%","method":"%REQ(:METHOD)%",...}), one JSON object a line
  cloudflare   Logpush http_requests NDJSON: EdgeStartTimestamp (unixnano, unix or RFC 3339), ClientIP,
               ClientRequestMethod, ClientRequestURI, and RequestHeaders for the key and user
  aws-waf      AWS WAF logs, one JSON object a line: timestamp, httpRequest (clientIp, country, headers, uri,
               args, httpMethod); a rate-based rule's BLOCK, CAPTCHA or CHALLENGE is the limiter's refusal
  --rules PATH         the rules whose keys say which headers, cookies and query parameters to carry (repeatable)
  --key-header NAME    the request header holding the API key (default x-api-key; Authorization: Bearer too)
  --user-header NAME   the request header holding the user id (default x-user-id)
  --out FILE           write the trace there instead of standard output
  --reorder DURATION   how late a line may come and still be put in order (default 60s; 0 keeps the log's order)

${EXIT_CODES}Also 1 when no line of the log could be read.
`;

/** Bad lines reported one by one; the rest are counted. */
export const MAX_SHOWN = 20;

export async function runTrace(args: string[], io: Io): Promise<number> {
  const cmd = { name: "trace", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["out", "format", "conf", "log-format", "key-header", "user-header", "reorder", "rules"],
    repeated: ["rules"],
    positionals: true,
  });
  if (typeof parsed === "number") return parsed;
  const [verb, kind, log, extra] = parsed.positionals;
  if (verb !== "from") return usageError(cmd, `expected "from", got ${JSON.stringify(verb ?? "")}`);
  if (kind !== "nginx" && kind !== "envoy" && kind !== "cloudflare" && kind !== "aws-waf") {
    return usageError(cmd, `expected nginx, envoy, cloudflare or aws-waf, got ${JSON.stringify(kind ?? "")}`);
  }
  if (extra !== undefined) return usageError(cmd, `unexpected argument "${extra}"`);
  const one = (n: string) => parsed.values.get(n)?.[0];
  const reorder = one("reorder") ?? "60s";
  const windowMs = parseWindow(reorder);
  if (windowMs === null)
    return usageError(cmd, `--reorder must be a duration such as 60s or 0, got ${JSON.stringify(reorder)}`);
  const columns = traceColumns(parsed.values.get("rules"));
  if ("errors" in columns) return inputError(io, columns.errors);
  const fields = {
    keyHeader: (one("key-header") ?? "x-api-key").toLowerCase(),
    userHeader: (one("user-header") ?? "x-user-id").toLowerCase(),
    columns,
  };
  const parser = logParser(kind, { format: one("format"), conf: one("conf"), logFormat: one("log-format") }, fields);
  if ("usage" in parser) return usageError(cmd, parser.usage);
  if ("error" in parser) return inputError(io, [parser.error]);
  const path = log === undefined || log === "-" ? undefined : log;
  return convert(parser, path, one("out"), windowMs, io, columns);
}

/** The trace's columns: the headers, cookies and query parameters the rules' keys name (`rules/` when it exists). */
function traceColumns(paths: readonly string[] | undefined): TraceColumns | { errors: readonly string[] } {
  const given = paths ?? (existsSync("rules/") ? ["rules/"] : []);
  if (given.length === 0) return columnsFor([]);
  const loaded = loadRules([...given]);
  return loaded.errors.length > 0 ? { errors: loaded.errors } : columnsFor([...loaded.rules, ...loaded.denies]);
}

function parseWindow(text: string): number | null {
  if (text === "0") return 0;
  const m = /^(\d+)(ms|s|min)$/.exec(text);
  if (m === null) return null;
  return Number(m[1]) * (m[2] === "ms" ? 1 : m[2] === "s" ? 1000 : 60_000);
}

export interface FormatChoice {
  readonly format: string | undefined;
  readonly conf: string | undefined;
  readonly logFormat: string | undefined;
}

/** The parser for a kind of log, its format from the flags or the NGINX configuration. */
export function logParser(
  kind: "nginx" | "envoy" | "cloudflare" | "aws-waf",
  choice: FormatChoice,
  fields: FieldOptions,
): LogParser | { error: string } | { usage: string } {
  if (kind === "cloudflare" || kind === "aws-waf") {
    if (choice.format !== undefined || choice.conf !== undefined)
      return { usage: `${kind} logs take no --format or --conf` };
    return kind === "cloudflare" ? cloudflareParser(fields) : awsWafParser(fields);
  }
  if (kind === "envoy") {
    if (choice.conf !== undefined) return { usage: "--conf is for nginx" };
    return envoyParser(choice.format, fields);
  }
  if (choice.format !== undefined && choice.conf !== undefined) return { usage: "give --format or --conf, not both" };
  let format = choice.format ?? NGINX_COMBINED;
  if (choice.conf !== undefined) {
    const fromConf = nginxLogFormat(choice.conf, choice.logFormat);
    if ("error" in fromConf) return fromConf;
    format = fromConf.format;
  }
  return nginxParser(format, fields);
}

/** The `log_format` an nginx.conf names (`name`, or the one its first `access_log` uses), `combined` by default. */
export function nginxLogFormat(conf: string, name: string | undefined): { format: string } | { error: string } {
  let config: Directive[];
  try {
    config = readNginxConfig(conf);
  } catch (err) {
    if (err instanceof NginxSyntaxError) return { error: err.message };
    throw err;
  }
  const formats = new Map<string, string>([["combined", NGINX_COMBINED]]);
  let used: string | undefined;
  const walk = (ds: readonly Directive[]) => {
    for (const d of ds) {
      if (d.name === "log_format" && d.args.length >= 2) {
        const parts = d.args.slice(1).filter((a) => !a.startsWith("escape="));
        formats.set(d.args[0]!, parts.join(""));
      }
      if (d.name === "access_log" && used === undefined && d.args[0] !== "off") used = d.args[1] ?? "combined";
      if (d.block !== null) walk(d.block);
    }
  };
  walk(config);
  const chosen = name ?? used ?? "combined";
  const format = formats.get(chosen);
  if (format === undefined)
    return { error: `${conf}: no log_format named "${chosen}" (it has: ${[...formats.keys()].join(", ")})` };
  return { format };
}

async function convert(
  parser: LogParser,
  path: string | undefined,
  outPath: string | undefined,
  windowMs: number,
  io: Io,
  columns: TraceColumns,
): Promise<number> {
  const name = path ?? "<stdin>";
  for (const w of parser.warnings) io.stderr.write(`${name}: warning: ${w}\n`);
  const stream = outPath === undefined ? io.stdout : createWriteStream(outPath);
  const out = new BufferedWriter(stream);
  // With NGINX's $status (and $request_time), each line also says what the origin answered.
  const traced = parser.outcomes === true ? { ...columns, extras: [...columns.extras, ...OUTCOME_COLUMNS] } : columns;
  out.append(requestTraceHeader(traced));
  const reorder = new Reorder(windowMs, (line) => out.append(formatRequestLineIn(withoutSecrets(line), traced)));
  const slot = emptyRequestLine();
  const bad = new BadLines(name, io.stderr);
  const progress = new Progress(io.stderr, "sluice trace from", path === undefined ? null : sizeOf(path));
  let lineNo = 0;
  let read = 0;
  let bytes = 0;
  try {
    for await (const batch of readLineBatches(path, io.stdin)) {
      for (const raw of batch) {
        lineNo++;
        bytes += raw.length + 1;
        const parsed = parser.parse(raw, slot);
        if (parsed === true) {
          read++;
          reorder.add(slot);
        } else if (parsed !== null) bad.add(lineNo, parsed);
      }
      progress.update(lineNo, bytes);
      await out.drained();
    }
  } catch (err) {
    progress.done();
    return inputError(io, [`${name}: cannot read: ${(err as Error).message}`]);
  }
  reorder.flush();
  await out.flush();
  if (stream !== io.stdout) await new Promise<void>((resolve) => stream.end(() => resolve()));
  progress.done();
  bad.summary(lineNo, parser.expected);
  if (reorder.late > 0)
    io.stderr.write(
      `${name}: ${reorder.late} lines came more than the --reorder window late and were written out of order\n`,
    );
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  io.stderr.write(`${name}: ${plural(read, "request")} written from ${plural(lineNo, "line")}\n`);
  return read === 0 && lineNo > 0 ? 1 : 0;
}

/** The line with its API key as `sha256:<hex>` (the log parsers already hash secret headers, cookies and queries). */
function withoutSecrets(line: RequestLine): RequestLine {
  line.key = hashedApiKey(line.key);
  return line;
}

function sizeOf(path: string): number | null {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
}

/** Bad lines: the first `MAX_SHOWN` reported as they come, then a count with the numbers. */
export class BadLines {
  count = 0;
  private readonly numbers: number[] = [];

  constructor(
    private readonly name: string,
    private readonly stderr: NodeJS.WritableStream,
  ) {}

  add(lineNo: number, why: string): void {
    this.count++;
    if (this.count <= MAX_SHOWN) {
      this.numbers.push(lineNo);
      this.stderr.write(`${this.name}:${lineNo}: ${why}\n`);
    }
  }

  /** `expected`: what a readable line looks like, said when some line could not be read. */
  summary(lines: number, expected?: string): void {
    if (this.count === 0) return;
    const more = this.count > MAX_SHOWN ? ` (the first ${MAX_SHOWN} shown: lines ${this.numbers.join(", ")})` : "";
    this.stderr.write(`${this.name}: ${this.count} of ${lines} lines could not be read and were left out${more}\n`);
    if (expected !== undefined) this.stderr.write(`${this.name}: expected ${expected}\n`);
  }
}
