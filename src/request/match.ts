/**
 * Which rules apply to a request, and at what cost. The rules are compiled once per isolate (`compileRules` is
 * memoised on the rules array): plan sets, algorithm parameters and capacities are computed at load, so a request
 * only walks a short array and matches pre-split route patterns.
 *
 * Every rule whose match holds applies: a plan quota, a burst rule and a route rule may all apply at once. A rule
 * applies when its plans include the caller's plan (or it names none), its route matches (or it names none), the
 * request's headers, cookies and query values pass its conditions (`match.header`, ...), and the request carries its
 * identity; a rule keyed on an identity the request lacks does not apply. A caller without a verified API key is
 * counted by `identity: api_key` rules as its rule's `unverified` says (by its address, by default).
 */

import { capacityOf, projectParams } from "../algorithms/index.ts";
import { addressGroups, inRange } from "../rules/address_range.ts";
import { routeMatches } from "../rules/route.ts";
import type {
  AlgorithmParams,
  DenyRule,
  Identity,
  MatchCondition,
  ResolvedRule,
  RoutePattern,
  RuleMatch,
} from "../rules/types.ts";
import { foldSegment } from "./canonical_path.ts";

export interface CompiledRule {
  readonly rule: ResolvedRule;
  /**
   * The rules version its parameters come from (`RULES_VERSION`, stamped by `sluice compile`; an account override's
   * own, `compileOverride`): the key's object obeys the newest it has seen. 0 when unversioned.
   */
  readonly version: number;
  /** The algorithm's parameters alone, in a fixed key order: what the limiter runs and fingerprints. */
  readonly params: AlgorithmParams;
  /** The largest cost the rule can ever admit. */
  readonly capacity: number;
  readonly plans: ReadonlySet<string> | null;
  /**
   * The rule's routes (`match.route`, `[]` for any), `match.except` and `cost_by_route` patterns with literal segments
   * lower-cased, for case-insensitive matching.
   */
  readonly folded: RouteSets & {
    readonly costByRoute: readonly { readonly route: RoutePattern; readonly cost: number }[];
  };
}

/** What matching reads of a rule: its match, its plans as a set, its routes (folded for case-insensitive matching). */
export interface Matchable {
  readonly rule: { readonly match: RuleMatch };
  readonly plans: ReadonlySet<string> | null;
  readonly folded: RouteSets;
}

/** A deny rule (src/rules/deny.ts) compiled for matching. */
export interface CompiledDeny extends Matchable {
  readonly rule: DenyRule;
}

/** One rule applied to one request. */
export interface Applicable {
  readonly compiled: CompiledRule;
  /** The hash of the identity value the rule counts by (SHA-256 hex, or HMAC-SHA256 under KEY_HASH_SECRET). */
  readonly keyHash: string;
  readonly cost: number;
}

export interface RequestFacts {
  /**
   * The methods the request counts as, upper-case: its own, `GET` for `HEAD`, and an `X-HTTP-Method-Override` (see
   * request_shape.ts). A rule applies if its route matches any of them.
   */
  readonly methods: readonly string[];
  /**
   * The canonical paths the request counts as (canonical_path.ts), the request's own first, then any its upstream
   * routes it as too (a format suffix stripped, upstream_profile.ts). A rule applies if its route matches any.
   */
  readonly paths: readonly string[];
  /** Match route patterns case-insensitively (the path is then lower-cased already). */
  readonly foldCase: boolean;
  readonly plan: string;
  /**
   * The hash of each identity the request carries, `null` when absent. `api_key` is set only for a key with an
   * account record (a verified key).
   */
  readonly keyHashes: { readonly [K in Identity]: string | null };
  /** The caller's account overrides: rule id -> that rule with the account's own parameters (`compileOverride`). */
  readonly overrides: ReadonlyMap<string, CompiledRule>;
  /**
   * For a caller without a verified key: the hash `identity: api_key` rules with `unverified: by_address` count it
   * by (its client address, caller.ts), `null` when it has no address. `null` for a verified caller.
   */
  readonly unverified: { readonly keyHash: string | null } | null;
  /**
   * The keys of the `key:` rules that matched, by rule id (key.ts `ruleKeyOf`: hashed at the edge, as text in a
   * replay); a rule absent here, or `null`, does not apply. Absent when no rule has a `key:`.
   */
  readonly keyed?: ReadonlyMap<string, string | null>;
  /** What `match.header`, `match.cookie` and `match.query` conditions read; absent here, the request carries none. */
  readonly values?: RequestValues;
}

/** A request's headers, cookies and query values, as the gateway reads a `Request` and a replay a trace line. */
export interface RequestValues {
  /** A header's value (name lower-case) as the runtime gives it, repeated fields joined by `, `; `null`: absent. */
  header(name: string): string | null;
  /** Every value of a cookie, in order (a `Cookie` header may name one twice). */
  cookie(name: string): readonly string[];
  /** Every value of a query parameter, decoded, in order. */
  query(name: string): readonly string[];
  /**
   * A `request.cf` field as text; `null` where Cloudflare gives none (a service binding's `check`, or JA4 without bot
   * management); `wrangler dev` gives every request the same stand-in values, and no JA4.
   */
  cf(field: CfField): string | null;
  /** The client address as `CF-Connecting-IP` carries it; `null`: none (a test, a proxy in front). */
  readonly address: string | null;
}

