/**
 * The envoyproxy/ratelimit service's configuration as Sluice rules: each descriptor chain with a rate limit becomes a
 * `fixed_window` rule (the service's windows are fixed per unit and aligned to the epoch, as Sluice's are).
 */

import { printCondition } from "../rules/match_conditions.ts";
import type { Sends } from "./envoy_actions.ts";
import { EnvoyImportError, isObject, type Loaded, type Obj } from "./envoy_file.ts";
import { type FilterSettings, filterSettings } from "./envoy_filter.ts";
import { addressValue, type EnvoyMapping, headerOf, matchOf, type Step, wildcardCondition } from "./envoy_mapping.ts";
import { checkService } from "./envoy_service_check.ts";
import { type DraftRule, type ImportResult, type ReportItem, ruleId } from "./report.ts";

/** `sends`: whether Envoy sends a descriptor of a chain's keys (envoy_import.ts), `null` when its routes are not known. */
export function importService(
  root: Obj,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  sends: Sends | null = null,
  filters: readonly Obj[] = [],
): ImportResult {
  checkService(root, file, loaded);
  const report: ReportItem[] = [];
  const settings = filterSettings(filters, String(root.domain), `${file}:${loaded.lineOf(root)}`, report);
  if (settings === "never") return { rules: [], report };
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  const named = new Map<string, string>();
  const replaced: { name: string; by: string; line: number }[] = [];
  const walk = (list: unknown, chain: Step[], where: string) => {
    if (list === undefined || list === null) return;
    if (!Array.isArray(list)) throw new EnvoyImportError(`${where}: descriptors must be a list`);
    const valued = valuesByKey(list);
    const denying = denyingValues(list);
    for (const d of list) {
      const line = isObject(d) ? loaded.lineOf(d) : 0;
      if (!isObject(d) || typeof d.key !== "string" || d.key === "") {
        throw new EnvoyImportError(`${file}:${line}: a descriptor needs a key`);
      }
      const value = descriptorValue(d, `${file}:${line}`, report);
      const notWith = value === null ? (valued.get(d.key) ?? []).filter((v) => v !== "*") : [];
      const denied = notWith.filter((v) => denying.has(`${d.key}\u0000${v}`));
      const shared = d.share_threshold === true ? { shared: true } : {};
      const more = { ...(notWith.length > 0 ? { notWith } : {}), ...(denied.length > 0 ? { denied } : {}), ...shared };
      const steps = [...chain, { key: d.key, value, line, ...more }];
      if (d.rate_limit !== undefined) {
        const rule = serviceRule(d, steps, `${root.domain}`, file, mapping, report, taken, sends, settings);
        if (rule !== null) {
          rules.push(rule.draft);
          if (rule.name !== null) named.set(rule.name, rule.draft.id);
          for (const r of rule.replaces) replaced.push({ name: r, by: rule.draft.id, line });
        }
      }
      walk(d.descriptors, steps, `${file}:${line}`);
    }
  };
  walk(root.descriptors, [], `${file}:${loaded.lineOf(root)}`);
  reportReplaced(replaced, named, file, report);
  if (rules.length > 1) {
    report.push({
      where: file,
      kind: "note",
      message:
        "the service counts a request in every matching limit even when another denies it; Sluice gives back what the admitting rules charged",
    });
  }
  return { rules, report };
}

/** The values one level holds per key: a valueless step's request with one of them goes down that one instead. */
function valuesByKey(list: readonly unknown[]): Map<string, string[]> {
  const valued = new Map<string, string[]>();
  for (const d of list) {
    if (isObject(d) && typeof d.key === "string" && d.value !== undefined && d.value !== null && d.value !== "")
      valued.set(d.key, [...(valued.get(d.key) ?? []), String(d.value)]);
  }
  return valued;
}

/**
 * The values whose own descriptor denies every request (`requests_per_unit: 0`, which a Sluice rule cannot say: left
 * out), as `key\0value`: a rule for their key alone keeps counting them rather than leave them unlimited.
 */
function denyingValues(list: readonly unknown[]): Set<string> {
  const out = new Set<string>();
  for (const d of list) {
    if (!isObject(d) || typeof d.key !== "string" || d.value === undefined || d.value === null) continue;
    const rl = d.rate_limit;
    if (
      isObject(rl) &&
      rl.unlimited !== true &&
      !(typeof rl.requests_per_unit === "number" && rl.requests_per_unit > 0)
    )
      out.add(`${d.key}\u0000${String(d.value)}`);
  }
  return out;
}

