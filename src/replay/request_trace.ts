/**
 * Request traces: one request per line, with what the gateway reads of it, so a replay can match routes, identify
 * callers and price requests as the Worker does. docs/rules.md, "Request traces", describes each column.
 *
 *   # sluice request trace v1
 *   t_ms,method,path,address,key,user,cost
 *   1733011200000,GET,/v1/quotes,192.0.2.10,sk_live_a1,,
 *
 * The first line names the format and its version; the second names the columns. `cost` is empty (the rules price
 * it) or a positive integer. Version 2 adds what a `key:` rule can count by (src/rules/key.ts): `host,asn,country,
 * colo,ja4`, then one column per header, cookie or query parameter (`header:x-tenant-id`, `cookie:s`, `query:t`);
 * values escape `%`, `,`, `&` and line breaks (`%25`, `%2C`, `%26`, `%0A`, `%0D`), repeated ones joined by `&`.
 * Either version may end with what the origin answered (`status`, `duration_ms`, `response:x-query-cost`), for
 * rules that count by the response and for concurrency (outcomes.ts).
 */

import { clientIpKey } from "../request/identity.ts";
import type { ResolvedRule } from "../rules/types.ts";
import type { Outcome } from "./outcomes.ts";

/** The first line of a version 1 request trace. */
export const REQUEST_TRACE_MAGIC = "# sluice request trace v1";
/** The first line of a version 2 request trace. */
export const REQUEST_TRACE_MAGIC_V2 = "# sluice request trace v2";
/** Its column line. */
export const REQUEST_TRACE_COLUMNS = "t_ms,method,path,address,key,user,cost";
/** Version 2's fixed columns, before the columns of the headers, cookies and query parameters it carries. */
export const REQUEST_TRACE_COLUMNS_V2 = `${REQUEST_TRACE_COLUMNS},host,asn,country,colo,ja4`;
const MAGIC_PREFIX = "# sluice request trace";

/** A trace's layout: its version and, in version 2, its extra columns (`header:x-tenant-id`, `cookie:s`, `query:t`). */
export interface TraceColumns {
  readonly version: 1 | 2;
  readonly extras: readonly string[];
}
export const V1_COLUMNS: TraceColumns = { version: 1, extras: [] };

