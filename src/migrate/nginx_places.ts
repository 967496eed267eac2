/**
 * Where NGINX sends requests, and which `limit_req` settings hold there: a server's locations (nested ones too) with
 * their routes, inheriting `limit_req`, `limit_req_status` and `limit_req_dry_run` as NGINX does (a block with its own
 * `limit_req` replaces the ones it would inherit).
 */
import { compileRoute } from "../rules/route.ts";
import { type Directive, NginxImportError, where } from "./nginx_conf.ts";

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

/** How NGINX picks a location (ngx_http_core_find_location): exact, then the longest prefix, then regexes. */
export type PlaceKind = "exact" | "caret" | "prefix" | "regex" | "server";

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
    return [{ route: null, label: `location ${a} (${why})`, kind: "regex", literal: "", inexact: null }];
  }
  const kind: PlaceKind = a === "=" ? "exact" : a === "^~" ? "caret" : a === "~" || a === "~*" ? "regex" : "prefix";
  const literal = kind === "regex" ? "" : ((kind === "prefix" ? a : b) ?? "");
  if (route === null && kind === "regex" && b !== undefined) {
    const each = alternatives(b).map((re) => ({ re, as: regexRoute(re, a === "~*") }));
    if (each.length > 0 && each.every((x) => x.as !== null)) {
      return each.map((x) => ({
        route: x.as!.route,
        label: `${label} (as ${x.re})`,
        kind,
        literal,
        inexact: x.as!.inexact,
      }));
    }
  }
  return [{ route: route?.route ?? null, label, kind, literal, inexact: route?.inexact ?? null }];
}

/**
 * `^/api/(v1|v2)/users` as `^/api/v1/users` and `^/api/v2/users`: the one group of literal alternatives (at most 8,
 * not repeated or optional) of a regex with no other group or `|` (but a final `(.*)` or `(/.*)?`); else none.
 */
