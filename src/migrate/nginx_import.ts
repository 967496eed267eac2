// long-file: NGINX's inheritance, locations and zones, read top to bottom
/**
 * `sluice import nginx`: NGINX's request limits as Sluice rules. `limit_req_zone` gives the key and the rate,
 * `limit_req` (zone, `burst`, `nodelay`, `delay=`) in `http`, `server` and `location` blocks gives a `leaky_queue`
 * rule, which has `limit_req`'s semantics. NGINX's inheritance is followed: a block with its own `limit_req`
 * replaces the ones it would inherit, several in one block all apply (Sluice composes them), and `limit_req_status`
 * and `limit_req_dry_run` (shadow) inherit alike. NGINX sends a request to one location; Sluice applies every rule
 * whose route matches, so a limit that every location shares becomes one rule without a route, and a limit of some
 * locations one rule per location. docs/rules.md, "Coming from NGINX", describes the mapping and its differences.
 */
import { compileRoute } from "../rules/route.ts";
import type { Directive } from "./nginx_conf.ts";
import { nginxRateNotes } from "./nginx_rate.ts";
import { type DraftRule, type ImportResult, type ReportItem, ruleId } from "./report.ts";

/** A `limit_req_zone`: its key's identity (or why there is none) and its rate. */
interface Zone {
  readonly name: string;
  readonly identity: string | null;
  readonly why: string;
  readonly rate: { readonly amount: number; readonly unit: "s" | "min" };
  readonly at: Directive;
}

/** The `limit_req` settings in force in a block. */
interface Context {
  readonly limits: readonly Directive[];
  readonly status: number | null;
  readonly dryRun: boolean;
}

/** A place requests go: a location (with its route), or a server's requests that match no location. */
interface Place {
  readonly route: string | null;
  readonly label: string;
  readonly context: Context;
  readonly at: Directive;
}

export class NginxImportError extends Error {}

const where = (d: Directive) => `${d.file}:${d.line}`;
const text = (d: Directive) => [d.name, ...d.args].join(" ");
const UNSUPPORTED: Readonly<Record<string, string>> = {
  limit_conn: "Sluice limits request rates, not concurrent connections",
  limit_conn_zone: "Sluice limits request rates, not concurrent connections",
  limit_rate: "Sluice limits request rates, not bandwidth",
  limit_rate_after: "Sluice limits request rates, not bandwidth",
};

export function importNginx(config: readonly Directive[]): ImportResult {
  const report: ReportItem[] = [];
  reportUnsupported(config, report);
  const http = config.find((d) => d.name === "http" && d.block !== null);
  if (http === undefined) throw new NginxImportError("no http { ... } block: nothing to import");
  const zones = readZones(http.block!, report);
  const base = contextOf(http.block!, { limits: [], status: null, dryRun: false });
  const servers = http.block!.filter((d) => d.name === "server" && d.block !== null);
  if (servers.filter((s) => placesOf(s, base).some((p) => p.context.limits.length > 0)).length > 1) {
    report.push({
      where: where(servers[1]!),
      kind: "approximate",
      message: "several server blocks have limits: Sluice rules do not match by host, so each applies to every host",
    });
  }
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  const seen = new Set<string>();
  for (const server of servers) {
    for (const rule of serverRules(placesOf(server, base), zones, report, taken)) {
      const identity = JSON.stringify([rule.match, rule.fields]);
      if (!seen.has(identity)) rules.push(rule);
      seen.add(identity);
    }
  }
  sharedZones(rules, zones, report);
  return { rules, report };
}

