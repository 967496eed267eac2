/**
 * NGINX `map` (and `geo`) variables in a zone's key. A map gives each request a value by another variable; a request
 * whose key comes out empty is not limited. Sluice can say that when the map gives one key (a constant or variables
 * it reads) to some requests and an empty key to others chosen by their path (`map $uri`: the others become the
 * rule's `match.except`), or to every request alike. Any other map (keys chosen by a header's value, several keys,
 * address ranges) is refused with its reason.
 */
import type { Directive } from "./nginx_conf.ts";

/** A `map SOURCE $VAR { value result; ... default result; }` as written. */
interface NginxMap {
  readonly source: string;
  readonly entries: readonly { readonly value: string; readonly result: string }[];
  readonly fallback: string;
  readonly at: Directive;
}

/** The maps and geos of an `http` block by the variable they set (without `$`); a geo has no entries to read. */
export type Maps = ReadonlyMap<string, NginxMap | { readonly geo: Directive }>;

export function readMaps(http: readonly Directive[]): Maps {
  const maps = new Map<string, NginxMap | { readonly geo: Directive }>();
  for (const d of http) {
    if (d.block === null) continue;
    if (d.name === "geo") {
      const v = d.args.at(-1);
      if (v?.startsWith("$") === true) maps.set(v.slice(1), { geo: d });
    } else if (d.name === "map" && d.args.length === 2 && d.args[1]!.startsWith("$")) {
      const entries = d.block
        .filter((e) => e.name !== "default" && e.args.length === 1)
        .map((e) => ({ value: e.name, result: e.args[0]! }));
      const fallback = d.block.find((e) => e.name === "default")?.args[0] ?? "";
      maps.set(d.args[1]!.slice(1), { source: d.args[0]!, entries, fallback, at: d });
    }
  }
  return maps;
}

/** A key with its map variables replaced: the expression, the routes whose requests get an empty key, and notes. */
export type Expanded =
  | { readonly key: string; readonly except: readonly string[]; readonly notes: readonly string[] }
  | { readonly refused: string };

const VARIABLE = /\$\{?([A-Za-z0-9_]+)\}?/g;

/** `key` with every map variable in it replaced by what the map gives, or why that cannot be said. */
export function expandMaps(key: string, maps: Maps): Expanded {
  let expanded = key;
  const except: string[] = [];
  const notes: string[] = [];
  for (const m of [...key.matchAll(VARIABLE)]) {
    const map = maps.get(m[1]!);
    if (map === undefined) continue;
    if ("geo" in map) {
      return {
        refused: `$${m[1]} comes from a geo block (address ranges), and a Sluice rule cannot match on an address range`,
      };
    }
    const one = expandOne(m[1]!, map, maps);
    if ("refused" in one) return one;
    expanded = expanded.replace(m[0], one.key);
    except.push(...one.except);
    notes.push(...one.notes);
  }
  return { key: expanded, except: [...new Set(except)], notes };
}

// long: each shape of map checked in turn, each refusal with its own reason
function expandOne(name: string, map: NginxMap, maps: Maps): Expanded {
  const said = `map ${map.source} $${name}`;
  const results = [...map.entries.map((e) => e.result), map.fallback];
  for (const r of results) {
    for (const v of r.matchAll(VARIABLE)) {
      if (maps.has(v[1]!))
        return { refused: `${said} gives $${v[1]}, itself a map: one map over another is not imported` };
    }
  }
  const keys = [...new Set(results.filter((r) => r !== ""))];
  if (keys.length === 0)
    return { refused: `${said} gives every request an empty key, so NGINX limits nothing with it` };
  if (keys.length > 1) {
    return {
      refused: `${said} gives different keys (${keys.join(", ")}) by the value of ${map.source}: a Sluice rule has one key; write one rule per key by hand`,
    };
  }
  const value = keys[0]!;
  const empties = map.entries.filter((e) => e.result === "");
  if (empties.length === 0 && map.fallback !== "")
    return { key: value, except: [], notes: [`${said} gives ${value} to every request`] };
  // `"" ""` for the variable the key is: an empty value stays empty, which key_missing: skip already says.
  if (map.fallback === value && empties.every((e) => e.value === "") && value === map.source) {
    return { key: value, except: [], notes: [] };
  }
  if (map.source !== "$uri" || map.fallback !== value) {
    return {
      refused: `${said}: which requests get the key ${value} and which an empty key (not limited) depends on ${map.source}, which a Sluice rule cannot match on (it matches routes, plans and identities)`,
    };
  }
  const except: string[] = [];
  for (const e of empties) {
    const route = routeOfUriValue(e.value);
    if (route === null) {
      return {
        refused: `${said}: ${JSON.stringify(e.value)} gives an empty key (not limited), and that pattern cannot be written as a route to leave out`,
      };
    }
    except.push(route);
  }
  return {
    key: value,
    except,
    notes: [`${said}: requests to ${except.join(", ")} get an empty key, so NGINX does not limit them (match.except)`],
  };
}

/** A `map $uri` value as a route: `/health` exactly, or a regex `~^/static/` (a literal prefix) as `/static/**`. */
function routeOfUriValue(value: string): string | null {
  if (value.startsWith("/") && /^[A-Za-z0-9_./-]+$/.test(value)) return `* ${value}`;
  const prefix = /^~\^(\/[A-Za-z0-9_/-]*)(?:\.\*)?$/.exec(value)?.[1];
  if (prefix === undefined) return null;
  return `* ${prefix}**`;
}
