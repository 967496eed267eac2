/**
 * Access logs as request traces (`sluice trace from`): one parser per kind, each turning one log line into a
 * `RequestLine` (or saying why it cannot), in constant memory per line.
 *
 * - NGINX: the line format of a `log_format` (default `combined`). Time from `$msec` (ms; with `$request_time`, the
 *   request's start: the moment `limit_req` decided), else `$time_iso8601` or `$time_local` (whole seconds: said in a
 *   warning). Method and path from `$request` (or `$request_method` and `$request_uri`), address from `$remote_addr`,
 *   key and user from the header variables named by the options.
 * - Envoy: its access log format (default: Envoy's default format), `%START_TIME%` (ms; or log_start_time.ts's
 *   formats), `%REQ(:METHOD)%`, the path, the address from `%DOWNSTREAM_REMOTE_ADDRESS%` or the first `X-Forwarded-For`
 *   hop, headers by `%REQ(NAME)%`; the answer from `%RESPONSE_CODE%` and `%DURATION%` (ms from start to last byte).
 * - Cloudflare Logpush `http_requests` NDJSON (log_cloudflare.ts): `EdgeStartTimestamp` (unixnano, unix, unixms or RFC 3339),
 *   `ClientIP`, `ClientRequestMethod`, `ClientRequestURI`, and the key and user from `RequestHeaders`; the answer
 *   from `EdgeResponseStatus` and `EdgeEndTimestamp` (the response's last byte), else `OriginResponseDurationMs`.
 */

import { fillLogFields, missingColumns } from "./log_fields.ts";
import { envoyColumns, envoyFields, nginxColumns, nginxFields } from "./log_fields_of.ts";
import { parseTimeLocal } from "./log_lines.ts";
import {
  answeredOf,
  DEFAULT_FIELDS,
  type FieldOptions,
  fill,
  identityHeadersOf,
  keyOf,
  type LogParser,
  outcomeOfMs,
  parseIsoMs,
  pathOf,
} from "./log_request.ts";
import { startTimeReader } from "./log_start_time.ts";
import type { Outcome } from "./outcomes.ts";
import type { Answered } from "./request_trace.ts";

export { awsWafParser } from "./log_aws_waf.ts";
export { cloudflareParser, edgeStartMs } from "./log_cloudflare.ts";
export { formatNginxLine, parseTimeLocal } from "./log_lines.ts";
export { DEFAULT_FIELDS, type FieldOptions, type LogParser, parseIsoMs } from "./log_request.ts";

export const NGINX_COMBINED =
  '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

export const ENVOY_DEFAULT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" ' +
  '"%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"';

/** A line format compiled to a regular expression with one group per variable. */
export interface CompiledFormat {
  readonly re: RegExp;
  /** The variable of each group, in order (`remote_addr`, `REQ(:METHOD)`). */
  readonly names: readonly string[];
}

/** NGINX `log_format` text (`$var`, `${var}`, literal text) compiled. */
export function compileNginxFormat(format: string): CompiledFormat {
  const names: string[] = [];
  let source = "^";
  const re = /\$\{?([A-Za-z0-9_]+)\}?/g;
  let last = 0;
  for (let m = re.exec(format); m !== null; m = re.exec(format)) {
    source += escapeRe(format.slice(last, m.index));
    source += "(.*?)";
    names.push(m[1]!);
    last = m.index + m[0].length;
  }
  source += `${escapeRe(format.slice(last))}$`;
  return { re: new RegExp(source), names };
}

/** Envoy format text (`%COMMAND%`, `%REQ(NAME)%`) compiled. */
export function compileEnvoyFormat(format: string): CompiledFormat {
  const names: string[] = [];
  let source = "^";
  const re = /%([A-Z_]+(?:\([^)]*\))?(?::\d+)?)%/g;
  let last = 0;
  const body = format.endsWith("\n") ? format.slice(0, -1) : format;
  for (let m = re.exec(body); m !== null; m = re.exec(body)) {
    source += escapeRe(body.slice(last, m.index));
    source += "(.*?)";
    names.push(m[1]!.replace(/:\d+$/, ""));
    last = m.index + m[0].length;
  }
  source += `${escapeRe(body.slice(last))}$`;
  return { re: new RegExp(source), names };
}

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** NGINX's `\xHH` escapes undone; `-` (NGINX's and Envoy's "no value") is `null`. */
function value(raw: string | undefined): string | null {
  if (raw === undefined || raw === "-" || raw === "") return null;
  return raw.includes("\\x")
    ? raw.replace(/\\x([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)))
    : raw;
}

