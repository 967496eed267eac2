/**
 * NGINX's `limit_req_zone`s: each zone's key as a Sluice identity (or why there is none) and its rate, with what the
 * import report says about them; and the zone a `limit_req` names.
 */
import { type Directive, NginxImportError, text, where } from "./nginx_conf.ts";
import { nginxRateNotes } from "./nginx_rate.ts";
import type { ReportItem } from "./report.ts";

/** A zone of either module: its name, its key's identity (or why there is none) and where it is defined. */
export interface ZoneLike {
  readonly name: string;
  readonly identity: string | null;
  readonly why: string;
  readonly at: Directive;
}

/** A `limit_req_zone`: its key's identity (or why there is none) and its rate. */
export interface Zone extends ZoneLike {
  readonly name: string;
  readonly identity: string | null;
  readonly why: string;
  readonly rate: { readonly amount: number; readonly unit: "s" | "min" };
  readonly at: Directive;
}

export function readZones(http: readonly Directive[], report: ReportItem[]): Map<string, Zone> {
  const zones = new Map<string, Zone>();
  for (const d of http.filter((x) => x.name === "limit_req_zone")) {
    const zone = readZone(d);
    if (zones.has(zone.name))
      throw new NginxImportError(`${where(d)}: limit_req_zone: zone "${zone.name}" is defined twice`);
    zones.set(zone.name, zone);
    for (const note of nginxRateNotes(zone.rate.amount, zone.rate.unit)) {
      report.push({ where: where(d), kind: "approximate", message: `${text(d)}: ${note}` });
    }
    if (zone.identity === null) {
      report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${zone.why}` });
    } else if (zone.why !== "") {
      report.push({
        where: where(d),
        kind: zone.identity === "api_key" ? "approximate" : "note",
        message: `${text(d)}: ${zone.why}`,
      });
    }
  }
  return zones;
}

function readZone(d: Directive): Zone {
  const [key, ...rest] = d.args;
  const zoneArg = rest.find((a) => a.startsWith("zone="));
  const rateArg = rest.find((a) => a.startsWith("rate="));
  if (key === undefined || zoneArg === undefined || rateArg === undefined) {
    throw new NginxImportError(`${where(d)}: limit_req_zone needs a key, zone=NAME:SIZE and rate=Nr/s or Nr/m`);
  }
  const name = /^zone=([^:]+):\d+[kKmM]?$/.exec(zoneArg)?.[1];
  if (name === undefined)
    throw new NginxImportError(`${where(d)}: limit_req_zone: bad ${zoneArg} (expected zone=NAME:SIZE)`);
  const rate = /^rate=(\d+)r\/([sm])$/.exec(rateArg);
  if (rate === null || Number(rate[1]) < 1) {
    throw new NginxImportError(`${where(d)}: limit_req_zone: bad ${rateArg} (expected rate=Nr/s or rate=Nr/m, N >= 1)`);
  }
  return {
    name,
    ...identityOfKey(key),
    rate: { amount: Number(rate[1]), unit: rate[2] === "s" ? "s" : "min" },
    at: d,
  };
}

/** The Sluice identity for an NGINX key, and what to say about it. */
export function identityOfKey(key: string): { identity: string | null; why: string } {
  const v = /^\$\{?([a-z0-9_]+)\}?$/.exec(key)?.[1];
  if (v === "binary_remote_addr" || v === "remote_addr") {
    return {
      identity: "ip",
      why: "counted by client address (CF-Connecting-IP); IPv6 clients share one budget per /64 unless IPV6_PREFIX=128",
    };
  }
  if (v === "http_authorization" || v === "http_x_api_key") {
    return {
      identity: "api_key",
      why:
        "counted by API key (Authorization: Bearer or X-API-Key) only for keys with an account record; a caller " +
        "without one is counted by its address (unverified: by_address), where NGINX counts every distinct value",
    };
  }
  if (v?.startsWith("http_")) {
    const header = v.slice(5).replaceAll("_", "-");
    return {
      identity: "user",
      why: `counted as the user, from the ${header} header: set USER_HEADER=${header} in wrangler.toml`,
    };
  }
  const name = v === undefined ? JSON.stringify(key) : `$${v}`;
  return {
    identity: null,
    why: `Sluice has no identity for the key ${name} (it counts by API key, client address or user)`,
  };
}

export function zoneOf(limit: Directive, zones: Map<string, Zone>): Zone {
  const arg = limit.args.find((a) => a.startsWith("zone="));
  const zone = arg === undefined ? undefined : zones.get(arg.slice(5));
  if (zone === undefined) {
    throw new NginxImportError(
      `${where(limit)}: limit_req: ${arg === undefined ? "no zone=NAME" : `no limit_req_zone defines zone "${arg.slice(5)}"`}`,
    );
  }
  return zone;
}
