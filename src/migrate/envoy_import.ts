// long-file: two configuration formats (the service and the local filter), each with its checks and messages
/**
 * `sluice import envoy`: Envoy's rate limits as Sluice rules, from either
 * - the envoyproxy/ratelimit service's configuration (`domain`, nested `descriptors` of `key`/`value`, `rate_limit`
 *   with `unit` and `requests_per_unit`, `unlimited`, `name`, `replaces`, `shadow_mode`): each descriptor chain with a
 *   rate limit becomes a `fixed_window` rule (the service's windows are fixed per unit, aligned to the epoch, as
 *   Sluice's are), or
 * - the local rate limit filter (`token_bucket` with `max_tokens`, `tokens_per_fill`, `fill_interval`;
 *   `filter_enabled`/`filter_enforced`; `descriptors`): `token_bucket` rules with `scope: local`.
 * A descriptor's values come from Envoy's route actions, which these files do not contain, so a small mapping says
 * what each descriptor key means: `remote_address` is the client address unless told otherwise; `--map KEY=api_key`
 * (or `user`, `ip`) names a per-client key; `--map KEY:VALUE=route:METHOD /path`, `plan:NAME` or `any` says which
 * requests a valued descriptor stands for. docs/rules.md, "Coming from Envoy", describes the mapping.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from "yaml";
import { compileRoute } from "../rules/route.ts";
import { type DraftRule, type ImportResult, type ReportItem, ruleId } from "./report.ts";

/** What a descriptor key (or key and value) stands for. */
export type Meaning =
  | { readonly kind: "identity"; readonly identity: "api_key" | "ip" | "user" }
  | { readonly kind: "route"; readonly route: string }
  | { readonly kind: "plan"; readonly plan: string }
  | { readonly kind: "any" };

export type EnvoyMapping = ReadonlyMap<string, Meaning>;

export class EnvoyImportError extends Error {}

/** `KEY=api_key|ip|user` or `KEY:VALUE=route:METHOD /path|plan:NAME|any`, parsed; or why not. */
export function parseMapping(specs: readonly string[]): { mapping: Map<string, Meaning> } | { error: string } {
  const mapping = new Map<string, Meaning>([["remote_address", { kind: "identity", identity: "ip" }]]);
  for (const spec of specs) {
    const eq = spec.indexOf("=");
    if (eq <= 0) return { error: `--map ${JSON.stringify(spec)}: expected KEY=IDENTITY or KEY:VALUE=MEANING` };
    const target = spec.slice(0, eq);
    const meaning = spec.slice(eq + 1);
    if (meaning === "api_key" || meaning === "ip" || meaning === "user") {
      mapping.set(target, { kind: "identity", identity: meaning });
    } else if (meaning === "any") {
      mapping.set(target, { kind: "any" });
    } else if (meaning.startsWith("plan:") && meaning.length > 5) {
      mapping.set(target, { kind: "plan", plan: meaning.slice(5) });
    } else if (meaning.startsWith("route:")) {
      const route = compileRoute(meaning.slice(6));
      if ("error" in route) return { error: `--map ${target}: route ${route.error}` };
      mapping.set(target, { kind: "route", route: route.source });
    } else {
      return {
        error: `--map ${target}: expected api_key, ip, user, any, plan:NAME or route:METHOD /path, got ${JSON.stringify(meaning)}`,
      };
    }
  }
  return { mapping };
}

/** A YAML or JSON file as plain values, with the line each mapping starts on. */
interface Loaded {
  readonly value: unknown;
  readonly lineOf: (node: object) => number;
}

