/**
 * What descriptors mean, read from an Envoy configuration's routes instead of `--map`: each `rate_limits` entry's
 * `actions` say which descriptor a request sends. `request_headers` and `query_parameters` are key parts,
 * `remote_address` and `masked_remote_address` the address; `generic_key` and `header_value_match` name which
 * requests send a value: the route the entry sits on, and the `:path`/`:method` a `header_value_match` matches.
 * A `header_value_match` on other headers is a `match.header`; one that cannot be (a range, `expect_match: false`
 * beyond a presence test) is left out with that reason. `destination_cluster`, `source_cluster` and `metadata`: envoy_route_actions.ts.
 */
import type { MatchCondition } from "../rules/types.ts";
import { isObject, type Obj, walkObjects } from "./envoy_file.ts";
import { headerMatch, queryMatch } from "./envoy_header_match.ts";
import { ADDRESS, headerMeaning, type Meaning, maskedIp } from "./envoy_mapping.ts";
import { nodeCluster, readRouteAction, routeFacts, routeOf } from "./envoy_route_actions.ts";
import { mayOverlap } from "./nginx_routes.ts";

/**
 * The descriptors Envoy's `rate_limits` entries send, as their keys in order (`null`: no entries seen, routes not
 * known). A `request_headers` or `query_parameters` action with `skip_if_absent: true` drops its entry, not the whole
 * descriptor, when the request has no such header or parameter: its entry's shapes come with and without it, the
 * shorter one sent only for requests without it (`absent`, the headers or parameters missing).
 */
export interface SentShape {
  readonly keys: readonly string[];
  /** The headers or query parameters whose absence this shape needs (empty: sent whatever the request holds). */
  readonly absent: readonly string[];
  /** What a request adds to the counter (the entry's `hits_addend`): a number, 1 unless set, or `null` when a format. */
  readonly hits: number | null;
  /** What else the entry says that changes the count: `limit` from metadata, `apply_on_stream_done`. */
  readonly notes: readonly string[];
}

/** What Envoy sends of a descriptor chain (`Sends`): for which requests, and what each adds. */
export interface SendInfo {
  readonly absent: readonly string[];
  /** The hits every entry sending it adds (`null`: they differ, or a format decides per request). */
  readonly hits: number | null;
  readonly notes: readonly string[];
}

/** Whether Envoy sends a descriptor chain: always, only without some headers (`absent`), or never (envoy_import.ts). */
export type Sends = (steps: readonly { readonly key: string }[]) => SendInfo | false;

export function sentShapes(root: unknown): SentShape[] | null {
  const out: SentShape[] = [];
  walkObjects(root, (value) => {
    // A virtual host's own entries reach only routes without limits of their own (see `walk`).
    const routes = Array.isArray(value.routes) ? value.routes.filter(isObject) : [];
    const hostReaches = isObject(value.match) || routes.length === 0 || routes.some(takesHostLimits);
    for (const list of [
      hostReaches ? value.rate_limits : undefined,
      isObject(value.route) ? value.route.rate_limits : undefined,
    ]) {
      if (!Array.isArray(list)) continue;
      for (const entry of list) {
        if (!isObject(entry)) continue;
        const actions = Array.isArray(entry.actions) ? entry.actions : isObject(entry.actions) ? [entry.actions] : [];
        out.push(...shapesOf(actions.filter(isObject), hitsOf(entry), entryNotes(entry)));
      }
    }
    return true;
  });
  return out.length === 0 ? null : out;
}

/** At most this many optional entries in one action list are expanded (2^n shapes); more are taken as sent. */
const MAX_OPTIONAL = 6;

/** An entry's `hits_addend`: `{ number: N }` (1 unless set; Envoy's field is at most 1e9), `null` for a `format`. */
function hitsOf(entry: Obj): number | null {
  const h = entry.hits_addend;
  if (!isObject(h)) return 1;
  if (typeof h.number === "number" && Number.isSafeInteger(h.number) && h.number >= 0) return h.number;
  return h.format === undefined && h.number === undefined ? 1 : null;
}

