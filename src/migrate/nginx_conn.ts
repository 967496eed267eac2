/**
 * NGINX's `limit_conn` module for `sluice import nginx`: `limit_conn_zone KEY zone=NAME:SIZE` gives the key, and
 * `limit_conn NAME N` a `concurrency` rule of `limit: N`. NGINX counts a connection while it has a request being
 * processed (with HTTP/2, each request in flight), which is what a concurrency slot counts: a request from its
 * admission to the end of its response. Sluice adds a lease (`slot_ttl`, 60 s unless set) that NGINX has not.
 */
import { MAX_CONCURRENCY } from "../algorithms/concurrency.ts";
import { type Directive, NginxImportError, text, where } from "./nginx_conf.ts";
import { readMaps } from "./nginx_map.ts";
import { keyOfZone, syncNote, type ZoneLike } from "./nginx_zones.ts";
import type { ReportItem } from "./report.ts";

export function readConnZones(http: readonly Directive[], report: ReportItem[]): Map<string, ZoneLike> {
  const zones = new Map<string, ZoneLike>();
  const maps = readMaps(http);
  for (const d of http.filter((x) => x.name === "limit_conn_zone")) {
    const synced = d.args.at(-1) === "sync";
    const [key, zoneArg, ...rest] = synced ? d.args.slice(0, -1) : d.args;
    if (synced) report.push(syncNote(d));
    // nginx_check.ts has refused what NGINX refuses: zone=NAME:SIZE with a valid size.
    const name = zoneArg === undefined ? undefined : /^zone=([^:]+):/.exec(zoneArg)?.[1];
    if (key === undefined || name === undefined || rest.length > 0)
      throw new NginxImportError(`${where(d)}: limit_conn_zone needs a key and zone=NAME:SIZE`);
    if (zones.has(name)) throw new NginxImportError(`${where(d)}: limit_conn_zone: zone "${name}" is defined twice`);
    const counted = keyOfZone(key, maps);
    // A concurrency rule counts by an identity; a key of other parts is not imported for limit_conn.
    const zone = {
      name,
      identity: counted.variants === undefined ? counted.identity : null,
      key: null,
      why:
        counted.variants !== undefined
          ? `a limit_conn key that a map gives several values of (${key}) is not imported`
          : counted.identity === null && counted.key !== null
            ? `a limit_conn key other than an address or API key (${key}) is not imported`
            : counted.why,
      at: d,
      ...(counted.except === undefined ? {} : { except: counted.except }),
      ...(counted.only === undefined ? {} : { only: counted.only }),
      ...(counted.servers === undefined ? {} : { servers: counted.servers }),
      ...(counted.conditions === undefined ? {} : { conditions: counted.conditions }),
    };
    zones.set(name, zone);
    if (zone.identity === null) report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${zone.why}` });
    else if (zone.why !== "") {
      const kind = zone.identity === "api_key" || counted.inexact === true ? "approximate" : "note";
      report.push({ where: where(d), kind, message: `${text(d)}: ${zone.why}` });
    }
    report.push({
      where: where(d),
      kind: "note",
      message: `${text(d)}: a slot is a lease of slot_ttl (60s unless set), renewed while its request runs, so a crashed isolate never holds one for long`,
    });
  }
  return zones;
}

/** The zone `limit_conn NAME N` names. */
export function connZoneOf(limit: Directive, zones: Map<string, ZoneLike>): ZoneLike {
  const name = limit.args[0];
  const zone = name === undefined ? undefined : zones.get(name);
  if (zone === undefined) {
    throw new NginxImportError(
      `${where(limit)}: limit_conn: ${name === undefined ? "no zone" : `no limit_conn_zone defines zone "${name}"`}`,
    );
  }
  return zone;
}

/** The number of connections `limit_conn NAME N` allows. */
export function connLimitOf(limit: Directive): number {
  const n = limit.args[1];
  if (limit.args.length !== 2 || n === undefined || !/^[0-9]+$/.test(n) || Number(n) < 1)
    throw new NginxImportError(`${where(limit)}: limit_conn needs a zone and a number from 1 to 65535`);
  if (Number(n) > MAX_CONCURRENCY)
    throw new NginxImportError(
      `${where(limit)}: limit_conn ${limit.args.join(" ")}: NGINX takes it, but a Sluice concurrency rule's limit is at most ${MAX_CONCURRENCY}`,
    );
  return Number(n);
}