/** `"GET /path?q HTTP/1.1"` as method and path (without the query). */
function requestLine(text: string | null): { method: string; path: string } | string {
  if (text === null) return "no request line";
  const m = /^([A-Za-z]+) (\S+)(?: [A-Z]+\/[0-9.]+)?$/.exec(text);
  if (m === null) return `not a request line: ${JSON.stringify(text.slice(0, 60))}`;
  return { method: m[1]!, path: pathOf(m[2]!) };
}

/** What the origin answered, from NGINX's `$status` and `$request_time` (seconds with ms: `0.123` is 123 ms, exactly). */
function outcomeOfLog(answered: Answered | null, took: string | null): Outcome | null {
  if (answered === null) return null;
  const durationMs = took !== null && /^\d{1,9}\.\d{3}$/.test(took) ? Number(took.replace(".", "")) : null;
  return { status: answered.status, durationMs };
}

const headerVar = (header: string) => `http_${header.toLowerCase().replaceAll("-", "_")}`;

/** Values for an NGINX format's variables, to show a line written in it (others print as `-`, as NGINX logs them). */
const NGINX_SAMPLE: Readonly<Record<string, string>> = {
  remote_addr: "192.0.2.10",
  time_local: "04/Dec/2026:14:00:00 +0000",
  time_iso8601: "2026-12-04T14:00:00+00:00",
  msec: "1733320800.125",
  request: "GET /v1/quotes HTTP/1.1",
  request_method: "GET",
  request_uri: "/v1/quotes",
  uri: "/v1/quotes",
  status: "200",
  body_bytes_sent: "612",
  request_time: "0.004",
  http_user_agent: "curl/8.5.0",
};

/** A line `format` would log for one request. */
export function nginxSample(format: string): string {
  return format.replace(/\$\{?([A-Za-z0-9_]+)\}?/g, (_, name: string) => NGINX_SAMPLE[name] ?? "-");
}

