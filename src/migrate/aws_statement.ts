/**
 * What an AWS WAF scope-down statement means as a Sluice `match`: string matches on the path and the method become
 * routes, on a header, a query argument or one cookie `match.header`/`query`/`cookie` conditions, a geo or ASN match a
 * `match.cf` condition, an IP set (aws_ip_set.ts) `match.address`; AndStatement all of them, OrStatement a route list, NotStatement `except:` or the opposite
 * condition. Anything else is refused with the statement and the reason, so no test is ever dropped. Field matching
 * (aws_field.ts) cites AWS's documentation of each statement.
 */
import { conditionPasses } from "../request/match.ts";
import { escapeRegex } from "../rules/match_conditions.ts";
import type { MatchCondition } from "../rules/types.ts";
import { bothAddresses, byAddress, negatedAddresses } from "./address_scope.ts";
import { type Finding, fieldTest, type Scope, type Scoped } from "./aws_field.ts";
import {
  AwsImportError,
  field,
  here,
  isInteger,
  isObject,
  isObjects,
  isStrings,
  type Obj,
  type Place,
  required,
  soleKey,
} from "./aws_file.ts";
import { ipSetTest, type PlaceWithSets } from "./aws_ip_set.ts";
import { intersect } from "./cloudflare_match.ts";

export type { Scope, Scoped };

const ANY: Scope = { routes: null, except: [], conditions: [], notes: [] };

/** Statements that test something a Sluice rule cannot, and why. */
const UNSAID: Readonly<Record<string, string>> = {
  LabelMatchStatement: "labels are set by AWS WAF's other rules, which a Sluice rule does not see",
  RegexPatternSetReferenceStatement: "a regex pattern set is an ARN of patterns kept in AWS, not in the file",
  SqliMatchStatement: "SQL injection detection is AWS WAF's own",
  XssMatchStatement: "cross-site scripting detection is AWS WAF's own",
  ManagedRuleGroupStatement: "a managed rule group is AWS's",
  RuleGroupReferenceStatement: "a rule group reference cannot be a scope-down statement",
  RateBasedStatement: "a rate-based statement cannot be nested",
};

/** The statement `stmt` (at `path`) as a match, or why not. */
// long: one branch per kind of statement, each with its own message
export function scopeOf(place: PlaceWithSets, stmt: Obj, path: string): Scoped {
  const [kind, body] = soleKey(place, stmt, path, "a statement");
  const at = here(place, stmt, kind);
  const inner = `${path}.${kind}`;
  if (!isObject(body)) throw new AwsImportError(`${at}: ${inner}: must be an object`);
  switch (kind) {
    case "AndStatement":
    case "OrStatement": {
      const list = required(place, body, "Statements", inner, isObjects, "a list of statements");
      const items = list.map((s, i) => scopeOf(place, s, `${inner}.Statements[${i}]`));
      const refused = items.find((s) => "refused" in s);
      if (refused !== undefined) return refused;
      return kind === "AndStatement" ? allOf(items as Scope[], at, inner) : anyOf(items as Scope[], at, inner);
    }
    case "NotStatement": {
      const item = required(place, body, "Statement", inner, isObject, "a statement");
      return negated(scopeOf(place, item, `${inner}.Statement`), at, inner);
    }
    case "ByteMatchStatement":
    case "RegexMatchStatement":
    case "SizeConstraintStatement":
      return fieldTest(place, kind, body, inner, at);
    case "GeoMatchStatement":
      return placeTest(place, body, inner, at, "country");
    case "AsnMatchStatement":
      return placeTest(place, body, inner, at, "asn");
    case "IPSetReferenceStatement":
      return ipSetTest(place, body, inner, at);
    default:
      return { refused: `${inner}: ${UNSAID[kind] ?? "not a statement the import reads"}`, at };
  }
}

/** Every one holds: routes intersected, the rest added up. */
function allOf(items: readonly Scope[], at: string, path: string): Scoped {
  let out: Scope = ANY;
  for (const s of items) {
    const routes = out.routes === null ? s.routes : s.routes === null ? out.routes : intersect(out.routes, s.routes);
    if (typeof routes === "string") return { refused: `${path}: ${routes}`, at };
    const addresses = bothAddresses(out, s);
    if (typeof addresses === "string") return { refused: `${path}: ${addresses}`, at };
    out = {
      routes,
      except: [...out.except, ...s.except],
      conditions: [...out.conditions, ...s.conditions],
      notes: [...out.notes, ...s.notes],
      ...addresses,
    };
  }
  return out;
}

