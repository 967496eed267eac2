/**
 * Envoy's header and query parameter matchers (a `header_value_match` action's `headers`, a
 * `query_parameter_value_match`'s `query_parameters`) as Sluice: `:method` and `:path` as a route, other headers as
 * `match.header` and query parameters as `match.query` conditions (src/rules/match_conditions.ts), or why one rule
 * cannot say them.
 */
import { conditionPasses } from "../request/match.ts";
import { regexError } from "../rules/match_conditions.ts";
import type { MatchCondition } from "../rules/types.ts";
import { isObject, type Obj } from "./envoy_file.ts";
import type { Meaning } from "./envoy_mapping.ts";
import { routeOf } from "./envoy_route_actions.ts";

/**
 * A `header_value_match` as a route (its `:path` and `:method`) and `match.header` conditions (its other headers);
 * else why it cannot be one. `expect_match: false` sends the descriptor when the headers do not all match: said only
 * for one presence test (`present_match`), whose opposite is one condition too.
 */
export function headerMatch(hvm: Obj, path: string): Meaning {
  let method = "*";
  let matchPath = path;
  const conditions: MatchCondition[] = [];
  for (const h of Array.isArray(hvm.headers) ? hvm.headers : []) {
    const name = isObject(h) && typeof h.name === "string" ? h.name.toLowerCase() : "";
    const exact = isObject(h) ? exactOf(h) : null;
    const prefix = isObject(h) ? prefixOf(h) : null;
    const plain = isObject(h) && h.invert_match !== true;
    if (name === ":method" && exact !== null && plain) method = exact.toUpperCase();
    else if (name === ":path" && exact !== null && plain) matchPath = exact;
    else if (name === ":path" && prefix !== null && plain) matchPath = `${prefix}**`;
    else {
      const c = isObject(h) && !name.startsWith(":") ? envoyCondition("header", name, h) : null;
      if (c === null) {
        return {
          kind: "refused",
          why: `its header_value_match tests the ${name === "" ? "unnamed" : name} header in a way a Sluice match.header cannot say (a pseudo-header, a range, or a regex JavaScript does not read)`,
        };
      }
      conditions.push(c);
    }
  }
  const base: Meaning = method === "*" && matchPath === "/" ? { kind: "any" } : routeOf(method, matchPath);
  return withConditions(base, conditions, hvm.expect_match === false && method === "*" && matchPath === path, "header");
}

/**
 * A `query_parameter_value_match` on the route at `path`: its `query_parameters` as `match.query` conditions (each
 * `string_match` or `present_match`), or why they cannot be.
 */
export function queryMatch(qvm: Obj, path: string): Meaning {
  const conditions: MatchCondition[] = [];
  for (const q of Array.isArray(qvm.query_parameters) ? qvm.query_parameters : []) {
    const name = isObject(q) && typeof q.name === "string" ? q.name : "";
    const c = name === "" ? null : envoyCondition("query", name, q as Obj);
    if (c === null) {
      return {
        kind: "refused",
        why: `its query_parameter_value_match tests the ${name === "" ? "unnamed" : name} query parameter in a way a Sluice match.query cannot say`,
      };
    }
    conditions.push(c);
  }
  const base: Meaning = path === "/" ? { kind: "any" } : routeOf("*", path);
  return withConditions(base, conditions, qvm.expect_match === false, "query");
}

/**
 * A route with the conditions that send its descriptor. `negated` (`expect_match: false`): the descriptor is sent
 * when they do not all hold, which one rule says only for one test. Its opposite is one condition too: a presence
 * test's negation; a value test's with `not` flipped and `missing_as_empty`, exact when the empty value passes it
 * (Envoy sends the descriptor for a request without the value) or Envoy reads a missing value as empty too.
 */