function reportUnsupported(directives: readonly Directive[], report: ReportItem[]): void {
  for (const d of directives) {
    const why = UNSUPPORTED[d.name];
    if (why !== undefined) report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${why}` });
    if (d.block !== null) reportUnsupported(d.block, report);
  }
}

function readZones(http: readonly Directive[], report: ReportItem[]): Map<string, Zone> {
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

function contextOf(block: readonly Directive[], parent: Context): Context {
  const limits = block.filter((d) => d.name === "limit_req");
  const status = block.filter((d) => d.name === "limit_req_status").at(-1);
  const dryRun = block.filter((d) => d.name === "limit_req_dry_run").at(-1);
  let code = parent.status;
  if (status !== undefined) {
    code = Number(status.args[0]);
    if (status.args.length !== 1 || !Number.isInteger(code) || code < 400 || code > 599) {
      throw new NginxImportError(`${where(status)}: limit_req_status must be a status from 400 to 599`);
    }
  }
  if (dryRun !== undefined && !(dryRun.args.length === 1 && ["on", "off"].includes(dryRun.args[0]!))) {
    throw new NginxImportError(`${where(dryRun)}: limit_req_dry_run must be on or off`);
  }
  return {
    limits: limits.length > 0 ? limits : parent.limits,
    status: code,
    dryRun: dryRun === undefined ? parent.dryRun : dryRun.args[0] === "on",
  };
}

/** Every place of a server: its locations (nested ones too) and, when no `location /` catches all, the server itself. */
function placesOf(server: Directive, base: Context): Place[] {
  const context = contextOf(server.block!, base);
  const places: Place[] = [];
  const walk = (block: readonly Directive[], parent: Context) => {
    for (const loc of block.filter((d) => d.name === "location" && d.block !== null)) {
      const ctx = contextOf(loc.block!, parent);
      const route = routeOfLocation(loc);
      if (route !== "named")
        places.push({
          route: route === null ? null : route,
          label: `location ${loc.args.join(" ")}`,
          context: ctx,
          at: loc,
        });
      walk(loc.block!, ctx);
    }
  };
  walk(server.block!, context);
  if (!places.some((p) => p.label === "location /")) {
    places.push({ route: "* /**", label: `server (requests no location matches)`, context, at: server });
  }
  return places;
}

/** The route of a location (`* /api/**`), `"named"` for `@name`, `null` when it cannot be mapped. */
export function routeOfLocation(loc: Directive): string | null | "named" {
  const [a, b] = loc.args;
  if (a === undefined) return null;
  if (a.startsWith("@")) return "named";
  if (a === "=") return b === undefined ? null : checked(`* ${b}`);
  if (a === "^~") return b === undefined ? null : prefixRoute(b);
  if (a === "~" || a === "~*") return b === undefined ? null : regexRoute(b);
  return prefixRoute(a);
}

function prefixRoute(prefix: string): string | null {
  const trimmed = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix;
  return checked(`* ${trimmed}/**`);
}

/** A regex made of literal segments, one-segment classes (`[^/]+`, `\d+`, `[0-9a-z]+`) and a final `.*`, as a route. */
function regexRoute(re: string): string | null {
  if (!re.startsWith("^/")) return null;
  let body = re.slice(1);
  let open = true;
  if (body.endsWith("$")) {
    body = body.slice(0, -1);
    open = false;
  }
  if (body.endsWith("/.*") || body.endsWith("(/.*)?")) {
    body = body.replace(/(?:\/\.\*|\(\/\.\*\)\?)$/, "");
    open = true;
  }
  const segments = body.slice(1).split("/");
  const out: string[] = [];
  for (const seg of segments) {
    if (/^(?:\[\^\/\]\+|\\d\+|\[0-9\]\+|\[[a-zA-Z0-9_-]+\]\+|\\w\+)$/.test(seg)) out.push("*");
    else if (/^[A-Za-z0-9_:-]+$/.test(seg.replaceAll("\\.", "."))) out.push(seg.replaceAll("\\.", "."));
    else if (seg === "" && out.length === segments.length - 1) continue;
    else return null;
  }
  return checked(`* /${out.join("/")}${open ? "/**" : ""}`.replace("//**", "/**"));
}

function checked(route: string): string | null {
  return "error" in compileRoute(route) ? null : route;
}

/** One server's rules: one per limit that every place shares, else one per place that has it. */
function serverRules(
  places: readonly Place[],
  zones: Map<string, Zone>,
  report: ReportItem[],
  taken: Set<string>,
): DraftRule[] {
  const byLimit = new Map<Directive, Map<string, Place[]>>();
  for (const place of places) {
    for (const limit of place.context.limits) {
      const settings = `${place.context.status}|${place.context.dryRun}`;
      const bySettings = byLimit.get(limit) ?? new Map<string, Place[]>();
      bySettings.set(settings, [...(bySettings.get(settings) ?? []), place]);
      byLimit.set(limit, bySettings);
    }
  }
  const groups = [...byLimit].flatMap(([limit, bySettings]) =>
    [...bySettings.values()].map((having) => ({ limit, places: having })),
  );
  const rules: DraftRule[] = [];
  for (const { limit, places: having } of groups) {
    const zone = zoneOf(limit, zones);
    if (zone.identity === null) {
      report.push({
        where: where(limit),
        kind: "left out",
        message: `${text(limit)}: its zone's key has no Sluice identity`,
      });
      continue;
    }
    if (having.length === places.length) {
      rules.push(draft(limit, zone, having[0]!, null, taken, []));
      continue;
    }
    for (const place of having) {
      // A nested location that inherits its parent's limit is already covered by the parent's rule.
      if (having.some((p) => p !== place && p.route !== null && place.route !== null && covers(p.route, place.route)))
        continue;
      const rule = placeRule(limit, zone, place, places, having, report, taken);
      if (rule !== null) rules.push(rule);
    }
  }
  return rules;
}

function placeRule(
  limit: Directive,
  zone: Zone,
  place: Place,
  places: readonly Place[],
  having: readonly Place[],
  report: ReportItem[],
  taken: Set<string>,
): DraftRule | null {
  if (place.route === null) {
    report.push({
      where: where(place.at),
      kind: "left out",
      message: `${place.label}: cannot be written as a Sluice route, so ${text(limit)} is not applied there`,
    });
    return null;
  }
  const notes: string[] = [];
  const others = places.filter((p) => !having.includes(p) && p.route !== null && covers(place.route!, p.route));
  if (others.length > 0) {
    const message = `${text(limit)} (${place.label}) also applies to ${others.map((o) => o.label).join(", ")}, which NGINX limits on its own`;
    report.push({ where: where(limit), kind: "approximate", message });
    notes.push(`approximate: ${message}`);
  }
  if (
    place.at.args[0] !== "=" &&
    !place.at.args.at(-1)!.endsWith("/") &&
    place.at.name === "location" &&
    !place.at.args[0]!.startsWith("~")
  ) {
    const message = `${place.label}: NGINX's prefix also matches longer names (${place.at.args.at(-1)}x); the route matches whole segments`;
    report.push({ where: where(place.at), kind: "approximate", message });
  }
  return draft(limit, zone, place, place.route, taken, notes);
}

/** Whether route `outer` matches every request that `inner` does (by its literal prefix). */
function covers(outer: string, inner: string): boolean {
  const o = outer.slice(2);
  const i = inner.slice(2);
  if (!o.endsWith("/**")) return false;
  const prefix = o.slice(0, -3);
  return prefix === "" || i === prefix || i.startsWith(`${prefix}/`);
}

function zoneOf(limit: Directive, zones: Map<string, Zone>): Zone {
  const arg = limit.args.find((a) => a.startsWith("zone="));
  const zone = arg === undefined ? undefined : zones.get(arg.slice(5));
  if (zone === undefined) {
    throw new NginxImportError(
      `${where(limit)}: limit_req: ${arg === undefined ? "no zone=NAME" : `no limit_req_zone defines zone "${arg.slice(5)}"`}`,
    );
  }
  return zone;
}

function draft(
  limit: Directive,
  zone: Zone,
  place: Place,
  route: string | null,
  taken: Set<string>,
  notes: string[],
): DraftRule {
  const { burst, delay } = burstOf(limit);
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "leaky_queue"],
    ["rate", `${zone.rate.amount}/${zone.rate.unit}`],
    ["burst", burst],
    delay === "nodelay" ? ["nodelay", true] : ["delay", delay],
    ["status", place.context.status ?? 503],
  ];
  if (place.context.dryRun) fields.push(["mode", "shadow"]);
  const suffix = route === null ? "" : `-${route.slice(2).replace("/**", "")}`;
  return {
    id: ruleId(`${zone.name}${suffix}`, taken),
    source: `${where(limit)}: ${text(limit)} (${route === null ? "every location" : place.label}; zone ${zone.name} at ${where(zone.at)}: ${text(zone.at)})`,
    notes,
    match: { ...(route === null ? {} : { route }), identity: zone.identity! },
    fields,
  };
}