/** The `request.cf` fields a key part or a `match.cf` condition reads. */
export type CfField = "asn" | "country" | "colo" | "ja4";

const compiledCache = new WeakMap<readonly ResolvedRule[], readonly CompiledRule[]>();

export function compileRules(rules: readonly ResolvedRule[], version = 0): readonly CompiledRule[] {
  const hit = compiledCache.get(rules);
  if (hit !== undefined) return hit;
  const compiled = rules.map((rule) => {
    const params = projectParams(rule);
    return {
      rule,
      version,
      params,
      capacity: capacityOf(params),
      plans: rule.match.plans === null ? null : new Set(rule.match.plans),
      folded: {
        ...foldRouteSets(routeSets(rule)),
        costByRoute: rule.costByRoute.map((e) => ({ route: foldRoute(e.route), cost: e.cost })),
      },
    };
  });
  compiledCache.set(rules, compiled);
  return compiled;
}

const deniesCache = new WeakMap<readonly DenyRule[], readonly CompiledDeny[]>();

export function compileDenies(denies: readonly DenyRule[]): readonly CompiledDeny[] {
  const hit = deniesCache.get(denies);
  if (hit !== undefined) return hit;
  const compiled = denies.map((rule) => ({
    rule,
    plans: rule.match.plans === null ? null : new Set(rule.match.plans),
    folded: foldRouteSets(routeSets(rule)),
  }));
  deniesCache.set(denies, compiled);
  return compiled;
}

/**
 * The deny rules whose match holds for this request, in order: the shadow ones to log, and the first enforcing one,
 * if any, the one that refuses it (the list stops there).
 */
export function denyingRules(denies: readonly CompiledDeny[], facts: RequestFacts): CompiledDeny[] {
  const out: CompiledDeny[] = [];
  for (const compiled of denies) {
    if (!matchesRequest(compiled, facts)) continue;
    out.push(compiled);
    if (compiled.rule.mode === "enforce") break;
  }
  return out;
}

export function applicableRules(rules: readonly CompiledRule[], facts: RequestFacts): Applicable[] {
  const out: Applicable[] = [];
  for (const compiled of rules) {
    const keyHash = countedBy(compiled.rule, facts);
    if (keyHash === null || !matchesRequest(compiled, facts)) continue;
    out.push({ compiled: facts.overrides.get(compiled.rule.id) ?? compiled, keyHash, cost: costOf(compiled, facts) });
  }
  return out;
}

/** The first rule with `unverified: reject` that would apply to this caller without a verified key, if any. */
export function rejectingRule(rules: readonly CompiledRule[], facts: RequestFacts): CompiledRule | null {
  if (facts.unverified === null) return null;
  for (const compiled of rules) {
    const { unverified } = compiled.rule;
    if (countsByApiKey(compiled.rule) && unverified === "reject" && matchesRequest(compiled, facts)) return compiled;
  }
  return null;
}

/** Whether a rule counts by the API key (`identity: api_key`, or an `api_key` part of its `key:`). */
export function countsByApiKey(rule: ResolvedRule): boolean {
  return rule.match.identity === "api_key" || rule.key?.some((p) => p.kind === "api_key") === true;
}

/** The key hash a rule counts this request by; `null`: the rule does not apply to it. */
function countedBy(rule: ResolvedRule, facts: RequestFacts): string | null {
  const identity = rule.match.identity;
  if (identity === null) return facts.keyed?.get(rule.id) ?? null;
  if (identity !== "api_key" || facts.unverified === null) return facts.keyHashes[identity];
  return rule.unverified === "by_address" ? facts.unverified.keyHash : null;
}

/** Plan, conditions (`match.header`, `match.cookie`, `match.query`) and route (under any of the request's methods). */
export function matchesRequest(compiled: Matchable, facts: RequestFacts): boolean {
  if (compiled.plans !== null && !compiled.plans.has(facts.plan)) return false;
  // The hot path: most rules have no conditions, so nothing is built for them.
  const conditions = compiled.rule.match.conditions;
  if (conditions !== undefined) {
    for (const c of conditions) if (!conditionPasses(c, conditionValue(c, facts.values))) return false;
  }
  if (compiled.rule.match.addresses !== undefined || compiled.rule.match.exceptAddresses !== undefined) {
    if (!addressPasses(compiled.rule.match, facts.values?.address ?? null)) return false;
  }
  return matchesRoute(compiled, facts);
}

/**
 * Whether a client address passes `match.address` (it is in one of its ranges) and `match.except_address` (it is in
 * none); a request without an address passes only the second.
 */
export function addressPasses(match: RuleMatch, address: string | null): boolean {
  const groups = addressGroups(address);
  if (match.addresses !== undefined && (groups === null || !match.addresses.some((r) => inRange(groups, r))))
    return false;
  return (
    groups === null || match.exceptAddresses === undefined || !match.exceptAddresses.some((r) => inRange(groups, r))
  );
}