function withConditions(base: Meaning, given: MatchCondition[], negated: boolean, what: "header" | "query"): Meaning {
  let conditions = given;
  if (negated) {
    const only = given.length === 1 ? given[0]! : null;
    const opposite: MatchCondition | null =
      only === null
        ? null
        : only.test === "present"
          ? { ...only, not: !only.not }
          : { ...only, not: !only.not, missingAsEmpty: true };
    const exact =
      opposite !== null &&
      (opposite.test === "present" || only?.missingAsEmpty === true || conditionPasses(opposite, null));
    if (!exact) {
      const matcher = what === "header" ? "header_value_match" : "query_parameter_value_match";
      return {
        kind: "refused",
        why: `its ${matcher} has expect_match: false (requests whose ${what === "header" ? "headers" : "query parameters"} do not all match: without one, or with another value), which one Sluice rule can say only for a single test${only === null ? "" : " whose opposite an empty value passes"}`,
      };
    }
    conditions = [opposite];
  }
  return conditions.length === 0 || (base.kind !== "any" && base.kind !== "route") ? base : { ...base, conditions };
}

/**
 * One Envoy `HeaderMatcher` (not a pseudo-header) as a condition, or `null`: exact, prefix, suffix, contains and
 * safe_regex (Envoy matches the whole value, so anchored) values, `string_match`'s `ignore_case`, `present_match`,
 * `invert_match` (the header present and failing the test, as Envoy reads it), `treat_missing_header_as_empty` as
 * `missing_as_empty` (value tests only); no test is `present_match: true`.
 */
export function envoyCondition(source: "header" | "query", name: string, h: Obj): MatchCondition | null {
  if (h.range_match !== undefined) return null;
  // A missing header read as "" (Envoy's treat_missing_header_as_empty): `missing_as_empty`; a presence test then
  // always passes or never, which no rule means to say.
  const empty = h.treat_missing_header_as_empty === true ? { missingAsEmpty: true as const } : {};
  const sm = isObject(h.string_match) ? h.string_match : {};
  const text = (legacy: string, key: string) =>
    typeof h[legacy] === "string" ? (h[legacy] as string) : typeof sm[key] === "string" ? (sm[key] as string) : null;
  const regexOf = (o: unknown) => (isObject(o) && typeof o.regex === "string" ? o.regex : null);
  const tests: [MatchCondition["test"], string | null][] = [
    ["equals", text("exact_match", "exact")],
    ["prefix", text("prefix_match", "prefix")],
    ["suffix", text("suffix_match", "suffix")],
    ["contains", text("contains_match", "contains")],
    ["matches", regexOf(h.safe_regex_match) ?? regexOf(sm.safe_regex)],
  ];
  const found = tests.find(([, v]) => v !== null && v !== "");
  const one = { in: source, name, ignoreCase: sm.ignore_case === true, not: h.invert_match === true };
  if (found === undefined) {
    const odd = h.present_match !== undefined && typeof h.present_match !== "boolean";
    if (Object.keys(sm).length > 0 || odd || "missingAsEmpty" in empty) return null;
    // `present_match: false` is "absent"; inverted, "present".
    return { ...one, test: "present", value: "", not: (h.present_match === false) !== one.not };
  }
  const [test, v] = found as [MatchCondition["test"], string];
  if (test !== "matches") return { ...one, test, value: v, ...empty };
  // RE2's syntax is mostly JavaScript's; one JavaScript does not read is left out (the caller says why).
  const anchored = `^(?:${v})$`;
  return regexError(anchored, one.ignoreCase) === null ? { ...one, test, value: anchored, ...empty } : null;
}

function exactOf(h: Obj): string | null {
  if (typeof h.exact_match === "string") return h.exact_match;
  return isObject(h.string_match) && typeof h.string_match.exact === "string" ? h.string_match.exact : null;
}

function prefixOf(h: Obj): string | null {
  if (typeof h.prefix_match === "string") return h.prefix_match;
  return isObject(h.string_match) && typeof h.string_match.prefix === "string" ? h.string_match.prefix : null;
}