export function alternatives(re: string): string[] {
  const m = /\((?:\?:)?([A-Za-z0-9_:.\\-]+(?:\|[A-Za-z0-9_:.\\-]+)+)\)(?![?*+{])/.exec(re);
  if (m === null) return [];
  const [before, after] = [re.slice(0, m.index), re.slice(m.index + m[0].length)];
  if (/[()|]/.test(before + after.replace(/\((?:\/)?\.\*\)\??\$?$/, ""))) return [];
  const options = m[1]!.split("|");
  return options.length > 8 ? [] : options.map((o) => before + o + after);
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

/** Whether two routes may match one request: `true` unless their segments tell them apart. */
export function mayOverlap(a: string, b: string): boolean {
  const sa = segmentsOf(a);
  const sb = segmentsOf(b);
  for (let i = 0; ; i++) {
    const x = sa[i];
    const y = sb[i];
    if (x === "**" || y === "**") return true;
    if (x === undefined || y === undefined) {
      const other = x ?? y;
      return other === undefined;
    }
    const px = x.endsWith("**") ? x.slice(0, -2) : null;
    const py = y.endsWith("**") ? y.slice(0, -2) : null;
    if (px !== null || py !== null) {
      if (x === "*" || y === "*") return true;
      const lx = px ?? x;
      const ly = py ?? y;
      return px !== null && py !== null
        ? lx.startsWith(ly) || ly.startsWith(lx)
        : px === null
          ? lx.startsWith(ly)
          : ly.startsWith(lx);
    }
    if (x !== "*" && y !== "*" && x !== y) return false;
  }
}

function segmentsOf(route: string): string[] {
  const path = route.slice(route.indexOf(" ") + 1);
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  return trimmed === "/" ? [] : trimmed.slice(1).split("/");
}

/**
 * The route of a location (`* /api/**`) and where it matches other requests than the location does (`null`: it does
 * not); `"named"` for `@name`; `null` when it cannot be a route.
 */
export function routeOfLocation(loc: Directive): { route: string; inexact: string | null } | null | "named" {
  const [a, b] = loc.args;
  if (a === undefined) return null;
  if (a.startsWith("@")) return "named";
  if (a === "=") {
    const route = b === undefined ? null : checked(`* ${b}`);
    if (route === null || b === undefined) return null;
    if (b === "/") return { route, inexact: null };
    const other = b.endsWith("/") ? b.slice(0, -1) : `${b}/`;
    return { route, inexact: `the route also matches ${other} (Sluice ignores one trailing slash)` };
  }
  if (a === "^~") return b === undefined ? null : prefixRoute(b);
  if (a === "~" || a === "~*") return b === undefined ? null : regexRoute(b, a === "~*");
  return prefixRoute(a);
}

/** `/api/` as `* /api/**`; `/v1/login` as `* /v1/login**`, which matches `/v1/loginx` too, as NGINX does. */
function prefixRoute(prefix: string): { route: string; inexact: string | null } | null {
  if (prefix === "/") return { route: "* /**", inexact: null };
  if (prefix.endsWith("/")) {
    const bare = prefix.slice(0, -1);
    const route = checked(`* ${bare}/**`);
    const inexact = `the route also matches ${bare} itself, which NGINX sends elsewhere (Sluice ignores one trailing slash)`;
    return route === null ? null : { route, inexact };
  }
  const route = checked(`* ${prefix}**`);
  return route === null ? null : { route, inexact: null };
}

/** A regex made of literal segments, one-segment classes (`[^/]+`, `\d+`, `[0-9a-z]+`) and a final `.*`, as a route. */
function regexRoute(re: string, caseless: boolean): { route: string; inexact: string | null } | null {
  if (!re.startsWith("^/")) return null;
  let body = re.slice(1);
  let open = true;
  if (body.endsWith("$")) {
    body = body.slice(0, -1);
    open = false;
  }
  if (body.endsWith("/.*") || body.endsWith("(/.*)?")) {
    body = body.replace(/(?:\/\.\*|\(\/\.\*\)\?)$/, "");
    open = true;
  } else if (/(?:\(\.\*\)|\.\*)$/.test(body)) {
    // `^/1/(.*)` is the prefix `/1/`; `^/api.*` the text prefix `/api`, which matches `/apiv2` too.
    body = body.replace(/(?:\(\.\*\)|\.\*)$/, "");
    open = true;
  }
  // An open regex ending in a literal (`^/api`, `^/api.*`) matches any path starting with that text: `* /api**`.
  const textPrefix = open && !body.endsWith("/") && /\/[A-Za-z0-9_:-]+$/.test(body.replaceAll("\\.", "."));
  // A slash inside a class (`[^/]+`) does not separate segments.
  const segments = body.slice(1).split(/\/(?![^[]*\])/);
  const out: string[] = [];
  const widened: string[] = [];
  for (const seg of segments) {
    if (/^(?:\[\^\/\]\+|\\d\+|\[0-9\]\+|\[[a-zA-Z0-9_-]+\]\+|\\w\+)$/.test(seg)) {
      out.push("*");
      if (seg !== "[^/]+") widened.push(seg);
    } else if (/^[A-Za-z0-9_:-]+$/.test(seg.replaceAll("\\.", "."))) out.push(seg.replaceAll("\\.", "."));
    else if (seg === "" && out.length === segments.length - 1) continue;
    else return null;
  }
  const route = checked(
    textPrefix ? `* /${out.join("/")}**` : `* /${out.join("/")}${open ? "/**" : ""}`.replace("//**", "/**"),
  );
  if (route === null) return null;
  const why = [
    ...(widened.length > 0 ? [`* matches any segment where the regex takes only ${widened.join(", ")}`] : []),
    ...(open ? [] : ["the route also matches the path with one trailing slash"]),
    ...(open && body.endsWith("/") && body.length > 1
      ? [
          `the route also matches ${body.slice(0, -1)} itself, which the regex does not (Sluice ignores one trailing slash)`,
        ]
      : []),
    ...(caseless ? ["~* ignores case, as Sluice does unless PATH_CASE_SENSITIVE=true"] : []),
  ];
  return { route, inexact: why.length === 0 ? null : why.join("; ") };
}

function checked(route: string): string | null {
  return "error" in compileRoute(route) ? null : route;
}

/** Whether route `outer` (ending in `/**` or `text**`) matches every request that `inner` does. */
export function covers(outer: string, inner: string): boolean {
  const o = outer.slice(2);
  const i = inner.slice(2);
  if (o === "/**") return true;
  if (o.endsWith("/**")) {
    const prefix = o.slice(0, -3);
    return i === prefix || i.startsWith(`${prefix}/`);
  }
  // `text**`: every match of `inner` starts with its literal beginning, so with `text` when that does.
  if (o.endsWith("**")) return i.startsWith(o.slice(0, -2));
  return false;
}

/**
 * The routes a rule keeps when its key is given only on `only` (a `map $uri` or `$request_method` with an empty
 * default): each pair's narrower route, a method from either side. `unsure` lists the pairs that overlap without
 * one holding the other, which routes cannot say exactly (the narrower-looking `only` route is kept for them).
 */
export function intersectRoutes(
  routes: readonly string[] | null,
  only: readonly string[],
): { routes: string[]; unsure: string[] } {
  if (routes === null) return { routes: [...only], unsure: [] };
  const out: string[] = [];
  const unsure: string[] = [];
  for (const r of routes) {
    for (const o of only) {
      const [rm, om] = [r.slice(0, r.indexOf(" ")), o.slice(0, o.indexOf(" "))];
      if (rm !== "*" && om !== "*" && rm !== om) continue;
      const method = rm === "*" ? om : rm;
      const [rp, op] = [r.slice(rm.length + 1), o.slice(om.length + 1)];
      if (rp === op || covers(`* ${op}`, `* ${rp}`)) out.push(`${method} ${rp}`);
      else if (covers(`* ${rp}`, `* ${op}`)) out.push(`${method} ${op}`);
      else if (mayOverlap(r, o)) {
        out.push(`${method} ${op}`);
        unsure.push(`${r} and ${o}`);
      }
    }
  }
  return { routes: [...new Set(out)], unsure };
}
