/**
 * Rule validation: plain values -> strict validation -> `ResolvedRule[]` with every default filled in. YAML text
 * becomes plain values in yaml.ts (`parseRules`); this module imports no YAML parser, so the Worker can run the very
 * same checks on a per-account override read from KV (`resolveOverride`, JSON via `rawFromJson`).
 *
 * Every problem is reported, all at once, as `<file>: <ruleId>.<field>: <message>` (`rules[3]` stands in for a
 * missing or invalid id; the index counts from 0), or `<file>:<line>: <message>` for YAML syntax. Bad input never
 * throws. The resolved rules are plain JSON data (they are serialized for the Worker, which never imports YAML).
 */
import { ALGORITHMS, algorithmFor, capacityOf, LEASE_ALGORITHMS, leasePolicy } from "../algorithms/index.ts";
import type { ParamReader } from "../algorithms/types.ts";
import { DURATION_HINT, MAX_AMOUNT, MAX_PERIOD_MS, parseDuration, parseRate, rateOf } from "./duration.ts";
import { DEFAULT_LEASE_TTL_MS, MAX_LEASE_TTL_MS } from "./lease.ts";
import { compileRoute } from "./route.ts";
import {
  type AlgorithmName,
  type AlgorithmParams,
  DEFAULT_TIMEOUT_MS,
  type Identity,
  type LeaseSettings,
  type Rate,
  type ResolvedRule,
  type RoutePattern,
  type RuleCommon,
  type RuleMatch,
  type Window,
} from "./types.ts";

/** A YAML float kept with its source text, so a message can show `1.0` as written rather than `1`. */
export class YamlFloat {
  constructor(
    readonly value: number,
    readonly source: string,
  ) {}
}
/** A YAML value as validation sees it: integers are bigints (exact at any size), floats are `YamlFloat`. */
export type Raw = string | bigint | boolean | null | YamlFloat | Raw[] | Map<string, Raw>;

const ID_RE = /^[A-Za-z0-9_.-]+$/;
const IDENTITIES: readonly Identity[] = ["api_key", "ip", "user"];
const MODES = ["enforce", "shadow"] as const;
const SCOPES = ["global", "local"] as const;
const ON_ERRORS = ["open", "closed"] as const;
const UNVERIFIED = ["by_address", "skip", "reject"] as const;

const COMMON_KEYS = [
  "id",
  "match",
  "algorithm",
  "cost",
  "cost_by_route",
  "mode",
  "scope",
  "on_error",
  "timeout_ms",
  "status",
  "retry_jitter_s",
  "lease",
  "unverified",
] as const;
const MATCH_KEYS = ["plan", "route", "identity"] as const;
/** The parameter fields an algorithm takes (its file says which); any other parameter field on it is an error. */
const paramSpec = (algorithm: AlgorithmName) => algorithmFor({ algorithm }).params;
const ALL_PARAM_KEYS = [...new Set(ALGORITHMS.flatMap((a) => paramSpec(a).keys))];

/** The rules of one file, from its plain values (see yaml.ts): all valid rules, and every problem. */
export function resolveRules(root: Raw, file: string): { rules: ResolvedRule[]; errors: string[] } {
  const errors: string[] = [];
  if (root === null) {
    errors.push(`${file}: the file is empty; expected a list of rules`);
    return { rules: [], errors };
  }
  if (!Array.isArray(root)) {
    errors.push(`${file}: the top level must be a list of rules ("- id: ..."), got ${describe(root)}`);
    return { rules: [], errors };
  }
  const rules: ResolvedRule[] = [];
  const firstIndex = new Map<string, number>();
  root.forEach((raw, index) => {
    const rule = resolveRule(raw, index, file, errors);
    const id = raw instanceof Map ? raw.get("id") : undefined;
    if (typeof id === "string" && ID_RE.test(id)) {
      const first = firstIndex.get(id);
      if (first !== undefined) {
        errors.push(`${file}: ${id}.id: duplicate id (first defined at rules[${first}])`);
        return;
      }
      firstIndex.set(id, index);
    }
    if (rule !== null) rules.push(rule);
  });
  return { rules, errors };
}