/** What an entry changes of the count besides its hits. */
function entryNotes(entry: Obj): string[] {
  const notes: string[] = [];
  if (entry.limit !== undefined) {
    notes.push(
      "its rate_limits entry takes the limit from the request's dynamic metadata when there is one (limit), which the rule cannot read",
    );
  }
  if (entry.apply_on_stream_done === true) {
    notes.push(
      "its rate_limits entry counts when the response is done (apply_on_stream_done), not before the request goes on",
    );
  }
  return notes;
}

/** One action list's shapes: every entry, and without each `skip_if_absent` entry in turn and together. */
function shapesOf(actions: readonly Obj[], hits: number | null, notes: readonly string[]): SentShape[] {
  const entries = actions.map((action) => ({ key: actionKey(action), optional: optionalOf(action) }));
  const optional = entries.flatMap((e, i) => (e.optional === null ? [] : [i])).slice(0, MAX_OPTIONAL);
  const shapes: SentShape[] = [];
  for (let mask = 0; mask < 2 ** optional.length; mask++) {
    const dropped = new Set(optional.filter((_, bit) => (mask & (1 << bit)) !== 0));
    shapes.push({
      keys: entries.filter((_, i) => !dropped.has(i)).map((e) => e.key),
      absent: [...dropped].map((i) => entries[i]!.optional!),
      hits,
      notes,
    });
  }
  return shapes;
}

/** What an action with `skip_if_absent: true` needs missing to drop its entry (`header x-tenant`), else `null`. */
function optionalOf(action: Obj): string | null {
  const [name, body] = Object.entries(action)[0] ?? ["", null];
  if (!isObject(body) || body.skip_if_absent !== true) return null;
  if (name === "request_headers" && typeof body.header_name === "string") return `header ${body.header_name}`;
  if (name === "query_parameters" && typeof body.query_parameter_name === "string")
    return `query parameter ${body.query_parameter_name}`;
  return null;
}

/** The descriptor key an action sends (Envoy's defaults where it names none). */
function actionKey(action: Obj): string {
  const [name, body] = Object.entries(action)[0] ?? ["", null];
  const own = isObject(body) && typeof body.descriptor_key === "string" ? body.descriptor_key : null;
  if (["remote_address", "masked_remote_address", "destination_cluster", "source_cluster"].includes(name)) return name;
  if (own !== null) return own;
  if (name === "request_headers" && isObject(body) && typeof body.header_name === "string")
    return body.header_name.toLowerCase();
  if (name === "query_parameters" && isObject(body) && typeof body.query_parameter_name === "string")
    return body.query_parameter_name;
  const defaults: Readonly<Record<string, string>> = {
    generic_key: "generic_key",
    header_value_match: "header_match",
    query_parameter_value_match: "query_match",
  };
  return defaults[name] ?? "?";
}

/** The descriptor meanings a configuration's route actions give, by `KEY` or `KEY:VALUE` as `--map` names them. */
export function actionMeanings(root: unknown): Map<string, Meaning> {
  const out = new Map<string, Meaning>();
  walk(root, "/", out, 0, nodeCluster(root), new WeakMap());
  return out;
}

/** A virtual host's routes, each with the paths of the routes before it: Envoy gives a request to the first match. */
function noteEarlier(routes: readonly unknown[], earlier: WeakMap<object, string[]>): void {
  const before: string[] = [];
  for (const r of routes) {
    if (!isObject(r) || !isObject(r.match)) continue;
    earlier.set(r, [...before]);
    before.push(pathOf(r.match) ?? "(a route a Sluice route cannot say)");
  }
}

/** Why a route's rule also takes requests Envoy gives to an earlier route, or `undefined`. */
function shadowNote(path: string, before: readonly string[]): string | undefined {
  const asRoute = (p: string) => (p === "/" ? "* /**" : `* ${p}`);
  const taken = before.filter((b) => b.startsWith("(") || mayOverlap(asRoute(path), asRoute(b)));
  if (taken.length === 0) return undefined;
  return `Envoy sends it on ${asRoute(path).slice(2)} only for requests no earlier route (${taken.map((b) => asRoute(b).slice(2)).join(", ")}) takes; the rule also applies to those`;
}