/**
 * The value a condition reads: the header's, or the first of a cookie's or query parameter's, or a `request.cf`
 * field's as a key part reads it (trimmed; a country or colo upper-case); `null`: absent.
 */
function conditionValue(c: MatchCondition, values: RequestValues | undefined): string | null {
  if (values === undefined) return null;
  if (c.in === "header") return values.header(c.name);
  if (c.in === "cf") return cfValue(values, c.name as CfField);
  return (c.in === "cookie" ? values.cookie(c.name) : values.query(c.name))[0] ?? null;
}

/** A `request.cf` field as keys and conditions read it: trimmed, a country or colo code upper-case; `null`: none. */
export function cfValue(values: RequestValues, field: CfField): string | null {
  const v = values.cf(field)?.trim() ?? null;
  return v === null || v === "" ? null : field === "country" || field === "colo" ? v.toUpperCase() : v;
}

/** Whether a value (`null`: absent) passes a condition; an absent value passes no value test (unless read as `""`). */
export function conditionPasses(c: MatchCondition, sent: string | null): boolean {
  if (c.test === "present") return (sent !== null) !== c.not;
  if (sent === null && c.missingAsEmpty !== true) return false;
  const value = sent ?? "";
  const [v, want] = c.ignoreCase ? [value.toLowerCase(), c.value.toLowerCase()] : [value, c.value];
  const passes =
    c.test === "equals"
      ? v === want
      : c.test === "prefix"
        ? v.startsWith(want)
        : c.test === "suffix"
          ? v.endsWith(want)
          : c.test === "contains"
            ? v.includes(want)
            : regexOf(c).test(value);
  return passes !== c.not;
}

const regexes = new WeakMap<MatchCondition, RegExp>();

/** A `matches` condition's expression, compiled once (the validator has compiled it already). */
function regexOf(c: MatchCondition): RegExp {
  let re = regexes.get(c);
  if (re === undefined) {
    re = new RegExp(c.value, c.ignoreCase ? "i" : "");
    regexes.set(c, re);
  }
  return re;
}

/** The request's methods, paths and case folding: what a route is matched on. */
export type RouteFacts = Pick<RequestFacts, "methods" | "paths" | "foldCase">;

/** Route alone (under any of the request's methods), whoever calls: a rule that fails it applies to no caller. */
export function matchesRoute(compiled: Matchable, facts: RouteFacts): boolean {
  const { routes, except } = facts.foldCase ? compiled.folded : routeSets(compiled.rule);
  const any = (list: readonly RoutePattern[]) =>
    facts.methods.some((m) => facts.paths.some((p) => list.some((r) => routeMatches(r, m, p))));
  return (routes.length === 0 || any(routes)) && (except.length === 0 || !any(except));
}

/** A rule's `match.route` (all of its routes; `[]`: any) and `match.except`. */
interface RouteSets {
  readonly routes: readonly RoutePattern[];
  readonly except: readonly RoutePattern[];
}

const routeSetsCache = new WeakMap<{ readonly match: RuleMatch }, RouteSets>();

function routeSets(rule: { readonly match: RuleMatch }): RouteSets {
  const hit = routeSetsCache.get(rule);
  if (hit !== undefined) return hit;
  const { route, moreRoutes, except } = rule.match;
  const sets = { routes: route === null ? [] : [route, ...moreRoutes], except };
  routeSetsCache.set(rule, sets);
  return sets;
}

function foldRouteSets(sets: RouteSets): RouteSets {
  return { routes: sets.routes.map(foldRoute), except: sets.except.map(foldRoute) };
}

/**
 * A rule with one account's own parameters (a per-account override, already validated against the rule): everything
 * downstream (the object's parameters and fingerprint, so its state carries over as on a redeploy; the capacity; the
 * RateLimit headers) then sees the account's limit.
 */
export function compileOverride(compiled: CompiledRule, params: AlgorithmParams, version = 0): CompiledRule {
  const normalised = projectParams({ ...compiled.rule, ...params } as ResolvedRule);
  return {
    ...compiled,
    params: normalised,
    capacity: capacityOf(normalised),
    version: Math.max(compiled.version, version),
  };
}

/**
 * `cost_by_route` for the first matching route, else the rule's cost. A request that counts as several methods or
 * paths pays the highest of their costs.
 */
export function costOf(compiled: CompiledRule, facts: Pick<RequestFacts, "methods" | "paths" | "foldCase">): number {
  const entries = facts.foldCase ? compiled.folded.costByRoute : compiled.rule.costByRoute;
  let cost = 0;
  for (const method of facts.methods) {
    for (const path of facts.paths) {
      const entry = entries.find((e) => routeMatches(e.route, method, path));
      cost = Math.max(cost, entry?.cost ?? compiled.rule.cost);
    }
  }
  return cost;
}

/** A route pattern as case-insensitive matching compares it: literal segments in canonical form. */
export function foldRoute(route: RoutePattern): RoutePattern {
  return {
    ...route,
    segments: route.segments.map((s) => foldSegment(s)),
  };
}