/**
 * A JSON value (an account record read from KV) as a `Raw` value: integers become bigints, other numbers keep their
 * text, so the checks and messages are those of a rule file. Nesting stops at depth 100 as null.
 */
export function rawFromJson(value: unknown, depth = 0): Raw {
  if (depth > 100 || value === undefined || value === null) return null;
  if (typeof value === "number")
    return Number.isSafeInteger(value) ? BigInt(value) : new YamlFloat(value, String(value));
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (Array.isArray(value)) return value.map((v) => rawFromJson(v, depth + 1));
  if (typeof value === "object") {
    const out = new Map<string, Raw>();
    for (const [k, v] of Object.entries(value)) out.set(k, rawFromJson(v, depth + 1));
    return out;
  }
  return String(value);
}

/** A value as a message shows it: strings quoted, numbers as written. */
export function describe(v: Raw | undefined): string {
  if (v === undefined || v === null) return "an empty value";
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof YamlFloat) return v.source;
  if (Array.isArray(v)) return "a list";
  if (v instanceof Map) return "a mapping";
  return String(v);
}

/** The errors of one rule, each prefixed with the file and the rule's id (or `rules[i]`). */
class RuleErrors {
  count = 0;
  constructor(
    private readonly out: string[],
    private readonly where: string,
  ) {}
  add(field: string, message: string): void {
    this.out.push(`${this.where}.${field}: ${message}`);
    this.count++;
  }
}

/** One rule of a file: resolved with every default filled in, or `null` with its problems added to `out`. */
function resolveRule(raw: Raw, index: number, file: string, out: string[]): ResolvedRule | null {
  if (!(raw instanceof Map)) {
    out.push(`${file}: rules[${index}]: must be a mapping with id, match and algorithm, got ${describe(raw)}`);
    return null;
  }
  const idRaw = raw.get("id");
  const id = typeof idRaw === "string" && ID_RE.test(idRaw) ? idRaw : null;
  const e = new RuleErrors(out, `${file}: ${id ?? `rules[${index}]`}`);
  if (!raw.has("id")) e.add("id", "required");
  else if (id === null) {
    e.add("id", `must be a non-empty string of letters, digits, _, . and -, got ${describe(idRaw)}`);
  }

  const algorithm = resolveAlgorithm(raw, e);
  checkKeys(raw, algorithm, e);
  const match = resolveMatch(raw, e);
  const params = algorithm === null ? null : resolveParams(algorithm, raw, e);
  const capacity = params === null ? null : capacityOf(params);
  const capacityName = algorithm === null ? "" : paramSpec(algorithm).capacityName;
  const cost = optional(raw, "cost", 1, (v) => positiveInt(e, "cost", v));
  if (cost !== undefined && capacity !== null && cost > capacity) {
    e.add("cost", exceedsCapacity(cost, capacity, capacityName));
  }
  const costByRoute = resolveCostByRoute(raw, e, capacity, capacityName);
  const mode = optional(raw, "mode", "enforce", (v) => oneOf(e, "mode", v, MODES));
  const scope = optional(raw, "scope", "global", (v) => oneOf(e, "scope", v, SCOPES));
  const onError = optional(raw, "on_error", "open", (v) => oneOf(e, "on_error", v, ON_ERRORS));
  const timeoutMs = optional(raw, "timeout_ms", DEFAULT_TIMEOUT_MS, (v) => positiveInt(e, "timeout_ms", v));
  const status = optional(raw, "status", 429, (v) => httpStatus(e, v));
  const retryJitterS = optional(raw, "retry_jitter_s", 0, (v) => nonNegativeInt(e, "retry_jitter_s", v));
  const lease = optional(raw, "lease", null, (v) => resolveLease(v, e, algorithm, scope, capacity));
  const unverified = optional(raw, "unverified", "by_address", (v) => oneOf(e, "unverified", v, UNVERIFIED));
  if (raw.has("unverified") && match !== undefined && match.identity !== "api_key") {
    e.add(
      "unverified",
      `only rules with identity: api_key have unverified callers; this one has identity: ${match.identity}`,
    );
  }

  const common: RuleCommon | null = allResolved({
    id: id ?? undefined,
    file,
    match,
    mode,
    scope,
    onError,
    timeoutMs,
    status,
    cost,
    costByRoute,
    retryJitterS,
    lease,
    unverified,
  });
  if (e.count > 0 || common === null || params === null) return null;
  return { ...common, ...params } as ResolvedRule;
}

