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
import { beats, contextOf, covers, type Place, placesOf } from "./nginx_places.ts";
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
  const made: { rule: DraftRule; group: Group }[] = [];
  const taken = new Set<string>();
  const seen = new Set<string>();
  for (const server of servers) {
    for (const one of serverRules(placesOf(server, base), zones, report, taken)) {
      const identity = JSON.stringify([one.group.zone.name, one.rule.match, one.rule.fields]);
      if (!seen.has(identity)) made.push(one);
      seen.add(identity);
    }
  }
  sharedZones(made, report);
  const rules = made.map((m) => m.rule);
  if (rules.some((r) => r.match.route !== undefined)) {
    report.push({
      where: where(http),
      kind: "note",
      message:
        "NGINX matches locations case-sensitively (but ~*); Sluice folds a path's case before matching unless " +
        "PATH_CASE_SENSITIVE=true in wrangler.toml's [vars]: set it to match as NGINX does",
    });
  }
  return { rules, report };
}

function reportUnsupported(directives: readonly Directive[], report: ReportItem[]): void {
  for (const d of directives) {
    const why = UNSUPPORTED[d.name];
    if (why !== undefined) report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${why}` });
    if (d.block !== null) reportUnsupported(d.block, report);
  }
}

/** The requests of one server that one `limit_req` (with its settings) limits: they share one state per key. */
interface Group {
  readonly limit: Directive;
  readonly zone: Zone;
  readonly burst: number;
  readonly delay: number | "nodelay";
  readonly status: number;
  readonly dryRun: boolean;
  readonly places: Place[];
}

/**
 * One server's rules: one per zone and settings, over the places that have it. NGINX sends a request to one place;
 * a rule says which by its routes and `except`: the routes of its places, minus the places that would take the
 * request from them. Where routes cannot say it exactly, the report lists the difference.
 */
function serverRules(
  places: readonly Place[],
  zones: Map<string, Zone>,
  report: ReportItem[],
  taken: Set<string>,
): { rule: DraftRule; group: Group }[] {
  const groups = new Map<string, Group>();
  for (const place of places) {
    for (const limit of place.context.limits) {
      const zone = zoneOf(limit, zones);
      const { burst, delay } = burstOf(limit);
      const status = place.context.status ?? 503;
      const dryRun = place.context.dryRun;
      const id = JSON.stringify([zone.name, burst, delay, status, dryRun]);
      const group = groups.get(id) ?? { limit, zone, burst, delay, status, dryRun, places: [] };
      group.places.push(place);
      groups.set(id, group);
    }
  }
  const out: { rule: DraftRule; group: Group }[] = [];
  for (const group of groups.values()) {
    if (group.zone.identity === null) {
      report.push({
        where: where(group.limit),
        kind: "left out",
        message: `${text(group.limit)}: its zone's key has no Sluice identity`,
      });
      continue;
    }
    const rule = groupRule(group, places, report, taken);
    if (rule !== null) out.push({ rule, group });
  }
  return out;
}

