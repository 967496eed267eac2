/**
 * Where NGINX sends requests, and which `limit_req` settings hold there: a server's locations (nested ones too) with
 * their routes, inheriting `limit_req`, `limit_req_status` and `limit_req_dry_run` as NGINX does (a block with its own
 * `limit_req` replaces the ones it would inherit).
 */
import { compileRoute } from "../rules/route.ts";
import { type Directive, NginxImportError, where } from "./nginx_conf.ts";

/** The `limit_req` settings in force in a block. */
export interface Context {
  readonly limits: readonly Directive[];
  readonly status: number | null;
  readonly dryRun: boolean;
}

/** A place requests go: a location (with its route), or a server's requests that match no location. */
export interface Place {
  readonly route: string | null;
  readonly label: string;
  readonly context: Context;
  readonly at: Directive;
}

export function contextOf(block: readonly Directive[], parent: Context): Context {
  const limits = block.filter((d) => d.name === "limit_req");
  const status = block.filter((d) => d.name === "limit_req_status").at(-1);
  const dryRun = block.filter((d) => d.name === "limit_req_dry_run").at(-1);
  let code = parent.status;
  if (status !== undefined) {
    code = Number(status.args[0]);
    if (status.args.length !== 1 || !Number.isInteger(code) || code < 400 || code > 599) {
      throw new NginxImportError(`${where(status)}: limit_req_status must be a status from 400 to 599`);
    }
  }
  if (dryRun !== undefined && !(dryRun.args.length === 1 && ["on", "off"].includes(dryRun.args[0]!))) {
    throw new NginxImportError(`${where(dryRun)}: limit_req_dry_run must be on or off`);
  }
  return {
    limits: limits.length > 0 ? limits : parent.limits,
    status: code,
    dryRun: dryRun === undefined ? parent.dryRun : dryRun.args[0] === "on",
  };
}

/** Every place of a server: its locations (nested ones too) and, when no `location /` catches all, the server itself. */
export function placesOf(server: Directive, base: Context): Place[] {
  const context = contextOf(server.block!, base);
  const places: Place[] = [];
  const walk = (block: readonly Directive[], parent: Context) => {
    for (const loc of block.filter((d) => d.name === "location" && d.block !== null)) {
      const ctx = contextOf(loc.block!, parent);
      const route = routeOfLocation(loc);
      if (route !== "named")
        places.push({
          route: route === null ? null : route,
          label: `location ${loc.args.join(" ")}`,
          context: ctx,
          at: loc,
        });
      walk(loc.block!, ctx);
    }
  };
  walk(server.block!, context);
  if (!places.some((p) => p.label === "location /")) {
    places.push({ route: "* /**", label: `server (requests no location matches)`, context, at: server });
  }
  return places;
}

/** The route of a location (`* /api/**`), `"named"` for `@name`, `null` when it cannot be mapped. */
export function routeOfLocation(loc: Directive): string | null | "named" {
  const [a, b] = loc.args;
  if (a === undefined) return null;
  if (a.startsWith("@")) return "named";
  if (a === "=") return b === undefined ? null : checked(`* ${b}`);
  if (a === "^~") return b === undefined ? null : prefixRoute(b);
  if (a === "~" || a === "~*") return b === undefined ? null : regexRoute(b);
  return prefixRoute(a);
}

function prefixRoute(prefix: string): string | null {
  const trimmed = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix;
  return checked(`* ${trimmed}/**`);
}

/** A regex made of literal segments, one-segment classes (`[^/]+`, `\d+`, `[0-9a-z]+`) and a final `.*`, as a route. */
function regexRoute(re: string): string | null {
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
  }
  const segments = body.slice(1).split("/");
  const out: string[] = [];
  for (const seg of segments) {
    if (/^(?:\[\^\/\]\+|\\d\+|\[0-9\]\+|\[[a-zA-Z0-9_-]+\]\+|\\w\+)$/.test(seg)) out.push("*");
    else if (/^[A-Za-z0-9_:-]+$/.test(seg.replaceAll("\\.", "."))) out.push(seg.replaceAll("\\.", "."));
    else if (seg === "" && out.length === segments.length - 1) continue;
    else return null;
  }
  return checked(`* /${out.join("/")}${open ? "/**" : ""}`.replace("//**", "/**"));
}

function checked(route: string): string | null {
  return "error" in compileRoute(route) ? null : route;
}

/** Whether route `outer` matches every request that `inner` does (by its literal prefix). */
export function covers(outer: string, inner: string): boolean {
  const o = outer.slice(2);
  const i = inner.slice(2);
  if (!o.endsWith("/**")) return false;
  const prefix = o.slice(0, -3);
  return prefix === "" || i === prefix || i.startsWith(`${prefix}/`);
}