/** Keys that are neither common fields nor the algorithm's parameters, each with the likeliest fix. */
function checkKeys(raw: Map<string, Raw>, algorithm: AlgorithmName | null, e: RuleErrors): void {
  const known: readonly string[] = algorithm === null ? ALL_PARAM_KEYS : paramSpec(algorithm).keys;
  for (const key of raw.keys()) {
    if ((COMMON_KEYS as readonly string[]).includes(key) || known.includes(key)) continue;
    if ((MATCH_KEYS as readonly string[]).includes(key)) {
      e.add(key, `unknown key; ${key} belongs inside match: { ${key}: ... }`);
    } else if (algorithm !== null && ALL_PARAM_KEYS.includes(key)) {
      e.add(key, notAParameterOf(algorithm));
    } else {
      e.add(key, unknownKey(key, [...COMMON_KEYS, ...known]));
    }
  }
}

/** `status`: the HTTP status a denial answers with. */
function httpStatus(e: RuleErrors, v: Raw | undefined): number | undefined {
  if (typeof v === "bigint" && v >= 400n && v <= 599n) return Number(v);
  e.add("status", `must be an HTTP status from 400 to 599, got ${describe(v)}`);
  return undefined;
}

/** The fields when every one resolved, else `null` (a field that did not is `undefined`; its error is reported). */
function allResolved<T extends Record<string, unknown>>(
  fields: T,
): { [K in keyof T]: Exclude<T[K], undefined> } | null {
  return Object.values(fields).includes(undefined) ? null : (fields as { [K in keyof T]: Exclude<T[K], undefined> });
}

function notAParameterOf(algorithm: AlgorithmName): string {
  return `not a parameter of ${algorithm} (${algorithm} takes ${paramSpec(algorithm).takes})`;
}

/**
 * A per-account override of one rule's parameters (an account record's `limits: { <rule id>: {...} }`): the rule's
 * algorithm parameters in rule-file spelling, all of them, replacing the rule's (defaults as in a rule file; the
 * algorithm stays the rule's). Checked by the code that checks rule files, with the same messages, prefixed
 * `<where>: <rule id>.<field>`; the rule's costs must still fit the new capacity. Only `scope: global` rules counted
 * by `api_key` take one: their objects see this account's requests alone (an address or user is shared between
 * accounts, and a local rule's isolate store keeps one set of parameters per rule).
 */
