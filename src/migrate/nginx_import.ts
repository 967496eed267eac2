/**
 * `sluice import nginx`: NGINX's request limits as Sluice rules. `limit_req_zone` gives the key and the rate,
 * `limit_req` (zone, `burst`, `nodelay`, `delay=`) in `http`, `server` and `location` blocks gives a `leaky_queue`
 * rule, which has `limit_req`'s semantics. NGINX's inheritance is followed: a block with its own `limit_req`
 * replaces the ones it would inherit, several in one block all apply (Sluice composes them), and `limit_req_status`
 * and `limit_req_dry_run` (shadow) inherit alike. NGINX sends a request to one location; Sluice applies every rule
 * whose route matches, so a limit that every location shares becomes one rule without a route, and a limit of some
 * locations one rule per location. docs/rules.md, "Coming from NGINX", describes the mapping and its differences.
 */
import { type Directive, NginxImportError, text, where } from "./nginx_conf.ts";
import { contextOf, covers, type Place, placesOf } from "./nginx_places.ts";
import { readZones, type Zone, zoneOf } from "./nginx_zones.ts";
import { type DraftRule, type ImportResult, type ReportItem, ruleId } from "./report.ts";

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
  // The server itself (requests no location matches) has no prefix; only a prefix location (no `=`, no regex) does.
  const prefix = place.at.name === "location" ? place.at.args.at(-1) : undefined;
  if (prefix !== undefined && place.at.args[0] !== "=" && !place.at.args[0]!.startsWith("~") && !prefix.endsWith("/")) {
    const message = `${place.label}: NGINX's prefix also matches longer names (${place.at.args.at(-1)}x); the route matches whole segments`;
    report.push({ where: where(place.at), kind: "approximate", message });
  }
  return draft(limit, zone, place, place.route, taken, notes);
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
