/**
 * NGINX's `limit_req_zone`s: each zone's key as a Sluice identity (or why there is none) and its rate, with what the
 * import report says about them; and the zone a `limit_req` names.
 */

import { MAX_AMOUNT } from "../rules/duration.ts";
import type { MatchCondition } from "../rules/types.ts";
import { nginxRate } from "./nginx_check.ts";
import { type Directive, NginxImportError, text, where } from "./nginx_conf.ts";
import { callerHint, geoipPart } from "./nginx_geoip.ts";
import { expandMaps, type Maps, readMaps } from "./nginx_map.ts";
import type { AddressChoice } from "./nginx_map_address.ts";
import type { ServerChoice } from "./nginx_map_sources.ts";
import { nginxRateNotes } from "./nginx_rate.ts";
import type { DraftRule, ReportItem } from "./report.ts";

/** A zone of either module: its name, its key (an identity, or `key:` parts, or why neither) and where it is. */
export interface ZoneLike {
  readonly name: string;
  readonly identity: string | null;
  /** The rule's `key:` when the zone's key is not one identity alone; `null` with `identity`, or when it cannot be said. */
  readonly key: readonly string[] | "global" | null;
  readonly why: string;
  readonly at: Directive;
  /** Routes whose requests the zone's key leaves empty (a `map $uri`), so NGINX does not limit them. */
  readonly except?: readonly string[];
  /** The only routes whose requests get a key (a `map $uri` or `$request_method` with an empty default). */
  readonly only?: readonly string[];
  /** For `key:` parts: what a request missing some gets (`identityOfKey`), and whether NGINX decides otherwise. */
  readonly keyMissing?: "skip" | "empty";
  readonly inexact?: boolean;
  /** A `map $server_name` in the key: which server blocks' requests get it. */
  readonly servers?: ServerChoice;
  /** A `map $http_NAME` (`$cookie_`, `$arg_`) in the key: the conditions under which requests get it. */
  readonly conditions?: readonly MatchCondition[];
  /** A `map $remote_addr` or a `geo` in the key: the client ranges given it (`match.address`, `except_address`). */
  readonly addresses?: AddressChoice;
  /** A map giving several keys by a value: one rule per key, each with its counting and conditions. */
  readonly variants?: readonly ZoneVariant[];
}

/** One key of a map that gives several: how it counts, and the requests that get it. */
export type ZoneVariant = Pick<
  ZoneLike,
  "identity" | "key" | "keyMissing" | "conditions" | "except" | "only" | "addresses"
>;

/** A `limit_req_zone`: its key's identity (or why there is none) and its rate. */
export interface Zone extends ZoneLike {
  readonly name: string;
  readonly identity: string | null;
  readonly key: readonly string[] | "global" | null;
  readonly why: string;
  readonly rate: { readonly amount: number; readonly unit: "s" | "min" };
  readonly at: Directive;
}

