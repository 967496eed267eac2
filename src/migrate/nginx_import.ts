/**
 * `sluice import nginx`: NGINX's request limits as Sluice rules. `limit_req_zone` gives the key and the rate,
 * `limit_req` (zone, `burst`, `nodelay`, `delay=`) in `http`, `server` and `location` blocks gives a `leaky_queue`
 * rule, which has `limit_req`'s semantics; `limit_conn_zone` and `limit_conn` give a `concurrency` rule (nginx_conn.ts),
 * with the same inheritance (`limit_conn_status`, `limit_conn_dry_run`). NGINX's inheritance is followed: a block with its own `limit_req`
 * replaces the ones it would inherit, several in one block all apply (Sluice composes them), and `limit_req_status`
 * and `limit_req_dry_run` (shadow) inherit alike. NGINX sends a request to one location; Sluice applies every rule
 * whose route matches, so a limit that every location shares becomes one rule without a route, and a limit of some
 * locations one rule per location. docs/rules.md, "Coming from NGINX", describes the mapping and its differences.
 */

import { MAX_AMOUNT } from "../rules/duration.ts";
import { checkNginx } from "./nginx_check.ts";
import { type Directive, httpBlockOf, NginxImportError, text, type UnreadInclude, where } from "./nginx_conf.ts";
import { connLimitOf, connZoneOf, readConnZones } from "./nginx_conn.ts";
import { serverGetsKey } from "./nginx_map_sources.ts";
import { withoutUncountedNamed } from "./nginx_named.ts";
import {
  beats,
  contextOf,
  LIMIT_CONN,
  LIMIT_REQ,
  type LimitNames,
  mayBeat,
  type Place,
  placesOf,
  serversOf,
} from "./nginx_places.ts";
import { closingNoted, reportUnread, reportUnsupported, reportUnused, sharedZones } from "./nginx_report.ts";
import { covers, intersectRoutes } from "./nginx_routes.ts";
import { addressFields, readZones, SERVER_NAME_PART, type Zone, type ZoneLike, zoneOf } from "./nginx_zones.ts";
import { conditionFields, type DraftRule, type ImportResult, type ReportItem, ruleId } from "./report.ts";

export function importNginx(config: readonly Directive[], unread: readonly UnreadInclude[] = []): ImportResult {
  const report: ReportItem[] = [];
  reportUnread(unread, report);
  reportUnsupported(config, report);
  const http = httpBlockOf(config);
  if (http === null)
    throw new NginxImportError("no http { ... } block, and no server or limit_req_zone: nothing to import");
  const first = http.block[0];
  const at = http.at === null ? (first === undefined ? "" : `${first.file}:1`) : where(http.at);
  if (http.at === null) {
    report.push({
      where: at,
      kind: "note",
      message:
        "no http { ... } block: read as a file that NGINX includes inside http (conf.d/, sites-enabled/); a zone it uses that another file defines is read from under --root",
    });
  }
  checkNginx(http.block);
  const taken = new Set<string>();
  const zones = readZones(http.block, report);
  reportUnused(config, zones, report);
  const rules = closingNoted(
    [
      ...kindRules(http.block, requestRates(zones), report, taken),
      ...kindRules(http.block, connections(readConnZones(http.block, report)), report, taken),
    ],
    report,
  );
  if (rules.some((r) => r.match.route !== undefined)) {
    report.push({
      where: at,
      kind: "note",
      message:
        "NGINX matches locations case-sensitively (but ~*); Sluice folds a path's case before matching unless " +
        "PATH_CASE_SENSITIVE=true in wrangler.toml's [vars]: set it to match as NGINX does",
    });
  }
  return { rules, report };
}

/** The rules of one limiting module (`limit_req` or `limit_conn`) over every server. */
function kindRules(http: readonly Directive[], kind: LimitKind, report: ReportItem[], taken: Set<string>): DraftRule[] {
  const base = contextOf(http, { limits: [], status: null, dryRun: false }, kind.names);
  const servers = serversOf(http, base, kind.names, report);
  if (servers.filter((s) => placesOf(s, base, kind.names).some((p) => p.context.limits.length > 0)).length > 1) {
    report.push({
      where: where(servers[1]!),
      kind: "approximate",
      message: "several server blocks have limits: Sluice rules do not match by host, so each applies to every host",
    });
  }
  const made: { rule: DraftRule; group: Group }[] = [];
  const seen = new Set<string>();
  for (const server of servers) {
    const serverName = server.block!.find((d) => d.name === "server_name")?.args[0] ?? "";
    const places = withoutUncountedNamed(placesOf(server, base, kind.names), { http, server, kind }, report);
    for (const place of places.filter((p) => p.answeredBy !== null)) {
      report.push({
        where: where(place.answeredBy!),
        kind: "note",
        message: `${place.label}: \`${text(place.answeredBy!)}\` answers its requests before NGINX's ${kind.names.limit} counts them (the rewrite phase comes first), so they are not limited (left out of the rules' routes)`,
      });
    }
    for (const one of serverRules(places, kind, report, taken, serverName)) {
      const identity = JSON.stringify([one.group.zone.name, one.rule.match, one.rule.key, one.rule.fields]);
      if (!seen.has(identity)) made.push(one);
      seen.add(identity);
    }
  }
  sharedZones(made, report);
  return made.map((m) => m.rule);
}

