/**
 * What a `map` over each kind of source variable can be as a Sluice rule, when the map gives one key and an empty one
 * (not limited): `$uri` as routes left out or kept (`match.except`, `match.route`), `$request_method` as routes with a
 * method, a header's values as `match.header` (nginx_map_header.ts), a header, cookie or query value that the key
 * holds as `key_missing: skip`, addresses that never reach the
 * Worker as a client's. Every other shape is refused with what a rule would need to say it.
 */
import type { MatchCondition } from "../rules/types.ts";
import { emptyTest } from "./empty_test.ts";
import { alpha2Of } from "./iso_countries.ts";
import type { Directive } from "./nginx_conf.ts";
import { GEOIP_AS } from "./nginx_geoip.ts";
import { type AddressChoice, addressChoice } from "./nginx_map_address.ts";
import { headerConditions, keysByValue, nounOf } from "./nginx_map_header.ts";
import { regexRoutes } from "./nginx_routes.ts";

/** A `map SOURCE $VAR { value result; ... default result; }` as written. */
export interface NginxMap {
  readonly source: string;
  readonly entries: readonly { readonly value: string; readonly result: string }[];
  readonly fallback: string;
  readonly at: Directive;
  /** How the report names it, when not `map SOURCE $VAR` (a map over a geo: nginx_map.ts `overGeo`). */
  readonly said?: string;
  /** Its values are a geo's CIDR ranges (the longest that holds an address wins), not a map's text. */
  readonly cidr?: true;
  /** What the report says of the geo's lines beyond its ranges (its `proxy` lines). */
  readonly notes?: readonly string[];
}

/**
 * A key with its map variables replaced: the expression, the routes whose requests get an empty key (`except`), the
 * only routes whose requests get a key (`only`, `null` for all), and notes.
 */
export type Expanded =
  | {
      readonly key: string;
      readonly except: readonly string[];
      readonly only: readonly string[] | null;
      readonly notes: readonly string[];
      /** The map gives an empty key exactly when a value the key holds is missing: `key_missing: skip`. */
      readonly skipMissing: boolean;
      /** `map $server_name`: which servers' requests get the key (the others NGINX does not limit); `null`: all. */
      readonly servers?: ServerChoice | null;
      /** `map $http_NAME` (`$cookie_`, `$arg_`): the conditions under which the key is given (`match.header`, ...). */
      readonly conditions?: readonly MatchCondition[];
      /** The API key, and the address where a request has none (as `identity: api_key`'s `unverified: by_address`). */
      readonly addressFallback?: boolean;
      /** `map $remote_addr` (or over a `geo`): the client ranges given the key, or given an empty one. */
      readonly addresses?: AddressChoice;
    }
  /** A header (cookie, query) map giving several keys by the value: one rule per key (nginx_map_header.ts). */
  | { readonly variants: readonly Variant[]; readonly notes: string[] }
  | { readonly refused: string };

/**
 * One key of a map giving several: the conditions, and (a map by path or method) the routes, or (by the client
 * address) the address ranges, that pick its requests.
 */
export interface Variant {
  readonly key: string;
  readonly conditions: readonly MatchCondition[];
  readonly addresses?: AddressChoice;
  readonly except?: readonly string[];
  readonly only?: readonly string[] | null;
}

/** The servers (by their first `server_name`, lower-case) a `map $server_name` gives the key or an empty one. */
export interface ServerChoice {
  readonly given: readonly string[];
  readonly empty: readonly string[];
  /** What a server the map does not list gets. */
  readonly fallbackGiven: boolean;
}

/** Whether a server's requests get the key under `choice`. */
export function serverGetsKey(choice: ServerChoice, serverName: string): boolean {
  const name = serverName.toLowerCase();
  if (choice.given.includes(name)) return true;
  if (choice.empty.includes(name)) return false;
  return choice.fallbackGiven;
}