export function readZones(http: readonly Directive[], report: ReportItem[]): Map<string, Zone> {
  const zones = new Map<string, Zone>();
  const maps = readMaps(http);
  for (const d of http.filter((x) => x.name === "limit_req_zone")) {
    const zone = readZone(d, maps);
    if (zones.has(zone.name))
      throw new NginxImportError(`${where(d)}: limit_req_zone: zone "${zone.name}" is defined twice`);
    zones.set(zone.name, zone);
    if (d.args.at(-1) === "sync") report.push(syncNote(d));
    for (const note of nginxRateNotes(zone.rate.amount, zone.rate.unit)) {
      report.push({ where: where(d), kind: "approximate", message: `${text(d)}: ${note}` });
    }
    if (zone.identity === null && zone.key === null) {
      report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${zone.why}` });
    } else if (zone.why !== "") {
      report.push({
        where: where(d),
        kind:
          zone.identity === "api_key" || zone.why.includes("$request_uri") || zone.inexact === true
            ? "approximate"
            : "note",
        message: `${text(d)}: ${zone.why}`,
      });
    }
  }
  return zones;
}

/** NGINX Plus's `sync`: the zone shared by a cluster's NGINXes, which Sluice's one state per key already is. */
export function syncNote(d: Directive): ReportItem {
  return {
    where: where(d),
    kind: "note",
    message: `${text(d)}: sync (NGINX Plus's zone shared across a cluster, counted approximately): Sluice keeps one exact state per key for every location anyway`,
  };
}

function readZone(d: Directive, maps: Maps): Zone {
  // nginx_check.ts has refused what NGINX refuses: the zone has a name and a size; the last zone= and rate= count.
  const [key, ...rest] = d.args.at(-1) === "sync" ? d.args.slice(0, -1) : d.args;
  const zoneArg = rest.filter((a) => a.startsWith("zone=")).at(-1);
  const rateArg = rest.filter((a) => a.startsWith("rate=")).at(-1);
  if (key === undefined || zoneArg === undefined) {
    throw new NginxImportError(`${where(d)}: limit_req_zone needs a key, zone=NAME:SIZE and rate=Nr/s or Nr/m`);
  }
  // NGINX's default rate is 1r/s; `rate=10` (no unit) is per second.
  const rate = rateArg === undefined ? { amount: 1n, unit: "s" as const } : nginxRate(rateArg);
  if (rate === null || rate.amount > BigInt(MAX_AMOUNT)) {
    throw new NginxImportError(
      `${where(d)}: limit_req_zone: ${rateArg} is more than Sluice's leaky_queue takes (an amount of at most ${MAX_AMOUNT})`,
    );
  }
  return {
    name: zoneArg.slice(5, zoneArg.indexOf(":")),
    ...keyOfZone(key, maps),
    rate: { amount: Number(rate.amount), unit: rate.unit },
    at: d,
  };
}

/** A zone's key through its maps (nginx_map.ts), then as `identityOfKey` says it. */
export function keyOfZone(
  key: string,
  maps: Maps,
): ReturnType<typeof identityOfKey> & {
  readonly except?: readonly string[];
  readonly only?: readonly string[];
  readonly servers?: ServerChoice;
  readonly conditions?: readonly MatchCondition[];
  readonly addresses?: AddressChoice;
  readonly variants?: readonly ZoneVariant[];
} {
  const expanded = expandMaps(key, maps);
  if ("refused" in expanded) return { identity: null, key: null, why: expanded.refused };
  if ("variants" in expanded) return variantsOf(expanded);
  const counted = identityOfKey(expanded.key, expanded.skipMissing);
  if (counted.identity === null && counted.key === null) return counted;
  const fallback = expanded.addressFallback === true && counted.identity === "api_key";
  const why = [...expanded.notes, fallback ? API_KEY_ELSE_ADDRESS : counted.why].filter((w) => w !== "").join("; ");
  return {
    ...counted,
    why,
    ...(expanded.except.length === 0 ? {} : { except: expanded.except }),
    ...(expanded.only === null ? {} : { only: expanded.only }),
    ...(expanded.servers == null ? {} : { servers: expanded.servers }),
    ...(expanded.conditions === undefined ? {} : { conditions: expanded.conditions }),
    ...(expanded.addresses === undefined ? {} : { addresses: expanded.addresses }),
  };
}

/** A map's keys, each counted as `identityOfKey` says and given to the requests its conditions pick. */
function variantsOf(expanded: Extract<ReturnType<typeof expandMaps>, { variants: unknown }>) {
  const variants: ZoneVariant[] = [];
  const whys: string[] = [...expanded.notes];
  let inexact = false;
  for (const v of expanded.variants) {
    const counted = identityOfKey(v.key, true);
    if (counted.identity === null && counted.key === null) return counted;
    variants.push({
      ...counted,
      conditions: v.conditions,
      ...(v.except === undefined || v.except.length === 0 ? {} : { except: v.except }),
      ...(v.only == null ? {} : { only: v.only }),
      ...(v.addresses === undefined ? {} : { addresses: v.addresses }),
    });
    if (counted.why !== "") whys.push(`${v.key}: ${counted.why}`);
    inexact ||= counted.inexact === true;
  }
  const first = variants[0]!;
  return { identity: first.identity, key: first.key, why: whys.join("; "), inexact, variants };
}

/** `$server_name` in a key: the server's own name, filled in per server block (nginx_import.ts). */
export const SERVER_NAME_PART = "$server_name";

/** The variables a key can be made of, as key parts, and what to say of each beyond the part itself. */
function partOf(v: string): { part: string; why: string | null; inexact?: boolean } | null {
  if (v === "binary_remote_addr" || v === "remote_addr") {
    return {
      part: "ip",
      why: "the client address is CF-Connecting-IP; IPv6 clients share one budget per /64 unless IPV6_PREFIX=128",
    };
  }
  // CF-Connecting-IP is the client address at Cloudflare; a key may not name the header itself.
  if (v === "http_cf_connecting_ip") return { part: "ip", why: "CF-Connecting-IP is the client address" };
  if (PROXY_ADDRESS.has(v)) return { part: "ip", why: proxyAddressWhy(v, false), inexact: true };
  // The API key's headers are the `api_key` part (a key may not name them as headers): approximate, as alone.
  if (v === "http_authorization" || v === "http_x_api_key")
    return { part: "api_key", why: API_KEY_DIFFERS, inexact: true };
  const header = /^http_([a-z0-9_]+)$/.exec(v)?.[1];
  if (header !== undefined && header !== "authorization" && header !== "x_api_key" && header !== "cookie") {
    return { part: `{ header: ${header.replaceAll("_", "-")} }`, why: null };
  }
  const cookie = /^cookie_([A-Za-z0-9_]+)$/.exec(v)?.[1];
  if (cookie !== undefined) return { part: `{ cookie: ${cookie} }`, why: null };
  const arg = /^arg_([A-Za-z0-9_]+)$/.exec(v)?.[1];
  if (arg !== undefined) return { part: `{ query: ${arg} }`, why: null };
  if (v === "uri")
    return {
      part: "path",
      why: "$uri is the path as Sluice canonicalises it (decoded, dot segments resolved; case folded unless PATH_CASE_SENSITIVE=true)",
    };
  if (v === "request_uri")
    return {
      part: "path",
      why: "$request_uri holds the query string too; the path part does not, so requests differing only in their query share a budget",
    };
  if (v === "host" || v === "http_host") return { part: "host", why: null };
  if (v === "server_name") return { part: SERVER_NAME_PART, why: null };
  if (v === "request_method") return { part: "method", why: null };
  return geoipPart(v);
}

/**
 * An NGINX key as a Sluice rule's counting: `identity` for the key that is one of Sluice's identities alone, else the
 * parts of a `key:` (a variable each; text between them only separates; text alone is a constant), and what to say.
 */
export function identityOfKey(
  key: string,
  skipMissing = false,
): {
  identity: string | null;
  key: readonly string[] | "global" | null;
  why: string;
  /** For `key:` parts: what a request missing some gets, and whether that differs from NGINX (listed). */
  keyMissing?: "skip" | "empty";
  inexact?: boolean;
} {
  const alone = identityAlone(/^\$\{?([a-z0-9_]+)\}?$/.exec(key)?.[1]);
  if (alone !== null) return alone;
  const parts: string[] = [];
  const notes: string[] = [];
  let inexact = false;
  const re = /\$\{?([A-Za-z0-9_]+)\}?/g;
  let literal = key;
  for (let m = re.exec(key); m !== null; m = re.exec(key)) {
    const part = partOf(m[1]!);
    if (part === null) {
      return {
        identity: null,
        key: null,
        why: `Sluice has no key part for $${m[1]} (it keys on addresses, headers, cookies, query values, the method, the path, the host, the server's name, the client's country and autonomous system, and constants)${callerHint(m[1]!)}`,
      };
    }
    parts.push(part.part);
    if (part.why !== null) notes.push(part.why);
    inexact ||= part.inexact === true;
    literal = literal.replace(m[0], "");
  }
  if (parts.length === 0) {
    return {
      identity: null,
      key: "global",
      why: `the constant key ${JSON.stringify(key)} is one budget for every client (key: global)`,
    };
  }
  const unique = [...new Set(parts)];
  const missing = missingOf(unique, literal, skipMissing);
  return {
    identity: null,
    key: unique,
    keyMissing: missing.keyMissing,
    inexact: missing.inexact || inexact,
    why: [
      `counted by ${unique.join(" + ")}${literal.trim() === "" ? "" : ` (the text ${JSON.stringify(literal)} between them only separates)`}; ${missing.why}`,
      ...notes,
    ].join("; "),
  };
}

/** A key of one variable that is a Sluice identity: the address, or the API key. */
function identityAlone(v: string | undefined): { identity: string; key: null; why: string; inexact?: boolean } | null {
  if (v === "binary_remote_addr" || v === "remote_addr") {
    return {
      identity: "ip",
      key: null,
      why: "counted by client address (CF-Connecting-IP); IPv6 clients share one budget per /64 unless IPV6_PREFIX=128",
    };
  }
  if (v !== undefined && PROXY_ADDRESS.has(v))
    return { identity: "ip", key: null, why: proxyAddressWhy(v, true), inexact: true };
  if (v === "http_authorization" || v === "http_x_api_key") {
    return {
      identity: "api_key",
      key: null,
      why: `counted by API key (Authorization: Bearer or X-API-Key); ${API_KEY_DIFFERS}`,
    };
  }
  return null;
}

/**
 * Headers a proxy in front of NGINX puts the client address in. Keyed by their text, a client that sets them itself
 * opens a fresh budget per value; what the key means is the client address, which at Cloudflare is CF-Connecting-IP
 * (the only address Sluice trusts): the `ip` part, reported approximate.
 */
const PROXY_ADDRESS = new Set(["http_x_forwarded_for", "http_x_real_ip", "http_true_client_ip", "http_x_client_ip"]);

function proxyAddressWhy(v: string, alone: boolean): string {
  const header = v.slice(5).replaceAll("_", "-");
  const counted = alone ? "counted by client address (CF-Connecting-IP), the address a proxy puts in" : "ip is";
  return `${counted} ${header}; NGINX counts by the header's text, which a client can also set itself (a fresh budget per value), and does not limit a request without it`;
}

/** How Sluice's verified API key differs from NGINX's `$http_authorization` / `$http_x_api_key`. */
const API_KEY_DIFFERS =
  "a caller without an account record is counted by its address (unverified: by_address), where NGINX counts " +
  "every distinct value and does not limit a request without one";

/** `API_KEY_DIFFERS` for a map that counts a request without the key by its address, as Sluice does. */
const API_KEY_ELSE_ADDRESS =
  "counted by API key (Authorization: Bearer or X-API-Key), and a request without one by its address, as " +
  "identity: api_key counts a caller without a verified key (unverified: by_address); NGINX counts every " +
  "distinct value of the header, Sluice only a key with an account record (others by address too)";

/** Parts a request always has at the edge: NGINX's key with them is never empty. */
const ALWAYS_THERE = new Set(["ip", "api_key", "method", "path", "host", SERVER_NAME_PART]);

/**
 * What a request missing some parts gets. NGINX joins the variables' values: the key is empty (not limited) only when
 * every one is, and a request missing some is counted by the rest. So a key with text of its own or a part every
 * request has is `empty` (a missing part counts as empty: NGINX's key without it); one part alone is `skip`; several
 * parts that may all be missing are `skip`, which also leaves out a request missing only some (listed). `fromMap`: a
 * map gives the key only to requests with the value it reads (nginx_map_sources.ts), so `skip` is exact.
 */
function missingOf(
  parts: readonly string[],
  literal: string,
  fromMap: boolean,
): { keyMissing: "skip" | "empty"; inexact: boolean; why: string } {
  if (fromMap) {
    return {
      keyMissing: "skip",
      inexact: false,
      why: "a request without the value its map reads gets an empty key, not limited, as in NGINX (key_missing: skip)",
    };
  }
  if (literal !== "" || parts.some((p) => ALWAYS_THERE.has(p))) {
    return {
      keyMissing: "empty",
      inexact: false,
      why: "a request missing a part counts it as empty (key_missing: empty), as NGINX counts it by the rest of its key",
    };
  }
  if (parts.length === 1) {
    return {
      keyMissing: "skip",
      inexact: false,
      why: "a request with an empty key is not limited, as in NGINX (key_missing: skip)",
    };
  }
  return {
    keyMissing: "skip",
    inexact: true,
    why: "a request with none of them is not limited, as in NGINX (key_missing: skip); one with only some of them is not limited either, where NGINX counts it by the ones it has",
  };
}

export function zoneOf(limit: Directive, zones: Map<string, Zone>): Zone {
  // NGINX keeps the last zone= of a limit_req.
  const arg = limit.args.filter((a) => a.startsWith("zone=")).at(-1);
  const zone = arg === undefined ? undefined : zones.get(arg.slice(5));
  if (zone === undefined) {
    throw new NginxImportError(
      `${where(limit)}: limit_req: ${arg === undefined ? "no zone=NAME" : `no limit_req_zone defines zone "${arg.slice(5)}"`}`,
    );
  }
  return zone;
}

/** A zone's address choice as a draft rule's `match.address` and `match.except_address`. */
export function addressFields(
  choice: AddressChoice | undefined,
): Pick<DraftRule["match"], "address" | "except_address"> {
  return {
    ...(choice?.only === undefined ? {} : { address: choice.only }),
    ...(choice?.except === undefined ? {} : { except_address: choice.except }),
  };
}
