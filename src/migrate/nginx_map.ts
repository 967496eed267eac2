/**
 * NGINX `map` (and `geo`) variables in a zone's key. A map gives each request a value by another variable; a request
 * whose key comes out empty is not limited. Sluice can say a map that gives one key (a constant or variables it reads)
 * to the requests it limits, when which requests those are is something a rule can say: by path (`match.except` or
 * `match.route`), by method (routes with a method), or by a value the key itself holds being absent
 * (`key_missing: skip`). nginx_map_sources.ts reads each kind of source; what a rule cannot say (keys chosen by a
 * header's value, several keys, address ranges, a host) is refused with its reason.
 */
import type { MatchCondition } from "../rules/types.ts";
import type { Directive } from "./nginx_conf.ts";
import { geoLines } from "./nginx_geo.ts";
import { GEOIP_AS, type Geoip2Binding, readGeoip2 } from "./nginx_geoip.ts";
import type { AddressChoice } from "./nginx_map_address.ts";
import { isConcatenation, overFlags } from "./nginx_map_concat.ts";
import {
  bySource,
  type Expanded,
  type MapShape,
  type NginxMap,
  routesOfUriValue,
  type ServerChoice,
  type Variant,
} from "./nginx_map_sources.ts";
import { mayOverlap } from "./nginx_routes.ts";

export type { Expanded, NginxMap };

/**
 * The maps and geos of an `http` block by the variable they set (without `$`); a geo has no entries to read; a
 * variable code computes (`js_set`, `perl_set`) only its directive.
 */
export type Maps = ReadonlyMap<string, MapLike>;

type MapLike = NginxMap | { readonly geo: Directive } | { readonly computed: Directive } | Geoip2Binding;

/** Words inside a `map` block that are not a value: flags, and `default` (the fallback). */
const MAP_WORDS = new Set(["default", "hostnames", "volatile"]);

export function readMaps(http: readonly Directive[]): Maps {
  const maps = new Map<string, MapLike>();
  for (const d of http) {
    if ((d.name === "js_set" || d.name === "perl_set") && d.args[0]?.startsWith("$") === true) {
      maps.set(d.args[0].slice(1), { computed: d });
    }
    if (d.block === null) continue;
    if (d.name === "geoip2") for (const [name, bound] of readGeoip2(d)) maps.set(name, bound);
    if (d.name === "geo") {
      const v = d.args.at(-1);
      if (v?.startsWith("$") === true) maps.set(v.slice(1), { geo: d });
    } else if (d.name === "map" && d.args.length === 2 && d.args[1]!.startsWith("$")) {
      const entries = d.block
        .filter((e) => !MAP_WORDS.has(e.name) && e.args.length === 1)
        .map((e) => ({ value: unescapeValue(e.name), result: e.args[0]! }));
      const fallback = d.block.find((e) => e.name === "default")?.args[0] ?? "";
      maps.set(d.args[1]!.slice(1), { source: d.args[0]!, entries, fallback, at: d });
    }
  }
  return maps;
}

/** NGINX's `\` before a value that would otherwise read as a word of the block (`\default`, `\~`). */
function unescapeValue(value: string): string {
  return value.startsWith("\\") ? value.slice(1) : value;
}

const VARIABLE = /\$\{?([A-Za-z0-9_]+)\}?/g;

/** `key` with every map variable in it replaced by what the map gives, or why that cannot be said. */
// long: every kind of map result gathered into one key, each pair one key cannot hold refused
export function expandMaps(key: string, maps: Maps): Expanded {
  let expanded = key;
  const except: string[] = [];
  let only: string[] | null = null;
  const notes: string[] = [];
  let skipMissing = false;
  let servers: ServerChoice | null = null;
  const conditions: MatchCondition[] = [];
  let fallback = false;
  let addresses: AddressChoice | null = null;
  for (const m of [...key.matchAll(VARIABLE)]) {
    const map = maps.get(m[1]!);
    if (map === undefined) continue;
    if (!("entries" in map)) {
      const other = notAMap(m[1]!, map);
      if ("refused" in other) return other;
      expanded = expanded.replace(m[0], other.as);
      continue;
    }
    const one = isConcatenation(map.source)
      ? overFlags(m[1]!, map, (v) => {
          const found = maps.get(v);
          return found === undefined || "entries" in found ? found : { other: true };
        })
      : throughMaps(m[1]!, map, maps);
    if ("refused" in one) return one;
    if ("variants" in one) {
      if (key.trim() !== m[0])
        return { refused: `${key}: a map giving several keys is imported only as the whole key` };
      return one;
    }
    expanded = expanded.replace(m[0], one.key);
    except.push(...one.except);
    if (one.only !== null) {
      if (only !== null) return { refused: `${key}: two maps that each limit only some routes are not imported` };
      only = [...one.only];
    }
    notes.push(...one.notes);
    conditions.push(...(one.conditions ?? []));
    fallback ||= one.addressFallback === true;
    skipMissing ||= one.skipMissing;
    if (one.servers != null) {
      if (servers !== null) return { refused: `${key}: two maps over $server_name in one key are not imported` };
      servers = one.servers;
    }
    if (one.addresses !== undefined) {
      if (addresses !== null)
        return { refused: `${key}: two maps over the client address in one key are not imported` };
      addresses = one.addresses;
    }
  }
  return {
    key: expanded,
    except: [...new Set(except)],
    only,
    notes,
    skipMissing,
    servers,
    ...(conditions.length === 0 ? {} : { conditions }),
    ...(fallback ? { addressFallback: true } : {}),
    ...(addresses === null ? {} : { addresses }),
  };
}

