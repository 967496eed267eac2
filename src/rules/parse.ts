/**
 * Rule validation: plain values -> strict validation -> `ResolvedRule[]` with every default filled in. YAML text
 * becomes plain values in yaml.ts (`parseRules`); this module imports no YAML parser, so the Worker can run the very
 * same checks on a per-account override read from KV (`resolveOverride`, JSON via `rawFromJson` in raw.ts).
 *
 * A rule is its id, its algorithm and that algorithm's parameters (params.ts), its `match`, and the common fields of
 * the field table (fields.ts), read in that order.
 *
 * Every problem is reported, all at once, as `<file>: <ruleId>.<field>: <message>` (`rules[3]` stands in for a
 * missing or invalid id; the index counts from 0), or `<file>:<line>: <message>` for YAML syntax. Bad input never
 * throws. The resolved rules are plain JSON data (they are serialized for the Worker, which never imports YAML).
 */
import { ALGORITHMS, type AlgorithmName, type AlgorithmParams, capacityOf } from "../algorithms/index.ts";
import { readAddressRanges } from "./address_range.ts";
import { closest } from "./closest.ts";
import { resolveDenyFields } from "./deny.ts";
import { CROSS_FIELD_CHECKS, type FieldContext, RULE_FIELDS } from "./fields.ts";
import { printKey } from "./key.ts";
import { CONDITION_SOURCES, readConditions } from "./match_conditions.ts";
import { ALL_PARAM_KEYS, notAParameterOf, paramSpec, resolveParams } from "./params.ts";
import { describe, type Raw } from "./raw.ts";
import { exceedsCapacity, oneOf, RuleErrors, unknownKey } from "./read.ts";
import { compileRoute } from "./route.ts";
import type { DenyRule, Identity, ResolvedRule, RoutePattern, RuleCommon, RuleMatch } from "./types.ts";

const ID_RE = /^[A-Za-z0-9_.-]+$/;
const IDENTITIES: readonly Identity[] = ["api_key", "ip", "user"];

/** The keys a rule file may give besides its algorithm's parameters (`deny` turns it into a deny rule, deny.ts). */
const COMMON_KEYS = ["id", "match", "algorithm", "deny", ...RULE_FIELDS.map((f) => f.yaml)];
const MATCH_KEYS = [
  "plan",
  "route",
  "except",
  "header",
  "cookie",
  "query",
  "cf",
  "address",
  "except_address",
  "identity",
] as const;

/**
 * Where a field of the rule at `index` is in the file (`7:9`), when the reader knows: yaml.ts, for key fields and a
 * rule's own problems (its id, what it lacks; field `""` is the rule itself).
 */
export type Locate = (index: number, field: string, message: string) => string | null;

/** The rules of one file, from its plain values (see yaml.ts): all valid rules, every problem, every warning. */
export function resolveRules(
  root: Raw,
  file: string,
  locate: Locate = () => null,
): { rules: ResolvedRule[]; denies: DenyRule[]; errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  if (root === null) {
    errors.push(`${file}: the file is empty; expected a list of rules`);
    return { rules: [], denies: [], errors, warnings };
  }
  if (!Array.isArray(root)) {
    errors.push(`${file}: the top level must be a list of rules ("- id: ..."), got ${describe(root)}`);
    return { rules: [], denies: [], errors, warnings };
  }
  const rules: ResolvedRule[] = [];
  const denies: DenyRule[] = [];
  const ids = root.map((raw) => {
    const id = raw instanceof Map ? raw.get("id") : undefined;
    return typeof id === "string" && ID_RE.test(id) ? id : null;
  });
  root.forEach((raw, index) => {
    // Rules that share an id are each reported, by their place in the file, not under the one name.
    const sharing = ids.flatMap((id, i) => (id !== null && id === ids[index] && i !== index ? [i] : []));
    const where = { index, file, locate, sharing };
    if (raw instanceof Map && raw.has("deny")) {
      const deny = resolveDeny(raw, where, errors, warnings);
      if (deny !== null) denies.push(deny);
      return;
    }
    const rule = resolveRule(raw, where, errors, warnings);
    if (rule !== null) rules.push(rule);
  });
  return { rules, denies, errors, warnings };
}