/** A map as `expandOne` found it: how to name it, the map, and its distinct non-empty results. */
export interface MapShape {
  readonly said: string;
  readonly map: NginxMap;
  readonly keys: readonly string[];
}

type Entry = NginxMap["entries"][number];

/** The map as a rule, by the variable it reads, or why it cannot be one. */
export function bySource(shape: MapShape): Expanded {
  const v = /^\$\{?([A-Za-z0-9_]+)\}?$/.exec(shape.map.source)?.[1];
  if (v === undefined) return refuse(shape, `its source ${shape.map.source} is not one variable`);
  if (/^(http|cookie|arg)_/.test(v) || CF_SOURCES[v] !== undefined) return clientValue(shape, v);
  if (/^geoip_(city_)?country_code3$/.test(v)) return byCode3(shape, v);
  if (/^geoip_(city_)?country_name$/.test(v)) {
    return {
      refused: `${shape.said}: $${v} gives a country's name, which GeoIP databases spell their own way, and Cloudflare the two-letter code (request.cf.country): map $geoip_country_code instead`,
    };
  }
  if (v === "remote_addr" && shape.keys.length > 1) return keysByAddress(shape);
  if (shape.keys.length > 1) return severalKeys(shape);
  if (v === "uri" || v === "document_uri") return byPath(shape);
  if (v === "request_method") return byMethod(shape);
  if (v === "remote_addr") return byAddress(shape);
  if (v === "server_name") return byServer(shape);
  if (v === "host") {
    return {
      refused: `${shape.said}: which requests get a key depends on the host, and Sluice rules do not match by host (every rule applies to every host the Worker serves)`,
    };
  }
  return refuse(shape, null);
}

/** A map over three-letter country codes, as the same map over Cloudflare's two-letter ones (ISO 3166-1). */
function byCode3(shape: MapShape, v: string): Expanded {
  const entries: Entry[] = [];
  for (const e of shape.map.entries) {
    const two = e.value === "" ? "" : e.value.startsWith("~") ? null : alpha2Of(e.value);
    if (two === null || two === undefined) {
      const what = two === null ? "a regex over three-letter codes" : "not an ISO 3166-1 three-letter country code";
      return {
        refused: `${shape.said}: ${e.value} is ${what}, and Cloudflare gives two-letter codes (request.cf.country): list three-letter codes, or map $geoip_country_code`,
      };
    }
    entries.push({ value: two, result: e.result });
  }
  const out = clientValue({ ...shape, map: { ...shape.map, entries } }, "geoip_country_code");
  if ("refused" in out) return out;
  const shown = shape.map.entries.find((e) => e.value !== "")?.value ?? "CHN";
  const note = `${shape.said}: $${v}'s three-letter codes read as the two-letter ones Cloudflare gives (${shown} as ${alpha2Of(shown)})`;
  return { ...out, notes: [note, ...out.notes] };
}

function refuse(shape: MapShape, why: string | null): Expanded {
  if (shape.keys.length > 1) return severalKeys(shape);
  return {
    refused: `${shape.said}: which requests get the key ${shape.keys[0]} and which an empty key (not limited) depends on ${shape.map.source}, which a Sluice rule cannot match on (it matches routes, plans and identities)${why === null ? "" : `; ${why}`}`,
  };
}

function severalKeys(shape: MapShape): Expanded {
  return {
    refused: `${shape.said} gives different keys (${[...shape.keys].sort().join(", ")}) by the value of ${shape.map.source}: a Sluice rule has one key; write one rule per key by hand`,
  };
}

function ok(key: string, parts: Partial<Omit<Extract<Expanded, { key: string }>, "key">> = {}): Expanded {
  return {
    key,
    except: parts.except ?? [],
    only: parts.only ?? null,
    notes: parts.notes ?? [],
    skipMissing: parts.skipMissing ?? false,
    servers: parts.servers ?? null,
    ...(parts.conditions === undefined ? {} : { conditions: parts.conditions }),
    ...(parts.addressFallback === true ? { addressFallback: true } : {}),
    ...(parts.addresses === undefined ? {} : { addresses: parts.addresses }),
  };
}