// long: the format's checks and the per-line closure that relies on them read as one
export function nginxParser(format: string, fields: FieldOptions = DEFAULT_FIELDS): LogParser | { error: string } {
  const compiled = compileNginxFormat(format);
  const has = (n: string) => compiled.names.includes(n);
  const time = ["msec", "time_iso8601", "time_local"].find(has);
  if (time === undefined) return { error: "the log format has no time ($msec, $time_iso8601 or $time_local)" };
  if (!has("request") && !(has("request_method") && (has("request_uri") || has("uri")))) {
    return { error: "the log format has no request ($request, or $request_method and $request_uri)" };
  }
  const warnings: string[] = [];
  if (time !== "msec")
    warnings.push(
      `the log's times ($${time}) are whole seconds: requests within a second keep their order but not their spacing; log $msec for milliseconds`,
    );
  if (!has("remote_addr")) warnings.push("the log format has no $remote_addr: requests have no client address");
  const columns = fields.columns;
  const missing = columns === undefined ? null : missingColumns(columns, nginxColumns(has));
  if (missing !== null) warnings.push(missing);
  const keyVar = has(headerVar(fields.keyHeader))
    ? headerVar(fields.keyHeader)
    : has("http_authorization")
      ? "http_authorization"
      : null;
  const index = new Map(compiled.names.map((n, i) => [n, i + 1]));
  const at = (m: RegExpExecArray, n: string | null) => (n === null || !index.has(n) ? null : value(m[index.get(n)!]));
  return {
    warnings,
    expected: `log_format '${format}', a line like: ${nginxSample(format)}`,
    outcomes: has("status"),
    parse(line, slot) {
      if (line.trim() === "") return null;
      const m = compiled.re.exec(line.endsWith("\r") ? line.slice(0, -1) : line);
      if (m === null) return "does not match the log format";
      const raw = at(m, time) ?? "";
      let tMs: number;
      if (time === "msec") {
        tMs = /^\d+\.\d{3}$/.test(raw) ? Number(raw.replace(".", "")) : Number.NaN;
        const took = at(m, "request_time");
        if (took !== null && /^\d+\.\d{3}$/.test(took)) tMs -= Number(took.replace(".", ""));
      } else tMs = time === "time_local" ? parseTimeLocal(raw) : parseIsoMs(raw);
      if (Number.isNaN(tMs)) return `unreadable time ${JSON.stringify(raw)}`;
      const req = has("request")
        ? requestLine(at(m, "request"))
        : { method: at(m, "request_method") ?? "", path: pathOf(at(m, "request_uri") ?? at(m, "uri") ?? "") };
      const filled = fill(
        slot,
        tMs,
        req,
        at(m, "remote_addr"),
        keyOf(at(m, keyVar)),
        at(m, headerVar(fields.userHeader)),
      );
      // $limit_req_status: PASSED, DELAYED, REJECTED, DELAYED_DRY_RUN or REJECTED_DRY_RUN (a dry run lets through).
      const limitReq = at(m, "limit_req_status");
      if (filled !== true) return filled;
      slot.answered = answeredOf(at(m, "status"), limitReq === null ? null : limitReq === "REJECTED");
      slot.outcome = outcomeOfLog(slot.answered, at(m, "request_time"));
      if (columns !== undefined)
        fillLogFields(
          slot,
          columns,
          nginxFields((n) => at(m, n), has),
          identityHeadersOf(fields),
        );
      return true;
    },
  };
}

// long: the format's checks and the per-line closure that relies on them read as one
export function envoyParser(
  format: string = ENVOY_DEFAULT,
  fields: FieldOptions = DEFAULT_FIELDS,
): LogParser | { error: string } {
  const compiled = format.trimStart().startsWith("{") ? compileEnvoyJsonFormat(format) : textFormat(format);
  if ("error" in compiled) return compiled;
  const find = (...names: string[]) => names.map((n) => compiled.names.indexOf(n)).find((i) => i >= 0) ?? -1;
  const time = compiled.names.findIndex((n) => n === "START_TIME" || n.startsWith("START_TIME("));
  const spec = /^START_TIME\((.*)\)$/.exec(compiled.names[time] ?? "")?.[1] ?? null;
  const readTime = startTimeReader(spec);
  if ("error" in readTime) return readTime;
  const method = find("REQ(:METHOD)");
  const path = find("REQ(X-ENVOY-ORIGINAL-PATH?:PATH)", "REQ(:PATH)", "REQ(:PATH?X-ENVOY-ORIGINAL-PATH)");
  if (time < 0 || method < 0 || path < 0)
    return { error: "the log format needs %START_TIME%, %REQ(:METHOD)% and the path (%REQ(:PATH)%)" };
  const direct = find("DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT", "DOWNSTREAM_REMOTE_ADDRESS");
  const xff = find("REQ(X-FORWARDED-FOR)");
  const key = find(`REQ(${fields.keyHeader.toUpperCase()})`, "REQ(AUTHORIZATION)");
  const user = find(`REQ(${fields.userHeader.toUpperCase()})`);
  const warnings =
    direct < 0
      ? [
          xff < 0
            ? "the log has no client address"
            : "client addresses are the first X-Forwarded-For hop (the default format logs no downstream address)",
        ]
      : [];
  if (key < 0) warnings.push(`the log has no API key (add %REQ(${fields.keyHeader.toUpperCase()})% to the format)`);
  if (spec !== null && !/%[1-9]?f/.test(spec)) {
    warnings.push(
      `the log's times (%START_TIME(${spec})%) are whole seconds: requests within a second keep their order but not their spacing; add %3f for milliseconds`,
    );
  }
  const commands = new Map(compiled.names.map((n, i) => [n.toUpperCase(), i]));
  const missing =
    fields.columns === undefined
      ? null
      : missingColumns(
          fields.columns,
          envoyColumns((c) => commands.has(c)),
        );
  if (missing !== null) warnings.push(missing);
  return {
    warnings,
    expected: `Envoy's access log format ${JSON.stringify(format.endsWith("\n") ? format.slice(0, -1) : format)}`,
    outcomes: find("RESPONSE_CODE") >= 0,
    parse(line, slot) {
      if (line.trim() === "") return null;
      const m = compiled.read(line.endsWith("\r") ? line.slice(0, -1) : line);
      if (typeof m === "string") return m;
      const get = (i: number) => (i < 0 ? null : value(m[i]));
      const tMs = readTime(get(time) ?? "");
      if (Number.isNaN(tMs)) return `unreadable %START_TIME% ${JSON.stringify(get(time))}`;
      const address = direct >= 0 ? withoutPort(get(direct)) : (get(xff)?.split(",")[0]?.trim() ?? null);
      const flagsAt = find("RESPONSE_FLAGS");
      const filled = fill(
        slot,
        tMs,
        { method: get(method) ?? "", path: pathOf(get(path) ?? "") },
        address,
        keyOf(get(key)),
        get(user),
      );
      if (filled !== true) return filled;
      // Envoy's response flag RL: rate limited (the rate limit service or the local filter).
      const flags = flagsAt < 0 ? null : (get(flagsAt) ?? "").split(",").includes("RL");
      slot.answered = answeredOf(get(find("RESPONSE_CODE")), flags);
      slot.outcome = outcomeOfMs(slot.answered, get(find("DURATION")));
      if (fields.columns !== undefined) {
        const byCommand = (c: string) => get(commands.get(c) ?? -1);
        fillLogFields(slot, fields.columns, envoyFields(byCommand, get(path)), identityHeadersOf(fields));
      }
      return true;
    },
  };
}

