/**
 * A named location's own limits (`location @fallback { limit_req zone=z; }`). Requests reach it only after the place
 * their path picked has run its preaccess phase (try_files, error_page, an upstream's X-Accel-Redirect), and NGINX
 * counts a request once: the first `limit_req` (`limit_conn`) with a key sets `r->main->limit_req_set` and every later
 * one declines (ngx_http_limit_req_handler). So where every place has a limit whose key every request has, a named
 * location's limits never count, and nothing is left out; otherwise they count for requests no rule can pick out.
 */
import { type Directive, text, where } from "./nginx_conf.ts";
import type { LimitNames, Place } from "./nginx_places.ts";
import type { ZoneLike } from "./nginx_zones.ts";
import type { ReportItem } from "./report.ts";

/** Variables every request has a value of (an address, a method, a path). */
const NEVER_EMPTY = /\$\{?(binary_remote_addr|remote_addr|request_method|uri|document_uri|request_uri)\}?/;

/** Whether every request has the zone's key, as NGINX computes it: a variable above, or text of its own. */
function alwaysKeyed(zone: ZoneLike): boolean {
  const key = zone.at.args[0] ?? "";
  return NEVER_EMPTY.test(key) || key.replace(/\$\{?[A-Za-z0-9_]+\}?/g, "") !== "";
}

/** Whether some `error_page` in `blocks` (nested ones too) sends a request to a named location. */
function errorPageToNamed(blocks: readonly Directive[]): boolean {
  return blocks.some(
    (d) => (d.name === "error_page" && d.args.at(-1)?.startsWith("@") === true) || errorPageToNamed(d.block ?? []),
  );
}

/**
 * `places` without the named locations whose limits never count (each limit noted), or as they are. A place answered
 * by a `return` counts nothing first, and its answer can reach a named location only by an `error_page`.
 */
export function withoutUncountedNamed(
  places: readonly Place[],
  scopes: {
    readonly http: readonly Directive[];
    readonly server: Directive;
    readonly kind: { readonly names: LimitNames; zoneOf(limit: Directive): ZoneLike };
  },
  report: ReportItem[],
): readonly Place[] {
  const { names, zoneOf } = scopes.kind;
  const named = places.filter((p) => p.kind === "named");
  if (named.length === 0) return places;
  const errorPages =
    errorPageToNamed(scopes.http.filter((d) => d.name !== "server")) || errorPageToNamed([scopes.server]);
  const countedFirst = places.every(
    (p) =>
      p.kind === "named" ||
      (p.answeredBy !== null && !errorPages) ||
      p.context.limits.some((l) => alwaysKeyed(zoneOf(l))),
  );
  if (!countedFirst) return places;
  const why = `NGINX counts a request once, in the first place with a ${names.limit} whose key it has, and every place a request can come from here has one whose key every request has (an address or a constant)`;
  for (const p of named) {
    for (const limit of p.context.limits) {
      report.push({ where: where(p.at), kind: "note", message: `${p.label}: ${text(limit)} never counts: ${why}` });
    }
  }
  return places.filter((p) => p.kind !== "named");
}
