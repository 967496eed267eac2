/**
 * The envoyproxy/ratelimit service's configuration as Sluice rules: each descriptor chain with a rate limit becomes a
 * `fixed_window` rule (the service's windows are fixed per unit and aligned to the epoch, as Sluice's are), and one
 * with `requests_per_unit: 0` (a blocklist: the service refuses every request that sends it) a deny rule.
 */

import { printCondition } from "../rules/match_conditions.ts";
import type { Sends } from "./envoy_actions.ts";
import { EnvoyImportError, isObject, type Loaded, type Obj } from "./envoy_file.ts";
import { type FilterSettings, filterSettings } from "./envoy_filter.ts";
import {
  addressValue,
  type ChainRule,
  type EnvoyMapping,
  headerOf,
  matchOf,
  type Step,
  wildcardCondition,
} from "./envoy_mapping.ts";
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
    for (const d of list) {
      const line = isObject(d) ? loaded.lineOf(d) : 0;
      if (!isObject(d) || typeof d.key !== "string" || d.key === "") {
        throw new EnvoyImportError(`${file}:${line}: a descriptor needs a key`);
      }
      const value = descriptorValue(d, `${file}:${line}`, report);
      const notWith = value === null ? (valued.get(d.key) ?? []).filter((v) => v !== "*") : [];
      const shared = d.share_threshold === true ? { shared: true } : {};
      const more = { ...(notWith.length > 0 ? { notWith } : {}), ...shared };
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
    // A client address (range) is left out of the key alone's rule exactly (`match.except_address`, siblingsExcepted).
    if (last.value !== null && addressValue(mapping, last.key, last.value)) {
      const message = `${chainText}: unlimited for these clients: the rules of ${last.key} alone leave them out (match.except_address), so no rule`;
      report.push({ where, kind: "note", message });
      return null;
    }
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
  const name = typeof rl.name === "string" ? rl.name : null;
  const id = () => ruleId(name ?? `${domain}-${steps.map((s) => s.value ?? s.key).join("-")}`, taken);
  const excepted = {
    ...match.match,
    ...(except.length === 0 ? {} : { except: [...(match.match.except ?? []), ...except] }),
    ...(headers.length === 0 ? {} : { header: [...(match.match.header ?? []), ...headers] }),
    ...(addresses.length === 0 ? {} : { except_address: addresses }),
  };
  if (perUnit === 0) {
    const deny = denyDraft({ ...match, match: excepted }, chainText, where, report);
    if (deny === null) return null;
    // A deny rule counts no one: what the notes say of the chain's key is not about it.
    const notes = match.notes.filter((n) => !n.startsWith("one budget for every client"));
    const fields: [string, string | number | boolean][] = [
      ["deny", true],
      ["status", settings?.status ?? 429],
    ];
    if (d.shadow_mode === true) fields.push(["mode", "shadow"]);
    const source = `${where}: domain ${domain}, descriptor ${chainText}: 0 per ${rl.unit}, every request refused`;
    return { draft: { id: id(), source, notes, match: deny, fields }, name, replaces: [] };
  }
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
      id: id(),
      source: `${where}: domain ${domain}, descriptor ${chainText}: ${perUnit} per ${rl.unit}`,
      notes: match.notes,
      match: excepted,
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
      if (addressValue(mapping, step.key, value)) {
        addresses.push(value);
        continue;
      }
      const meaning = mapping.get(`${step.key}:${value}`);
      const header = meaning === undefined ? headerOf(mapping.get(step.key)) : null;
      if (meaning?.kind === "route") except.push(...[meaning.route].flat());
      else if (header !== null) headers.push(printCondition({ ...wildcardCondition(header, value), not: true }));
      else {
        approximate(
          `a request with ${step.key}=${value} goes to that descriptor of its own (the service looks up a key's value before the key alone), never to this one; Sluice's rule counts it too`,
        );
      }
    }
  }
  return { except: [...new Set(except)], headers, addresses };
}

/**
 * A chain with `requests_per_unit: 0` as a deny rule's match: the chain's match without its identity, and each part of
 * its key the request must carry for Envoy to send the descriptor (a header, cookie or query value) as a `present`
 * test on it; the address is always there. A part a match cannot test for (an API key, a user) is left out.
 */
function denyDraft(
  chain: ChainRule,
  chainText: string,
  where: string,
  report: ReportItem[],
): DraftRule["match"] | null {
  const { identity: _, ...match } = chain.match;
  const present: Record<"header" | "cookie" | "query", string[]> = { header: [], cookie: [], query: [] };
  const key = chain.key ?? (chain.match.identity === undefined ? [] : [chain.match.identity]);
  for (const part of key === "global" ? [] : key) {
    const named = /^\{ (header|cookie|query): (.+) \}$/.exec(part);
    if (named !== null) present[named[1] as keyof typeof present].push(`{ name: ${named[2]}, present: true }`);
    else if (part !== "ip") {
      report.push({
        where,
        kind: "left out",
        message: `${chainText}: requests_per_unit 0 refuses every request that sends it, and only callers with ${part} send it; a deny rule names whom it refuses by its match, which cannot test for ${part}`,
      });
      return null;
    }
  }
  return {
    ...match,
    ...Object.fromEntries(
      (["header", "cookie", "query"] as const).flatMap((k) =>
        present[k].length === 0 ? [] : [[k, [...(match[k] ?? []), ...present[k]]]],
      ),
    ),
  };
}