/**
 * What differs between NGINX's two limiting modules: their directives, how a limit names its zone, and the
 * algorithm fields a limit becomes (`settings`: what tells two limits of one zone apart).
 */
interface LimitKind {
  readonly names: LimitNames;
  zoneOf(limit: Directive): ZoneLike;
  fieldsOf(limit: Directive, zone: ZoneLike): { readonly settings: string; readonly fields: DraftField[] };
}

type DraftField = readonly [string, string | number | boolean];

/** `limit_req`: a `leaky_queue` at the zone's rate, with the limit's `burst` and `delay` or `nodelay`. */
function requestRates(zones: Map<string, Zone>): LimitKind {
  return {
    names: LIMIT_REQ,
    zoneOf: (limit) => zoneOf(limit, zones),
    fieldsOf(limit, zone) {
      const { burst, delay } = burstOf(limit);
      const rate = (zone as Zone).rate;
      return {
        settings: JSON.stringify([burst, delay]),
        fields: [
          ["algorithm", "leaky_queue"],
          ["rate", `${rate.amount}/${rate.unit}`],
          ["burst", burst],
          delay === "nodelay" ? ["nodelay", true] : ["delay", delay],
        ],
      };
    },
  };
}

/** `limit_conn`: `concurrency` with the limit's number of connections as its `limit` (nginx_conn.ts). */
function connections(zones: Map<string, ZoneLike>): LimitKind {
  return {
    names: LIMIT_CONN,
    zoneOf: (limit) => connZoneOf(limit, zones),
    fieldsOf(limit) {
      const n = connLimitOf(limit);
      return {
        settings: String(n),
        fields: [
          ["algorithm", "concurrency"],
          ["limit", n],
        ],
      };
    },
  };
}

/** The requests of one server that one `limit_req` (with its settings) limits: they share one state per key. */
interface Group {
  readonly limit: Directive;
  readonly zone: ZoneLike;
  readonly fields: readonly DraftField[];
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
  kind: LimitKind,
  report: ReportItem[],
  taken: Set<string>,
  serverName: string,
): { rule: DraftRule; group: Group }[] {
  const groups = new Map<string, Group>();
  for (const place of places) {
    for (const limit of place.context.limits) {
      const zone = kind.zoneOf(limit);
      const { settings, fields } = kind.fieldsOf(limit, zone);
      const status = place.context.status ?? 503;
      const dryRun = place.context.dryRun;
      const id = JSON.stringify([zone.name, settings, status, dryRun]);
      const group = groups.get(id) ?? { limit, zone, fields, status, dryRun, places: [] };
      group.places.push(place);
      groups.set(id, group);
    }
  }
  const out: { rule: DraftRule; group: Group }[] = [];
  for (const group of groups.values()) {
    if (group.zone.servers !== undefined && !serverGetsKey(group.zone.servers, serverName)) {
      report.push({
        where: where(group.limit),
        kind: "note",
        message: `${text(group.limit)}: server ${serverName === "" ? '""' : serverName}: its zone's map gives this server an empty key, so NGINX does not limit its requests (no rule)`,
      });
      continue;
    }
    if (group.zone.identity === null && group.zone.key === null) {
      report.push({
        where: where(group.limit),
        kind: "left out",
        message: `${text(group.limit)}: its zone's key has no Sluice identity`,
      });
      continue;
    }
    for (const rule of groupRule(group, places, report, taken, serverName)) out.push({ rule, group });
  }
  return out;
}