export function resolveOverride(rule: ResolvedRule, value: Raw, where: string, out: string[]): AlgorithmParams | null {
  const e = new RuleErrors(out, `${where}: ${rule.id}`);
  const algorithm = rule.algorithm;
  if (rule.match.identity !== "api_key" || rule.scope !== "global") {
    e.add(
      "limits",
      `only scope: global rules counted by api_key take a per-account override; this one is scope: ${rule.scope}, ` +
        `identity: ${rule.match.identity}`,
    );
    return null;
  }
  if (!(value instanceof Map)) {
    e.add(
      "limits",
      `must be a mapping of ${algorithm} parameters (${paramSpec(algorithm).takes}), got ${describe(value)}`,
    );
    return null;
  }
  const known = paramSpec(algorithm).keys;
  for (const key of value.keys()) {
    if (known.includes(key)) continue;
    if (key === "algorithm")
      e.add(key, `an override keeps the rule's algorithm (${algorithm}); change it in the rule file`);
    else if (ALL_PARAM_KEYS.includes(key)) e.add(key, notAParameterOf(algorithm));
    else e.add(key, unknownKey(key, known, `${algorithm} takes ${paramSpec(algorithm).takes}`));
  }
  const params = resolveParams(algorithm, value, e);
  if (params === null || e.count > 0) return null;
  const capacity = capacityOf(params);
  const capacityName = paramSpec(algorithm).capacityName;
  const leaseUnits = rule.lease?.units ?? null;
  if (leaseUnits !== null && leaseUnits > capacity) {
    e.add(
      "lease.units",
      `must be at most this override's capacity ${capacity} (its ${capacityName}), got the rule's ${leaseUnits}: ` +
        `raise ${capacityName} or lower the rule's lease.units`,
    );
  }
  if (rule.cost > capacity) e.add("cost", exceedsCapacity(rule.cost, capacity, capacityName));
  for (const { route, cost } of rule.costByRoute) {
    if (cost > capacity)
      e.add(`cost_by_route[${JSON.stringify(route.source)}]`, exceedsCapacity(cost, capacity, capacityName));
  }
  return e.count > 0 ? null : params;
}

function resolveAlgorithm(raw: Map<string, Raw>, e: RuleErrors): AlgorithmName | null {
  if (!raw.has("algorithm")) {
    e.add("algorithm", `required: one of ${ALGORITHMS.join(", ")}`);
    return null;
  }
  return oneOf(e, "algorithm", raw.get("algorithm"), ALGORITHMS) ?? null;
}

function resolveMatch(raw: Map<string, Raw>, e: RuleErrors): RuleMatch | undefined {
  const m = raw.get("match");
  if (!raw.has("match")) {
    e.add("match", `required, e.g. { plan: free, identity: api_key }`);
    return undefined;
  }
  if (!(m instanceof Map)) {
    e.add("match", `must be a mapping such as { plan: free, identity: api_key }, got ${describe(m)}`);
    return undefined;
  }
  let ok = true;
  for (const key of m.keys()) {
    if ((MATCH_KEYS as readonly string[]).includes(key)) continue;
    e.add(`match.${key}`, unknownKey(key, MATCH_KEYS, "match takes plan, route and identity"));
    ok = false;
  }
  let plans: string[] | null = null;
  if (m.has("plan")) {
    const p = m.get("plan");
    const list = Array.isArray(p) ? p : [p];
    if (list.length === 0 || !list.every((x) => typeof x === "string" && x !== "")) {
      e.add("match.plan", `must be a plan name or a non-empty list of plan names, got ${describePlan(p)}`);
      ok = false;
    } else {
      plans = list as string[];
    }
  }
  let route: RoutePattern | null = null;
  if (m.has("route")) {
    const r = m.get("route");
    const compiled = typeof r === "string" ? compileRoute(r) : { error: `must be "METHOD /path", got ${describe(r)}` };
    if ("error" in compiled) {
      e.add("match.route", compiled.error);
      ok = false;
    } else {
      route = compiled;
    }
  }
  let identity: Identity | undefined;
  if (!m.has("identity")) {
    e.add("match.identity", `required: one of ${IDENTITIES.join(", ")}`);
  } else {
    identity = oneOf(e, "match.identity", m.get("identity"), IDENTITIES);
  }
  return ok && identity !== undefined ? { plans, route, identity } : undefined;
}

function describePlan(p: Raw | undefined): string {
  if (Array.isArray(p)) return p.length === 0 ? "an empty list" : `[${p.map(describe).join(", ")}]`;
  return describe(p);
}