function load(text: string, file: string): Loaded {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw new EnvoyImportError(
      `${file}${pos === undefined ? "" : `:${pos.line}:${pos.col}`}: ${(e.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "")}`,
    );
  }
  const lines = new WeakMap<object, number>();
  const convert = (node: unknown): unknown => {
    if (isScalar(node)) return node.value;
    if (isSeq(node)) {
      const out = node.items.map(convert);
      if (node.range) lines.set(out, counter.linePos(node.range[0]).line);
      return out;
    }
    if (isMap(node)) {
      const out: Record<string, unknown> = {};
      for (const pair of node.items) out[String(isScalar(pair.key) ? pair.key.value : pair.key)] = convert(pair.value);
      if (node.range) lines.set(out, counter.linePos(node.range[0]).line);
      return out;
    }
    return null;
  };
  return { value: convert(doc.contents), lineOf: (node) => lines.get(node) ?? 1 };
}

export function importEnvoy(text: string, file: string, mapping: EnvoyMapping): ImportResult {
  const loaded = load(text, file);
  const root = loaded.value;
  if (isObject(root) && "domain" in root) return importService(root, file, loaded, mapping);
  const filters = localFilters(root);
  if (filters.length === 0) {
    throw new EnvoyImportError(
      `${file}: neither a ratelimit service configuration (domain, descriptors) nor a local rate limit filter (token_bucket)`,
    );
  }
  const report: ReportItem[] = [];
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  for (const filter of filters) rules.push(...importLocal(filter, file, loaded, mapping, report, taken));
  return { rules, report };
}

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** One (key, value) step of a descriptor chain, and where it is. */
interface Step {
  readonly key: string;
  readonly value: string | null;
  readonly line: number;
}