/** An OrStatement is a route list when every statement in it tests only the path and the method. */
function anyOf(items: readonly Scope[], at: string, path: string): Scoped {
  const routes: string[] = [];
  for (const s of items) {
    if (s.except.length > 0 || s.conditions.length > 0 || byAddress(s))
      return {
        refused: `${path}: an OR of tests other than the path and the method (a rule's conditions must all hold)`,
        at,
      };
    if (s.routes === null) return { ...ANY, notes: items.flatMap((i) => i.notes) };
    routes.push(...s.routes);
  }
  return { ...ANY, routes: [...new Set(routes)], notes: items.flatMap((i) => i.notes) };
}

/**
 * NOT of path and method tests: those routes as `except:`. NOT of one condition: its opposite. AWS evaluates a
 * request without the inspected component as not matching ("Request components in AWS WAF": "if a web request
 * doesn't have the request component that's specified in the rule statement, AWS WAF evaluates the request as not
 * matching"), so its NOT passes such a request: the opposite reads a missing value as empty (`missing_as_empty`) when
 * that makes it pass, and is refused when no condition says so.
 */
function negated(s: Scoped, at: string, path: string): Scoped {
  if ("refused" in s) return s;
  // NOT of an IP set: every client but its ranges (AWS's own example of a rate limit that spares some addresses).
  const opposite = s.routes === null && s.except.length === 0 && s.conditions.length === 0 ? negatedAddresses(s) : null;
  if (opposite !== null) return { ...ANY, ...opposite, notes: s.notes };
  if (byAddress(s)) return { refused: `${path}: NOT of an IP set beside other tests`, at };
  const only = s.routes === null && s.except.length === 0 && s.conditions.length === 1 ? s.conditions[0]! : null;
  if (only !== null) {
    const flipped: MatchCondition = { ...only, not: !only.not };
    const candidates: MatchCondition[] =
      only.test === "present" ? [flipped] : [{ ...flipped, missingAsEmpty: true }, withoutEmpty(flipped)];
    const opposite = candidates.find((c) => conditionPasses(c, null) === !conditionPasses(only, null));
    if (opposite !== undefined) return { ...ANY, conditions: [opposite], notes: s.notes };
  }
  if (s.routes === null || s.except.length > 0 || s.conditions.length > 0)
    return {
      refused: `${path}: NOT of something other than path and method tests or one condition`,
      at,
    };
  return { ...ANY, except: s.routes, notes: s.notes };
}

function withoutEmpty(c: MatchCondition): MatchCondition {
  const { missingAsEmpty: _, ...plain } = c;
  return plain;
}

/**
 * GeoMatchStatement (`CountryCodes`, two-letter codes) or AsnMatchStatement (`AsnList`): a `match.cf` test of where
 * Cloudflare places the client, `equals` for one value, an anchored `matches` for several. A ForwardedIPConfig (AWS
 * placing the address in a header) is approximate: Sluice places the connecting client.
 */
function placeTest(place: Place, body: Obj, path: string, at: string, name: "country" | "asn"): Scoped {
  const values =
    name === "country"
      ? required(place, body, "CountryCodes", path, isStrings, "a list of country codes")
      : required(place, body, "AsnList", path, isIntegers, "a list of AS numbers").map(String);
  if (values.length === 0) return { refused: `${path}: an empty list matches no request`, at };
  if (name === "country" && values.some((c) => !/^[A-Z0-9]{2}$/.test(c)))
    return { refused: `${path}: a country is a two-letter code in capitals`, at };
  const base = { in: "cf", name, ignoreCase: false, not: false } as const;
  const condition: MatchCondition =
    values.length === 1
      ? { ...base, test: "equals", value: values[0]! }
      : { ...base, test: "matches", value: `^(?:${values.map(escapeRegex).join("|")})$` };
  const notes: Finding[] = [
    {
      kind: "note",
      message: `AWS places the client by its own geolocation data, Sluice by Cloudflare's (request.cf.${name}); they may disagree for some addresses`,
      at,
    },
  ];
  if (field(place, body, "ForwardedIPConfig", path, isObject, "an object") !== undefined)
    notes.push({
      kind: "approximate",
      message: `${path}.ForwardedIPConfig: AWS places the address in a forwarded header; Sluice places the connecting client`,
      at: here(place, body, "ForwardedIPConfig"),
    });
  return { ...ANY, conditions: [condition], notes };
}

const isIntegers = (v: unknown): v is number[] => Array.isArray(v) && v.every(isInteger);
