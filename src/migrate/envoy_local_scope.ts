/**
 * Where a local rate limit filter's configuration applies. Envoy takes the most specific one a request's route has
 * (`resolveMostSpecificPerFilterConfig`): a route's `typed_per_filter_config`, else its virtual host's, else the
 * filter's own config in `http_filters`; each holds its own buckets. So a route's config is a rule on that route, a
 * virtual host's on every route but those with their own, the filter's own on every request but those (the docs'
 * "globally disabled, enabled for a specific route" example is a route's config beside an empty filter).
 */
import { isObject, type Obj } from "./envoy_file.ts";
import { intersectRoutes, mayOverlap } from "./nginx_routes.ts";
import type { DraftRule, ReportItem } from "./report.ts";

/**
 * A configuration's place: the routes it covers (`null`: all; none: it never applies, `notes` say why), those a more
 * specific one takes, and what differs from Envoy.
 */
export interface LocalScope {
  readonly routes: readonly string[] | null;
  readonly except: readonly string[];
  readonly notes: readonly string[];
  /** Why no rule can say where it applies (a route matched otherwise than by its path). */
  readonly refused: string | null;
}

const EVERYWHERE: LocalScope = { routes: null, except: [], notes: [], refused: null };

/** A route's `match` as a Sluice route (`prefix: /api` is `* /api**`), or `null` when a path pattern cannot say it. */
function routeOf(match: Obj): string | null {
  const path =
    typeof match.path === "string"
      ? match.path
      : typeof match.prefix === "string"
        ? `${match.prefix}**`
        : typeof match.path_separated_prefix === "string"
          ? `${match.path_separated_prefix}/**`
          : null;
  return path === null ? null : `* ${path}`;
}

/** The local filter configurations inside `value` (a `typed_per_filter_config`): objects with a `token_bucket`. */
function configsIn(value: unknown, depth = 0): Obj[] {
  if (depth > 8 || !isObject(value)) return [];
  if (isObject(value.token_bucket) || "stat_prefix" in value) return [value];
  return Object.values(value).flatMap((v) => configsIn(v, depth + 1));
}

/** A virtual host's routes with a local config of their own, by route (`null`: one no path pattern says). */
function ownedRoutes(host: Obj): { route: Obj; path: string | null; configs: Obj[] }[] {
  const routes = Array.isArray(host.routes) ? host.routes.filter(isObject) : [];
  return routes.flatMap((r) => {
    const configs = configsIn(r.typed_per_filter_config);
    return configs.length > 0 && isObject(r.match) ? [{ route: r, path: routeOf(r.match), configs }] : [];
  });
}

function hostNote(host: Obj): string[] {
  const domains = Array.isArray(host.domains) ? host.domains.map(String) : ["*"];
  return domains.includes("*")
    ? []
    : [`Envoy applies it to the virtual host ${domains.join(", ")} only; Sluice rules do not match by host`];
}

/** Routes before `route` in its host that may take its requests (Envoy gives a request to the first that matches). */
function shadowed(host: Obj, route: Obj, path: string): string[] {
  const routes = Array.isArray(host.routes) ? host.routes.filter(isObject) : [];
  const before = routes.slice(0, Math.max(0, routes.indexOf(route)));
  const paths = before.map((r) => (isObject(r.match) ? routeOf(r.match) : null));
  const taken = paths
    .filter((p) => p === null || mayOverlap(p, path))
    .map((p) => p?.slice(2) ?? "a route no path says");
  if (taken.length === 0) return [];
  return [
    `Envoy gives ${path.slice(2)} only requests no earlier route (${taken.join(", ")}) takes; the rule also counts those`,
  ];
}

/** Every virtual host (an object with `routes` and `domains`) in a configuration. */
function hostsIn(value: unknown, depth = 0): Obj[] {
  if (depth > 60) return [];
  if (Array.isArray(value)) return value.flatMap((v) => hostsIn(v, depth + 1));
  if (!isObject(value)) return [];
  if (Array.isArray(value.routes) && "domains" in value) return [value];
  return Object.values(value).flatMap((v) => hostsIn(v, depth + 1));
}

/**
 * Each local filter configuration's scope, by the configuration object; one not found under a route or virtual host
 * is the filter's own (every request but those a more specific one takes).
 */
// long: the three levels, each with what a more specific one takes from it
export function localScopes(root: unknown): (config: Obj) => LocalScope {
  const scopes = new Map<Obj, LocalScope>();
  const hosts = hostsIn(root);
  const taken: string[] = [];
  let everyHostTaken = hosts.length > 0;
  for (const host of hosts) {
    const owned = ownedRoutes(host);
    const hostConfigs = configsIn(host.typed_per_filter_config);
    const ownPaths = owned.flatMap((o) => (o.path === null ? [] : [o.path]));
    for (const o of owned) {
      const scope: LocalScope =
        o.path === null
          ? { ...EVERYWHERE, refused: "its route matches requests by something other than a path pattern" }
          : {
              routes: [o.path],
              except: [],
              notes: [...hostNote(host), ...shadowed(host, o.route, o.path)],
              refused: null,
            };
      for (const c of o.configs) scopes.set(c, scope);
    }
    for (const c of hostConfigs)
      scopes.set(c, { routes: null, except: ownPaths, notes: hostNote(host), refused: null });
    if (hostConfigs.length > 0 && hostNote(host).length === 0) continue;
    everyHostTaken = false;
    taken.push(...ownPaths);
  }
  return (config) => {
    const found = scopes.get(config);
    if (found !== undefined) return found;
    if (everyHostTaken) {
      const why = "every virtual host has a configuration of its own, which Envoy uses instead: this one never applies";
      return { routes: [], except: [], notes: [why], refused: null };
    }
    return { routes: null, except: taken, notes: [], refused: null };
  };
}

/** Rules on the routes `scope` gives them, with what differs from Envoy there noted. */
export function placed(rules: DraftRule[], scope: LocalScope, prefix: string, where: string, report: ReportItem[]) {
  for (const message of scope.notes) report.push({ where, kind: "approximate", message: `${prefix}: ${message}` });
  return rules.map((r): DraftRule => {
    const own =
      r.match.route === undefined ? null : typeof r.match.route === "string" ? [r.match.route] : r.match.route;
    const routes =
      scope.routes === null ? own : own === null ? scope.routes : intersectRoutes(own, scope.routes).routes;
    const except = [...new Set([...(r.match.except ?? []), ...scope.except])];
    const match = {
      ...r.match,
      ...(routes === null ? {} : { route: routes.length === 1 ? routes[0]! : routes }),
      ...(except.length === 0 ? {} : { except }),
    };
    return { ...r, match, notes: [...r.notes, ...scope.notes.map((n) => `approximate: ${n}`)] };
  });
}