// long: a route, a virtual host and their rate_limits, each place with the routes its actions reach
function walk(
  value: unknown,
  prefix: string,
  out: Map<string, Meaning>,
  depth: number,
  node: string | null,
  earlier: WeakMap<object, string[]>,
): void {
  if (depth > 60) return;
  if (Array.isArray(value)) {
    for (const v of value) walk(v, prefix, out, depth + 1, node, earlier);
    return;
  }
  if (!isObject(value)) return;
  if (Array.isArray(value.routes)) noteEarlier(value.routes, earlier);
  // A route: `match` with its path, and `rate_limits` on it or on its `route` action; a virtual host's apply to its
  // routes.
  const here = isObject(value.match) ? (pathOf(value.match) ?? prefix) : prefix;
  const targets = isObject(value.match)
    ? [routeFacts(value, here)]
    : Array.isArray(value.routes)
      ? value.routes.filter(takesHostLimits).map((r) => routeFacts(r, pathOf(r.match as Obj) ?? "/"))
      : [];
  // A virtual host's own limits reach only its routes without limits of their own (Envoy's default): where some
  // route has its own, the host's actions are sent on the other routes only (on none, if every route has its own).
  const hostRoutes = Array.isArray(value.routes) ? value.routes.filter(isObject) : [];
  const paths =
    !isObject(value.match) && hostRoutes.length > 0 && targets.length < hostRoutes.length
      ? targets.map((t) => t.path)
      : [here];
  const lists = [value.rate_limits, isObject(value.route) ? value.route.rate_limits : undefined];
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      if (!isObject(entry)) continue;
      // `actions` is a list; some published configurations write one action as a mapping, read as a list of one.
      const actions = Array.isArray(entry.actions) ? entry.actions : isObject(entry.actions) ? [entry.actions] : [];
      for (const action of actions) {
        if (!isObject(action)) continue;
        const before = isObject(value.match) ? (earlier.get(value) ?? []) : [];
        for (const path of paths) readAction(action, path, out, shadowNote(path, before));
        readRouteAction(action, { targets, node }, out);
      }
    }
  }
  for (const [k, v] of Object.entries(value)) if (k !== "rate_limits") walk(v, here, out, depth + 1, node, earlier);
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
function readAction(action: Obj, path: string, out: Map<string, Meaning>, note: string | undefined): void {
  const a = (name: string) => (isObject(action[name]) ? (action[name] as Obj) : null);
  const str = (o: Obj, k: string, fallback: string) => (typeof o[k] === "string" ? (o[k] as string) : fallback);
  const headers = a("request_headers");
  if (headers !== null && typeof headers.header_name === "string") {
    const name = headers.header_name.toLowerCase();
    sentAt(out, str(headers, "descriptor_key", name), headerMeaning(name), path, note);
  }
  const query = a("query_parameters");
  if (query !== null && typeof query.query_parameter_name === "string") {
    const name = query.query_parameter_name;
    const meaning: Meaning = { kind: "part", part: `{ query: ${name} }`, text: `the ${name} query value` };
    sentAt(out, str(query, "descriptor_key", name), meaning, path, note);
  }
  const masked = a("masked_remote_address");
  if (masked !== null) {
    const v4 = typeof masked.v4_prefix_mask_len === "number" ? masked.v4_prefix_mask_len : 32;
    const v6 = typeof masked.v6_prefix_mask_len === "number" ? masked.v6_prefix_mask_len : 128;
    sentAt(out, "masked_remote_address", maskedIp(v4, v6), path, note);
  }
  if (a("remote_address") !== null) sentAt(out, "remote_address", ADDRESS, path, note);
  const qvm = a("query_parameter_value_match");
  if (qvm !== null && typeof qvm.descriptor_value === "string") {
    const key = `${str(qvm, "descriptor_key", "query_match")}:${qvm.descriptor_value}`;
    sentAt(out, key, queryMatch(qvm, path), path, note);
  }
  const generic = a("generic_key");
  if (generic !== null && typeof generic.descriptor_value === "string") {
    const key = `${str(generic, "descriptor_key", "generic_key")}:${generic.descriptor_value}`;
    sentAt(out, key, path === "/" ? { kind: "any" } : routeOf("*", path), path, note);
  }
  const hvm = a("header_value_match");
  if (hvm !== null && typeof hvm.descriptor_value === "string") {
    sentAt(
      out,
      `${str(hvm, "descriptor_key", "header_match")}:${hvm.descriptor_value}`,
      headerMatch(hvm, path),
      path,
      note,
    );
  }
}

