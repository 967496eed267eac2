/**
 * Route actions whose descriptor value is a fact of the route a request takes, or of the Envoy it passes, not of the
 * request: `destination_cluster` (the cluster its route sends it to), `source_cluster` (this Envoy's own cluster,
 * `node.cluster`), and `metadata` from the route entry (`source: ROUTE_ENTRY`). With the routes given, each value is
 * the routes that send it. `metadata` from the request's dynamic metadata, `dynamic_metadata` and descriptor
 * extensions (a CEL `expr`) are values a Worker never has: their descriptors are refused with that reason.
 */
import { compileRoute } from "../rules/route.ts";
import { isObject, type Obj } from "./envoy_file.ts";
import type { Meaning } from "./envoy_mapping.ts";

/** What a route says about the requests it takes: its path pattern, its cluster, its metadata. */
export interface RouteFacts {
  readonly path: string;
  /** The one cluster it sends to; `null` with `picks` saying why there is none. */
  readonly cluster: string | null;
  readonly picks: string | null;
  /** Clusters it may send to, picked at request time (`weighted_clusters`). */
  readonly weighted: readonly string[];
  readonly metadata: unknown;
}

export function routeFacts(route: Obj, path: string): RouteFacts {
  const action = isObject(route.route) ? route.route : null;
  const cluster = action !== null && typeof action.cluster === "string" ? action.cluster : null;
  const weighted =
    action !== null && isObject(action.weighted_clusters) && Array.isArray(action.weighted_clusters.clusters)
      ? action.weighted_clusters.clusters.flatMap((c) => (isObject(c) && typeof c.name === "string" ? [c.name] : []))
      : [];
  const picks =
    cluster !== null
      ? null
      : action === null
        ? "sends to no cluster (a redirect or a direct response)"
        : weighted.length > 0
          ? `picks its cluster by weight (${weighted.join(", ")})`
          : action.cluster_header !== undefined
            ? `picks its cluster by the ${String(action.cluster_header)} header`
            : "names no cluster";
  return { path, cluster, picks, weighted, metadata: route.metadata };
}

/** The Envoy's own cluster (`node.cluster` of its bootstrap), among the documents given. */
export function nodeCluster(root: unknown, depth = 0): string | null {
  if (Array.isArray(root) && depth < 3) {
    for (const doc of root) {
      const found = nodeCluster(doc, depth + 1);
      if (found !== null) return found;
    }
  }
  return isObject(root) && isObject(root.node) && typeof root.node.cluster === "string" ? root.node.cluster : null;
}

/** A route as a Sluice route, or why it cannot be one. */
export function routeOf(method: string, path: string): Meaning {
  const source = `${method} ${path === "/" ? "/**" : path}`;
  const r = compileRoute(source);
  return "error" in r
    ? { kind: "refused", why: `the route ${source} cannot be written as a Sluice route` }
    : { kind: "route", route: r.source };
}

/** Where a rate limit entry's actions apply: the routes it covers, and the Envoy's own cluster. */
export interface ActionPlace {
  readonly targets: readonly RouteFacts[];
  readonly node: string | null;
}

export function readRouteAction(action: Obj, place: ActionPlace, out: Map<string, Meaning>): void {
  if (isObject(action.destination_cluster)) destinationCluster(place.targets, out);
  if (isObject(action.source_cluster)) sourceCluster(place.node, out);
  if (isObject(action.metadata)) metadata(action.metadata, place.targets, out);
  const dynamic = isObject(action.dynamic_metadata) ? action.dynamic_metadata : null;
  if (dynamic !== null && typeof dynamic.descriptor_key === "string") {
    refuseKey(out, dynamic.descriptor_key, dynamicWhy(dynamic));
  }
  const extension = isObject(action.extension) ? action.extension : null;
  if (extension !== null) {
    const typed = isObject(extension.typed_config) ? extension.typed_config : {};
    const key = typeof typed.descriptor_key === "string" ? typed.descriptor_key : String(extension.name ?? "");
    refuseKey(
      out,
      key,
      `its value comes from the descriptor extension ${String(extension.name ?? "(unnamed)")} (an expression Envoy evaluates), which Sluice does not evaluate`,
    );
  }
}

function destinationCluster(targets: readonly RouteFacts[], out: Map<string, Meaning>): void {
  const picked: string[] = [];
  for (const t of targets) {
    if (t.cluster !== null) addRoute(out, `destination_cluster:${t.cluster}`, t.path);
    else picked.push(`${t.path} ${t.picks}`);
    for (const name of t.weighted) {
      out.set(`destination_cluster:${name}`, {
        kind: "refused",
        why: `the route ${t.path} picks this cluster by weight at request time, which a Sluice route cannot say`,
      });
    }
  }
  if (!out.has("destination_cluster:*")) {
    out.set("destination_cluster:*", {
      kind: "refused",
      why:
        picked.length > 0
          ? `no route with a destination_cluster action sends to this cluster by name (${picked.join("; ")})`
          : "no route with a destination_cluster action sends to this cluster, so Envoy never sends this value",
    });
  }
  out.set("destination_cluster", perCluster(targets, picked));
}