/** Where a rule stands: its place in the file, the file, how to locate a field, the places of rules sharing its id. */
interface RulePlace {
  readonly index: number;
  readonly file: string;
  readonly locate: Locate;
  readonly sharing: readonly number[];
}

/** A deny rule (deny.ts): its id and match as any rule's, then its own fields; `null` with its problems in `out`. */
function resolveDeny(raw: Map<string, Raw>, place: RulePlace, out: string[], warnings: string[]): DenyRule | null {
  const { id, e } = ruleId(raw, place, out, warnings);
  const match = resolveMatch(raw, e, false);
  const fields = resolveDenyFields(raw, e);
  if (e.count > 0 || id === null || match === undefined || fields === null) return null;
  const { plans, route, except, conditions, addresses, exceptAddresses } = match;
  if ([plans, route, conditions, addresses, exceptAddresses].every((x) => x == null) && except.length === 0) {
    e.warn("match", "names no plan, route, header, cookie, query, cf value or address: it refuses every request");
  }
  return { id, file: place.file, match, ...fields };
}

/** A rule's id, checked (present, well formed, unique in its file), and the errors of the rule it names. */
function ruleId(
  raw: Map<string, Raw>,
  { index, file, locate, sharing }: RulePlace,
  out: string[],
  warnings: string[],
): { readonly id: string | null; readonly e: RuleErrors } {
  const idRaw = raw.get("id");
  const id = typeof idRaw === "string" && ID_RE.test(idRaw) ? idRaw : null;
  const ref = id === null ? `rules[${index}]` : sharing.length > 0 ? `${id} (rules[${index}])` : id;
  const at = (field: string, message: string) => {
    const position = locate(index, field, message);
    return position === null ? null : `${file}:${position}: ${ref}`;
  };
  const e = new RuleErrors(out, `${file}: ${ref}`, warnings, at);
  if (!raw.has("id")) e.add("id", "required");
  else if (id === null) {
    e.add("id", `must be a non-empty string of letters, digits, _, . and -, got ${describe(idRaw)}`);
  }
  if (sharing.length > 0) {
    const others = sharing.map((i) => {
      const line = locate(i, "id", "duplicate id")?.split(":")[0];
      return `rules[${i}]${line === undefined ? "" : ` (line ${line})`}`;
    });
    e.add("id", `duplicate id: ${others.join(", ")} ${others.length === 1 ? "has" : "have"} it too; ids are unique`);
  }
  return { id, e };
}

/** One rule of a file: resolved with every default filled in, or `null` with its problems added to `out`. */
function resolveRule(raw: Raw, place: RulePlace, out: string[], warnings: string[]): ResolvedRule | null {
  const { index, file, locate } = place;
  if (!(raw instanceof Map)) {
    const message = `must be a mapping with id, match and algorithm, got ${describe(raw)}`;
    const position = locate(index, "", message);
    out.push(`${file}${position === null ? "" : `:${position}`}: rules[${index}]: ${message}`);
    return null;
  }
  const { id, e } = ruleId(raw, place, out, warnings);
  const algorithm = resolveAlgorithm(raw, e);
  // A misspelt algorithm ("gcar") does not hide its fields' problems: they are checked as the likeliest one's.
  const checkedAs = algorithm ?? likelyAlgorithm(raw);
  checkKeys(raw, checkedAs, e);
  const match = resolveMatch(raw, e);
  const params = checkedAs === null ? null : resolveParams(checkedAs, raw, e);
  const capacity = params === null ? null : capacityOf(params);
  const capacityName = checkedAs === null ? "" : paramSpec(checkedAs).capacityName;
  const common = readFields(raw, { e, algorithm: checkedAs, capacity, capacityName, params }, match);
  if (e.count > 0 || id === null || match === undefined || common === null || params === null) return null;
  if (algorithm === null) return null;
  return { id, file, match, ...common, ...params } as ResolvedRule;
}