/** The algorithm's parameters, read by its own `params.read` through a reader that knows rule-file syntax. */
function resolveParams(algorithm: AlgorithmName, raw: Map<string, Raw>, e: RuleErrors): AlgorithmParams | null {
  const reader: ParamReader = {
    rate: () => resolveRate(algorithm, raw, e),
    window: (month) => resolveWindow(algorithm, raw, e, month),
    int(key, options = {}) {
      const { min = 1, fallback, zeroHint } = options;
      const parse = (v: Raw | undefined) => {
        if (min === 1 && v === 0n && zeroHint !== undefined) {
          e.add(key, `must be a positive integer, got 0 (${zeroHint})`);
          return undefined;
        }
        return min === 1 ? positiveInt(e, key, v) : nonNegativeInt(e, key, v);
      };
      return fallback === undefined ? required(raw, e, algorithm, key, parse) : optional(raw, key, fallback, parse);
    },
    bool: (key, fallback) =>
      optional(raw, key, fallback, (v) => {
        if (typeof v === "boolean") return v;
        e.add(key, `must be true or false, got ${describe(v)}`);
        return undefined;
      }),
    has: (key) => raw.has(key),
    error: (key, message) => e.add(key, message),
  };
  return paramSpec(algorithm).read(reader) as AlgorithmParams | null;
}

function resolveRate(algorithm: AlgorithmName, raw: Map<string, Raw>, e: RuleErrors): Rate | undefined {
  const hasPerS = raw.has("rate_per_s");
  const hasText = raw.has("rate");
  if (hasPerS && hasText) {
    e.add("rate", "give rate_per_s or rate, not both");
    return undefined;
  }
  if (hasPerS) {
    const n = positiveInt(e, "rate_per_s", raw.get("rate_per_s"));
    return n === undefined ? undefined : rateOf(n, 1000);
  }
  if (hasText) {
    const v = raw.get("rate");
    if (typeof v !== "string") {
      const hint = typeof v === "bigint" ? " (for a count per second, use rate_per_s)" : "";
      e.add("rate", `must be a rate "<amount>/<duration>" such as 10/s, 100/min or 7/3s, got ${describe(v)}${hint}`);
      return undefined;
    }
    const rate = parseRate(v);
    if ("error" in rate) {
      e.add("rate", rate.error);
      return undefined;
    }
    return rate;
  }
  e.add("rate", `required for ${algorithm}: "<amount>/<duration>" such as 250/s (or rate_per_s: <count per second>)`);
  return undefined;
}

function resolveWindow(
  algorithm: AlgorithmName,
  raw: Map<string, Raw>,
  e: RuleErrors,
  month: boolean,
): Window | undefined {
  const hasSeconds = raw.has("window_s");
  const hasText = raw.has("window");
  if (hasSeconds && hasText) {
    e.add("window", "give window_s or window, not both");
    return undefined;
  }
  if (hasSeconds) {
    const s = positiveInt(e, "window_s", raw.get("window_s"));
    if (s === undefined) return undefined;
    if (s * 1000 > MAX_PERIOD_MS) {
      e.add("window_s", `is too long (max 2^40 ms, about 34 years), got ${s}`);
      return undefined;
    }
    return { kind: "ms", ms: s * 1000 };
  }
  if (hasText) {
    const v = raw.get("window");
    if (v === "month") {
      if (month) return { kind: "month" };
      e.add("window", `month is only for fixed_window; ${algorithm} needs a fixed length such as 30d`);
      return undefined;
    }
    if (typeof v !== "string") {
      const hint = typeof v === "bigint" ? " (for a number of seconds, use window_s)" : "";
      e.add("window", `must be ${DURATION_HINT}${month ? ", or month" : ""}, got ${describe(v)}${hint}`);
      return undefined;
    }
    const d = parseDuration(v);
    if ("error" in d) {
      e.add("window", d.error);
      return undefined;
    }
    return { kind: "ms", ms: d.ms };
  }
  e.add("window_s", `required for ${algorithm} (or window: "<duration>")`);
  return undefined;
}

