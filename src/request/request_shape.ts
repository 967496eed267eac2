/**
 * What a request counts as, before any rule is asked: the methods and the canonical paths it is matched under
 * (canonical_path.ts), and the path the upstream receives. A path that cannot be read, or that is ambiguous under
 * `PATH_AMBIGUOUS=refuse`, is refused here with 400, so no rule ever sees it and no upstream receives it. Paths: the
 * canonical path, and for a router that strips format suffixes the path without it. Methods: see `methodsOf`.
 */

import { bodyMethods } from "./body_method.ts";
import { type AmbiguousPaths, ambiguityOf, canonicalPath, forwardedPath, type PathOptions } from "./canonical_path.ts";
import {
  OVERRIDABLE_METHODS,
  PROFILE_RULES,
  type ProfileRules,
  type UpstreamProfile,
  withoutFormatSuffixes,
} from "./upstream_profile.ts";

const OVERRIDE_HEADERS = ["x-http-method-override", "x-http-method", "x-method-override"] as const;
const METHOD_RE = /^[A-Za-z]{1,20}$/;

export interface ShapeOptions {
  readonly path: PathOptions;
  readonly ambiguousPaths: AmbiguousPaths;
  readonly upstreamProfile: UpstreamProfile;
}

export type RequestShape =
  | {
      readonly ok: true;
      /** The request's own method, upper-case. */
      readonly method: string;
      /** Every method the request counts as, upper-case, its own first. */
      readonly methods: readonly string[];
      /** The canonical path rules match. */
      readonly path: string;
      /** Every canonical path the request counts as: `path` first. */
      readonly paths: readonly string[];
      /** The path sent upstream. */
      readonly forwardPath: string;
    }
  | { readonly ok: false; readonly detail: string; readonly error: "unreadable_request" | "ambiguous_path" };

/** `bodyWithheld`: `request` stands for one whose body was not passed on (body_method.ts `bodyMethods`). */
export async function shapeOf(
  request: Request,
  url: URL,
  options: ShapeOptions,
  bodyWithheld = false,
): Promise<RequestShape> {
  const profile = PROFILE_RULES[options.upstreamProfile];
  const methods = await methodsOf(request, url, profile, bodyWithheld);
  if (typeof methods === "string") return unreadable(methods);
  return shapeWith(methods, url.pathname, options);
}

/**
 * The shape of a request whose methods are known (`methodsOf` for a request; a replayed trace line has one method,
 * and `headAsGet`): its canonical paths, whether its path is ambiguous, and the path forwarded.
 */
export function shapeWith(methods: string[], pathname: string, options: ShapeOptions): RequestShape {
  const profile = PROFILE_RULES[options.upstreamProfile];
  const canonical = canonicalPath(pathname, options.path);
  if (!canonical.ok) return unreadable(`The request path cannot be read: ${canonical.error}.`);
  const ambiguity = ambiguityOf(pathname, options.path);
  const forward = options.ambiguousPaths === "forward";
  if (ambiguity !== null && !forward) {
    return {
      ok: false,
      detail: `The request path holds ${ambiguity}; send the path with plain / separators.`,
      error: "ambiguous_path",
    };
  }
  const paths = [canonical.path, ...withoutFormatSuffixes(canonical.path, profile.formatSuffix)];
  if (profile.formatSuffix.includes("rails")) {
    // Rails matches `.:format` on the path as sent, `;` and escapes included: `/v1/login.;x` is `/v1/login` with the
    // format `;x`, and `/v1/a.xml%2Ejson` is `/v1/a` with the format `xml%2Ejson`.
    const slash = pathname.lastIndexOf("/");
    const format = /^(.+)\.[^/.?]+$/.exec(pathname.slice(slash + 1));
    const bare = format === null ? null : canonicalPath(pathname.slice(0, slash + 1) + format[1], options.path);
    if (bare?.ok && !paths.includes(bare.path)) paths.push(bare.path);
  }
  return {
    ok: true,
    method: methods[0]!,
    methods,
    path: canonical.path,
    paths,
    forwardPath: forwardedPath(pathname, options.path, forward && !options.path.keepParams),
  };
}

const unreadable = (detail: string) => ({ ok: false, detail, error: "unreadable_request" }) as const;

/**
 * Every method the request counts as, its own first; or why a method override cannot be read.
 * - `HEAD` counts as `GET` (and as `HEAD`): every common framework answers it with the GET handler.
 * - `X-HTTP-Method-Override` (and its spellings `X-HTTP-Method`, `X-Method-Override`): the request counts against
 *   the rules of its own method and of the named one; when a rule matches both, the higher cost applies. An upstream
 *   that honours the header cannot be used to step around a rule of either method, and one that ignores it loses
 *   nothing. A value that is not a method name is refused with 400.
 * - `_method` on a `POST`, where the upstream profile reads it (upstream_profile.ts): in the query, or in a urlencoded
 *   or JSON body (inflated first where the framework does), read up to `BODY_READ_MAX_BYTES` (body_method.ts),
 *   counted the same way. A body that cannot be read within the bound (multipart, larger, an encoding not decoded
 *   here) counts against every method `_method` can name. Two different `_method` values are a 400: the upstream
 *   would run one of them, and which one depends on the framework.
 */
async function methodsOf(
  request: Request,
  url: URL,
  profile: ProfileRules,
  bodyWithheld: boolean,
): Promise<string[] | string> {
  const method = request.method.toUpperCase();
  const methods = [method];
  const add = (m: string) => {
    if (!methods.includes(m)) methods.push(m);
  };
  for (const name of OVERRIDE_HEADERS) {
    const value = request.headers.get(name);
    if (value === null) continue;
    const trimmed = value.trim();
    if (!METHOD_RE.test(trimmed))
      return `${name} must name an HTTP method, got ${JSON.stringify(trimmed.slice(0, 40))}.`;
    add(trimmed.toUpperCase());
  }
  if (method === "POST") {
    const named: string[] = [];
    if (profile.methodInQuery) named.push(...url.searchParams.getAll("_method"));
    const body = await bodyMethods(request, profile, bodyWithheld);
    if (body === "unreadable") for (const m of OVERRIDABLE_METHODS) add(m);
    else named.push(...body);
    const distinct = new Set(named.map((m) => m.trim().toUpperCase()));
    for (const m of distinct) {
      if (!METHOD_RE.test(m)) return `_method must name an HTTP method, got ${JSON.stringify(m.slice(0, 40))}.`;
    }
    if (distinct.size > 1) return `_method names ${distinct.size} different methods; send one.`;
    for (const m of distinct) add(m);
  }
  return headAsGet(methods);
}

/** `HEAD` counts as `GET` too (every common framework answers it with the GET handler). */
export function headAsGet(methods: string[]): string[] {
  if (methods.includes("HEAD") && !methods.includes("GET")) methods.push("GET");
  return methods;
}
