/**
 * What a request counts as, before any rule is asked: the methods it is matched under and its canonical path
 * (canonical_path.ts). A path that cannot be read is refused here with 400, so no rule ever sees it.
 *
 * Methods:
 * - `HEAD` counts as `GET` (and as `HEAD`): every common framework answers it with the GET handler.
 * - `X-HTTP-Method-Override` (and its spellings `X-HTTP-Method`, `X-Method-Override`): the request counts against
 *   the rules of its own method and of the named one; when a rule matches both, the higher cost applies. An upstream
 *   that honours the header cannot be used to step around a rule of either method, and one that ignores it loses
 *   nothing. A value that is not a method name is refused with 400.
 */
import { canonicalPath, forwardedPath, type PathOptions } from "./canonical_path.ts";

const OVERRIDE_HEADERS = ["x-http-method-override", "x-http-method", "x-method-override"] as const;
const METHOD_RE = /^[A-Za-z]{1,20}$/;

export type RequestShape =
  | {
      readonly ok: true;
      /** The request's own method, upper-case. */
      readonly method: string;
      /** Every method the request counts as, upper-case, its own first. */
      readonly methods: readonly string[];
      /** The canonical path rules match. */
      readonly path: string;
      /** The path sent upstream. */
      readonly forwardPath: string;
    }
  | { readonly ok: false; readonly detail: string };

export function shapeOf(request: Request, pathname: string, options: PathOptions): RequestShape {
  const method = request.method.toUpperCase();
  const methods = [method];
  const add = (m: string) => {
    if (!methods.includes(m)) methods.push(m);
  };
  for (const name of OVERRIDE_HEADERS) {
    const value = request.headers.get(name);
    if (value === null) continue;
    const trimmed = value.trim();
    if (!METHOD_RE.test(trimmed)) {
      return { ok: false, detail: `${name} must name an HTTP method, got ${JSON.stringify(trimmed.slice(0, 40))}.` };
    }
    add(trimmed.toUpperCase());
  }
  if (methods.includes("HEAD")) add("GET");
  const canonical = canonicalPath(pathname, options);
  if (!canonical.ok) return { ok: false, detail: `The request path cannot be read: ${canonical.error}.` };
  return { ok: true, method, methods, path: canonical.path, forwardPath: forwardedPath(pathname, options) };
}