/** A geo, a variable code computes or a `geoip2` binding in a key: why it cannot be said, or what it reads as. */
function notAMap(
  name: string,
  map: Exclude<MapLike, NginxMap>,
): { readonly refused: string } | { readonly as: string } {
  if ("geo" in map) {
    return {
      refused: `$${name} comes from a geo block (address ranges), and a Sluice rule cannot match on an address range`,
    };
  }
  if ("computed" in map) {
    return {
      refused: `$${name} is computed by code in NGINX (${map.computed.name} ${map.computed.args.slice(1).join(" ")}), which a Worker does not run: if it is who the caller is (a user id from a token), have the auth layer in front send it as a header and count by user (USER_HEADER) or { header: NAME }`,
    };
  }
  if (map.geoip === null) {
    return {
      refused: `$${name} is ${map.at.args.filter((a) => !a.startsWith("default=")).join(" ")} of a geoip2 database, which Sluice has no key part for (it has the client's country and autonomous system number, as Cloudflare locates the client)`,
    };
  }
  return { as: `$${GEOIP_AS[map.geoip]}` };
}

/** A map read through the geo or maps it reads (`overGeo`, `overMaps`), then as its source says. */
function throughMaps(name: string, given: NginxMap, maps: Maps): Expanded {
  // A map over a geoip2 variable reads what the geoip module's own variable would (nginx_geoip.ts).
  const bound = maps.get(/^\$\{?([A-Za-z0-9_]+)\}?$/.exec(given.source)?.[1] ?? "");
  const map =
    bound !== undefined && "geoip" in bound && bound.geoip !== null
      ? { ...given, source: `$${GEOIP_AS[bound.geoip]}`, said: given.said ?? `map ${given.source} $${name}` }
      : given;
  const over = overGeo(name, overMaps(name, map, maps), maps);
  return "refused" in over ? over : expandOne(name, over, maps);
}

/**
 * A map over a `geo` variable (`geo $limited { default 1; 10.0.0.0/8 0; }` then `map $limited $key { 0 ""; 1
 * $binary_remote_addr; }`: NGINX's allowlist) as the map over the client address it amounts to: each range gives
 * what the map gives its geo value (`byAddress` then decides; nginx_geo.ts reads `ranges` and `proxy`). A geo over
 * another variable, or with `delete`, is refused; a map that reads a geo's values by regex stays as it is.
 */
function overGeo(name: string, map: NginxMap, maps: Maps): NginxMap | { readonly refused: string } {
  const geoName = /^\$\{?([A-Za-z0-9_]+)\}?$/.exec(map.source)?.[1] ?? "";
  const geo = maps.get(geoName);
  if (geo === undefined || !("geo" in geo) || map.entries.some((e) => e.value.startsWith("~"))) return map;
  const { args, block } = geo.geo;
  const said = `map ${map.source} $${name} (over geo $${geoName}`;
  if (args.length === 2 && !/^\$(binary_)?remote_addr$/.test(args[0]!)) {
    return { refused: `${said} of ${args[0]}): a Sluice rule cannot match on ranges of its value` };
  }
  const lines = geoLines(block ?? []);
  if ("refused" in lines) return { refused: `${said}): ${lines.refused}` };
  const mapped = (v: string) => map.entries.find((e) => e.value === v)?.result ?? map.fallback;
  return {
    source: "$remote_addr",
    entries: lines.entries.map((e) => ({ value: e.value, result: mapped(e.result) })),
    fallback: mapped(lines.fallback),
    at: map.at,
    said: `${said}, by client address)`,
    cidr: true,
    ...(lines.notes.length === 0 ? {} : { notes: lines.notes }),
  };
}

/**
 * A map over another map's constants (`map $http_user_agent $bot { ~*bot 1; default 0; }` then `map $bot $key { 1
 * $binary_remote_addr; default ""; }`) as one map over the first one's source: each of its values gives what the
 * second gives its result (compared ignoring case, as NGINX compares a map's strings). Only when the first gives
 * constants and the second lists strings, not regexes; a chain of such maps, up to 4 deep.
 */