/** `replaces`: both rules apply in Sluice where the service applies only the replacing one. */
function reportReplaced(
  replaced: readonly { name: string; by: string; line: number }[],
  named: ReadonlyMap<string, string>,
  file: string,
  report: ReportItem[],
): void {
  for (const r of replaced) {
    const target = named.get(r.name);
    report.push({
      where: `${file}:${r.line}`,
      kind: "approximate",
      message: `${r.by} replaces ${target ?? `"${r.name}"`} where both apply; Sluice applies every rule that matches, so ${target ?? "it"} also applies there`,
    });
  }
}

/**
 * A descriptor's value; `*` alone matches every value, one counter per value (the service's wildcardMatch): that is
 * the key without a value, and the report says so.
 */
function descriptorValue(d: Obj, where: string, report: ReportItem[]): string | null {
  const given = d.value === undefined || d.value === null ? null : String(d.value);
  // With share_threshold, `*` is one counter for every value: not the key without a value (envoy_mapping.ts says why).
  if (given !== "*" || d.share_threshold === true) return given;
  report.push({
    where,
    kind: "note",
    message: `${String(d.key)}=* matches every ${String(d.key)} value, one counter per value: read as ${String(d.key)} without a value`,
  });
  return null;
}

const UNITS: Readonly<Record<string, string>> = {
  second: "s",
  minute: "min",
  hour: "h",
  day: "d",
  week: "7d",
  // The service's month and year are fixed 30-day and 365-day windows from the epoch (its UnitToDivider), not
  // calendar months: Sluice's `month` window would be another limit.
  month: "30d",
  year: "365d",
};

