/**
 * AWS WAF logs as request traces (`sluice trace from aws-waf`, and `plan --trace` on such a log): one JSON object a
 * line, as WAF writes them to CloudWatch Logs, S3 or Firehose ("Log fields for web ACL traffic"): `timestamp` (ms),
 * `httpRequest` with `clientIp`, `country`, `headers` (a list of `{name, value}`), `uri`, `args` (the query string)
 * and `httpMethod`, and what WAF did: `action` and `terminatingRuleType`. WAF does not log the origin's status, so a
 * line says only whether WAF refused the request: a rate-based rule's `BLOCK` (`responseCodeSent`, else 403),
 * `CAPTCHA` (405) or `CHALLENGE` (202) is the limiter's refusal; anything else was let through by it.
 */
import { fillLogFields, type LogFields } from "./log_fields.ts";
import { DEFAULT_FIELDS, type FieldOptions, fill, identityHeadersOf, keyOf, type LogParser } from "./log_request.ts";
import type { Answered } from "./request_trace.ts";

/** What WAF answers each refusing action with (its documentation's defaults); a Block's custom code wins. */
const REFUSED: Readonly<Record<string, number>> = { BLOCK: 403, CAPTCHA: 405, CHALLENGE: 202 };

export function awsWafParser(fields: FieldOptions = DEFAULT_FIELDS): LogParser {
  return {
    warnings: [],
    expected: "AWS WAF log JSON, one object a line with timestamp and httpRequest (clientIp, uri, httpMethod)",
    outcomes: false,
    parse(line, slot) {
      if (line.trim() === "") return null;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        return "not JSON";
      }
      if (!isRecord(record)) return "not a JSON object";
      const http = record.httpRequest;
      if (!isRecord(http)) return "no httpRequest";
      const tMs = typeof record.timestamp === "number" ? record.timestamp : Number.NaN;
      if (!Number.isSafeInteger(tMs)) return `unreadable timestamp ${JSON.stringify(record.timestamp)}`;
      const uri = text(http.uri);
      const method = text(http.httpMethod);
      if (uri === null || method === null) return "no httpRequest.uri or httpRequest.httpMethod";
      const headers = headersOf(http.headers);
      const header = (name: string) => headers.get(name.toLowerCase()) ?? null;
      const key = keyOf(header(fields.keyHeader) ?? header("authorization"));
      const filled = fill(slot, tMs, { method, path: uri }, text(http.clientIp), key, header(fields.userHeader));
      if (filled !== true) return filled;
      slot.answered = answeredOf(record);
      if (fields.columns !== undefined)
        fillLogFields(slot, fields.columns, awsWafFields(http, header), identityHeadersOf(fields));
      return true;
    },
  };
}

/**
 * Whether WAF's rate limiting refused the request: a rate-based rule ended its evaluation with a refusing action.
 * The status is what the client got for a refusal; WAF logs no status for a request it let through, and `limited`
 * (false) is what `plan` reads then, not the 200 given for the type's sake.
 */
function answeredOf(record: Record<string, unknown>): Answered {
  const action = text(record.action) ?? "";
  const refused = REFUSED[action];
  if (refused === undefined) return { status: 200, limited: false };
  const sent = typeof record.responseCodeSent === "number" ? record.responseCodeSent : null;
  return { status: sent ?? refused, limited: record.terminatingRuleType === "RATE_BASED" };
}

function awsWafFields(http: Record<string, unknown>, header: (name: string) => string | null): LogFields {
  const args = text(http.args);
  const uri = text(http.uri);
  return {
    host: header("host")?.replace(/:\d+$/, "") ?? null,
    asn: null,
    country: text(http.country),
    colo: null,
    ja4: text(http.ja4Fingerprint),
    header,
    // The Cookie header whole (log_fields.ts reads each cookie from it, a cookie sent twice as two values).
    cookie: () => undefined,
    arg: () => undefined,
    target: uri === null ? null : args === null ? uri : `${uri}?${args}`,
  };
}

/** WAF's header list as a map by lower-case name; a header sent twice keeps both values, joined as fetch joins them. */
function headersOf(list: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(list)) return out;
  for (const h of list) {
    if (!isRecord(h) || typeof h.name !== "string" || typeof h.value !== "string") continue;
    const name = h.name.toLowerCase();
    const before = out.get(name);
    out.set(name, before === undefined ? h.value : `${before}, ${h.value}`);
  }
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function text(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : null;
}