const isRegex = (value: string) => value.startsWith("~");

/** Variables of where the client is, as the `request.cf` field a `match.cf` condition reads (nginx_geoip.ts). */
const CF_SOURCES: Readonly<Record<string, "country" | "asn">> = {
  geoip_country_code: "country",
  geoip_city_country_code: "country",
  [GEOIP_AS.asn]: "asn",
};

/** A regex that every non-empty value matches (`~.`, `~.+`, `~^.+$`, `~*.`): "the value is present". */
const ANY_VALUE = /^~\*?\^?\.[+*]?\$?$/;

/** What a request gets when the client value is absent and when it is present, if no particular value decides. */
// long: the entries a header/cookie/query map can have, read as absent/present, each refusal with its reason
function clientValue(shape: MapShape, v: string): Expanded {
  const { map, said } = shape;
  const kind =
    CF_SOURCES[v] !== undefined
      ? `the client's ${CF_SOURCES[v]}`
      : v.startsWith("http_")
        ? `the header ${v.slice(5).replaceAll("_", "-")}`
        : v.startsWith("cookie_")
          ? `the cookie ${v.slice(7)}`
          : `the query parameter ${v.slice(4)}`;
  const particular = map.entries.filter((e) => e.value !== "" && !ANY_VALUE.test(e.value));
  if (particular.length > 0) {
    if (shape.keys.length > 1) {
      const [source, name] = sourceOf(v);
      const split = keysByValue(map, said, source, name);
      if ("refused" in split) return split;
      const noun = nounOf(source, name);
      const note = `${said} gives ${shape.keys.join(", ")} by the ${noun}'s value: one rule per key (match.${source})`;
      return { variants: split.variants, notes: [note] };
    }
    const [source, name] = sourceOf(v);
    const conditions = headerConditions(map, said, source, name);
    if ("refused" in conditions) return conditions;
    const approx =
      source === "query"
        ? "; NGINX's $arg_ is the first value as sent (not decoded), its name any case; Sluice's the first decoded, its name as written"
        : "";
    const noun = nounOf(source, name);
    const note =
      map.fallback === ""
        ? `${said}: only requests whose ${noun} has a value it lists get a key (match.${source})${approx}`
        : `${said}: every request gets the key but those whose ${noun} has a value it exempts (match.${source} with not: true; a request without it reads as empty, as NGINX reads it: missing_as_empty)${approx}`;
    return ok(shape.keys[0]!, { conditions, notes: [note] });
  }
  const missing = map.entries.find((e) => e.value === "")?.result ?? map.fallback;
  const present = map.entries.find((e) => ANY_VALUE.test(e.value))?.result ?? map.fallback;
  if (missing !== "" && present !== "" && missing !== present) {
    const apiKey = v === "http_authorization" || v === "http_x_api_key";
    // The API key, else the address: what Sluice's identity: api_key does for a caller without a verified key.
    const holdsKey = new RegExp(`^\\$\\{?${v}\\}?$`).test(present);
    if (apiKey && holdsKey && /^\$\{?(binary_)?remote_addr\}?$/.test(missing)) {
      const note = `${said}: the API key, and the address for a request without one`;
      return ok(present, { notes: [note], addressFallback: true });
    }
    return {
      refused: `${said} gives ${present} when ${kind} is sent and ${missing} when not: a Sluice key has no part that falls back to another${apiKey ? " (for an API key that falls back to the address, a rule with identity: api_key and unverified: by_address is the closest: write it by hand)" : ""}`,
    };
  }
  const [source, name] = sourceOf(v);
  const sent = (yes: boolean): MatchCondition => emptyTest(source, name, !yes);
  if (missing === "" && present !== "") {
    const holds = [...present.matchAll(/\$\{?([A-Za-z0-9_]+)\}?/g)].some((m) => m[1] === v);
    if (holds) return ok(present, { skipMissing: true });
    const note = `${said}: only requests that send ${kind} with a value are limited (by ${present}): match.${source} matches: ^$, not: true, missing_as_empty: true`;
    return ok(present, { conditions: [sent(true)], notes: [note] });
  }
  const note = `${said}: only requests that do not send ${kind}, or send it empty, are limited (by ${missing}): match.${source} matches: ^$, missing_as_empty: true`;
  return ok(missing, { conditions: [sent(false)], notes: [note] });
}

