/**
 * Router models for the differential route fuzzer (routes.ts) of the two frameworks that cannot run here (no JVM
 * build, no Ruby): which handler Spring MVC 5.3 on Tomcat 9 and Rails 7.1 on Rack 3 run for a request, written from
 * their sources, for the parts Sluice's `spring` and `rails` profiles stand for (docs/rules.md, "Your upstream").
 * A model answers `"none"` where the framework refuses the request (400) or no route matches: it can miss a dispatch
 * (a weaker check), never invent one.
 *
 * Spring MVC 5.3 (suffix pattern match on, `useTrailingSlashMatch` on, `HiddenHttpMethodFilter`), on Tomcat 9:
 * - Tomcat refuses (400) a raw `\`, an encoded `/` or `\` (`%2F`, `%5C`), `%00`, and a `..` above the root; it drops
 *   `;params` from every segment, decodes the escapes (UTF-8), merges `//` and resolves `.` and `..`.
 * - `AntPathMatcher`: case-sensitive; a pattern `/a/b` also matches `/a/b/` and, when the pattern has no dot,
 *   `/a/b.*` (`PatternsRequestCondition.getMatchingPattern`: everything after the dot, an empty rest included).
 * - `HiddenHttpMethodFilter`: on a `POST`, `getParameter("_method")` (the query's first value, else a urlencoded
 *   body's; Tomcat does not inflate bodies), upper-cased, if it is `PUT`, `DELETE` or `PATCH`.
 * Rails 7.1 (Journey, `(.:format)` on every route) with Rack 3 `Rack::MethodOverride`:
 * - `normalize_path`: `//` squeezed, a trailing `/` removed, escapes upper-cased; routes match the escaped path,
 *   case-sensitive, `:param` and `.:format` of `[^/.?]+`; nothing decoded, no `;` or dot segment treated specially.
 * - `Rack::MethodOverride`: on a `POST`, the form body's `_method` (urlencoded, or a POST without a Content-Type,
 *   which Rack reads as a form: `form_data?`), upper-cased, if Rack knows the method.
 */
import { gunzipSync, inflateSync } from "node:zlib";

/** A route as the fuzzer knows it: its id, its method (`*` any), its path segments (`*` one, a last `**` any rest). */
export interface ModelRoute {
  readonly id: string;
  readonly method: string;
  readonly segments: readonly string[];
}

/** A request's body as a model reads it. */
export interface ModelBody {
  readonly contentType: string | null;
  readonly contentEncoding: string | null;
  readonly bytes: Buffer;
}

/** The handler a model runs: `"<route id> <METHOD>"`, or `"none"`. */
export type Dispatch = string;

// --- Spring MVC 5.3 on Tomcat 9 ---------------------------------------------------------------------------------

/** The path Tomcat hands Spring for `rawPath`, or `null` when Tomcat answers 400. */
export function tomcatPath(rawPath: string): string | null {
  if (rawPath.includes("\\")) return null;
  const withoutParams = rawPath
    .split("/")
    .map((s) => s.replace(/;.*$/s, ""))
    .join("/");
  if (/%2f|%5c|%00/i.test(withoutParams)) return null;
  let decoded: string;
  try {
    decoded = decodeURIComponent(withoutParams);
  } catch {
    return null;
  }
  if (decoded.includes("\\") || decoded.includes("\0")) return null;
  const out: string[] = [];
  const segments = decoded.split("/").slice(1);
  for (const [i, s] of segments.entries()) {
    const last = i === segments.length - 1;
    if (s === "" && !last) continue;
    if (s === ".") {
      if (last) out.push("");
      continue;
    }
    if (s === "..") {
      if (out.length === 0) return null;
      out.pop();
      if (last) out.push("");
      continue;
    }
    out.push(s);
  }
  return `/${out.join("/")}`;
}

/** Whether `AntPathMatcher` matches `path` against `pattern` (segments; `*` one non-empty, a last `**` any rest). */
function antMatches(pattern: readonly string[], path: string, suffix: boolean): boolean {
  const parts = path.split("/").filter((s) => s !== "");
  const glob = pattern[pattern.length - 1] === "**";
  const fixed = glob ? pattern.slice(0, -1) : pattern;
  if (glob ? parts.length < fixed.length : parts.length !== fixed.length) return false;
  return fixed.every((p, i) => {
    const s = parts[i]!;
    if (p === "*") return true;
    if (s === p) return true;
    // `pattern + ".*"`: the last segment, then a dot, then anything.
    return suffix && i === fixed.length - 1 && !glob && s.startsWith(`${p}.`);
  });
}

