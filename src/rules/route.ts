/**
 * Routes: `"METHOD /path"` patterns from `match.route` and `cost_by_route`, compiled once and matched per request.
 *
 * - The method is upper-cased; `*` matches any method. The path is split on `/`. Every character other than `/` is literal, so colons are too: `POST /v1/labels:batch`
 *   matches only that path, never `/v1/labels`. A segment `*` matches exactly one non-empty segment. A final `**`
 *   matches any rest, including nothing: `GET /v1/**` matches `/v1`, `/v1/` and `/v1/a/b`. A final segment of
 *   letters followed by `**` matches any rest that starts with them: `GET /v1/login**` matches `/v1/login`,
 *   `/v1/loginx` and `/v1/login/a` (NGINX's prefix locations, which do not stop at a `/`); one of `**` followed by
 *   letters, any rest that ends with them: `* /**.php` matches `/index.php` and `/a/b.php` (NGINX's `~ \.php$`).
 * - One trailing `/` is ignored, in patterns and paths alike (`/v1/login/` counts against `POST /v1/login`): most
 *   frameworks route both to one handler, so a slash must not step around a limit.
 * - The Worker matches the canonical path (src/request/canonical_path.ts: decoded once, dot segments resolved,
 *   slashes merged, `;params` dropped, lower-cased unless PATH_CASE_SENSITIVE), so a pattern is written decoded and
 *   holds no `%` or `;`. A query string is not part of the path.
 */
import type { RoutePattern } from "./types.ts";

const METHOD_RE = /^(?:[A-Za-z]+|\*)$/;

/** `source` compiled for `routeMatches`, or why it is not a route. */
export function compileRoute(source: string): RoutePattern | { readonly error: string } {
  const parts = source.trim().split(/\s+/);
  const [method, path] = parts;
  const bad = (why: string) => ({ error: `${why}, got ${JSON.stringify(source)}` });
  if (parts.length !== 2 || method === undefined || path === undefined) {
    return bad(`must be "METHOD /path", e.g. "POST /v1/labels:batch"`);
  }
  if (!METHOD_RE.test(method)) return bad("the method must be letters (GET, POST, ...) or * for any");
  if (!path.startsWith("/")) return bad("the path must start with /");
  if (path.includes("?") || path.includes("#")) return bad("a route matches the path only, without ? or #");
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  const segments = trimmed === "/" ? [] : trimmed.slice(1).split("/");
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] ?? "";
    if (seg === "") return bad("the path has an empty segment (//)");
    if (seg === "**" && i !== segments.length - 1) return bad("** may only be the last segment");
    if (seg === "." || seg === "..")
      return bad("the path has a . or .. segment (requests are matched with them resolved)");
    if (seg.includes("%") || seg.includes(";")) {
      return bad("write the path decoded, without % or ; (requests are matched decoded, with ;parameters removed)");
    }
    const last = i === segments.length - 1;
    const text = last && seg.endsWith("**") ? seg.slice(0, -2) : last && seg.startsWith("**") ? seg.slice(2) : seg;
    if (seg !== "*" && seg !== "**" && text.includes("*")) {
      return bad(
        `* must be a whole segment, or ** begin or end the last one (${JSON.stringify(seg)} mixes it with other characters)`,
      );
    }
  }
  return { source, method: method === "*" ? "*" : method.toUpperCase(), segments };
}

/** Whether a request (`method`, `path` = `URL.pathname`) matches `p`. Allocation-free: it runs on every request. */
export function routeMatches(p: RoutePattern, method: string, path: string): boolean {
  if (p.method !== "*" && p.method !== method && p.method !== method.toUpperCase()) return false;
  if (path.charCodeAt(0) !== 47 /* / */) return false;
  // The segments live in path[1, end): one trailing slash is dropped; "/" has none.
  let end = path.length;
  if (end > 1 && path.charCodeAt(end - 1) === 47) end--;
  let pos = end === 1 ? end + 1 : 1; // start of the next unread segment; pos > end means none left
  const segs = p.segments;
  const n = segs.length;
  for (let i = 0; i < n; i++) {
    const seg = segs[i]!;
    if (seg === "**" && i === n - 1) return true;
    if (pos > end) return false;
    // `text**`: the rest of the path starts with `text`.
    if (i === n - 1 && seg.endsWith("**")) return end - pos >= seg.length - 2 && path.startsWith(seg.slice(0, -2), pos);
    // `**text`: the rest of the path, slashes and all, ends with `text` (which holds no `/`, so it lies in the rest).
    if (seg.startsWith("**")) return path.endsWith(seg.slice(2), end);
    let next = path.indexOf("/", pos);
    if (next === -1 || next > end) next = end;
    if (seg === "*") {
      if (next === pos) return false;
    } else if (next - pos !== seg.length || !path.startsWith(seg, pos)) {
      return false;
    }
    pos = next + 1;
  }
  return pos > end;
}
