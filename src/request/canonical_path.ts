/**
 * What counts as the same path. Upstreams route many spellings of one path to one handler (NGINX decodes and merges
 * slashes, Go's ServeMux cleans dot segments, Rails and Spring strip `;jsessionid=...`, Express and ASP.NET ignore
 * case), so rules match a canonical form of the path (`canonicalPath`), never the spelling a client chose, and the
 * upstream receives a path routed the way the rules matched it (`forwardedPath`). Pure; docs/rules.md, "What counts
 * as the same request", is the user-facing description.
 */

export interface PathOptions {
  /** Match `/Foo` and `/foo` as different paths. Default false (case-insensitive). */
  readonly caseSensitive: boolean;
  /** `%2F` stays inside its segment instead of separating segments. Default false (it separates). */
  readonly keepEncodedSlash: boolean;
  /** `;` is an ordinary character instead of starting path parameters. Default false (`;...` is dropped). */
  readonly keepParams: boolean;
}

export const DEFAULT_PATH_OPTIONS: PathOptions = { caseSensitive: false, keepEncodedSlash: false, keepParams: false };

/**
 * What is done with a path that still holds something an upstream may read as a separator after the canonical form:
 * an encoded `/` (`%2F`, unless `keepEncodedSlash` declares it data) or an encoded `\` (`%5C`), anywhere, `;params`
 * included. NGINX and Werkzeug decode `%2F` into a separator, Express, Go and Rails keep it as data, Tomcat and Spring
 * refuse it: no one reading is every upstream's.
 * - `refuse` (the default): 400 problem+json, nothing counted, nothing forwarded. Safe for every upstream.
 * - `forward`: the request is counted as matched and the upstream receives the matched path (`forwardedPath`):
 *   `%2F` written as `/`, `;params` dropped (unless `keepParams`), so no upstream can read another route into it.
 */
export type AmbiguousPaths = "refuse" | "forward";

/** Why `pathname` is ambiguous under `options` (see `AmbiguousPaths`), or `null` when it is not. */
export function ambiguityOf(pathname: string, options: PathOptions = DEFAULT_PATH_OPTIONS): string | null {
  if (/%5c/i.test(pathname)) return "an encoded backslash (%5C), which some upstreams read as a separator";
  if (!options.keepEncodedSlash && ENCODED_SLASH.test(pathname))
    return "an encoded slash (%2F), which some upstreams read as a separator and others as data";
  if (!options.keepParams && pathname.split("/").some((segment) => DOT_WITH_PARAMS.test(segment)))
    return "a dot segment with ;params (..;x), which Tomcat reads as .. and NGINX as a name";
  if (!options.keepParams && pathname.split("/").some((segment) => segment.startsWith(";")))
    return "a segment of ;params alone (/;x/), which Tomcat reads as empty and NGINX as a name";
  return null;
}

const DOT_WITH_PARAMS = /^(?:\.|%2e){1,2};/i;

/** `text` with ASCII upper-case letters lower-cased and nothing else changed. */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (run) => run.toLowerCase());
}

export type PathResult = { readonly ok: true; readonly path: string } | { readonly ok: false; readonly error: string };

const HEX = /^[0-9A-Fa-f]{2}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/** One segment's text with every escape decoded once, or why it cannot be. */
function decodeSegment(raw: string): string | { readonly error: string } {
  if (!raw.includes("%")) return raw;
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const c = raw.codePointAt(i)!;
    if (c !== 37 /* % */) {
      // URL.pathname is ASCII; anything else (a caller passing raw text) is taken as its UTF-8 bytes.
      if (c < 0x80) bytes.push(c);
      else for (const b of encoder.encode(String.fromCodePoint(c))) bytes.push(b);
      if (c > 0xffff) i++;
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return { error: `malformed percent escape ${JSON.stringify(raw.slice(i, i + 3))}` };
    const byte = Number.parseInt(hex, 16);
    if (byte === 0) return { error: "the path contains %00" };
    bytes.push(byte);
    i += 2;
  }
  try {
    return utf8.decode(new Uint8Array(bytes));
  } catch {
    return { error: "the path's percent escapes are not UTF-8" };
  }
}