/** What a `$http_`, `$cookie_` or `$arg_` variable reads, as a condition names it. */
function sourceOf(v: string): readonly [MatchCondition["in"], string] {
  const cf = CF_SOURCES[v];
  if (cf !== undefined) return ["cf", cf];
  if (v.startsWith("http_")) return ["header", v.slice(5).replaceAll("_", "-")];
  return v.startsWith("cookie_") ? ["cookie", v.slice(7)] : ["query", v.slice(4)];
}

/** `map $uri`: values giving an empty key become `match.except`; with an empty default, the others `match.route`. */
function byPath(shape: MapShape): Expanded {
  const { map, said } = shape;
  const key = shape.keys[0]!;
  const empties = map.entries.filter((e) => e.result === "");
  const given = map.entries.filter((e) => e.result !== "");
  // NGINX tries exact paths first, then regexes in order: an empty-key regex beside paths given the key may lose.
  if (empties.some((e) => isRegex(e.value)) && (map.fallback === "" || given.length > 0)) {
    return {
      refused: `${said}: a regex that gives an empty key beside entries that give the key (NGINX tries exact paths, then regexes in order) cannot be said as routes`,
    };
  }
  const except = routesOf(empties, said);
  if ("refused" in except) return except;
  if (map.fallback !== "") {
    return ok(key, {
      except: except.routes,
      notes: [
        `${said}: requests to ${except.routes.join(", ")} get an empty key, so NGINX does not limit them (match.except)`,
      ],
    });
  }
  const only = routesOf(given, said);
  if ("refused" in only) return only;
  return ok(key, {
    only: only.routes,
    except: except.routes,
    notes: [`${said}: only requests to ${only.routes.join(", ")} get a key, so NGINX limits only them (match.route)`],
  });
}

function routesOf(entries: readonly Entry[], said: string): { routes: string[] } | { refused: string } {
  const routes: string[] = [];
  for (const e of entries) {
    const route = routesOfUriValue(e.value);
    if (route === null) {
      return {
        refused: `${said}: ${JSON.stringify(e.value)} gives ${e.result === "" ? "an empty key (not limited)" : `the key ${e.result}`}, and that pattern cannot be written as a route`,
      };
    }
    routes.push(...route);
  }
  return { routes };
}

/**
 * A `map $uri` value as routes: `/health` exactly, or a regex as a location's (`~^/static/` as `/static/**`,
 * `~*\.(css|js)$` as `/**.css` and `/**.js`: nginx_routes.ts `regexRoutes`).
 */
export function routesOfUriValue(value: string): string[] | null {
  if (value.startsWith("/") && /^[A-Za-z0-9_./-]+$/.test(value)) return [`* ${value}`];
  const m = /^~(\*?)(.+)$/.exec(value);
  return m === null ? null : (regexRoutes(m[2]!, m[1] === "*")?.map((r) => r.route) ?? null);
}

