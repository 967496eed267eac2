/**
 * Cloudflare Logpush `http_requests` NDJSON as request traces (`sluice trace from cloudflare`): `EdgeStartTimestamp`
 * (unixnano, unix, unixms or RFC 3339), `ClientIP`, `ClientRequestMethod`, `ClientRequestURI`, the key and user from
 * `RequestHeaders`; what the origin answered from `EdgeResponseStatus` (the status the client got) and the time from
 * `EdgeStartTimestamp` to `EdgeEndTimestamp` (the edge finished sending the response), else `OriginResponseDurationMs`.
 */
import { fillLogFields } from "./log_fields.ts";
import { cloudflareFields } from "./log_fields_of.ts";
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

export function cloudflareParser(fields: FieldOptions = DEFAULT_FIELDS): LogParser {
  const warned: string[] = [];
  return {
    warnings: warned,
    expected:
      "Logpush http_requests NDJSON, one object a line with EdgeStartTimestamp, ClientIP, ClientRequestMethod and ClientRequestURI",
    outcomes: true,
    parse(line, slot) {
      if (line.trim() === "") return null;
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return "not JSON";
      }
      if (typeof record !== "object" || record === null || Array.isArray(record)) return "not a JSON object";
      if (record.EdgeStartTimestamp === undefined) return "no EdgeStartTimestamp";
      const tMs = edgeStartMs(record.EdgeStartTimestamp);
      if (Number.isNaN(tMs)) return `unreadable EdgeStartTimestamp ${JSON.stringify(record.EdgeStartTimestamp)}`;
      const uri = typeof record.ClientRequestURI === "string" ? record.ClientRequestURI : "";
      const method = typeof record.ClientRequestMethod === "string" ? record.ClientRequestMethod : "";
      if (method === "" || uri === "") return "no ClientRequestMethod or ClientRequestURI";
      const headers = (
        typeof record.RequestHeaders === "object" && record.RequestHeaders !== null ? record.RequestHeaders : {}
      ) as Record<string, unknown>;
      const header = (name: string) => {
        const v = headers[name] ?? headers[name.toLowerCase()];
        return typeof v === "string" && v !== "" ? v : null;
      };
      const address = typeof record.ClientIP === "string" && record.ClientIP !== "" ? record.ClientIP : null;
      const key = keyOf(header(fields.keyHeader) ?? header("authorization"));
      const filled = fill(slot, tMs, { method, path: pathOf(uri) }, address, key, header(fields.userHeader));
      if (filled !== true) return filled;
      slot.answered = answeredOf(digitsOf(record.EdgeResponseStatus), null);
      slot.outcome = outcomeOfMs(slot.answered, cloudflareDurationMs(record, tMs));
      if (fields.columns !== undefined)
        fillLogFields(slot, fields.columns, cloudflareFields(record, headers), identityHeadersOf(fields));
      return true;
    },
  };
}

/** A whole number of a JSON record (a number or a digit string) as text; anything else `null`. */
function digitsOf(v: unknown): string | null {
  const text = typeof v === "number" && Number.isSafeInteger(v) ? String(v) : typeof v === "string" ? v : null;
  return text !== null && /^\d{1,9}$/.test(text) ? text : null;
}

/**
 * A Logpush record's duration, ms: from `EdgeStartTimestamp` (`startMs`) to `EdgeEndTimestamp` (the edge finished
 * sending the response: what a concurrency slot is held for), else `OriginResponseDurationMs` (the origin's part only).
 */
function cloudflareDurationMs(record: Record<string, unknown>, startMs: number): string | null {
  const endMs = record.EdgeEndTimestamp === undefined ? Number.NaN : edgeStartMs(record.EdgeEndTimestamp);
  if (Number.isSafeInteger(endMs) && endMs >= startMs) return String(endMs - startMs);
  return digitsOf(record.OriginResponseDurationMs);
}

/** Logpush timestamps: unixnano, unixms or unix (numbers or digit strings, told apart by size), or RFC 3339. */
export function edgeStartMs(v: unknown): number {
  if (typeof v === "string" && !/^\d+$/.test(v)) return parseIsoMs(v);
  const digits = typeof v === "number" ? String(Math.trunc(v)) : typeof v === "string" ? v : "";
  if (!/^\d{1,19}$/.test(digits)) return Number.NaN;
  if (digits.length >= 17) return Number(digits.slice(0, digits.length - 6));
  if (digits.length >= 14) return Number(digits.slice(0, digits.length - 3));
  if (digits.length >= 12) return Number(digits);
  return Number(digits) * 1000;
}