/**
 * The field table's fields, in table order (a reader may consult the fields read before it), then the checks across
 * fields: every field resolved, or `null` when one is invalid (its error is reported).
 */
function readFields(
  raw: Map<string, Raw>,
  base: Omit<FieldContext, "earlier">,
  match: RuleMatch | undefined,
): Omit<RuleCommon, "id" | "file" | "match"> | null {
  const earlier: Record<string, unknown> = { match };
  let ok = true;
  for (const f of RULE_FIELDS) {
    const read = f.read as (v: Raw | undefined, cx: FieldContext) => unknown;
    const value = raw.has(f.yaml) ? read(raw.get(f.yaml), { ...base, earlier }) : f.fallback;
    if (value === undefined) ok = false;
    earlier[f.resolved] = value;
  }
  for (const check of CROSS_FIELD_CHECKS) check(earlier, (key) => raw.has(key), base.e);
  if (!ok) return null;
  const { match: _, ...fields } = earlier;
  return fields as Omit<RuleCommon, "id" | "file" | "match">;
}

/** Keys that are neither common fields nor the algorithm's parameters, each with the likeliest fix. */
function checkKeys(raw: Map<string, Raw>, algorithm: AlgorithmName | null, e: RuleErrors): void {
  const known: readonly string[] = algorithm === null ? ALL_PARAM_KEYS : paramSpec(algorithm).keys;
  for (const key of raw.keys()) {
    if (COMMON_KEYS.includes(key) || known.includes(key)) continue;
    if ((MATCH_KEYS as readonly string[]).includes(key)) {
      e.add(key, `unknown key; ${key} belongs inside match: { ${key}: ... }`);
    } else if (algorithm !== null && ALL_PARAM_KEYS.includes(key)) {
      e.add(key, notAParameterOf(algorithm));
    } else {
      e.add(key, unknownKey(key, [...COMMON_KEYS, ...known], undefined, e));
    }
  }
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
        (rule.match.identity === null ? `key: ${printKey(rule.key)}` : `identity: ${rule.match.identity}`),
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
    else e.add(key, unknownKey(key, known, `${algorithm} takes ${paramSpec(algorithm).takes}`, e));
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

/** The algorithm a misspelt `algorithm:` most likely means (`gcar` -> gcra), or `null` when none is near. */
function likelyAlgorithm(raw: Map<string, Raw>): AlgorithmName | null {
  const given = raw.get("algorithm");
  return typeof given === "string" ? (closest(given, ALGORITHMS) as AlgorithmName | null) : null;
}

function resolveAlgorithm(raw: Map<string, Raw>, e: RuleErrors): AlgorithmName | null {
  if (!raw.has("algorithm")) {
    e.add("algorithm", `required: one of ${ALGORITHMS.join(", ")}`);
    return null;
  }
  return oneOf(e, "algorithm", raw.get("algorithm"), ALGORITHMS) ?? null;
}

/** A rule's `match`; `counts: false` for a deny rule, which counts no one, so takes no identity. */
function resolveMatch(raw: Map<string, Raw>, e: RuleErrors, counts = true): RuleMatch | undefined {
  const m = raw.get("match");
  if (!raw.has("match")) {
    e.add("match", `required, e.g. ${counts ? "{ plan: free, identity: api_key }" : "{ address: [203.0.113.7] }"}`);
    return undefined;
  }
  if (!(m instanceof Map)) {
    const example = counts ? "{ plan: free, identity: api_key }" : "{ address: [203.0.113.7] }";
    e.add("match", `must be a mapping such as ${example}, got ${describe(m)}`);
    return undefined;
  }
  let ok = true;
  for (const key of m.keys()) {
    if ((MATCH_KEYS as readonly string[]).includes(key)) continue;
    if (key === "key") e.add("match.key", "key belongs at the rule's top level (key: ..., beside match)");
    else e.add(`match.${key}`, unknownKey(key, MATCH_KEYS, `match takes ${MATCH_KEYS.join(", ")}`));
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
  const routes = m.has("route") ? routeList(e, "match.route", m.get("route")) : [];
  const except = m.has("except") ? routeList(e, "match.except", m.get("except")) : [];
  if (routes === null || except === null) ok = false;
  const addresses = addressFields(m, e);
  if (addresses === null) ok = false;
  const read = CONDITION_SOURCES.map((s) => (m.has(s) ? readConditions(m.get(s), s, e) : []));
  if (read.some((c) => c === undefined)) ok = false;
  const conditions = read.flatMap((c) => c ?? []);
  const route = routes?.[0] ?? null;
  const identity = resolveIdentity(raw, m, e, counts);
  if (!ok || identity === undefined || routes === null || except === null) return undefined;
  return {
    plans,
    route,
    moreRoutes: routes.slice(1),
    except,
    ...(conditions.length > 0 ? { conditions } : {}),
    ...addresses,
    identity,
  };
}

/**
 * `match.identity`, `null` when the rule gives `key:` (of which `match.identity: X` is the short spelling, key.ts; a
 * rule gives one or the other) or counts no one (a deny rule, which takes none); `undefined` after an error.
 */
function resolveIdentity(
  raw: Map<string, Raw>,
  m: Map<string, Raw>,
  e: RuleErrors,
  counts: boolean,
): Identity | null | undefined {
  if (!counts) {
    if (!m.has("identity")) return null;
    e.add(
      "match.identity",
      "a deny rule refuses whoever its match names and counts no one, so it takes no identity; name whom to refuse " +
        "with match.address, match.header, match.plan or match.route",
    );
    return undefined;
  }
  if (m.has("identity") && raw.has("key")) {
    e.add("match.identity", "give match.identity or key, not both (match.identity: X is the short form of key: [X])");
    return undefined;
  }
  if (m.has("identity")) return oneOf(e, "match.identity", m.get("identity"), IDENTITIES);
  if (raw.has("key") || m.has("key")) return null;
  e.add("match.identity", `required: one of ${IDENTITIES.join(", ")} (or a key: at the rule's top level)`);
  return undefined;
}

/** `match.address` and `match.except_address` as `RuleMatch` fields (absent: not given); `null` after an error. */
function addressFields(m: Map<string, Raw>, e: RuleErrors): Pick<RuleMatch, "addresses" | "exceptAddresses"> | null {
  const addresses = m.has("address") ? readAddressRanges(e, "match.address", m.get("address")) : undefined;
  const excepted = m.has("except_address")
    ? readAddressRanges(e, "match.except_address", m.get("except_address"))
    : undefined;
  if (addresses === null || excepted === null) return null;
  return { ...(addresses ? { addresses } : {}), ...(excepted ? { exceptAddresses: excepted } : {}) };
}

/** `match.route` or `match.except`: one `"METHOD /path"` or a non-empty list of them; `null` after an error. */
function routeList(e: RuleErrors, field: string, raw: Raw | undefined): RoutePattern[] | null {
  const list = Array.isArray(raw) ? raw : [raw];
  if (list.length === 0) {
    e.add(field, `must be "METHOD /path" or a non-empty list of them, got an empty list`);
    return null;
  }
  const out: RoutePattern[] = [];
  list.forEach((r, i) => {
    const name = Array.isArray(raw) ? `${field}[${i}]` : field;
    const compiled = typeof r === "string" ? compileRoute(r) : { error: `must be "METHOD /path", got ${describe(r)}` };
    if ("error" in compiled) e.add(name, compiled.error);
    else out.push(compiled);
  });
  return out.length === list.length ? out : null;
}

function describePlan(p: Raw | undefined): string {
  if (Array.isArray(p)) return p.length === 0 ? "an empty list" : `[${p.map(describe).join(", ")}]`;
  return describe(p);
}