/** An Envoy format's command operators (`names`) and how a line gives their values, in that order, or why not. */
interface EnvoyLineFormat {
  readonly names: readonly string[];
  read(line: string): readonly (string | undefined)[] | string;
}

function textFormat(format: string): EnvoyLineFormat {
  const { re, names } = compileEnvoyFormat(format);
  return {
    names,
    read: (line) =>
      re.exec(line)?.slice(1) ??
      (line.startsWith("{")
        ? "does not match the log format (a JSON line: give the json_format object as --format)"
        : "does not match the log format"),
  };
}

const ONE_COMMAND = /^%([A-Z_]+(?:\([^)]*\))?)(?::\d+)?%$/;

/**
 * Envoy's `json_format` (a JSON object of field names to command operators, as in the access logger's config), each
 * log line one JSON object with those fields. A field whose value is not exactly one operator (literal text, several
 * operators, a nested object) is not read. Values may be strings, numbers (`%RESPONSE_CODE%`, `%DURATION%`) or null.
 */
export function compileEnvoyJsonFormat(format: string): EnvoyLineFormat | { error: string } {
  let spec: unknown;
  try {
    spec = JSON.parse(format);
  } catch {
    spec = null;
  }
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
    return { error: 'a JSON --format must be an Envoy json_format object, e.g. \'{"start":"%START_TIME%",...}\'' };
  }
  const fields: string[] = [];
  const names: string[] = [];
  for (const [field, op] of Object.entries(spec)) {
    const m = typeof op === "string" ? ONE_COMMAND.exec(op.trim()) : null;
    if (m === null) continue;
    fields.push(field);
    names.push(m[1]!);
  }
  return {
    names,
    read(line) {
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        return "not JSON (the format is Envoy's json_format)";
      }
      if (typeof record !== "object" || record === null || Array.isArray(record)) return "not a JSON object";
      const r = record as Record<string, unknown>;
      return fields.map((f) => {
        const v = r[f];
        return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : undefined;
      });
    },
  };
}

function withoutPort(address: string | null): string | null {
  if (address === null) return null;
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (v6 !== null) return v6[1]!;
  return /^[\d.]+:\d+$/.test(address) ? address.slice(0, address.lastIndexOf(":")) : address;
}