/**
 * `destination_cluster` without a value: one counter per cluster. When every route sending it names its cluster, the
 * rule's routes are those routes and its key the `route` part, one state per route: exactly one per cluster where each
 * cluster has one route (else listed).
 */
function perCluster(targets: readonly RouteFacts[], picked: readonly string[]): Meaning {
  if (picked.length > 0 || targets.length === 0) {
    return {
      kind: "refused",
      why: `one counter per cluster Envoy routes to, and ${picked.length > 0 ? `a route picks its cluster at request time (${picked.join("; ")})` : "no route sends it"}: give the service one descriptor per cluster (with its value), which imports as that cluster's routes`,
    };
  }
  const routes: string[] = [];
  const byCluster = new Map<string, string[]>();
  for (const t of targets) {
    const r = routeOf("*", t.path);
    if (r.kind !== "route") return r;
    routes.push(...[r.route].flat());
    byCluster.set(t.cluster!, [...(byCluster.get(t.cluster!) ?? []), ...[r.route].flat()]);
  }
  const shared = [...byCluster].filter(([, rs]) => rs.length > 1);
  return {
    kind: "part",
    part: "route",
    text: "the route, one per cluster",
    routes: [...new Set(routes)],
    ...(shared.length === 0
      ? {}
      : {
          note: `Envoy keeps one counter per cluster, Sluice one per route: ${shared.map(([c, rs]) => `${c}'s routes ${rs.join(", ")}`).join("; ")} count apart`,
        }),
  };
}

function sourceCluster(node: string | null, out: Map<string, Meaning>): void {
  // One Envoy has one cluster: every request it passes sends the same value, so a counter per value is one budget.
  out.set("source_cluster", { kind: "any" });
  if (node !== null) out.set(`source_cluster:${node}`, { kind: "any" });
  out.set("source_cluster:*", {
    kind: "refused",
    why:
      node === null
        ? "its value is the Envoy's own cluster (node.cluster or --service-cluster), which the configuration given does not set: give --map source_cluster:VALUE=any when the Worker takes the requests of Envoys of cluster VALUE"
        : `this Envoy's cluster is ${node} (node.cluster), so it never sends another source_cluster value`,
  });
}

/** `metadata` from the route entry: the routes whose metadata (or the action's `default_value`) gives each value. */
function metadata(action: Obj, targets: readonly RouteFacts[], out: Map<string, Meaning>): void {
  const key = action.descriptor_key;
  if (typeof key !== "string") return;
  if (action.source !== "ROUTE_ENTRY") {
    refuseKey(out, key, dynamicWhy(action));
    return;
  }
  const fallback = typeof action.default_value === "string" ? action.default_value : null;
  for (const t of targets) {
    const value = metadataValue(t.metadata, action.metadata_key) ?? fallback;
    if (value !== null) addRoute(out, `${key}:${value}`, t.path);
  }
  if (!out.has(`${key}:*`)) {
    out.set(`${key}:*`, {
      kind: "refused",
      why: "no route's metadata (nor the action's default_value) gives this value, so Envoy never sends it",
    });
  }
  out.set(key, {
    kind: "refused",
    why: "one counter per value of the routes' metadata: give the service one descriptor per value, which imports as the routes that carry it",
  });
}

function dynamicWhy(action: Obj): string {
  const mk =
    isObject(action.metadata_key) && typeof action.metadata_key.key === "string" ? action.metadata_key.key : "";
  return `its value is the request's dynamic metadata${mk === "" ? "" : ` (${mk})`}, which Envoy's filters set while they handle it and a Worker does not have`;
}

/** `filter_metadata[metadata_key.key]`, then each `path` step's `key`, as a string; `null` when absent. */
function metadataValue(routeMetadata: unknown, metadataKey: unknown): string | null {
  if (!isObject(routeMetadata) || !isObject(routeMetadata.filter_metadata) || !isObject(metadataKey)) return null;
  let at: unknown = typeof metadataKey.key === "string" ? routeMetadata.filter_metadata[metadataKey.key] : undefined;
  for (const step of Array.isArray(metadataKey.path) ? metadataKey.path : []) {
    at = isObject(at) && isObject(step) && typeof step.key === "string" ? at[step.key] : undefined;
  }
  return typeof at === "string" ? at : typeof at === "number" || typeof at === "boolean" ? String(at) : null;
}

function refuseKey(out: Map<string, Meaning>, key: string, why: string): void {
  out.set(key, { kind: "refused", why });
  out.set(`${key}:*`, { kind: "refused", why });
}

/** A value sent on `path` too: the routes of every place that sends it, any request if one sends it everywhere. */
function addRoute(out: Map<string, Meaning>, key: string, path: string): void {
  const meaning: Meaning = path === "/" ? { kind: "any" } : routeOf("*", path);
  const had = out.get(key);
  if (had === undefined || meaning.kind === "refused") out.set(key, meaning);
  else if (had.kind === "refused" || had.kind === "any") return;
  else if (meaning.kind === "any") out.set(key, meaning);
  else if (had.kind === "route" && meaning.kind === "route") {
    const routes = [...new Set([...[had.route].flat(), ...[meaning.route].flat()])];
    out.set(key, { kind: "route", route: routes.length === 1 ? routes[0]! : routes });
  }
}