function overMaps(name: string, map: NginxMap, maps: Maps, depth = 0): NginxMap {
  const innerName = /^\$\{?([A-Za-z0-9_]+)\}?$/.exec(map.source)?.[1] ?? "";
  const inner = maps.get(innerName);
  if (depth >= 4 || inner === undefined || !("entries" in inner) || map.entries.some((e) => e.value.startsWith("~")))
    return map;
  if ([...inner.entries.map((e) => e.result), inner.fallback].some((r) => r.includes("$"))) return map;
  const mapped = (v: string) =>
    map.entries.find((e) => e.value.toLowerCase() === v.toLowerCase())?.result ?? map.fallback;
  const composed: NginxMap = {
    source: inner.source,
    entries: inner.entries.map((e) => ({ value: e.value, result: mapped(e.result) })),
    fallback: mapped(inner.fallback),
    at: map.at,
    said: `${map.said ?? `map ${map.source} $${name}`} (over map ${inner.source} $${innerName})`,
  };
  return overMaps(name, composed, maps, depth + 1);
}

function expandOne(name: string, map: NginxMap, maps: Maps): Expanded {
  const said = map.said ?? `map ${map.source} $${name}`;
  const results = [...map.entries.map((e) => e.result), map.fallback];
  for (const r of results) {
    for (const v of r.matchAll(VARIABLE)) {
      const inner = maps.get(v[1]!);
      if (inner !== undefined && "computed" in inner)
        return {
          refused: `${said} gives $${v[1]}, computed by code in NGINX (${inner.computed.name}), which a Worker does not run`,
        };
      if (inner !== undefined)
        return { refused: `${said} gives $${v[1]}, itself a map: one map over another is not imported` };
    }
  }
  const keys = [...new Set(results.filter((r) => r !== ""))];
  if (keys.length === 0)
    return { refused: `${said} gives every request an empty key, so NGINX limits nothing with it` };
  const shape: MapShape = { said, map, keys };
  if (keys.length === 1 && !results.includes(""))
    return {
      key: keys[0]!,
      except: [],
      only: null,
      notes: [`${said} gives ${keys[0]} to every request`],
      skipMissing: false,
    };
  if (keys.length > 1 && BY_ROUTE.test(map.source)) return keysByRoute(shape);
  return bySource(shape);
}

/** Sources whose values are a request's path or method: which key a request gets is something routes say. */
const BY_ROUTE = /^\$\{?(uri|document_uri|request_method)\}?$/;

/**
 * A map giving several keys by path or method (`map $uri $k { ~^/api/ $binary_remote_addr; /login $http_x_user;
 * default ""; }`) as one rule per key, each on the routes that get it: each key's own view of the map (`keyView`)
 * read as a one-key map is (`byPath`, `byMethod`); any key that cannot be said leaves the whole map out.
 */
function keysByRoute(shape: MapShape): Expanded {
  const variants: Variant[] = [];
  const notes: string[] = [];
  for (const key of shape.keys) {
    const one = bySource({ said: shape.said, map: keyView(shape.map, key), keys: [key] });
    if ("refused" in one) return one;
    if ("variants" in one) return { refused: `${shape.said}: ${key} cannot be said on its own` };
    variants.push({ key, conditions: [], except: one.except, only: one.only });
    notes.push(...one.notes);
  }
  return {
    variants,
    notes: [`${shape.said} gives ${shape.keys.join(", ")} by ${shape.map.source}: one rule per key`, ...notes],
  };
}

/**
 * The map as one key sees it: the others' entries give an empty key, where they can take a request from it. A
 * method, a path string (strings are tried first) or the default can; another key's regex only if it comes before one
 * of this key's and may match the same paths (NGINX tries regexes in order; a later one never takes from an earlier).
 */
function keyView(map: NginxMap, key: string): NginxMap {
  const mine = map.entries.map((e, i) => (e.result === key && e.value.startsWith("~") ? i : -1)).filter((i) => i >= 0);
  const last = Math.max(-1, ...mine);
  const routesOf = (value: string) => routesOfUriValue(value) ?? ["* /**"];
  const mineRoutes = mine.flatMap((i) => routesOf(map.entries[i]!.value));
  const entries = map.entries.flatMap((e, i) => {
    if (e.result === key) return [e];
    const regex = e.value.startsWith("~") && !map.source.includes("request_method");
    const takes =
      !regex ||
      map.fallback === key ||
      (i < last && routesOf(e.value).some((r) => mineRoutes.some((m) => mayOverlap(r, m))));
    return takes ? [{ value: e.value, result: "" }] : [];
  });
  return { ...map, entries, fallback: map.fallback === key ? key : "" };
}