function groupRule(
  group: Group,
  places: readonly Place[],
  report: ReportItem[],
  taken: Set<string>,
  serverName: string,
): DraftRule[] {
  const notes: string[] = [];
  const say = (at: Directive, kind: ReportItem["kind"], message: string) => {
    // A regex location's alternatives are one place each, and say the same once.
    if (report.some((r) => r.where === where(at) && r.kind === kind && r.message === message)) return;
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
  if (mapped.length === 0) return [];
  const others = places.filter((p) => !group.places.includes(p));
  if (others.length === 0) {
    return byKey(group, null, [], say, mapped, taken, notes, serverName);
  }
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
  for (const q of others.filter((q) => q.route === null && mapped.some((p) => mayBeat(q, p)))) {
    say(
      q.at,
      "approximate",
      `${limitText} (${labels(mapped)}) also applies to requests NGINX sends to ${q.label}, which cannot be written as a route to leave them out`,
    );
  }
  const except = [...new Set(excluded.map((q) => q.route!))];
  return byKey(group, routes, except, say, mapped, taken, notes, serverName);
}

/**
 * A group's rule on the routes its zone's key is given on; one per key for a zone whose map gives several
 * (`ZoneLike.variants`: by a header's value, or by path or method, each key on its own routes).
 */
function byKey(
  group: Group,
  routes: readonly string[] | null,
  except: readonly string[],
  say: (at: Directive, kind: ReportItem["kind"], message: string) => void,
  ...rest: Parameters<typeof draft> extends [Group, unknown, unknown, ...infer R] ? R : never
): DraftRule[] {
  const groups = (group.zone.variants ?? [null]).map((v) =>
    v === null ? group : { ...group, zone: { ...group.zone, ...v, variants: undefined } },
  );
  return groups.flatMap((g) => {
    const kept = keptRoutes(g, routes, say);
    return kept === undefined ? [] : [draft(g, kept, except, ...rest)];
  });
}

/**
 * The rule's routes narrowed to those its zone's key is given on (`ZoneLike.only`); `undefined` when none is left,
 * so NGINX limits nothing there.
 */
function keptRoutes(
  group: Group,
  routes: readonly string[] | null,
  say: (at: Directive, kind: ReportItem["kind"], message: string) => void,
): readonly string[] | null | undefined {
  const only = group.zone.only;
  if (only === undefined) return routes;
  const kept = intersectRoutes(routes, only);
  for (const pair of kept.unsure) {
    say(
      group.limit,
      "approximate",
      `${text(group.limit)}: its key is given only on ${only.join(", ")}, and ${pair} overlap in part, which routes cannot say exactly`,
    );
  }
  if (kept.routes.length > 0) return kept.routes;
  say(
    group.limit,
    "note",
    `${text(group.limit)}: its key is given only on ${only.join(", ")}, where it does not apply: it limits nothing`,
  );
  return undefined;
}

function draft(
  group: Group,
  routes: readonly string[] | null,
  exceptRoutes: readonly string[],
  places: readonly Place[],
  taken: Set<string>,
  notes: string[],
  serverName: string,
): DraftRule {
  const { zone, limit } = group;
  // A `map $uri` key that is empty for some paths: NGINX does not limit them, so the rule leaves them out.
  const except = [...new Set([...exceptRoutes, ...(zone.except ?? [])])];
  const fields: DraftField[] = [...group.fields, ["status", group.status]];
  const key = keyOf(zone, serverName);
  if (key !== null && key !== "global") {
    fields.push(["key_missing", zone.keyMissing ?? "skip"]);
    // NGINX counted every value the client sent; the warning for a rotatable key would only repeat that.
    if (key.every((p) => /^\{ (header|cookie|query):/.test(p) || p === "path"))
      fields.push(["key_client_chosen", "accept"]);
  }
  if (group.dryRun) fields.push(["mode", "shadow"]);
  const first = routes?.[0];
  const method =
    first === undefined || first.startsWith("* ") ? "" : `-${first.slice(0, first.indexOf(" ")).toLowerCase()}`;
  const path =
    first
      ?.slice(first.indexOf(" ") + 1)
      .replace(/\/?\*\*$/, "")
      .replace(/\*\*\.?/, "") ?? "";
  const suffix = `${method}${path === "" ? "" : `-${path}`}`;
  const where_ = routes === null ? "every location" : labels(places);
  return {
    id: ruleId(`${zone.name}${suffix}${group.dryRun ? "-dry-run" : ""}`, taken),
    source: `${where(limit)}: ${text(limit)} (${where_}; zone ${zone.name} at ${where(zone.at)}: ${text(zone.at)})`,
    notes,
    match: {
      ...(routes === null ? {} : { route: routes.length === 1 ? routes[0]! : routes }),
      ...(except.length === 0 ? {} : { except }),
      ...conditionFields(zone.conditions ?? []),
      ...addressFields(zone.addresses),
      ...(zone.identity === null ? {} : { identity: zone.identity }),
    },
    ...(key === null ? {} : { key }),
    fields,
  };
}

function burstOf(limit: Directive): { burst: number; delay: number | "nodelay" } {
  // nginx_check.ts has refused what NGINX refuses: each parameter is zone=, burst=N, delay=N (N > 0) or nodelay.
  let burst = 0;
  let delay: number | "nodelay" = 0;
  for (const arg of limit.args) {
    const m = /^(burst|delay)=(\d+)$/.exec(arg);
    if (m !== null) {
      if (BigInt(m[2]!) > BigInt(MAX_AMOUNT))
        throw new NginxImportError(
          `${where(limit)}: limit_req: ${arg} is more than Sluice takes (at most ${MAX_AMOUNT})`,
        );
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

/** The zone's `key:` in one server: `$server_name` is that server's name, a constant. */
function keyOf(zone: ZoneLike, serverName: string): "global" | readonly string[] | null {
  if (zone.key === null || zone.key === "global") return zone.key;
  return zone.key.map((p) => (p === SERVER_NAME_PART ? `{ const: ${JSON.stringify(serverName)} }` : p));
}

/** The places' labels, each once (a regex location's alternatives share theirs). */
function labels(places: readonly Place[]): string {
  return [...new Set(places.map((p) => p.label))].join(", ");
}
