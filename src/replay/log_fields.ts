/**
 * What an access log line carries of a version 2 request trace's fields (the host, `request.cf`'s fields and the
 * headers, cookies and query parameters the rules key on), read by the log parsers of logs.ts through `LogFields`.
 * Only the columns asked for are read. Secret values never reach a trace raw: a cookie, and a header or query
 * parameter whose name says it holds a credential (`secretColumn`), is written as `sha256:<hex>` of each trimmed value,
 * so a replay still tells values apart exactly as the gateway would (a key only compares values). The `user` column
 * likewise (`hashedUser`).
 */
import { createHash } from "node:crypto";
import { identityKey } from "../request/identity.ts";
import { cookieValues } from "../request/key.ts";
import type { RequestLine, TraceColumns } from "./request_trace.ts";

/** A log line's fields as a parser reads them; `null`: the log does not have it (or it was empty). */
export interface LogFields {
  readonly host: string | null;
  readonly asn: string | null;
  readonly country: string | null;
  readonly colo: string | null;
  readonly ja4: string | null;
  /** A request header's value (name lower-case). */
  header(name: string): string | null;
  /** A cookie's value where the log names cookies one by one (NGINX `$cookie_NAME`); `undefined`: it does not. */
  cookie(name: string): string | null | undefined;
  /** A query parameter's value where the log names them (NGINX `$arg_NAME`, not decoded); `undefined`: it does not. */
  arg(name: string): string | null | undefined;
  /** The request target with its query (`/v1/search?q=a`), when the log has it. */
  readonly target: string | null;
}

/** The part of a name that says a value is a credential. */
const SECRET_NAME = /auth|token|secret|session|passw|pwd|key|sig|cred|jwt|otp|csrf|xsrf/i;

/** Whether a trace column holds a secret (hashed when written): every cookie; a header or query naming a credential. */
export function secretColumn(column: string): boolean {
  return column.startsWith("cookie:") || SECRET_NAME.test(column.slice(column.indexOf(":") + 1));
}

/** `sha256:` and the hex SHA-256 of a value. */
export function hashedValue(value: string): string {
  return `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/**
 * The trusted user header's value as a trace holds it: `sha256:<hex>` of the user id the gateway reads from it
 * (trimmed and checked as src/request/identity.ts does), so equal users stay equal in a replay; `null` when the
 * gateway reads none. A value already `sha256:<hex>` is kept.
 */
export function hashedUser(raw: string | null): string | null {
  if (raw === null) return null;
  if (HASHED.test(raw)) return raw;
  const user = identityKey("user", raw, { userHeader: "", ipv6PrefixBits: 64 });
  return user === null ? null : hashedValue(user);
}

/**
 * An API key as a trace or a report holds it: `sha256:<hex>` of the key when the gateway would read it (a token68 of
 * at most its length, src/request/identity.ts), else `null` (the gateway reads no key either). A value already
 * `sha256:<hex>` is kept. Logs hold raw keys; nothing Sluice writes or shows from a log does.
 */
export function hashedApiKey(raw: string | null): string | null {
  if (raw === null) return null;
  if (HASHED.test(raw)) return raw;
  const key = identityKey("api_key", raw, { userHeader: "", ipv6PrefixBits: 64 });
  return key === null ? null : hashedValue(key);
}

const HASHED = /^sha256:[0-9a-f]{64}$/;

/** Headers whose one value holds commas (as src/request/key.ts reads them): not split before hashing. */
const WHOLE_HEADERS: ReadonlySet<string> = new Set(["user-agent", "date", "if-modified-since", "if-unmodified-since"]);

/**
 * Fill `slot`'s version 2 fields from `fields`: the fixed ones always, the extra columns `columns` names.
 * `identityHeaders` (lower-case): the headers the trace reads the API key and the user from (`--key-header`,
 * `--user-header`); a key part naming one of them is hashed as the `key` and `user` columns are.
 */
export function fillLogFields(
  slot: RequestLine,
  columns: TraceColumns,
  fields: LogFields,
  identityHeaders: readonly string[],
): void {
  slot.host = fields.host;
  slot.asn = fields.asn;
  slot.country = fields.country;
  slot.colo = fields.colo;
  slot.ja4 = fields.ja4;
  const out = new Map<string, readonly string[]>();
  for (const column of columns.extras) {
    const values = columnValues(column, fields, identityHeaders);
    if (values.length > 0) out.set(column, values);
  }
  slot.fields = out;
}

function columnValues(column: string, fields: LogFields, identityHeaders: readonly string[]): readonly string[] {
  const colon = column.indexOf(":");
  const kind = column.slice(0, colon);
  const name = column.slice(colon + 1);
  const secret = secretColumn(column) || (kind === "header" && identityHeaders.includes(name));
  if (kind === "header") {
    const value = fields.header(name);
    if (value === null) return [];
    if (!secret) return [value];
    const parts = WHOLE_HEADERS.has(name) ? [value] : value.split(",");
    const hashed = parts.map((p) => p.trim()).filter((p) => p !== "");
    return hashed.length === 0 ? [] : [hashed.map(hashedValue).join(", ")];
  }
  const raw = kind === "cookie" ? cookieOf(name, fields) : queryOf(name, fields);
  const values = raw.map((v) => v.trim()).filter((v) => v !== "");
  return secret ? values.map(hashedValue) : values;
}

function cookieOf(name: string, fields: LogFields): readonly string[] {
  const one = fields.cookie(name);
  if (one !== undefined) return one === null ? [] : [one];
  return cookieValues(fields.header("cookie"), name);
}

function queryOf(name: string, fields: LogFields): readonly string[] {
  const one = fields.arg(name);
  if (one !== undefined) return one === null ? [] : [decodeQuery(one)];
  const target = fields.target;
  const q = target?.indexOf("?") ?? -1;
  if (target === null || q < 0) return [];
  const out: string[] = [];
  for (const pair of target
    .slice(q + 1)
    .split("#")[0]!
    .split("&")) {
    const eq = pair.indexOf("=");
    const key = decodeQuery(eq < 0 ? pair : pair.slice(0, eq));
    if (key === name) out.push(decodeQuery(eq < 0 ? "" : pair.slice(eq + 1)));
  }
  return out;
}

/** A query component decoded as `URLSearchParams` does (`+` is a space; a broken escape is kept as written). */
function decodeQuery(text: string): string {
  const spaced = text.replaceAll("+", " ");
  try {
    return decodeURIComponent(spaced);
  } catch (err) {
    if (err instanceof URIError) return spaced;
    throw err;
  }
}

/** NGINX's variable for a request header: `$http_x_tenant_id`. */
export function nginxHeaderVar(header: string): string {
  return `http_${header.toLowerCase().replaceAll("-", "_")}`;
}

/** What a log format cannot tell of the columns asked for, said once as a warning (`has`: the format logs it). */
export function missingColumns(columns: TraceColumns, has: (column: string) => boolean): string | null {
  const missing = columns.extras.filter((c) => !has(c));
  if (missing.length === 0) return null;
  return `the log has no ${missing.join(", ")}: rules keyed on ${missing.length === 1 ? "it read it" : "them read them"} as missing`;
}