/** `map $request_method`: the methods that get an empty key become routes left out, or those that get one routes. */
function byMethod(shape: MapShape): Expanded {
  const { map, said } = shape;
  const key = shape.keys[0]!;
  const methods = (entries: readonly Entry[]) => entries.flatMap((e) => methodsOf(e.value) ?? [`?${e.value}`]);
  const empty = methods(map.entries.filter((e) => e.result === ""));
  const given = methods(map.entries.filter((e) => e.result !== ""));
  const bad = [...empty, ...given].find((m) => m.startsWith("?"));
  if (bad !== undefined)
    return { refused: `${said}: ${JSON.stringify(bad.slice(1))} is not a method or an anchored list of methods` };
  if (empty.some((m) => given.includes(m)))
    return { refused: `${said}: a method gets both an empty key and the key, by entries NGINX tries in turn` };
  if (map.fallback !== "") {
    return ok(key, {
      except: empty.map((m) => `${m} /**`),
      notes: [`${said}: ${empty.join(", ")} requests get an empty key, so NGINX does not limit them (match.except)`],
    });
  }
  return ok(key, {
    only: given.map((m) => `${m} /**`),
    notes: [`${said}: only ${given.join(", ")} requests get a key, so NGINX limits only them (routes with the method)`],
  });
}

/** `POST`, `~^POST$`, `~^(GET|HEAD)$`, `~*^(get|head)$` as methods; anything else `null`. */
function methodsOf(value: string): string[] | null {
  if (/^[A-Za-z]+$/.test(value)) return [value.toUpperCase()];
  const m = /^~(\*?)\^\(?([A-Za-z|]+)\)?\$$/.exec(value);
  if (m === null || (m[1] === "" && m[2] !== m[2]!.toUpperCase())) return null;
  return m[2]!.split("|").map((x) => x.toUpperCase());
}

/** `map $remote_addr` (or over a `geo`) giving several keys: one rule per key, on the clients that get it. */
function keysByAddress(shape: MapShape): Expanded {
  const { map, said } = shape;
  const variants: Variant[] = [];
  const notes: string[] = [`${said} gives ${shape.keys.join(", ")} by the client address: one rule per key`];
  for (const key of shape.keys) {
    const entries = map.entries.map((e) => ({ value: e.value, result: e.result === key ? key : "" }));
    const got = addressChoice(entries, map.fallback === key ? key : "", `${said}, ${key}`, map.cidr === true);
    if ("refused" in got) return got;
    notes.push(...got.notes.filter((n) => !notes.includes(n)));
    variants.push({ key, conditions: [], ...(got.choice === null ? {} : { addresses: got.choice }) });
  }
  return { variants, notes };
}

/** `map $remote_addr` (or over a `geo`): the clients that get the key (nginx_map_address.ts). */
function byAddress(shape: MapShape): Expanded {
  const got = addressChoice(shape.map.entries, shape.map.fallback, shape.said, shape.map.cidr === true);
  if ("refused" in got) return got;
  const notes = [...(shape.map.notes ?? []).map((n) => `${shape.said}: ${n}`), ...got.notes];
  return ok(shape.keys[0]!, { notes, ...(got.choice === null ? {} : { addresses: got.choice }) });
}

/**
 * `map $server_name`: each server block's name is known when importing, so a server the map gives an empty key gets
 * no rule (NGINX does not limit its requests). Names as exact strings only (NGINX compares them ignoring case).
 */
function byServer(shape: MapShape): Expanded {
  const { map, said } = shape;
  const odd = map.entries.find((e) => isRegex(e.value) || e.value.includes("*") || e.value.startsWith("."));
  if (odd !== undefined) {
    return {
      refused: `${said}: ${JSON.stringify(odd.value)} is a pattern, not a server name; only exact names can be resolved per server block`,
    };
  }
  const names = (given: boolean) =>
    map.entries.filter((e) => (e.result !== "") === given).map((e) => e.value.toLowerCase());
  return ok(shape.keys[0]!, {
    servers: { given: names(true), empty: names(false), fallbackGiven: map.fallback !== "" },
    notes: [`${said}: resolved per server block; a server it gives an empty key is not limited, as in NGINX`],
  });
}