/** The handler Spring MVC 5.3 on Tomcat 9 runs for `method` `target` (path and query) with `body`. */
export function springDispatch(
  routes: readonly ModelRoute[],
  method: string,
  target: string,
  body: ModelBody | null,
): Dispatch {
  const q = target.indexOf("?");
  const path = tomcatPath(q < 0 ? target : target.slice(0, q));
  if (path === null) return "none";
  const query = q < 0 ? "" : target.slice(q + 1);
  const ran = springMethod(method, query, body);
  const verb = ran === "HEAD" ? "GET" : ran;
  for (const r of routes) {
    if (r.method !== "*" && r.method !== verb) continue;
    const dotted = r.segments.some((s) => s.includes("."));
    const trailing = path.endsWith("/") && path !== "/";
    // A trailing `/` matches through `pattern + "/"`, never together with a suffix.
    if (antMatches(r.segments, path, false)) return `${r.id} ${verb}`;
    if (!trailing && !dotted && antMatches(r.segments, path, true)) return `${r.id} ${verb}`;
  }
  return "none";
}

/** `HiddenHttpMethodFilter`: the method a `POST` runs as. */
function springMethod(method: string, query: string, body: ModelBody | null): string {
  if (method !== "POST") return method;
  const fromQuery = new URLSearchParams(query).getAll("_method");
  const fromBody = body !== null && isForm(body.contentType) ? formFields(body, "_method") : [];
  const value = [...fromQuery, ...fromBody][0];
  if (value === undefined || value === "") return method;
  const upper = value.toUpperCase();
  return ["PUT", "DELETE", "PATCH"].includes(upper) ? upper : method;
}

// --- Rails 7.1 on Rack 3 ------------------------------------------------------------------------------------------

/** `Journey::Router::Utils.normalize_path`. */
export function railsPath(rawPath: string): string {
  let path = `/${rawPath}`.replace(/\/+/g, "/");
  if (path !== "/") path = path.replace(/\/$/, "").replace(/%[a-f0-9]{2}/g, (e) => e.toUpperCase());
  return path;
}

const RAILS_SEGMENT = /^[^/.?]+$/;

/** Whether a Journey route of `pattern` with `(.:format)` matches the normalized `path`. */
function journeyMatches(pattern: readonly string[], path: string): boolean {
  const parts = path.split("/").slice(1);
  const glob = pattern[pattern.length - 1] === "**";
  const fixed = glob ? pattern.slice(0, -1) : pattern;
  if (glob ? parts.length < fixed.length : parts.length !== fixed.length) return false;
  if (glob && parts.length > fixed.length) return fixed.every((p, i) => p === "*" || parts[i] === p);
  return fixed.every((p, i) => {
    const s = parts[i]!;
    const last = i === fixed.length - 1;
    if (p === "*") return last ? RAILS_SEGMENT.test(s.replace(/\.[^/.?]+$/, "")) : RAILS_SEGMENT.test(s);
    if (s === p) return true;
    return last && s.startsWith(`${p}.`) && RAILS_SEGMENT.test(s.slice(p.length + 1));
  });
}

/** The handler Rails 7.1 runs for `method` `target` (path and query) with `body`. */
export function railsDispatch(
  routes: readonly ModelRoute[],
  method: string,
  target: string,
  body: ModelBody | null,
): Dispatch {
  const q = target.indexOf("?");
  const path = railsPath(q < 0 ? target : target.slice(0, q));
  const ran = rackMethod(method, body);
  const verb = ran === "HEAD" ? "GET" : ran;
  for (const r of routes) {
    if (r.method !== "*" && r.method !== verb) continue;
    if (journeyMatches(r.segments, path)) return `${r.id} ${verb}`;
  }
  return "none";
}

const RACK_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "LINK", "UNLINK"];

/** `Rack::MethodOverride`: the method a `POST` runs as. */
function rackMethod(method: string, body: ModelBody | null): string {
  if (method !== "POST" || body === null) return method;
  // `form_data?`: a form type, or a POST with no Content-Type at all.
  if (body.contentType !== null && !isForm(body.contentType)) return method;
  const value = formFields(body, "_method").at(-1);
  if (value === undefined) return method;
  const upper = value.toUpperCase();
  return RACK_METHODS.includes(upper) ? upper : method;
}

// --- bodies -------------------------------------------------------------------------------------------------------

function isForm(contentType: string | null): boolean {
  return contentType !== null && /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType);
}

/** The values of `name` in a urlencoded body as a server that does not inflate reads it (garbage when encoded). */
function formFields(body: ModelBody, name: string): string[] {
  const coding = (body.contentEncoding ?? "identity").trim().toLowerCase();
  if (coding !== "identity") return [];
  return new URLSearchParams(body.bytes.toString("latin1")).getAll(name);
}

/** A body's bytes as an inflating reader sees them, or `null` when it cannot inflate them. */
export function inflated(body: ModelBody): Buffer | null {
  const coding = (body.contentEncoding ?? "identity").trim().toLowerCase();
  try {
    if (coding === "identity") return body.bytes;
    if (coding === "gzip") return gunzipSync(body.bytes);
    if (coding === "deflate") return inflateSync(body.bytes);
  } catch {
    return null;
  }
  return null;
}
