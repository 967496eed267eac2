/**
 * Request traces, version 1: one request per line, with what the gateway reads of it, so a replay can match routes,
 * identify callers and price requests as the Worker does. docs/rules.md, "Request traces", describes each column.
 *
 *   # sluice request trace v1
 *   t_ms,method,path,address,key,user,cost
 *   1733011200000,GET,/v1/quotes,192.0.2.10,sk_live_a1,,
 *   1733011200125,POST,/v1/labels:batch,2001:db8::7,sha256:9f86d0...,,
 *
 * The first line names the format and its version; the second names the columns (always these seven, in order).
 * `key` is an API key or `sha256:<64 hex digits>` (its hash, as account records are keyed); `cost` is empty (the
 * rules price it) or a positive integer that every applying rule charges instead. Empty fields are absent.
 */

/** The first line of a version 1 request trace. */
export const REQUEST_TRACE_MAGIC = "# sluice request trace v1";
/** Its column line. */
export const REQUEST_TRACE_COLUMNS = "t_ms,method,path,address,key,user,cost";
const MAGIC_PREFIX = "# sluice request trace";

/** One request of a request trace. Empty fields are `null`. */
export interface RequestLine {
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

/** Which kind of trace a first line starts: a request trace, the wrong version of one, or the keyed CSV. */
export function traceKindOf(firstLine: string): "request" | "keyed" | { readonly error: string } {
  const line = firstLine.trim();
  if (line === REQUEST_TRACE_MAGIC) return "request";
  if (line.startsWith(MAGIC_PREFIX)) {
    return {
      error: `unsupported request trace version ${JSON.stringify(line)} (this sluice reads "${REQUEST_TRACE_MAGIC}")`,
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
export function parseRequestLineInto(raw: string, slot: RequestLine): true | null | string {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  if (line.trim() === "" || line.startsWith("#") || line === REQUEST_TRACE_COLUMNS) return null;
  const f = line.split(",");
  if (f.length !== 7) return `expected 7 fields (${REQUEST_TRACE_COLUMNS}), got ${f.length}: ${clip(line)}`;
  const [t, method, path, address, key, user, cost] = f as [string, string, string, string, string, string, string];
  if (!/^\d{1,16}$/.test(t)) return `t_ms must be an integer number of milliseconds, got ${JSON.stringify(clip(t))}`;
  const tMs = Number(t);
  if (tMs > MAX_T_MS) return `t_ms must be at most ${MAX_T_MS}, got ${t}`;
  if (!METHOD.test(method)) return `method must be letters, got ${JSON.stringify(clip(method))}`;
  if (!path.startsWith("/")) return `path must start with /, got ${JSON.stringify(clip(path))}`;
  if (/[\s?#]/.test(path)) return `path must have no spaces, ? or #, got ${JSON.stringify(clip(path))}`;
  if (key.startsWith("sha256:") && !HASHED_KEY.test(key)) {
    return `a hashed key must be sha256: and 64 lower-case hex digits, got ${JSON.stringify(clip(key))}`;
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
  return true;
}

/** One request as a trace line (with its newline): the inverse of `parseRequestLineInto`. */
export function formatRequestLine(r: RequestLine): string {
  const path = r.path.replaceAll(",", "%2C");
  return `${r.tMs},${r.method},${path},${r.address ?? ""},${r.key ?? ""},${r.user ?? ""},${r.cost ?? ""}\n`;
}

/** The two lines every request trace starts with. */
export function requestTraceHeader(): string {
  return `${REQUEST_TRACE_MAGIC}\n${REQUEST_TRACE_COLUMNS}\n`;
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
