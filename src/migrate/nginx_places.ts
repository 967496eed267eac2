/**
 * Where NGINX sends requests, and which `limit_req` settings hold there: a server's locations (nested ones too) with
 * their routes, inheriting `limit_req`, `limit_req_status` and `limit_req_dry_run` as NGINX does (a block with its own
 * `limit_req` replaces the ones it would inherit).
 */
import { type Directive, NginxImportError, where } from "./nginx_conf.ts";
import { mayOverlap, regexRoutes, routeOfLocation } from "./nginx_routes.ts";
import type { ReportItem } from "./report.ts";

/** The directives of one NGINX limiting module: the limit, its status and its dry run (`limit_req`, `limit_conn`). */
export interface LimitNames {
  readonly limit: string;
  readonly status: string;
  readonly dryRun: string;
}

export const LIMIT_REQ: LimitNames = { limit: "limit_req", status: "limit_req_status", dryRun: "limit_req_dry_run" };
export const LIMIT_CONN: LimitNames = {
  limit: "limit_conn",
  status: "limit_conn_status",
  dryRun: "limit_conn_dry_run",
};

/** The `limit_req` (or `limit_conn`) settings in force in a block. */
export interface Context {
  readonly limits: readonly Directive[];
  readonly status: number | null;
  readonly dryRun: boolean;
}

/**
 * How NGINX picks a location (ngx_http_core_find_location): exact, then the longest prefix, then regexes; a named
 * location (`@name`) is never picked by a path.
 */
export type PlaceKind = "exact" | "caret" | "prefix" | "regex" | "server" | "named";

/** A place requests go: a location (with its route), or a server's requests that match no location. */
export interface Place {
  readonly route: string | null;
  readonly label: string;
  readonly context: Context;
  readonly at: Directive;
  readonly kind: PlaceKind;
  /** The location's literal (`/v1/login` of `location = /v1/login`), `""` for a regex or the server. */
  readonly literal: string;
  /** The place's position in the server: among regexes, the first that matches wins. */
  readonly order: number;
  /** Where the route matches other requests than the location does, if it does. */
  readonly inexact: string | null;
  /**
   * The `return` that answers every request here before any limit runs (NGINX's rewrite phases come before its
   * preaccess phase, where `limit_req` and `limit_conn` count), when the place would otherwise have limits: then its
   * context has none.
   */
  readonly answeredBy: Directive | null;
}

export function contextOf(block: readonly Directive[], parent: Context, names: LimitNames = LIMIT_REQ): Context {
  const limits = block.filter((d) => d.name === names.limit);
  const status = block.filter((d) => d.name === names.status).at(-1);
  const dryRun = block.filter((d) => d.name === names.dryRun).at(-1);
  let code = parent.status;
  if (status !== undefined) {
    code = Number(status.args[0]);
    if (status.args.length !== 1 || !Number.isInteger(code) || code < 400 || code > 599) {
      throw new NginxImportError(`${where(status)}: ${names.status} must be a status from 400 to 599`);
    }
  }
  if (dryRun !== undefined && !(dryRun.args.length === 1 && ["on", "off"].includes(dryRun.args[0]!.toLowerCase()))) {
    throw new NginxImportError(`${where(dryRun)}: ${names.dryRun} must be on or off`);
  }
  return {
    limits: limits.length > 0 ? limits : parent.limits,
    status: code,
    // NGINX reads on and off in any case.
    dryRun: dryRun === undefined ? parent.dryRun : dryRun.args[0]!.toLowerCase() === "on",
  };
}

/** Every place of a server: its locations (nested ones too) and, when no `location /` catches all, the server itself. */
export function placesOf(server: Directive, base: Context, names: LimitNames = LIMIT_REQ): Place[] {
  const context = contextOf(server.block!, base, names);
  // A server-level `return` answers every request of the server before it even picks a location.
  const serverReturn = returnOf(server.block!);
  const places: Place[] = [];
  const unlimited = (ctx: Context, answeredBy: Directive | null) =>
    answeredBy === null || ctx.limits.length === 0
      ? { context: ctx, answeredBy: null }
      : { context: { ...ctx, limits: [] }, answeredBy };
  const walk = (block: readonly Directive[], parent: Context) => {
    for (const loc of block.filter((d) => d.name === "location" && d.block !== null)) {
      const ctx = contextOf(loc.block!, parent, names);
      for (const place of locationPlaces(loc, names)) {
        places.push({
          ...place,
          ...unlimited(ctx, serverReturn ?? returnOf(loc.block!)),
          at: loc,
          order: places.length,
        });
      }
      // A nested location runs its own rewrite directives, not its parent's `return`, and inherits its limits.
      walk(loc.block!, ctx);
    }
  };
  walk(server.block!, context);
  if (!places.some((p) => (p.kind === "prefix" || p.kind === "caret") && p.literal === "/")) {
    places.push({
      route: "* /**",
      label: "server (requests no location matches)",
      ...unlimited(context, serverReturn),
      at: server,
      kind: "server",
      literal: "",
      order: places.length,
      inexact: null,
    });
  }
  return places;
}