function groupRule(group: Group, places: readonly Place[], report: ReportItem[], taken: Set<string>): DraftRule | null {
  const notes: string[] = [];
  const say = (at: Directive, kind: ReportItem["kind"], message: string) => {
    report.push({ where: where(at), kind, message });
    if (kind === "approximate") notes.push(`approximate: ${message}`);
  };
  const limitText = text(group.limit);
  const mapped = group.places.filter((p) => p.route !== null);
  for (const place of group.places.filter((p) => p.route === null)) {
    say(
      place.at,
      "left out",
      `${place.label}: cannot be written as a Sluice route, so ${limitText} is not applied there`,
    );
  }
  if (mapped.length === 0) return null;
  const others = places.filter((p) => !group.places.includes(p));
  if (others.length === 0) return draft(group, null, [], mapped, taken, notes);
  const catchAll = mapped.some((p) => p.route === "* /**");
  const own = [...new Set(mapped.map((p) => p.route!))];
  const routes = catchAll ? ["* /**"] : own.filter((r) => !own.some((o) => o !== r && covers(o, r)));
  const excluded = others.filter((q) => q.route !== null && (catchAll || mapped.some((p) => beats(q, p))));
  for (const place of mapped.filter((p) => p.inexact !== null && (!catchAll || p.route === "* /**"))) {
    say(place.at, "approximate", `${limitText} (${place.label}): ${place.inexact}`);
  }
  for (const q of excluded) {
    if (q.inexact !== null) say(q.at, "approximate", `${limitText} is not applied to ${q.label}, and ${q.inexact}`);
    for (const p of mapped.filter((p) => beats(p, q))) {
      say(
        p.at,
        "approximate",
        `${limitText} is not applied where ${q.label} matches, though NGINX sends ${p.label} (inside it) to a place that has it`,
      );
    }
  }
  for (const q of others.filter((q) => q.route === null)) {
    say(
      q.at,
      "approximate",
      `${limitText} (${mapped.map((p) => p.label).join(", ")}) also applies to requests NGINX sends to ${q.label}, which cannot be written as a route to leave them out`,
    );
  }
  return draft(group, routes, [...new Set(excluded.map((q) => q.route!))], mapped, taken, notes);
}

function draft(
  group: Group,
  routes: readonly string[] | null,
  except: readonly string[],
  places: readonly Place[],
  taken: Set<string>,
  notes: string[],
): DraftRule {
  const { zone, limit } = group;
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "leaky_queue"],
    ["rate", `${zone.rate.amount}/${zone.rate.unit}`],
    ["burst", group.burst],
    group.delay === "nodelay" ? ["nodelay", true] : ["delay", group.delay],
    ["status", group.status],
  ];
  if (group.dryRun) fields.push(["mode", "shadow"]);
  const first = routes?.[0];
  const suffix = first === undefined || first === "* /**" ? "" : `-${first.slice(2).replace(/\/?\*\*$/, "")}`;
  const where_ = routes === null ? "every location" : places.map((p) => p.label).join(", ");
  return {
    id: ruleId(`${zone.name}${suffix}${group.dryRun ? "-dry-run" : ""}`, taken),
    source: `${where(limit)}: ${text(limit)} (${where_}; zone ${zone.name} at ${where(zone.at)}: ${text(zone.at)})`,
    notes,
    match: {
      ...(routes === null ? {} : { route: routes.length === 1 ? routes[0]! : routes }),
      ...(except.length === 0 ? {} : { except }),
      identity: zone.identity!,
    },
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

/** A zone read by several rules (other settings, dry run, or servers): NGINX keeps one state per key for the zone. */
function sharedZones(made: readonly { rule: DraftRule; group: Group }[], report: ReportItem[]): void {
  const byZone = new Map<Zone, DraftRule[]>();
  for (const { rule, group } of made) byZone.set(group.zone, [...(byZone.get(group.zone) ?? []), rule]);
  for (const [zone, rules] of byZone) {
    if (rules.length < 2) continue;
    report.push({
      where: where(zone.at),
      kind: "approximate",
      message: `zone ${zone.name} is read by ${rules.length} rules (${rules.map((r) => r.id).join(", ")}) with different settings: NGINX keeps one state per key for the zone, Sluice one per rule`,
    });
  }
}

/**
 * The statuses NGINX's `limit_req` refuses with in this configuration: every `limit_req_status`, and 503 (the
 * default) unless the `http` block sets one for all.
 */
export function nginxLimitStatuses(config: readonly Directive[]): Set<number> {
  const statuses = new Set<number>();
  const walk = (block: readonly Directive[]) => {
    for (const d of block) {
      if (d.name === "limit_req_status" && d.args.length === 1) statuses.add(Number(d.args[0]));
      if (d.block !== null) walk(d.block);
    }
  };
  walk(config);
  const http = config.find((d) => d.name === "http")?.block ?? [];
  if (!http.some((d) => d.name === "limit_req_status")) statuses.add(503);
  return statuses;
}