/**
 * The canonical form of `pathname` (a `URL.pathname`) for matching, or why the path cannot be read:
 * 1. split on `/`; per segment, drop `;` and everything after it (path parameters), unless `keepParams`;
 * 2. decode every percent escape once (a malformed escape, `%00` or bytes that are not UTF-8 are an error); a decoded
 *    `/` (`%2F`) separates segments too, unless `keepEncodedSlash`; a double-encoded `%252F` decodes to the literal
 *    text `%2F` and stays inside its segment (upstreams decode once, so they do not route it as a separator either);
 * 3. drop empty segments (`//` is `/`; one trailing `/` is ignored) and `.`; `..` removes the previous segment (never
 *    above the root), also when the dots were encoded (`%2e%2E`);
 * 4. lower-case ASCII letters only (`A-Z`), unless `caseSensitive`: upstreams fold case that way (NGINX's `~*`,
 *    Express's and Spring's case-insensitive routes compare bytes or ASCII), so the Kelvin sign is not `k`;
 * 5. re-encode `%` as `%25`, `;` as `%3B` (and, with `keepEncodedSlash`, a decoded `/` as `%2F`), so the form is
 *    unambiguous and canonicalising it again changes nothing. Route patterns contain neither `%` nor `;` (the
 *    validator refuses them), so a pattern segment never equals such a segment; `*` and `**` still match it.
 */
export function canonicalPath(pathname: string, options: PathOptions = DEFAULT_PATH_OPTIONS): PathResult {
  const out: string[] = [];
  for (const rawSegment of pathname.split("/")) {
    const cut = options.keepParams ? -1 : rawSegment.indexOf(";");
    const decoded = decodeSegment(cut < 0 ? rawSegment : rawSegment.slice(0, cut));
    if (typeof decoded !== "string") return { ok: false, error: decoded.error };
    const pieces = options.keepEncodedSlash ? [decoded] : decoded.split("/");
    for (const piece of pieces) {
      if (piece === "" || piece === ".") continue;
      if (piece === "..") {
        out.pop();
        continue;
      }
      let text = piece.replaceAll("%", "%25").replaceAll(";", "%3B");
      if (options.keepEncodedSlash) text = text.replaceAll("/", "%2F");
      out.push(options.caseSensitive ? text : asciiLower(text));
    }
  }
  return { ok: true, path: `/${out.join("/")}` };
}

/**
 * A route pattern's literal segment as case-insensitive matching compares it. Patterns are written decoded and hold
 * no `%` or `;` (the validator refuses them), so lower-casing ASCII is all it takes.
 */
export function foldSegment(segment: string): string {
  return asciiLower(segment);
}

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const DOT = /^(?:\.|%2e)$/i;
const DOT_DOT = /^(?:\.|%2e){2}$/i;

/**
 * The path to forward, routed the way the rules matched it without changing what an upstream may read as data: `%2F`
 * written as `/` (unless `keepEncodedSlash`: matching did not split there, so neither does the upstream), empty
 * segments merged, `.`/`..` segments (encoded or not, with or without `;params`) resolved, percent-encoded unreserved
 * characters (`A-Z a-z 0-9 - . _ ~`) decoded, other escapes kept (hex upper-cased), case kept, one trailing `/` kept
 * as sent. `;params` are kept, unless `dropParams` (the `forward` answer to an ambiguous path: a parameter may hold
 * `%2F..%2F`, which NGINX decodes and resolves into another route). Its canonical form is the request's.
 * `pathname` must have passed `canonicalPath` (escapes are valid).
 */
export function forwardedPath(
  pathname: string,
  options: PathOptions = DEFAULT_PATH_OPTIONS,
  dropParams = false,
): string {
  const out: string[] = [];
  for (const raw of pathname.split("/")) {
    const cut = options.keepParams ? -1 : raw.indexOf(";");
    const head = cut < 0 ? raw : raw.slice(0, cut);
    const params = cut < 0 ? "" : raw.slice(cut);
    // Split where matching split, so `..` removes what matching removed.
    const pieces = options.keepEncodedSlash ? [head] : head.split(ENCODED_SLASH);
    pieces.forEach((piece, i) => {
      if (piece === "" || DOT.test(piece)) return;
      if (DOT_DOT.test(piece)) {
        out.pop();
        return;
      }
      out.push(normalizeEscapes(piece) + (i === pieces.length - 1 && !dropParams ? params : ""));
    });
  }
  const path = `/${out.join("/")}`;
  return out.length > 0 && pathname.endsWith("/") ? `${path}/` : path;
}

const ENCODED_SLASH = /%2f/i;

/** Percent-encoded unreserved characters decoded (RFC 3986 6.2.2.2), other escapes' hex upper-cased. */
function normalizeEscapes(segment: string): string {
  return segment.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : encoded.toUpperCase();
  });
}