function burstOf(limit: Directive): { burst: number; delay: number | "nodelay" } {
  let burst = 0;
  let delay: number | "nodelay" = 0;
  for (const arg of limit.args) {
    const m = /^(burst|delay)=(\d+)$/.exec(arg);
    if (m !== null) {
      if (m[1] === "burst") burst = Number(m[2]);
      else delay = Number(m[2]);
    } else if (arg === "nodelay") delay = "nodelay";
    else if (!arg.startsWith("zone="))
      throw new NginxImportError(`${where(limit)}: limit_req: unknown parameter "${arg}"`);
  }
  if (typeof delay === "number" && delay > burst) {
    // NGINX lets `delay` exceed `burst`: then nothing waits, which is `nodelay`.
    delay = "nodelay";
  }
  return { burst, delay };
}

/** A zone read by several rules: NGINX keeps one state per key for all of them, Sluice one per rule. */
function sharedZones(rules: readonly DraftRule[], zones: Map<string, Zone>, report: ReportItem[]): void {
  for (const zone of zones.values()) {
    const using = rules.filter((r) => r.source.includes(`; zone ${zone.name} at ${where(zone.at)}:`));
    if (using.length > 1) {
      report.push({
        where: where(zone.at),
        kind: "approximate",
        message: `zone ${zone.name} is read by ${using.length} rules (${using.map((r) => r.id).join(", ")}): NGINX keeps one state per key for the zone, Sluice one per rule`,
      });
    }
  }
}