/**
 * A descriptor that the actions on `path` send, merged with the places that sent it before: Envoy sends it on each
 * route whose `rate_limits` have the action, so its limit applies on all of them (every request, if one place is a
 * virtual host or `/`), never only on the last one read. A per-client key (an address, a header) keeps its meaning
 * and gets those routes; a refused meaning stays refused.
 */
function sentAt(out: Map<string, Meaning>, key: string, given: Meaning, path: string, note?: string): void {
  const had = out.get(key);
  const meaning = withNote(given, note, had);
  if (meaning.kind === "identity" || meaning.kind === "part") {
    const here = path === "/" ? undefined : routeOf("*", path);
    const routes = here?.kind === "route" ? [here.route].flat() : undefined;
    const alike =
      had !== undefined &&
      had.kind === meaning.kind &&
      JSON.stringify({ ...had, routes: undefined, note: undefined }) ===
        JSON.stringify({ ...meaning, routes: undefined, note: undefined });
    if (!alike) {
      out.set(key, routes === undefined ? meaning : { ...meaning, routes: one(routes) });
      return;
    }
    const before = had.routes === undefined ? undefined : [had.routes].flat();
    // Sent everywhere at one place (or somewhere a route cannot say): every request.
    if (before === undefined || routes === undefined) out.set(key, { ...meaning, routes: undefined });
    else out.set(key, { ...meaning, routes: one([...new Set([...before, ...routes])]) });
    return;
  }
  if (had === undefined || meaning.kind === "refused") out.set(key, meaning);
  else if (had.kind === "refused") return;
  else if (JSON.stringify(conditionsOf(had)) !== JSON.stringify(conditionsOf(meaning))) {
    // One rule has one match.header: a descriptor sent under different header conditions is two limits' worth.
    out.set(key, {
      kind: "refused",
      why: "Envoy sends it where different header_value_match conditions hold, and one rule's match.header is one set of conditions",
    });
  } else if (had.kind === "any") out.set(key, meaning.kind === "any" ? meaning : { ...had, ...noteOf(meaning) });
  else if (meaning.kind === "any" || had.kind !== "route" || meaning.kind !== "route") out.set(key, meaning);
  else {
    const route = one([...new Set([...[had.route].flat(), ...[meaning.route].flat()])]);
    out.set(key, { kind: "route", route, ...noteOf(meaning), ...conditionsOf(meaning) });
  }
}

/** A meaning's `match.header` conditions, as a spread (none: `{}`). */
function conditionsOf(meaning: Meaning): { conditions?: readonly MatchCondition[] } {
  return (meaning.kind === "route" || meaning.kind === "any") && meaning.conditions !== undefined
    ? { conditions: meaning.conditions }
    : {};
}

/** A note on a meaning, joined with the one the key already had (each place's note once). */
function withNote(meaning: Meaning, note: string | undefined, had: Meaning | undefined): Meaning {
  if (meaning.kind === "refused" || meaning.kind === "plan") return meaning;
  const notes = [...new Set([had === undefined ? undefined : noteOf(had).note, meaning.note, note])].filter(
    (n): n is string => n !== undefined,
  );
  return notes.length === 0 ? meaning : { ...meaning, note: notes.join("; ") };
}

function noteOf(meaning: Meaning): { note?: string } {
  return "note" in meaning && meaning.note !== undefined ? { note: meaning.note } : {};
}

function one(routes: readonly string[]): string | readonly string[] {
  return routes.length === 1 ? routes[0]! : routes;
}
