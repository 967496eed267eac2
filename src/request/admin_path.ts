/**
 * Which paths are the admin API's. Pure: the gateway (src/edge) and the route fuzzer (test/fuzz) ask the same
 * questions. The admin API answers only its own spelling, `/_sluice/...` as written; any other spelling that some
 * upstream may read as a path under `/_sluice` is refused, never forwarded (docs/rules.md).
 */
import { canonicalPath } from "./canonical_path.ts";

export const ADMIN_PREFIX = "/_sluice";

/** `path` (a `URL.pathname`) is the admin API as written. */
export function isAdminPath(path: string): boolean {
  return path === ADMIN_PREFIX || path.startsWith(`${ADMIN_PREFIX}/`);
}

/**
 * Whether some upstream may read `pathname` as a path under /_sluice: decoded (`%5F`), case folded, `;params` dropped
 * (Tomcat) or kept as data (NGINX), `%2F` or `%5C` as separators, dot segments resolved.
 */
export function adminReading(pathname: string): boolean {
  // Without an escape a pathname is ASCII, and no reading joins letters across a segment or a `;`: a path that does not
  // spell `_sluice` in any case has no reading under it (the common case, checked without the four readings below).
  if (!pathname.includes("%") && !pathname.toLowerCase().includes("_sluice")) return false;
  const readings = [pathname, pathname.replace(/%5c/gi, "%2F")].flatMap((p) => [
    canonicalPath(p, { caseSensitive: false, keepEncodedSlash: false, keepParams: false }),
    canonicalPath(p, { caseSensitive: false, keepEncodedSlash: false, keepParams: true }),
  ]);
  return readings.some((r) => r.ok && isAdminPath(r.path));
}