const LEASE_KEYS = ["ttl", "units", "above"] as const;

/** `lease`: the setting checked field by field, and against the rule's algorithm and scope. */
function resolveLease(
  v: Raw | undefined,
  e: RuleErrors,
  algorithm: AlgorithmName | null,
  scope: string | undefined,
  capacity: number | null,
): LeaseSettings | null | undefined {
  if (!(v instanceof Map)) {
    e.add("lease", `must be a mapping such as { ttl: 1s, units: 100, above: 200/s }, got ${describe(v)}`);
    return undefined;
  }
  const errorsBefore = e.count;
  for (const key of v.keys()) {
    if ((LEASE_KEYS as readonly string[]).includes(key)) continue;
    e.add(`lease.${key}`, unknownKey(key, LEASE_KEYS, "lease takes ttl, units and above"));
  }
  if (algorithm !== null) {
    const policy = leasePolicy(algorithm);
    if (policy.kind === "none") {
      const names = LEASE_ALGORITHMS.join(", ").replace(/, ([^,]*)$/, " and $1");
      e.add("lease", `${algorithm} takes no lease (${policy.why}); leases are for ${names}`);
    }
  }
  if (scope === "local") {
    e.add(
      "lease",
      "a lease is a slice of a global key's budget; a scope: local rule is already decided in the isolate",
    );
  }
  const ttlMs = v.has("ttl") ? leaseTtl(v.get("ttl"), e) : DEFAULT_LEASE_TTL_MS;
  const units = v.has("units") ? leaseUnits(v.get("units"), e, capacity) : null;
  const above = v.has("above") ? leaseAbove(v.get("above"), e) : null;
  if (e.count > errorsBefore || ttlMs === undefined || units === undefined || above === undefined) return undefined;
  return { ttlMs, units, above };
}

/** `lease.ttl`: a duration up to `MAX_LEASE_TTL_MS`. */
function leaseTtl(t: Raw | undefined, e: RuleErrors): number | undefined {
  const d = typeof t === "string" ? parseDuration(t) : { error: `must be ${DURATION_HINT}, got ${describe(t)}` };
  if ("error" in d) {
    e.add("lease.ttl", d.error);
    return undefined;
  }
  if (d.ms > MAX_LEASE_TTL_MS) {
    e.add(
      "lease.ttl",
      `must be at most 10s (the bound for rate rules loosens by rate × ttl), got ${JSON.stringify(t)}`,
    );
    return undefined;
  }
  return d.ms;
}

/** `lease.units`: a positive integer no larger than the rule's capacity. */
function leaseUnits(u: Raw | undefined, e: RuleErrors, capacity: number | null): number | undefined {
  const n = positiveInt(e, "lease.units", u);
  if (n !== undefined && capacity !== null && n > capacity) {
    e.add("lease.units", `must be at most the rule's capacity ${capacity}, got ${n}`);
    return undefined;
  }
  return n;
}

/** `lease.above`: a rate, as in rule files. */
function leaseAbove(a: Raw | undefined, e: RuleErrors): Rate | undefined {
  const rate =
    typeof a === "string"
      ? parseRate(a)
      : { error: `must be a rate "<amount>/<duration>" such as 200/s, got ${describe(a)}` };
  if ("error" in rate) {
    e.add("lease.above", rate.error);
    return undefined;
  }
  return rate;
}

