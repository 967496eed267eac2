/**
 * What every access log parser shares (logs.ts: NGINX, Envoy; log_cloudflare.ts: Logpush): the options, the parser's
 * interface, and the checks that turn a line's fields into a `RequestLine`.
 */
import { hashedUser } from "./log_fields.ts";
import { utcMs } from "./log_lines.ts";
import type { Outcome } from "./outcomes.ts";
import { type Answered, badAddress, type RequestLine, type TraceColumns } from "./request_trace.ts";

/** Which request headers carry the caller's API key and user id (lower-case names). */
export interface FieldOptions {
  readonly keyHeader: string;
  readonly userHeader: string;
  /** A version 2 trace's columns to fill (host, `request.cf`'s fields, the headers the rules name); absent: none. */
  readonly columns?: TraceColumns;
}

export const DEFAULT_FIELDS: FieldOptions = { keyHeader: "x-api-key", userHeader: "x-user-id" };

/** The headers a log's API key and user come from: a key part naming one is a secret, hashed in a trace. */
export function identityHeadersOf(fields: FieldOptions): readonly string[] {
  return [fields.keyHeader, fields.userHeader, "authorization"];
}

export interface LogParser {
  /** `true`: `slot` holds the request; `null`: a line to skip (blank); else why the line cannot be read. */
  parse(line: string, slot: RequestLine): true | null | string;
  /** Said once, before any line: what the log cannot tell (whole-second times, no address). */
  readonly warnings: readonly string[];
  /** What a readable line looks like: the format, and for NGINX a line written in it, said after unreadable lines. */
  readonly expected: string;
  /**
   * Whether its lines say what the origin answered (`RequestLine.outcome`: NGINX's `$status` and `$request_time`,
   * Envoy's `%RESPONSE_CODE%` and `%DURATION%`, Logpush's `EdgeResponseStatus` and its end time or origin duration).
   */
  readonly outcomes?: boolean;
}

/** RFC 3339 / ISO 8601 with any fraction (truncated to ms) and `Z` or an offset, as ms; NaN when not one (`utcMs`). */
export function parseIsoMs(text: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})$/.exec(text);
  if (m === null) return Number.NaN;
  const ms = Number((m[7] ?? "").slice(0, 3).padEnd(3, "0"));
  return utcMs(m.slice(1, 7).map(Number), ms, m[8]!);
}

/** A request target's path: the query and fragment dropped, an absolute URL's path taken. */
export function pathOf(target: string): string {
  let path = target;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\/[^/]*/i.exec(path);
  if (scheme !== null) path = path.slice(scheme[0].length) || "/";
  const q = path.search(/[?#]/);
  return q < 0 ? path : path.slice(0, q);
}

/** The API key from a header value: a `Bearer` token, or the value itself. */
export function keyOf(raw: string | null): string | null {
  if (raw === null) return null;
  const bearer = /^bearer\s+(\S+)\s*$/i.exec(raw);
  return bearer?.[1] ?? raw.trim();
}

/** The request's fields, checked, into `slot`: true, or why not. */
export function fill(
  slot: RequestLine,
  tMs: number,
  req: { method: string; path: string } | string,
  address: string | null,
  key: string | null,
  user: string | null,
): true | string {
  if (typeof req === "string") return req;
  if (!Number.isSafeInteger(tMs) || tMs < 0) return "no readable time";
  if (!req.path.startsWith("/")) return `the path must start with /, got ${JSON.stringify(req.path.slice(0, 60))}`;
  if (/[\s,]/.test(user ?? "") || /[\s,]/.test(key ?? "")) return "a key or user with a comma or a space";
  const bad = badAddress(address);
  if (bad !== null) return `the client ${bad}`;
  slot.tMs = tMs;
  slot.method = req.method.toUpperCase();
  slot.path = req.path.replace(/\s/g, "%20");
  slot.address = address;
  slot.key = key;
  slot.user = hashedUser(user);
  slot.cost = null;
  slot.answered = null;
  slot.outcome = null;
  return true;
}

/** The answer a log line records: its status (a 3-digit code) and whether the limiter refused it, if said. */
export function answeredOf(status: string | null, limited: boolean | null): Answered | null {
  return status !== null && /^[1-5]\d\d$/.test(status) ? { status: Number(status), limited } : null;
}

/** What the origin answered, from a status and a duration in whole ms (Envoy's `%DURATION%`, Logpush's fields). */
export function outcomeOfMs(answered: Answered | null, took: string | null): Outcome | null {
  if (answered === null) return null;
  return { status: answered.status, durationMs: took !== null && /^\d{1,9}$/.test(took) ? Number(took) : null };
}