const EXTRA = /^(header:[!#$%&'*+\-.^_`|~0-9a-z]{1,64}|cookie:[\x21-\x7e]{1,64}|query:[\x21-\x7e]{1,64})$/;

/** What the origin answered, after the other columns: its status, its duration and response headers (lower-case). */
const OUTCOME_COLUMN = /^(status|duration_ms|response:[!#$%&'*+\-.^_`|~0-9a-z]{1,64})$/;

/** A column line's layout (version 2's, or version 1's with what the origin answered), or what is wrong with it. */
export function columnsOf(line: string, version: 1 | 2 = 2): TraceColumns | string {
  const text = line.endsWith("\r") ? line.slice(0, -1) : line;
  const fixed = version === 1 ? REQUEST_TRACE_COLUMNS : REQUEST_TRACE_COLUMNS_V2;
  if (!text.startsWith(fixed)) return `expected the column line ${fixed},...`;
  const rest = text.slice(fixed.length);
  const extras = rest === "" ? [] : rest.slice(1).split(",");
  if (rest !== "" && !rest.startsWith(",")) return `unknown column in ${JSON.stringify(clip(text))}`;
  const known = (c: string) => OUTCOME_COLUMN.test(c) || (version === 2 && EXTRA.test(c));
  const bad = extras.find((c) => !known(c) || c.includes(",") || c.includes("&"));
  if (bad !== undefined) {
    const kinds = version === 2 ? "header:NAME (lower-case), cookie:NAME, query:NAME, " : "";
    return `a column must be ${kinds}status, duration_ms or response:NAME (lower-case), got ${JSON.stringify(clip(bad))}`;
  }
  if (new Set(extras).size !== extras.length) return "a column is named twice";
  return { version, extras };
}

/**
 * The columns a trace needs for a rule set: every header, cookie and query parameter a `key:` names or a `match`
 * condition tests, sorted (a `match.cf` condition's field is a column of every version 2 trace).
 */
export function columnsFor(
  rules: readonly (Pick<ResolvedRule, "match"> & { readonly key?: ResolvedRule["key"] })[],
): TraceColumns {
  const names = new Set<string>();
  for (const r of rules) {
    // `request.cf`'s fields are a version 2 trace's own columns (asn, country, colo, ja4).
    for (const c of r.match.conditions ?? []) if (c.in !== "cf") names.add(`${c.in}:${c.name}`);
    for (const p of r.key ?? []) {
      if (p.kind === "header" || p.kind === "cookie" || p.kind === "query") names.add(`${p.kind}:${p.name}`);
    }
  }
  return { version: 2, extras: [...names].sort() };
}

/** One request of a request trace. Empty fields are `null`. */
export interface RequestLine {
  /** Version 2: the host the request was sent to. */
  host?: string | null;
  /** Version 2: `request.cf`'s fields, as text. */
  asn?: string | null;
  country?: string | null;
  colo?: string | null;
  ja4?: string | null;
  /**
   * Version 2: the headers, cookies and query parameters, by column name (`header:x-t`: the value as the Worker sees
   * it, repeated fields joined by `, `; `cookie:s`, `query:t`: each value). Replaced, never changed in place (a copied
   * line keeps its own).
   */
  fields?: ReadonlyMap<string, readonly string[]>;
  tMs: number;
  method: string;
  path: string;
  address: string | null;
  /** The API key as sent, or `sha256:<hex>`. */
  key: string | null;
  user: string | null;
  /** `null`: priced by the rules. */
  cost: number | null;
  /** What the proxy answered, when the line comes from its access log; `null` for a request trace. */
  answered: Answered | null;
  /** What the origin answered and how long it took, for rules that count by the response; absent: not known. */
  outcome?: Outcome | null;
}

/**
 * A trace's `status,duration_ms` fields: both empty (not known), or a status 100-599 and a duration (empty: not known;
 * a charge is then due at once, and a concurrency slot is held until its lease ends).
 */
export function outcomeOf(status: string, duration: string): Outcome | null | string {
  if (status === "" && duration === "") return null;
  if (!/^[1-5]\d\d$/.test(status))
    return `status must be an HTTP status from 100 to 599, got ${JSON.stringify(status.slice(0, 80))}`;
  if (duration !== "" && !/^\d{1,12}$/.test(duration)) {
    return `duration_ms must be empty or an integer number of milliseconds, got ${JSON.stringify(duration.slice(0, 80))}`;
  }
  return { status: Number(status), durationMs: duration === "" ? null : Number(duration) };
}

/** What an access log says the proxy answered a request. */
export interface Answered {
  readonly status: number;
  /**
   * Whether its rate limiter refused the request, when the log says (NGINX's `$limit_req_status` is `REJECTED`,
   * Envoy's `%RESPONSE_FLAGS%` hold `RL`); `null` when only the status tells.
   */
  readonly limited: boolean | null;
}

export function emptyRequestLine(): RequestLine {
  return { tMs: 0, method: "GET", path: "/", address: null, key: null, user: null, cost: null, answered: null };
}

const NO_FIELDS: ReadonlyMap<string, readonly string[]> = new Map();
/** A line without what version 2 adds: absent (`undefined`), as a version 1 line or a log without it reads. */
const NO_V2 = {
  host: undefined,
  asn: undefined,
  country: undefined,
  colo: undefined,
  ja4: undefined,
  fields: undefined,
};

/** Clear what version 2 adds (a version 1 line, or a log that has none of it). */
export function clearV2(slot: RequestLine): void {
  Object.assign(slot, NO_V2);
}

/** Which kind of trace a first line starts: a request trace, the wrong version of one, or the keyed CSV. */
export function traceKindOf(firstLine: string): "request" | "keyed" | { readonly error: string } {
  const line = firstLine.trim();
  if (line === REQUEST_TRACE_MAGIC || line === REQUEST_TRACE_MAGIC_V2) return "request";
  if (line.startsWith(MAGIC_PREFIX)) {
    return {
      error: `unsupported request trace version ${JSON.stringify(line)} (this sluice reads "${REQUEST_TRACE_MAGIC}" and "${REQUEST_TRACE_MAGIC_V2}")`,
    };
  }
  return "keyed";
}

const METHOD = /^[A-Za-z]{1,20}$/;
const HASHED_KEY = /^sha256:[0-9a-f]{64}$/;
const MAX_T_MS = 8_640_000_000_000_000;

/**
 * One line of a request trace (without its newline) into `slot`: `true` when parsed, `null` for a line to skip (blank,
 * a comment, the column line), or the error message.
 */
export function parseRequestLineInto(
  raw: string,
  slot: RequestLine,
  columns: TraceColumns = V1_COLUMNS,
): true | null | string {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  if (line.trim() === "" || line.startsWith("#") || line === REQUEST_TRACE_COLUMNS) return null;
  if (columns.version === 2 && line.startsWith(REQUEST_TRACE_COLUMNS_V2)) return null;
  const f = line.split(",");
  const fixed = columns.version === 1 ? 7 : 12;
  const expected = fixed + columns.extras.length;
  if (f.length !== expected) {
    const names = columns.version === 1 ? REQUEST_TRACE_COLUMNS : "its column line";
    return `expected ${expected} fields (${names}), got ${f.length}: ${clip(line)}`;
  }
  const [t, method, path, address, key, user, cost] = f as [string, string, string, string, string, string, string];
  if (!/^\d{1,16}$/.test(t)) return `t_ms must be an integer number of milliseconds, got ${JSON.stringify(clip(t))}`;
  const tMs = Number(t);
  if (tMs > MAX_T_MS) return `t_ms must be at most ${MAX_T_MS}, got ${t}`;
  if (!METHOD.test(method)) return `method must be letters, got ${JSON.stringify(clip(method))}`;
  if (!path.startsWith("/")) return `path must start with /, got ${JSON.stringify(clip(path))}`;
  if (/[\s?#]/.test(path)) return `path must have no spaces, ? or #, got ${JSON.stringify(clip(path))}`;
  const bad = badAddress(address === "" ? null : address);
  if (bad !== null) return bad;
  if (key.startsWith("sha256:") && !HASHED_KEY.test(key)) {
    return `a hashed key must be sha256: and 64 lower-case hex digits, got ${JSON.stringify(clip(key))}`;
  }
  if (user.startsWith("sha256:") && !HASHED_KEY.test(user)) {
    return `a hashed user must be sha256: and 64 lower-case hex digits, got ${JSON.stringify(clip(user))}`;
  }
  let parsedCost: number | null = null;
  if (cost !== "") {
    parsedCost = /^\d{1,15}$/.test(cost) ? Number(cost) : 0;
    if (parsedCost < 1) return `cost must be empty or a positive integer, got ${JSON.stringify(clip(cost))}`;
  }
  slot.tMs = tMs;
  slot.method = method.toUpperCase();
  slot.path = path;
  slot.address = address === "" ? null : address;
  slot.key = key === "" ? null : key;
  slot.user = user === "" ? null : user;
  slot.cost = parsedCost;
  const outcome = outcomeColumns(columns, f, fixed);
  if (typeof outcome === "string") return outcome;
  slot.outcome = outcome;
  if (columns.version === 1) {
    clearV2(slot);
    return true;
  }
  readV2(slot, f, columns);
  return true;
}

/**
 * Why `address` is not one client address, or `null` when it is (or absent). The gateway refuses a `CF-Connecting-IP`
 * that is not exactly one address with 400; read as no address, it would turn every `ip` rule and `ip` key part off
 * for the line, so a replay refuses it too, saying where. Shared with the access log parsers (log_request.ts).
 */
export function badAddress(address: string | null): string | null {
  if (address === null || clientIpKey(address, 128) !== null) return null;
  return `address must be one IPv4 or IPv6 address (no port, brackets, zone or list), got ${JSON.stringify(clip(address))}`;
}

/** Version 2's fields of a line (`f`) into `slot`. */
function readV2(slot: RequestLine, f: readonly string[], columns: TraceColumns): void {
  const text = (v: string) => (v === "" ? null : unescapeField(v));
  slot.host = text(f[7]!);
  slot.asn = text(f[8]!);
  slot.country = text(f[9]!);
  slot.colo = text(f[10]!);
  slot.ja4 = text(f[11]!);
  if (columns.extras.length === 0) slot.fields = NO_FIELDS;
  else {
    const fields = new Map<string, readonly string[]>();
    columns.extras.forEach((name, i) => {
      const v = f[12 + i]!;
      if (v === "" || OUTCOME_COLUMN.test(name)) return;
      fields.set(name, name.startsWith("header:") ? [unescapeField(v)] : v.split("&").map(unescapeField));
    });
    slot.fields = fields;
  }
}

/** The outcome columns of a line (`f`, its fields; the extras start at `fixed`): what the origin answered, or `null`. */
function outcomeColumns(columns: TraceColumns, f: readonly string[], fixed: number): Outcome | null | string {
  let status = "";
  let duration = "";
  let headers: Map<string, string> | null = null;
  for (const [i, name] of columns.extras.entries()) {
    const v = f[fixed + i]!;
    if (name === "status") status = v;
    else if (name === "duration_ms") duration = v;
    else if (name.startsWith("response:") && v !== "") {
      headers ??= new Map();
      headers.set(name.slice("response:".length), unescapeField(v));
    }
  }
  const outcome = outcomeOf(status, duration);
  if (outcome === null || typeof outcome === "string" || headers === null) return outcome;
  return { ...outcome, headers };
}

/** A version 2 field's text, escaped: `%`, `,`, `&` and line breaks. */
export function escapeField(v: string): string {
  return v.replace(/[%,&\r\n]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
}

function unescapeField(v: string): string {
  return v.replace(/%(25|2C|26|0A|0D)/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** One request as a version 1 trace line (with its newline): the inverse of `parseRequestLineInto`. */
export function formatRequestLine(r: RequestLine): string {
  return formatRequestLineIn(r, V1_COLUMNS);
}

/** One request as a line of a trace with these columns (with its newline). */
export function formatRequestLineIn(r: RequestLine, columns: TraceColumns): string {
  const path = r.path.replaceAll(",", "%2C");
  const v1 = `${r.tMs},${r.method},${path},${r.address ?? ""},${r.key ?? ""},${r.user ?? ""},${r.cost ?? ""}`;
  const text = (v: string | null | undefined) => (v === null || v === undefined ? "" : escapeField(v));
  const fixed = columns.version === 1 ? "" : `,${[r.host, r.asn, r.country, r.colo, r.ja4].map(text).join(",")}`;
  const extras = columns.extras.map((name) => {
    if (OUTCOME_COLUMN.test(name)) return outcomeField(r.outcome ?? null, name);
    return (r.fields?.get(name) ?? []).map(escapeField).join("&");
  });
  return `${v1}${fixed}${extras.map((e) => `,${e}`).join("")}\n`;
}

function outcomeField(o: Outcome | null, name: string): string {
  if (o === null) return "";
  if (name === "status") return String(o.status);
  if (name === "duration_ms") return o.durationMs === null ? "" : String(o.durationMs);
  const v = o.headers?.get(name.slice("response:".length));
  return v === undefined ? "" : escapeField(v);
}

/** The columns that say what the origin answered: `status,duration_ms`. */
export const OUTCOME_COLUMNS: readonly string[] = ["status", "duration_ms"];

/** The two lines every request trace starts with. */
export function requestTraceHeader(columns: TraceColumns = V1_COLUMNS): string {
  const extras = columns.extras.map((c) => `,${c}`).join("");
  if (columns.version === 1) return `${REQUEST_TRACE_MAGIC}\n${REQUEST_TRACE_COLUMNS}${extras}\n`;
  return `${REQUEST_TRACE_MAGIC_V2}\n${REQUEST_TRACE_COLUMNS_V2}${extras}\n`;
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
