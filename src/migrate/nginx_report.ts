/**
 * What `sluice import nginx` reports beside its rules: includes it could not read, directives Sluice has no rule for,
 * and zones no limit uses.
 */
import { type Directive, text, type UnreadInclude, where } from "./nginx_conf.ts";
import type { Zone, ZoneLike } from "./nginx_zones.ts";
import type { DraftRule, ReportItem } from "./report.ts";

const UNSUPPORTED: Readonly<Record<string, string>> = {
  limit_rate: "Sluice limits request rates, not bandwidth",
  limit_rate_after: "Sluice limits request rates, not bandwidth",
};

/** NGINX's stock files, which hold no limits: an include of one that is not here is only noted. */
const STOCK_INCLUDE = /(?:^|\/)(?:mime\.types|[a-z]+_params|fastcgi\.conf|koi-utf|koi-win|win-utf)$/;

export function reportUnread(unread: readonly UnreadInclude[], report: ReportItem[]): void {
  for (const u of unread) {
    const stock = STOCK_INCLUDE.test(u.at.args[0] ?? "");
    report.push({
      where: where(u.at),
      kind: stock ? "note" : "left out",
      message: stock
        ? `${text(u.at)}: ${u.why} (NGINX's stock file: no limits in it)`
        : `${text(u.at)}: ${u.why}, so any limits its files hold are not imported (import with them in place, or import each file)`,
    });
  }
}

/** Zones no `limit_req` names: NGINX limits nothing with them (their limits may be in files not read). */
export function reportUnused(
  config: readonly Directive[],
  zones: ReadonlyMap<string, Zone>,
  report: ReportItem[],
): void {
  const named = new Set<string>();
  const walk = (block: readonly Directive[]) => {
    for (const d of block) {
      if (d.name === "limit_req") for (const a of d.args) if (a.startsWith("zone=")) named.add(a.slice(5));
      if (d.block !== null) walk(d.block);
    }
  };
  walk(config);
  for (const zone of zones.values()) {
    if (named.has(zone.name)) continue;
    report.push({
      where: where(zone.at),
      kind: "note",
      message: `zone ${zone.name}: no limit_req uses it in the files read, so it limits nothing here`,
    });
  }
}

export function reportUnsupported(directives: readonly Directive[], report: ReportItem[]): void {
  for (const d of directives) {
    const why = UNSUPPORTED[d.name];
    if (why !== undefined) report.push({ where: where(d), kind: "left out", message: `${text(d)}: ${why}` });
    if ((d.name === "allow" || d.name === "deny") && !report.some((r) => r.message.endsWith(ACCESS_NOTE)))
      report.push({
        where: where(d),
        kind: "note",
        message: `${text(d)}, and every other allow or deny: ${ACCESS_NOTE}`,
      });
    if (d.block !== null) reportUnsupported(d.block, report);
  }
}

/**
 * NGINX's access rules (`allow`, `deny`) are not limits: behind Sluice they stay NGINX's, and count in its limits as
 * NGINX counts them (limit_req runs before them). A blocklist at the edge is a deny rule, written by hand.
 */
const ACCESS_NOTE =
  'access rules, not limits, so not imported (NGINX keeps them); a blocklist at the edge is a deny rule (docs/rules.md, "Refusing outright")';

/** A rule of status 444, which NGINX answers by closing the connection: what differs, said. */
export function closingNoted(rules: readonly DraftRule[], report: ReportItem[]): DraftRule[] {
  const message =
    "status 444: NGINX closes the connection without a response; Sluice answers with an HTTP 444 (and Retry-After)";
  return rules.map((rule) => {
    if (!rule.fields.some(([k, v]) => k === "status" && v === 444)) return rule;
    const where = rule.source.slice(0, rule.source.indexOf(": "));
    report.push({ where, kind: "approximate", message: `${rule.id}: ${message}` });
    return { ...rule, notes: [...rule.notes, `approximate: ${message}`] };
  });
}

/** A zone read by several rules (other settings, dry run, or servers): NGINX keeps one state per key for the zone. */
export function sharedZones(
  made: readonly { rule: DraftRule; group: { readonly zone: ZoneLike } }[],
  report: ReportItem[],
): void {
  // Rules of one group share its settings (a map's keys, one rule each): only groups tell settings apart.
  const byZone = new Map<ZoneLike, { groups: Set<object>; rules: DraftRule[] }>();
  for (const { rule, group } of made) {
    const seen = byZone.get(group.zone) ?? { groups: new Set<object>(), rules: [] };
    seen.groups.add(group);
    seen.rules.push(rule);
    byZone.set(group.zone, seen);
  }
  for (const [zone, { groups, rules }] of byZone) {
    if (groups.size < 2) continue;
    report.push({
      where: where(zone.at),
      kind: "approximate",
      message: `zone ${zone.name} is read by ${rules.length} rules (${rules.map((r) => r.id).join(", ")}) with different settings: NGINX keeps one state per key for the zone, Sluice one per rule`,
    });
  }
}