function importService(root: Obj, file: string, loaded: Loaded, mapping: EnvoyMapping): ImportResult {
  if (typeof root.domain !== "string" || root.domain === "")
    throw new EnvoyImportError(`${file}:${loaded.lineOf(root)}: domain must be a non-empty string`);
  const report: ReportItem[] = [];
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  const named = new Map<string, string>();
  const replaced: { name: string; by: string; line: number }[] = [];
  const walk = (list: unknown, chain: Step[], where: string) => {
    if (list === undefined || list === null) return;
    if (!Array.isArray(list)) throw new EnvoyImportError(`${where}: descriptors must be a list`);
    for (const d of list) {
      const line = isObject(d) ? loaded.lineOf(d) : 0;
      if (!isObject(d) || typeof d.key !== "string" || d.key === "") {
        throw new EnvoyImportError(`${file}:${line}: a descriptor needs a key`);
      }
      const value = d.value === undefined || d.value === null ? null : String(d.value);
      const steps = [...chain, { key: d.key, value, line }];
      if (d.rate_limit !== undefined) {
        const rule = serviceRule(d, steps, `${root.domain}`, file, mapping, report, taken);
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
  for (const r of replaced) {
    const target = named.get(r.name);
    report.push({
      where: `${file}:${r.line}`,
      kind: "approximate",
      message: `${r.by} replaces ${target ?? `"${r.name}"`} where both apply; Sluice applies every rule that matches, so ${target ?? "it"} also applies there`,
    });
  }
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

const UNITS: Readonly<Record<string, string>> = {
  second: "s",
  minute: "min",
  hour: "h",
  day: "d",
  week: "7d",
  month: "month",
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
  const unit = typeof rl.unit === "string" ? UNITS[rl.unit.toLowerCase()] : undefined;
  const perUnit = rl.requests_per_unit;
  if (unit === undefined) {
    if (typeof rl.unit === "string" && rl.unit.toLowerCase() === "year") {
      report.push({ where, kind: "left out", message: `${chainText}: unit year: Sluice windows go up to a month` });
      return null;
    }
    throw new EnvoyImportError(
      `${where}: rate_limit.unit must be second, minute, hour, day, week or month, got ${JSON.stringify(rl.unit)}`,
    );
  }
  if (typeof perUnit !== "number" || !Number.isSafeInteger(perUnit) || perUnit < 0) {
    throw new EnvoyImportError(
      `${where}: rate_limit.requests_per_unit must be a whole number, got ${JSON.stringify(perUnit)}`,
    );
  }
  const match = matchOf(steps, chainText, where, mapping, report);
  if (match === null) return null;
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
  if (d.shadow_mode === true) fields.push(["mode", "shadow"]);
  return {
    draft: {
      id: ruleId(name ?? `${domain}-${steps.map((s) => s.value ?? s.key).join("-")}`, taken),
      source: `${where}: domain ${domain}, descriptor ${chainText}: ${perUnit} per ${rl.unit}`,
      notes: match.notes,
      match: match.match,
      fields,
    },
    name,
    replaces,
  };
}

// long: each descriptor step's meaning, checked in chain order with its own message
/** The rule's match from a descriptor chain through the mapping, or `null` (reported) when it has no single identity. */
function matchOf(
  steps: readonly Step[],
  chainText: string,
  where: string,
  mapping: EnvoyMapping,
  report: ReportItem[],
): { match: DraftRule["match"]; notes: string[] } | null {
  let identity: string | null = null;
  let route: string | undefined;
  let plan: string | undefined;
  const notes: string[] = [];
  const approximations: ReportItem[] = [];
  for (const step of steps) {
    const meaning = step.value === null ? mapping.get(step.key) : (mapping.get(`${step.key}:${step.value}`) ?? null);
    if (step.value === null && meaning === undefined) {
      report.push({
        where,
        kind: "left out",
        message: `${chainText}: no meaning for descriptor key ${step.key}: give --map ${step.key}=api_key, ip or user`,
      });
      return null;
    }
    if (meaning === null || meaning === undefined) {
      const message = `${step.key}=${step.value} comes from an Envoy route action: mapped to every request (give --map ${step.key}:${step.value}=route:METHOD /path for one route)`;
      approximations.push({ where, kind: "approximate", message: `${chainText}: ${message}` });
      notes.push(`approximate: ${message}`);
      continue;
    }
    if (meaning.kind === "identity") {
      if (step.value !== null) {
        report.push({
          where,
          kind: "left out",
          message: `${chainText}: a limit for one ${step.key} value (${step.value}): Sluice rules count every caller alike`,
        });
        return null;
      }
      if (identity !== null) {
        report.push({
          where,
          kind: "left out",
          message: `${chainText}: counted by two identities at once (${identity} and ${meaning.identity})`,
        });
        return null;
      }
      identity = meaning.identity;
    } else if (meaning.kind === "route") route = meaning.route;
    else if (meaning.kind === "plan") plan = meaning.plan;
  }
  if (identity === null) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: one budget shared by every client; Sluice counts per API key, address or user`,
    });
    return null;
  }
  report.push(...approximations);
  return {
    match: { ...(plan === undefined ? {} : { plan }), ...(route === undefined ? {} : { route }), identity },
    notes,
  };
}

/** Every local rate limit filter configuration in a file (the filter's own config, or nested in a bootstrap). */
function localFilters(value: unknown, depth = 0): Obj[] {
  if (depth > 50) return [];
  if (Array.isArray(value)) return value.flatMap((v) => localFilters(v, depth + 1));
  if (!isObject(value)) return [];
  if (isObject(value.token_bucket) && ("stat_prefix" in value || "descriptors" in value || "filter_enforced" in value))
    return [value];
  return Object.values(value).flatMap((v) => localFilters(v, depth + 1));
}

function importLocal(
  filter: Obj,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
): DraftRule[] {
  const where = `${file}:${loaded.lineOf(filter)}`;
  const prefix = typeof filter.stat_prefix === "string" ? filter.stat_prefix : "local";
  const enabled = percentOf(filter.filter_enabled);
  const enforced = percentOf(filter.filter_enforced);
  if (enabled === 0) {
    report.push({
      where,
      kind: "left out",
      message: `${prefix}: filter_enabled is 0% (Envoy's default when not set), so the filter limits nothing`,
    });
    return [];
  }
  const shadow = enforced < 100;
  if (enabled < 100 || (enforced > 0 && enforced < 100)) {
    report.push({
      where,
      kind: "approximate",
      message: `${prefix}: enabled for ${enabled}% and enforced for ${enforced}% of requests; Sluice applies a rule to all of them (${shadow ? "shadow" : "enforce"})`,
    });
  }
  report.push({
    where,
    kind: "left out",
    message: `${prefix}: the filter-wide token_bucket is one budget shared by every client of an Envoy instance; Sluice counts per API key, address or user`,
  });
  const rules: DraftRule[] = [];
  const descriptors = Array.isArray(filter.descriptors) ? filter.descriptors : [];
  for (const d of descriptors) {
    const rule = localRule(d, prefix, file, loaded, mapping, report, taken, shadow);
    if (rule !== null) rules.push(rule);
  }
  return rules;
}

function localRule(
  d: unknown,
  prefix: string,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
  shadow: boolean,
): DraftRule | null {
  const line = isObject(d) ? loaded.lineOf(d) : 0;
  const where = `${file}:${line}`;
  if (!isObject(d) || !Array.isArray(d.entries) || !isObject(d.token_bucket)) {
    throw new EnvoyImportError(`${where}: a local descriptor needs entries and a token_bucket`);
  }
  const steps: Step[] = d.entries.map((e) => {
    if (!isObject(e) || typeof e.key !== "string")
      throw new EnvoyImportError(`${where}: a descriptor entry needs a key`);
    return { key: e.key, value: e.value === undefined || e.value === "" ? null : String(e.value), line };
  });
  const chainText = steps.map((s) => (s.value === null ? s.key : `${s.key}=${s.value}`)).join(", ");
  const match = matchOf(steps, chainText, where, mapping, report);
  if (match === null) return null;
  const bucket = tokenBucket(d.token_bucket, where);
  const message = `Envoy adds ${bucket.perFill} token(s) at once every ${bucket.interval}; Sluice's bucket refills continuously at the same rate`;
  if (bucket.perFill > 1) report.push({ where, kind: "approximate", message: `${chainText}: ${message}` });
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "token_bucket"],
    ["rate", `${bucket.perFill}/${bucket.interval}`],
    ["burst", bucket.maxTokens],
    ["scope", "local"],
  ];
  if (shadow) fields.push(["mode", "shadow"]);
  return {
    id: ruleId(`${prefix}-${steps.map((s) => s.value ?? s.key).join("-")}`, taken),
    source: `${where}: local rate limit ${prefix}, descriptor ${chainText}`,
    notes: [...match.notes, ...(bucket.perFill > 1 ? [`approximate: ${message}`] : [])],
    match: match.match,
    fields,
  };
}

