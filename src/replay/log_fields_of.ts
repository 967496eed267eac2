/**
 * Each log kind's `LogFields` (log_fields.ts): where NGINX, Envoy and Cloudflare Logpush lines keep the host, the
 * headers, cookies and query parameters, and `request.cf`'s fields, and which columns a format can fill at all.
 *
 * - NGINX: `$host` (else `$http_host`), `$http_NAME`, `$http_cookie` (else `$cookie_NAME`), the query of
 *   `$request_uri` or `$request` (else `$arg_NAME`), `$geoip_country_code`.
 * - Envoy: `%REQ(:AUTHORITY)%`, `%REQ(NAME)%` (a cookie from `%REQ(COOKIE)%`), the query of the path.
 * - Logpush `http_requests`: `ClientRequestHost`, `ClientASN`, `ClientCountry`, `EdgeColoCode`, `JA4`,
 *   `RequestHeaders` and `Cookies` (the custom fields a Logpush job was told to log), the query of `ClientRequestURI`.
 */
import { type LogFields, nginxHeaderVar } from "./log_fields.ts";

/** Whether a format can fill a trace column (`header:x`, `cookie:s`, `query:t`), from the variables it logs. */
export type ColumnCheck = (column: string) => boolean;

function split(column: string): [string, string] {
  const colon = column.indexOf(":");
  return [column.slice(0, colon), column.slice(colon + 1)];
}

/** `host:port` without the port (`[v6]:port` too). */
function hostOnly(host: string | null): string | null {
  if (host === null) return null;
  return host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.replace(/:\d+$/, "");
}

/** NGINX: which variables the format logs (`has`) and a line's values (`at`, `null` for `-`). */
export function nginxFields(at: (name: string) => string | null, has: (name: string) => boolean): LogFields {
  const request = at("request");
  const target = at("request_uri") ?? (request === null ? null : (request.split(" ")[1] ?? null));
  // `$cookie_NAME` and `$arg_NAME` hold one value (the first) of a cookie or parameter sent twice, which the gateway
  // refuses as two values: the whole Cookie header and request target say so, and are read first when logged.
  return {
    host: at("host") ?? hostOnly(at("http_host")),
    asn: null,
    country: at("geoip_country_code"),
    colo: null,
    ja4: null,
    header: (name) => at(nginxHeaderVar(name)),
    cookie: (name) => (has(`cookie_${name}`) && !has("http_cookie") ? at(`cookie_${name}`) : undefined),
    arg: (name) => (has(`arg_${name}`) && target === null ? at(`arg_${name}`) : undefined),
    target,
  };
}

export function nginxColumns(has: (name: string) => boolean): ColumnCheck {
  return (column) => {
    const [kind, name] = split(column);
    if (kind === "header") return has(nginxHeaderVar(name));
    if (kind === "cookie") return has(`cookie_${name}`) || has("http_cookie");
    return has(`arg_${name}`) || has("request_uri") || has("request");
  };
}

/** Envoy: a line's value for a command (`REQ(X-TENANT-ID)`, upper-case), `null` when absent or not logged. */
export function envoyFields(get: (command: string) => string | null, path: string | null): LogFields {
  return {
    host: hostOnly(get("REQ(:AUTHORITY)") ?? get("REQ(HOST)")),
    asn: null,
    country: null,
    colo: null,
    ja4: null,
    header: (name) => get(`REQ(${name.toUpperCase()})`),
    cookie: () => undefined,
    arg: () => undefined,
    target: path,
  };
}

export function envoyColumns(has: (command: string) => boolean): ColumnCheck {
  return (column) => {
    const [kind, name] = split(column);
    if (kind === "header") return has(`REQ(${name.toUpperCase()})`);
    return kind === "cookie" ? has("REQ(COOKIE)") : true;
  };
}

/** Logpush: a record and its `RequestHeaders` (names lower-case or as Logpush wrote them). */
export function cloudflareFields(record: Record<string, unknown>, headers: Record<string, unknown>): LogFields {
  const text = (v: unknown) =>
    typeof v === "string" && v !== "" ? v : typeof v === "number" && Number.isFinite(v) ? String(v) : null;
  const cookies = record.Cookies;
  return {
    host: text(record.ClientRequestHost),
    asn: text(record.ClientASN),
    country: text(record.ClientCountry),
    colo: text(record.EdgeColoCode),
    ja4: text(record.JA4),
    header: (name) => text(headers[name] ?? findHeader(headers, name) ?? standardHeader(record, name)),
    cookie: (name) =>
      typeof cookies === "object" && cookies !== null ? text((cookies as Record<string, unknown>)[name]) : undefined,
    arg: () => undefined,
    target: text(record.ClientRequestURI),
  };
}

/**
 * Request headers that Logpush logs as standard fields of their own, read when the custom `RequestHeaders` field does
 * not hold them (it holds only the headers a zone chose to log).
 */
const STANDARD_HEADER_FIELDS: Readonly<Record<string, string>> = {
  "user-agent": "ClientRequestUserAgent",
  referer: "ClientRequestReferer",
  "x-requested-with": "ClientXRequestedWith",
};

function standardHeader(record: Record<string, unknown>, name: string): unknown {
  const field = STANDARD_HEADER_FIELDS[name];
  return field === undefined ? undefined : record[field];
}

function findHeader(headers: Record<string, unknown>, name: string): unknown {
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}