/**
 * A `http` block's servers; for a file NGINX includes inside `http` (conf.d/) with limits and no server, one server
 * with no locations, as those limits reach every server's requests (reported).
 */
export function serversOf(
  http: readonly Directive[],
  base: Context,
  names: LimitNames,
  report: ReportItem[],
): Directive[] {
  const servers = http.filter((d) => d.name === "server" && d.block !== null);
  const first = base.limits[0];
  if (servers.length > 0 || first === undefined) return servers;
  report.push({
    where: where(first),
    kind: "note",
    message: `${names.limit} in http with no server block here: NGINX applies it to every server's requests, so it is imported for every request`,
  });
  return [{ name: "server", args: [], file: first.file, line: first.line, block: [] }];
}

/**
 * A location's places: one; one per alternative of a regex's group (`^/api/(v1|v2)/users`), when each is a route; for a
 * named location, one only if it has limits of its own (they apply to what try_files, error_page or an internal
 * redirect send it: no path says which, so no route).
 */
function locationPlaces(loc: Directive, names: LimitNames): Omit<Place, "context" | "answeredBy" | "at" | "order">[] {
  const [a, b] = loc.args;
  const label = `location ${loc.args.join(" ")}`;
  const route = routeOfLocation(loc);
  if (route === "named") {
    if (!loc.block!.some((d) => d.name === names.limit)) return [];
    const why =
      "a named location: requests reach it by try_files, error_page or an internal redirect, not by their path";
    return [{ route: null, label: `location ${a} (${why})`, kind: "named", literal: "", inexact: null }];
  }
  const kind: PlaceKind = a === "=" ? "exact" : a === "^~" ? "caret" : a === "~" || a === "~*" ? "regex" : "prefix";
  const literal = kind === "regex" ? "" : ((kind === "prefix" ? a : b) ?? "");
  if (route === null && kind === "regex" && b !== undefined) {
    const each = regexRoutes(b, a === "~*");
    // Alternatives that differ from NGINX alike are said once, as the location; others each as their own regex.
    const alike = each?.every((x) => x.inexact === each[0]!.inexact);
    if (each !== null)
      return each.map((x) => ({ ...x, label: alike ? label : `${label} (as ${x.re})`, kind, literal }));
  }
  return [{ route: route?.route ?? null, label, kind, literal, inexact: route?.inexact ?? null }];
}

/**
 * A block's own unconditional `return` (not one inside `if`): NGINX answers with it in a rewrite phase, before
 * `limit_req` and `limit_conn` ever see the request (`location /health { return 200; }` is never limited).
 */
function returnOf(block: readonly Directive[]): Directive | null {
  return block.find((d) => d.name === "return" && d.block === null) ?? null;
}

/**
 * Whether NGINX sends some request that both `q` and `p` match to `q`: an exact location wins its path; the longest
 * matching prefix wins among prefixes; regexes, in order, win over a plain prefix (not over `^~`); every location wins
 * over the server's own requests. Places whose routes cannot overlap never compete.
 */
export function beats(q: Place, p: Place): boolean {
  if (q === p || q.route === null || p.route === null || q.kind === "server") return false;
  if (!mayOverlap(q.route, p.route)) return false;
  if (p.kind === "server") return true;
  if (p.kind === "exact") return false;
  if (q.kind === "exact") return true;
  const prefixLike = (k: PlaceKind) => k === "prefix" || k === "caret";
  if (prefixLike(q.kind) && prefixLike(p.kind)) return q.literal.length > p.literal.length;
  if (q.kind === "regex" && p.kind === "regex") return q.order < p.order;
  if (q.kind === "regex") return p.kind === "prefix";
  return q.kind === "caret";
}

/**
 * Whether NGINX may send to `q`, a place no route says, some request that `p` matches: as `beats`, by the places'
 * kinds and order alone (a regex takes nothing from an exact location, a `^~` one or an earlier regex).
 */
export function mayBeat(q: Place, p: Place): boolean {
  // A request reaches a named location after the place its path picked has counted it (try_files, error_page, an
  // upstream's X-Accel-Redirect all come after the preaccess phase), and NGINX counts a request once: its first
  // `limit_req` (`limit_conn`) with a key sets `r->main->limit_req_set`, and every later one declines.
  if (q === p || p.kind === "exact" || q.kind === "server" || q.kind === "named") return false;
  if (q.kind === "regex")
    return p.kind === "prefix" || p.kind === "server" || (p.kind === "regex" && q.order < p.order);
  return true;
}