function tokenBucket(b: Obj, where: string): { maxTokens: number; perFill: number; interval: string } {
  const maxTokens = b.max_tokens;
  const perFill = b.tokens_per_fill ?? 1;
  if (typeof maxTokens !== "number" || !Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw new EnvoyImportError(`${where}: token_bucket.max_tokens must be a positive whole number`);
  }
  if (typeof perFill !== "number" || !Number.isSafeInteger(perFill) || perFill < 1) {
    throw new EnvoyImportError(`${where}: token_bucket.tokens_per_fill must be a positive whole number`);
  }
  const m = typeof b.fill_interval === "string" ? /^(\d+)(?:\.(\d{1,3}))?s$/.exec(b.fill_interval) : null;
  if (m === null)
    throw new EnvoyImportError(`${where}: token_bucket.fill_interval must be a duration such as "1s" or "0.5s"`);
  const ms = Number(m[1]) * 1000 + Number((m[2] ?? "").padEnd(3, "0"));
  if (ms < 1) throw new EnvoyImportError(`${where}: token_bucket.fill_interval must be at least 1ms`);
  return { maxTokens, perFill, interval: ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms` };
}

/** A runtime fractional percent's default value, in percent; 0 when not set (Envoy's default). */
function percentOf(v: unknown): number {
  if (!isObject(v) || !isObject(v.default_value)) return 0;
  const n = Number(v.default_value.numerator ?? 0);
  const denominator = v.default_value.denominator ?? "HUNDRED";
  const per = denominator === "TEN_THOUSAND" ? 100 : denominator === "MILLION" ? 10_000 : 1;
  return n / per;
}
