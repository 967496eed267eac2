/**
 * NGINX variables that say where a client is, as the key parts Cloudflare's own geolocation gives a Worker
 * (`request.cf.country`, `request.cf.asn`): the geoip module's `$geoip_country_code` (`code3`, `name`, and the city
 * database's `$geoip_city_country_code`), and the variables a `geoip2` block binds to a database's country ISO code or
 * autonomous system number. Approximate: NGINX reads its own database, Cloudflare another, so a few addresses are
 * placed differently. Also what to say of variables that name the caller in a way a Worker cannot read.
 */
import type { Directive } from "./nginx_conf.ts";

/** What a `geoip2` variable holds: a part Sluice has, or `null` for one it has not (the path named). */
export interface Geoip2Binding {
  readonly geoip: "country" | "asn" | null;
  readonly at: Directive;
}

/** Internal names a bound `geoip2` variable is read as (`partOf`): what the geoip module would call it. */
export const GEOIP_AS = { country: "geoip_country_code", asn: "geoip2_autonomous_system_number" } as const;

const COUNTRY = new Set([
  "geoip_country_code",
  "geoip_country_code3",
  "geoip_country_name",
  "geoip_city_country_code",
  "geoip_city_country_code3",
  "geoip_city_country_name",
]);

/** The key part a geolocation variable is, with what the report says; `null` for any other variable. */
export function geoipPart(v: string): { part: string; why: string; inexact: true } | null {
  const where = "NGINX reads its own GeoIP database and Cloudflare geolocates with another, so a few addresses differ";
  if (COUNTRY.has(v))
    return { part: "country", why: `the client's country as Cloudflare says it; ${where}`, inexact: true };
  if (v === GEOIP_AS.asn) {
    return { part: "asn", why: `the client's autonomous system as Cloudflare says it; ${where}`, inexact: true };
  }
  return null;
}

/** The variables a `geoip2 FILE { $var [default=V] [source=$addr] path...; }` block binds, by name (without `$`). */
export function readGeoip2(d: Directive): Map<string, Geoip2Binding> {
  const out = new Map<string, Geoip2Binding>();
  for (const line of d.block ?? []) {
    if (!line.name.startsWith("$")) continue;
    // `source=` reads another address than the client's: not what Cloudflare geolocates.
    if (line.args.some((a) => a.startsWith("source="))) {
      out.set(line.name.slice(1), { geoip: null, at: line });
      continue;
    }
    const path = line.args.filter((a) => !a.includes("=")).join(" ");
    const geoip = /^(registered_)?country iso_code$/.test(path)
      ? "country"
      : path === "autonomous_system_number"
        ? "asn"
        : null;
    out.set(line.name.slice(1), { geoip, at: line });
  }
  return out;
}

/** What to do instead, for a variable that names the caller in a way a Worker does not read; `""` for others. */
export function callerHint(v: string): string {
  if (v.startsWith("jwt_")) {
    return `: $${v} is a claim of a JWT NGINX Plus validated (auth_jwt); have the auth layer in front validate it and send the subject as a header, then count by user (USER_HEADER) or { header: NAME }`;
  }
  if (v === "remote_user") {
    return ": $remote_user is the Basic authentication user name; have the auth layer in front check it and send it as a header, then count by user (USER_HEADER), or count by api_key";
  }
  return "";
}
