/**
 * Upstream profiles: the equivalences the router behind Sluice adds to the ones every upstream shares (canonical
 * path, `HEAD` as `GET`, `X-HTTP-Method-Override`). A request counts as every request its upstream may route it as,
 * so a framework's own spelling of "another method" or "the same route" cannot step around a rule. Pure; the table
 * in docs/rules.md ("Your upstream") is the user-facing description, and a unit test keeps the two in step.
 *
 * - `_method`: Express's `method-override` reads the query, and with the documented `req.body._method` getter the
 *   parsed body (urlencoded or JSON, inflated first; of several values the first); Laravel the form or JSON body and
 *   the query; Spring's `HiddenHttpMethodFilter` the query or form; Rack the form body only (a `POST` body without a
 *   `Content-Type` is a form to Rack). All honour it on `POST` only, so only a `POST` is read for it.
 * - Format suffixes: Spring MVC's suffix pattern match routes `/users/1.<anything>` as `/users/1` (the pattern `+ ".*"`:
 *   everything after the first dot of the last segment, an empty rest included), Rails' `(.:format)` strips a last
 *   `.format` of `[^/.?]+`. The request then counts as every path its router may route it as.
 */

export const UPSTREAM_PROFILES = ["any", "nginx", "express", "go", "flask", "spring", "rails", "laravel"] as const;
export type UpstreamProfile = (typeof UPSTREAM_PROFILES)[number];

/** A body type whose `_method` field a framework reads. */
export type MethodBody = "form" | "json";

/** How a router strips a format suffix (see `withoutFormatSuffixes`). */
export type SuffixStyle = "spring" | "rails";

export interface ProfileRules {
  /** A `POST`'s `_method` query parameter names the method the upstream runs. */
  readonly methodInQuery: boolean;
  /** The body types whose `_method` field names the method the upstream runs (on a `POST`). */
  readonly methodInBody: readonly MethodBody[];
  /** The framework inflates a `Content-Encoding: gzip | deflate | br` body before reading `_method` from it. */
  readonly decodesBody: boolean;
  /** A `POST` body without a `Content-Type` is read as a form (Rack's `form_data?`). */
  readonly untypedIsForm: boolean;
  /** How the router strips a last segment's format suffix; none when empty. */
  readonly formatSuffix: readonly SuffixStyle[];
}

const NONE: ProfileRules = {
  methodInQuery: false,
  methodInBody: [],
  decodesBody: false,
  untypedIsForm: false,
  formatSuffix: [],
};

/** Each profile's equivalences. `any` (the default) is all of them: safe when the upstream is not known. */
export const PROFILE_RULES: { readonly [P in UpstreamProfile]: ProfileRules } = {
  any: {
    methodInQuery: true,
    methodInBody: ["form", "json"],
    decodesBody: true,
    untypedIsForm: true,
    formatSuffix: ["spring", "rails"],
  },
  nginx: NONE,
  express: { ...NONE, methodInQuery: true, methodInBody: ["form", "json"], decodesBody: true },
  go: NONE,
  flask: NONE,
  spring: { ...NONE, methodInQuery: true, methodInBody: ["form"], formatSuffix: ["spring"] },
  rails: { ...NONE, methodInBody: ["form"], untypedIsForm: true, formatSuffix: ["rails"] },
  laravel: { ...NONE, methodInQuery: true, methodInBody: ["form", "json"] },
};

/**
 * The methods a `POST` whose body cannot be read within `BODY_READ_MAX_BYTES` (multipart, larger, an encoding that
 * cannot be decoded here) may run as, under a profile that reads `_method` from the body: every method a framework
 * lets `_method` name (Rack's list, the widest).
 */
export const OVERRIDABLE_METHODS = ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "LINK", "UNLINK"] as const;

/** A body (urlencoded or JSON) is read for `_method` up to this many bytes, encoded and decoded alike. */
export const BODY_READ_MAX_BYTES = 65_536;

const RAILS_FORMAT = /^(.+)\.[^/.?]+$/;

/**
 * The canonical paths a router that strips format suffixes in `styles` may route `path` as, besides `path` itself
 * (none when the last segment has no suffix). `path` is canonical (canonical_path.ts).
 * - `spring`: the last segment up to its first dot, when something precedes the dot (`login.`, `login.tar.gz` and
 *   `login.x-y` are all `login`: the pattern `/v1/login` matches as `/v1/login.*`).
 * - `rails`: the last segment without a last `.format` of `[^/.?]+` (`a.b.json` is `a.b`; `login.` is no suffix).
 */
export function withoutFormatSuffixes(path: string, styles: readonly SuffixStyle[]): string[] {
  const slash = path.lastIndexOf("/");
  const last = path.slice(slash + 1);
  const out: string[] = [];
  const add = (bare: string) => {
    const p = `${path.slice(0, slash + 1)}${bare}`;
    if (p !== path && !out.includes(p)) out.push(p);
  };
  for (const style of styles) {
    if (style === "spring") {
      const dot = last.indexOf(".");
      if (dot > 0) add(last.slice(0, dot));
    } else {
      const m = RAILS_FORMAT.exec(last);
      if (m !== null) add(m[1]!);
    }
  }
  return out;
}