function resolveCostByRoute(
  raw: Map<string, Raw>,
  e: RuleErrors,
  capacity: number | null,
  capacityName: string,
): RuleCommon["costByRoute"] | undefined {
  if (!raw.has("cost_by_route")) return [];
  const m = raw.get("cost_by_route");
  if (!(m instanceof Map)) {
    e.add("cost_by_route", `must be a mapping of "METHOD /path" to a cost, got ${describe(m)}`);
    return undefined;
  }
  const out: { route: RoutePattern; cost: number }[] = [];
  let ok = true;
  for (const [source, v] of m) {
    const field = `cost_by_route[${JSON.stringify(source)}]`;
    const route = compileRoute(source);
    if ("error" in route) {
      e.add(field, route.error);
      ok = false;
    }
    const cost = positiveInt(e, field, v);
    if (cost !== undefined && capacity !== null && cost > capacity) {
      e.add(field, exceedsCapacity(cost, capacity, capacityName));
      ok = false;
    }
    if ("error" in route || cost === undefined) ok = false;
    else out.push({ route, cost });
  }
  return ok ? out : undefined;
}

function exceedsCapacity(cost: number, capacity: number, capacityName: string): string {
  return `cost ${cost} is more than the rule's capacity ${capacity} (${capacityName}); such a request could never be admitted`;
}

/** `parse(value)` when the key is present, else the default. `undefined` means invalid (already reported). */
function optional<T>(raw: Map<string, Raw>, key: string, fallback: T, parse: (v: Raw | undefined) => T | undefined) {
  return raw.has(key) ? parse(raw.get(key)) : fallback;
}

function required<T>(
  raw: Map<string, Raw>,
  e: RuleErrors,
  algorithm: AlgorithmName,
  key: string,
  parse: (v: Raw | undefined) => T | undefined,
): T | undefined {
  if (raw.has(key)) return parse(raw.get(key));
  e.add(key, `required for ${algorithm}`);
  return undefined;
}

function positiveInt(e: RuleErrors, field: string, v: Raw | undefined): number | undefined {
  if (typeof v === "bigint" && v >= 1n) {
    if (v <= BigInt(MAX_AMOUNT)) return Number(v);
    e.add(field, `must be at most 2^50, got ${describe(v)}`);
    return undefined;
  }
  e.add(field, `must be a positive integer, got ${describe(v)}`);
  return undefined;
}

function nonNegativeInt(e: RuleErrors, field: string, v: Raw | undefined): number | undefined {
  if (typeof v === "bigint" && v >= 0n) {
    if (v <= BigInt(MAX_AMOUNT)) return Number(v);
    e.add(field, `must be at most 2^50, got ${describe(v)}`);
    return undefined;
  }
  e.add(field, `must be an integer >= 0, got ${describe(v)}`);
  return undefined;
}

function oneOf<T extends string>(
  e: RuleErrors,
  field: string,
  v: Raw | undefined,
  allowed: readonly T[],
): T | undefined {
  if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as T;
  const guess = typeof v === "string" ? closest(v, allowed) : null;
  e.add(
    field,
    `must be one of ${allowed.join(", ")}, got ${describe(v)}${guess === null ? "" : `; did you mean "${guess}"?`}`,
  );
  return undefined;
}

function unknownKey(key: string, known: readonly string[], fallback?: string): string {
  const guess = closest(key, known);
  if (guess !== null) return `unknown key; did you mean "${guess}"?`;
  return fallback === undefined ? "unknown key" : `unknown key (${fallback})`;
}

/** The known word nearest to `word` (edit distance <= 2, or a prefix of it), or null. */
export function closest(word: string, known: readonly string[]): string | null {
  const w = word.toLowerCase().replaceAll("-", "_");
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const k of known) {
    // An abbreviation (`timeout` for `timeout_ms`) is as good as one typo.
    const prefix = w.length >= 3 && k.startsWith(w);
    const d = prefix ? 1 : editDistance(w, k);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return bestDistance <= 2 ? best : null;
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps (`brust` -> `burst`). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    const row = d[i]!;
    const prev = d[i - 1]!;
    for (let j = 1; j <= b.length; j++) {
      const sub = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + sub);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      row[j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