// long: one descriptor's checks in the order the service reads its fields, each with its own message
function serviceRule(
  d: Obj,
  steps: Step[],
  domain: string,
  file: string,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
  sends: Sends | null,
  settings: FilterSettings | null,
): { draft: DraftRule; name: string | null; replaces: string[] } | null {
  const rl = d.rate_limit;
  const line = steps.at(-1)!.line;
  const where = `${file}:${line}`;
  const chainText = steps.map((s) => (s.value === null ? s.key : `${s.key}=${s.value}`)).join(" > ");
  if (!isObject(rl)) throw new EnvoyImportError(`${where}: rate_limit must be a mapping`);
  if (rl.unlimited === true) {
    const last = steps.at(-1)!;
    const exempts = last.value !== null && mapping.get(last.key)?.kind === "identity";
    report.push(
      exempts
        ? {
            where,
            kind: "approximate",
            message: `${chainText}: unlimited for one ${last.key}; Sluice cannot exempt one caller, so the rules counted by ${last.key} still count it`,
          }
        : { where, kind: "note", message: `${chainText}: unlimited, so no rule` },
    );
    return null;
  }
  // envoy_service_check.ts has refused what the service refuses: the unit is known, the count a uint32 (0 if absent).
  const unit = UNITS[String(rl.unit).toLowerCase()];
  const perUnit = typeof rl.requests_per_unit === "number" ? rl.requests_per_unit : 0;
  if (unit === undefined)
    throw new EnvoyImportError(`${where}: rate_limit.unit ${JSON.stringify(rl.unit)} is not known`);
  const sent = sends === null ? { absent: [], hits: 1, notes: [] } : sends(steps);
  if (sent === false) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: no rate_limits entry of the Envoy configuration given sends a descriptor of exactly these keys (${steps.map((s) => s.key).join(", ")}), and the service applies a limit only to a descriptor as deep as its chain, so this limit never applies (give --map to say what it means anyway)`,
    });
    return null;
  }
  const match = matchOf(steps, chainText, where, mapping, report);
  if (match === null) return null;
  const approximate = (message: string) => {
    report.push({ where, kind: "approximate", message: `${chainText}: ${message}` });
    match.notes.push(`approximate: ${message}`);
  };
  const { except, headers, addresses } = siblingsExcepted(steps, mapping, approximate);
  if (sent.absent.length > 0) {
    // skip_if_absent: requests with the header send the longer descriptor, which this chain does not match.
    approximate(
      `Envoy sends a descriptor of exactly these keys only for requests without the ${sent.absent.join(" and the ")} (skip_if_absent drops that entry); Sluice's rule counts the requests with it too`,
    );
  }
  for (const note of sent.notes) approximate(note);
  if (sent.hits === null) {
    approximate(
      "the rate_limits entries that send it add other hits (hits_addend: a format, or numbers that differ); the rule charges each request 1",
    );
  }
  if (perUnit === 0) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: requests_per_unit 0 denies every request; Sluice limits are at least 1`,
    });
    return null;
  }
  const name = typeof rl.name === "string" ? rl.name : null;
  const replaces = Array.isArray(rl.replaces)
    ? rl.replaces.flatMap((r) => (isObject(r) && typeof r.name === "string" ? [r.name] : []))
    : [];
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "fixed_window"],
    ["limit", perUnit],
    ["window", unit],
  ];
  fields.push(...match.fields);
  if (sent.hits === 0) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: hits_addend 0: its requests add nothing, so it never limits`,
    });
    return null;
  }
  if (sent.hits !== null && sent.hits > perUnit) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: each request adds ${sent.hits} hits (hits_addend), more than the limit of ${perUnit}: the service refuses every request, and Sluice limits are at least one request`,
    });
    return null;
  }
  if (sent.hits !== null && sent.hits !== 1) fields.push(["cost", sent.hits]);
  // The filter's answers: a denial's status, and closed when the service cannot answer (failure_mode_deny).
  if (settings?.status != null) fields.push(["status", settings.status]);
  if (settings?.onError === "closed") fields.push(["on_error", "closed"]);
  if (d.shadow_mode === true) fields.push(["mode", "shadow"]);
  if (d.quota_mode === true) {
    report.push({
      where,
      kind: "approximate",
      message: `${chainText}: quota_mode: the service refuses a request only when every quota limit it meets is over; Sluice refuses when any rule is, which is the same for a request that meets one quota limit`,
    });
  }
  return {
    draft: {
      id: ruleId(name ?? `${domain}-${steps.map((s) => s.value ?? s.key).join("-")}`, taken),
      source: `${where}: domain ${domain}, descriptor ${chainText}: ${perUnit} per ${rl.unit}`,
      notes: match.notes,
      match: {
        ...match.match,
        ...(except.length === 0 ? {} : { except: [...(match.match.except ?? []), ...except] }),
        ...(headers.length === 0 ? {} : { header: [...(match.match.header ?? []), ...headers] }),
        ...(addresses.length === 0 ? {} : { except_address: addresses }),
      },
      ...(match.key === null ? {} : { key: match.key }),
      fields,
    },
    name,
    replaces,
  };
}

/**
 * The routes a chain's valueless steps give up to their valued siblings (`Step.notWith`): a sibling whose value means
 * a route takes that route's requests away from this chain (`except:`, exact), as one of a client address or range
 * takes its clients (`except_address`); one that means anything else cannot be
 * said as an exception, and `approximate` reports it.
 */
function siblingsExcepted(
  steps: readonly Step[],
  mapping: EnvoyMapping,
  approximate: (message: string) => void,
): { except: string[]; headers: string[]; addresses: string[] } {
  const except: string[] = [];
  const headers: string[] = [];
  const addresses: string[] = [];
  for (const step of steps) {
    for (const value of step.notWith ?? []) {
      // A sibling for one client address (range): those clients go there, never here (`match.except_address`).
      if (addressValue(mapping, step.key, value) && step.denied?.includes(value) !== true) {
        addresses.push(value);
        continue;
      }
      const meaning = mapping.get(`${step.key}:${value}`);
      const header = meaning === undefined ? headerOf(mapping.get(step.key)) : null;
      if (meaning?.kind === "route") except.push(...[meaning.route].flat());
      else if (header !== null && step.denied?.includes(value) === true) {
        approximate(
          `a request with ${step.key}=${value} goes to that descriptor of its own, which denies every request (left out); Sluice's rule counts it here rather than not at all`,
        );
      } else if (header !== null) headers.push(printCondition({ ...wildcardCondition(header, value), not: true }));
      else {
        approximate(
          `a request with ${step.key}=${value} goes to that descriptor of its own (the service looks up a key's value before the key alone), never to this one; Sluice's rule counts it too`,
        );
      }
    }
  }
  return { except: [...new Set(except)], headers, addresses };
}
