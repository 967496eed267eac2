/**
 * Upstream profiles: the equivalences the router behind Sluice adds to the ones every upstream shares (canonical
 * path, `HEAD` as `GET`, `X-HTTP-Method-Override`). A request counts as every request its upstream may route it as,
 * so a framework's own spelling of "another method" or "the same route" cannot step around a rule. Pure; the table
 * in docs/rules.md ("Your upstream") is the user-facing description, and a unit test keeps the two in step.
 *
 * - `_method` (method override by parameter): Express's `method-override('_method')` reads the query (and a form
 *   body with the usual getter), Laravel and Symfony the form body and the query, Spring's `HiddenHttpMethodFilter`
 *   `getParameter` (query or form), Rails' `Rack::MethodOverride` the form body only. All of them honour it on `POST`
 *   only, so only a `POST` is read for it.
 * - Format suffixes: Rails routes `/users/1.json` as `/users/1` (`(.:format)`), Spring MVC's suffix pattern match as
 *   `/users/1` too. The request then counts as both paths.
 */

export const UPSTREAM_PROFILES = ["any", "nginx", "express", "go", "flask", "spring", "rails", "laravel"] as const;
export type UpstreamProfile = (typeof UPSTREAM_PROFILES)[number];

export interface ProfileRules {
  /** A `POST`'s `_method` query parameter names the method the upstream runs. */
  readonly methodInQuery: boolean;
  /** A `POST`'s `_method` form field names the method the upstream runs. */
  readonly methodInForm: boolean;
  /** The router strips a last segment's `.ext` (`/v1/login.json` is `/v1/login`). */
  readonly formatSuffix: boolean;
}

const NONE: ProfileRules = { methodInQuery: false, methodInForm: false, formatSuffix: false };

/** Each profile's equivalences. `any` (the default) is all of them: safe when the upstream is not known. */
export const PROFILE_RULES: { readonly [P in UpstreamProfile]: ProfileRules } = {
  any: { methodInQuery: true, methodInForm: true, formatSuffix: true },
  nginx: NONE,
  express: { methodInQuery: true, methodInForm: true, formatSuffix: false },
  go: NONE,
  flask: NONE,
  spring: { methodInQuery: true, methodInForm: true, formatSuffix: true },
  rails: { methodInQuery: false, methodInForm: true, formatSuffix: true },
  laravel: { methodInQuery: true, methodInForm: true, formatSuffix: false },
};

/**
 * The methods a `POST` whose form body cannot be read cheaply (multipart, chunked, larger than
 * `FORM_READ_MAX_BYTES`) may run as, under a profile that reads `_method` from the body: every method a framework
 * lets `_method` name (Rack's list, the widest).
 */
export const OVERRIDABLE_METHODS = ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "LINK", "UNLINK"] as const;

/** A urlencoded body up to this size (by its Content-Length) is read for `_method`. */
export const FORM_READ_MAX_BYTES = 65_536;

const SUFFIX = /^(.+)\.[A-Za-z0-9]{1,16}$/;

/**
 * The canonical path a router that strips format suffixes routes `path` as, or `null` when the last segment has no
 * suffix. `path` is canonical (canonical_path.ts).
 */
export function withoutFormatSuffix(path: string): string | null {
  const slash = path.lastIndexOf("/");
  const last = path.slice(slash + 1);
  const m = SUFFIX.exec(last);
  if (m === null) return null;
  return `${path.slice(0, slash + 1)}${m[1]!}`;
}
