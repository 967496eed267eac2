/**
 * What descriptors mean, read from an Envoy configuration's routes instead of `--map`: each `rate_limits` entry's
 * `actions` say which descriptor a request sends. `request_headers` and `query_parameters` are key parts,
 * `remote_address` and `masked_remote_address` the address; `generic_key` and `header_value_match` name which
 * requests send a value: the route the entry sits on, and the `:path`/`:method` a `header_value_match` matches.
 * A `header_value_match` on another header, or with `expect_match: false`, cannot be a Sluice match: its descriptor
 * is left out with that reason. `destination_cluster`, `source_cluster` and `metadata`: envoy_route_actions.ts.
 */
import { isObject, type Obj } from "./envoy_file.ts";
import { headerMeaning, type Meaning, maskedIp } from "./envoy_mapping.ts";
import { nodeCluster, readRouteAction, routeFacts, routeOf } from "./envoy_route_actions.ts";

/** The descriptor meanings a configuration's route actions give, by `KEY` or `KEY:VALUE` as `--map` names them. */
export function actionMeanings(root: unknown): Map<string, Meaning> {
  const out = new Map<string, Meaning>();
  walk(root, "/", out, 0, nodeCluster(root));
  return out;
}

function walk(value: unknown, prefix: string, out: Map<string, Meaning>, depth: number, node: string | null): void {
  if (depth > 60) return;
  if (Array.isArray(value)) {
    for (const v of value) walk(v, prefix, out, depth + 1, node);
    return;
  }
  if (!isObject(value)) return;
  // A route: `match` with its path, and `rate_limits` on it or on its `route` action; a virtual host's apply to its
  // routes.
  const here = isObject(value.match) ? (pathOf(value.match) ?? prefix) : prefix;
  const targets = isObject(value.match)
    ? [routeFacts(value, here)]
    : Array.isArray(value.routes)
      ? value.routes.filter(takesHostLimits).map((r) => routeFacts(r, pathOf(r.match as Obj) ?? "/"))
      : [];
  const lists = [value.rate_limits, isObject(value.route) ? value.route.rate_limits : undefined];
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      if (!isObject(entry)) continue;
      // `actions` is a list; some published configurations write one action as a mapping, read as a list of one.
      const actions = Array.isArray(entry.actions) ? entry.actions : isObject(entry.actions) ? [entry.actions] : [];
      for (const action of actions) {
        if (!isObject(action)) continue;
        readAction(action, here, out);
        readRouteAction(action, { targets, node }, out);
      }
    }
  }
  for (const [k, v] of Object.entries(value)) if (k !== "rate_limits") walk(v, here, out, depth + 1, node);
}

/**
 * Whether a virtual host's `rate_limits` apply to a route: Envoy uses them unless the route has its own (then only
 * with `include_vh_rate_limits`).
 */
function takesHostLimits(route: unknown): route is Obj {
  if (!isObject(route) || !isObject(route.match)) return false;
  const action = isObject(route.route) ? route.route : null;
  const own = action !== null && Array.isArray(action.rate_limits) && action.rate_limits.length > 0;
  return !own || action?.include_vh_rate_limits === true;
}

/** A route's `match` as a Sluice path pattern: `prefix: /api` is `/api**`, `path: /login` is `/login`. */
function pathOf(match: Obj): string | null {
  if (typeof match.path === "string") return match.path;
  if (typeof match.prefix === "string") return match.prefix === "/" ? "/" : `${match.prefix}**`;
  if (typeof match.path_separated_prefix === "string") return `${match.path_separated_prefix}/**`;
  return null;
}

// long: one branch per kind of action, each with the meaning it gives
function readAction(action: Obj, path: string, out: Map<string, Meaning>): void {
  const a = (name: string) => (isObject(action[name]) ? (action[name] as Obj) : null);
  const str = (o: Obj, k: string, fallback: string) => (typeof o[k] === "string" ? (o[k] as string) : fallback);
  const headers = a("request_headers");
  if (headers !== null && typeof headers.header_name === "string") {
    const name = headers.header_name.toLowerCase();
    out.set(str(headers, "descriptor_key", name), headerMeaning(name));
  }
  const query = a("query_parameters");
  if (query !== null && typeof query.query_parameter_name === "string") {
    const name = query.query_parameter_name;
    out.set(str(query, "descriptor_key", name), {
      kind: "part",
      part: `{ query: ${name} }`,
      text: `the ${name} query value`,
    });
  }
  const masked = a("masked_remote_address");
  if (masked !== null) {
    const v4 = typeof masked.v4_prefix_mask_len === "number" ? masked.v4_prefix_mask_len : 32;
    const v6 = typeof masked.v6_prefix_mask_len === "number" ? masked.v6_prefix_mask_len : 128;
    out.set("masked_remote_address", maskedIp(v4, v6));
  }
  if (a("remote_address") !== null) out.set("remote_address", { kind: "identity", identity: "ip" });
  const qvm = a("query_parameter_value_match");
  if (qvm !== null && typeof qvm.descriptor_value === "string") {
    out.set(`${str(qvm, "descriptor_key", "query_match")}:${qvm.descriptor_value}`, {
      kind: "refused",
      why: "its query_parameter_value_match matches query parameters, and a Sluice rule matches routes, plans and identities",
    });
  }
  const generic = a("generic_key");
  if (generic !== null && typeof generic.descriptor_value === "string") {
    const key = `${str(generic, "descriptor_key", "generic_key")}:${generic.descriptor_value}`;
    out.set(key, path === "/" ? { kind: "any" } : routeOf("*", path));
  }
  const hvm = a("header_value_match");
  if (hvm !== null && typeof hvm.descriptor_value === "string") {
    out.set(`${str(hvm, "descriptor_key", "header_match")}:${hvm.descriptor_value}`, headerMatch(hvm, path));
  }
}

/** A `header_value_match` as a route, when it matches only `:path` and `:method`; else why it cannot be one. */
function headerMatch(hvm: Obj, path: string): Meaning {
  if (hvm.expect_match === false) {
    return {
      kind: "refused",
      why: "its header_value_match has expect_match: false (requests whose headers do not match), which a Sluice rule cannot say",
    };
  }
  let method = "*";
  let matchPath = path;
  for (const h of Array.isArray(hvm.headers) ? hvm.headers : []) {
    const name = isObject(h) && typeof h.name === "string" ? h.name.toLowerCase() : "";
    const exact = isObject(h) ? exactOf(h) : null;
    const prefix = isObject(h) ? prefixOf(h) : null;
    if (name === ":method" && exact !== null && h.invert_match !== true) method = exact.toUpperCase();
    else if (name === ":path" && exact !== null && h.invert_match !== true) matchPath = exact;
    else if (name === ":path" && prefix !== null && h.invert_match !== true) matchPath = `${prefix}**`;
    else {
      return {
        kind: "refused",
        why: `its header_value_match matches the ${name === "" ? "unnamed" : name} header${h.invert_match === true ? " (inverted)" : ""}, and a Sluice rule matches routes, plans and identities, not header values`,
      };
    }
  }
  return method === "*" && matchPath === "/" ? { kind: "any" } : routeOf(method, matchPath);
}

function exactOf(h: Obj): string | null {
  if (typeof h.exact_match === "string") return h.exact_match;
  return isObject(h.string_match) && typeof h.string_match.exact === "string" ? h.string_match.exact : null;
}

function prefixOf(h: Obj): string | null {
  if (typeof h.prefix_match === "string") return h.prefix_match;
  return isObject(h.string_match) && typeof h.string_match.prefix === "string" ? h.string_match.prefix : null;
}
