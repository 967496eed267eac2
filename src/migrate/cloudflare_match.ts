/**
 * What a Cloudflare rule expression (cloudflare_expr.ts's tree) means as a Sluice `match`: path and method tests
 * become routes (`* /login`, `* /api**`, `* /**.php`, a list for `in` or an `or`), negated ones `except:`, tests of
 * headers, cookies and query values `match.header`/`cookie`/`query` conditions. Anything else is refused with the
 * part that cannot be said, so no test is ever dropped: a rule must not apply to more (or fewer) requests unseen.
 */

import { conditionPasses } from "../request/match.ts";
import { parseAddressRange } from "../rules/address_range.ts";
import { COOKIE_OR_QUERY_NAME, HEADER_NAME } from "../rules/key.ts";
import { escapeRegex, regexError } from "../rules/match_conditions.ts";
import { compileRoute } from "../rules/route.ts";
import type { MatchCondition } from "../rules/types.ts";
import { type AddressScope, bothAddresses, byAddress, negatedAddresses } from "./address_scope.ts";
import type { Field, Node, Op, Value } from "./cloudflare_expr.ts";
import { covers, mayOverlap } from "./nginx_routes.ts";

/** A rule's match: `routes` null for any request; `notes` for what is matched more broadly (stricter). */
export interface Selection extends AddressScope {
  readonly routes: readonly string[] | null;
  readonly except: readonly string[];
  readonly conditions: readonly MatchCondition[];
  readonly notes: readonly string[];
}

export type Translated = Selection | { readonly refused: string };

const ANY: Selection = { routes: null, except: [], conditions: [], notes: [] };

/** `node` as a match, or why it cannot be one. */
export function selectionOf(node: Node): Translated {
  switch (node.kind) {
    case "bool":
      return node.value ? ANY : { refused: "`false` matches no request" };
    case "and":
      return node.items.map(selectionOf).reduce(both);
    case "or":
      return either(node);
    case "not":
      return negated(node);
    case "xor":
      return { refused: `\`${node.text}\`: xor (one test or the other, not both) cannot be a rule's match` };
    case "any":
      return node.item.kind === "compare" && node.item.field.index === "*"
        ? leaf(node.item.field, node.item.op, node.item.values, node.text)
        : { refused: `\`${node.text}\`: any() of something other than one test of a header, cookie or query value` };
    case "flag":
      return { refused: `\`${node.text}\`: ${fieldReason(node.field)}` };
    case "compare":
      return leaf(node.field, node.op, node.values, node.text);
  }
}

/** Both hold: routes intersected, the rest added up. */
function both(a: Translated, b: Translated): Translated {
  if ("refused" in a) return a;
  if ("refused" in b) return b;
  const routes = a.routes === null ? b.routes : b.routes === null ? a.routes : intersect(a.routes, b.routes);
  if (typeof routes === "string") return { refused: routes };
  const addresses = bothAddresses(a, b);
  if (typeof addresses === "string") return { refused: addresses };
  return {
    routes,
    except: [...a.except, ...b.except],
    conditions: [...a.conditions, ...b.conditions],
    notes: [...a.notes, ...b.notes],
    ...addresses,
  };
}

export function intersect(a: readonly string[], b: readonly string[]): string[] | string {
  const out: string[] = [];
  for (const x of a) {
    for (const y of b) {
      const [xm, xp] = x.split(" ") as [string, string];
      const [ym, yp] = y.split(" ") as [string, string];
      if (xm !== "*" && ym !== "*" && xm !== ym) continue;
      const method = xm === "*" ? ym : xm;
      if (xp === yp || covers(`* ${xp}`, `* ${yp}`)) out.push(`${method} ${yp}`);
      else if (covers(`* ${yp}`, `* ${xp}`)) out.push(`${method} ${xp}`);
      else if (mayOverlap(`* ${xp}`, `* ${yp}`))
        return `the paths ${xp} and ${yp} both tested: the requests matching both are not one route`;
    }
  }
  return out.length === 0 ? "no request passes all of its path and method tests" : [...new Set(out)];
}

/** An `or` is a route list when every side is only path and method tests: a rule's conditions must all hold. */
function either(node: Node & { kind: "and" | "or" | "xor" }): Translated {
  const routes: string[] = [];
  const notes: string[] = [];
  for (const item of node.items) {
    const s = selectionOf(item);
    if ("refused" in s) return s;
    if (s.except.length > 0 || s.conditions.length > 0 || byAddress(s))
      return {
        refused: `\`${node.text}\`: an or of tests other than the path and method (a rule's conditions must all hold)`,
      };
    if (s.routes === null) return ANY;
    routes.push(...s.routes);
    notes.push(...s.notes);
  }
  return { routes: [...new Set(routes)], except: [], conditions: [], notes };
}

/**
 * `not` of path and method tests: those routes as `except:`. `not` of one condition: its opposite, a request without
 * the value read as empty where that makes it pass as Cloudflare's `not` does (`missing_as_empty`).
 */
function negated(node: Node & { kind: "not" }): Translated {
  const s = selectionOf(node.item);
  if ("refused" in s) return s;
  // `not ip.src in {...}`: every client but those.
  const opposite = s.routes === null && s.except.length === 0 && s.conditions.length === 0 ? negatedAddresses(s) : null;
  if (opposite !== null) return { ...ANY, ...opposite, notes: s.notes };
  if (byAddress(s))
    return { refused: `\`${node.text}\`: not of an ip.src test beside others (each not would need an or)` };
  const only = s.routes === null && s.except.length === 0 && s.conditions.length === 1 ? s.conditions[0]! : null;
  if (only !== null) {
    const flipped = { ...only, not: !only.not };
    const opposite = only.test === "present" ? flipped : readsEmpty({ ...flipped, missingAsEmpty: true }, true);
    if (conditionPasses(opposite, null) !== conditionPasses(only, null))
      return { ...ANY, conditions: [opposite], notes: s.notes };
  }
  if (s.routes === null || s.except.length > 0 || s.conditions.length > 0)
    return {
      refused: `\`${node.text}\`: not of something other than path and method tests or one condition (Cloudflare's not of a header test also matches requests without the header, which this condition's opposite does not)`,
    };
  return { routes: null, except: s.routes, conditions: [], notes: s.notes };
}

/**
 * `c` reading a request without the value as empty (`missing_as_empty`) when `empty` (a field Cloudflare reads as
 * "" when the header is not sent: `http.user_agent`) and that changes what it says of such a request; else `c`.
 */
function readsEmpty(c: MatchCondition, empty: boolean): MatchCondition {
  if (!empty || c.test === "present") return c;
  const flagged: MatchCondition = { ...c, missingAsEmpty: true };
  if (conditionPasses(flagged, null)) return flagged;
  const { missingAsEmpty: _, ...plain } = flagged;
  return plain;
}

const PATH = "http.request.uri.path";
const METHOD = "http.request.method";
/** Fields that are one request header's value. */
const HEADER_FIELDS: Readonly<Record<string, string>> = {
  "http.user_agent": "user-agent",
  "http.referer": "referer",
  "http.x_forwarded_for": "x-forwarded-for",
};
const MAPS: Readonly<Record<string, MatchCondition["in"]>> = {
  "http.request.headers": "header",
  "http.request.cookies": "cookie",
  "http.request.uri.args": "query",
};

function leaf(field: Field, op: Op, values: readonly Value[], text: string): Translated {
  const refuse = (why: string): Translated => ({ refused: `\`${text}\`: ${why}` });
  if (field.unknownCall) return refuse(`${field.name} is a function the import does not read`);
  if (field.name === PATH && field.key === null && field.index === null && !field.len)
    return pathTest(field, op, strings(values), refuse);
  if (field.name === METHOD && field.key === null && field.index === null && !field.len && !field.lower) {
    const methods = strings(values);
    if (methods === null || !methods.every((m) => /^[A-Z]+$/.test(m)))
      return refuse("a method is compared with upper-case names");
    const routes = methods.map((m) => `${m} /**`);
    if (op === "eq" || op === "in") return { ...ANY, routes };
    if (op === "ne") return { ...ANY, except: routes };
    return refuse(`the method is matched with eq, ne or in, not ${op}`);
  }
  if (field.name === "ip.src" && field.key === null && field.index === null && !field.len && !field.lower)
    return addressTest(op, values, refuse);
  const cf = CF_FIELDS[field.name];
  if (cf !== undefined && field.key === null && field.index === null && !field.len && !field.lower)
    return cfTest(cf, op, values, refuse);
  const source = MAPS[field.name] ?? (HEADER_FIELDS[field.name] === undefined ? undefined : "header");
  if (source === undefined) return refuse(fieldReason(field));
  return conditionTest(field, source, op, values, refuse);
}

/**
 * `ip.src in {203.0.113.0/28 2001:db8::/32}`, `ip.src eq 203.0.113.7` (`ne`): the client ranges, as `match.address`
 * (`match.except_address`); `ip.src` is the address Cloudflare saw, the gateway's `CF-Connecting-IP`.
 */
function addressTest(op: Op, values: readonly Value[], refuse: (why: string) => Translated): Translated {
  const texts = values.map((v) => (v.kind === "word" || v.kind === "string" ? v.text : String(v.kind)));
  const list = texts.find((t) => t.startsWith("$"));
  if (list !== undefined)
    return refuse(
      `${list} is a list whose items the rule's JSON does not hold: give them with --list ${list.slice(1)}=FILE`,
    );
  const bad = texts.find((t) => "error" in parseAddressRange(t));
  if (bad !== undefined) return refuse(`${bad} is not an address or a CIDR range`);
  if (op === "eq" || op === "in") return { ...ANY, addresses: texts };
  if (op === "ne") return { ...ANY, exceptAddresses: texts };
  return refuse(`the client address is matched with eq, ne or in, not ${op}`);
}

/** Fields of where Cloudflare places the client, as the `request.cf` field a `match.cf` condition reads. */
const CF_FIELDS: Readonly<Record<string, "country" | "asn">> = {
  "ip.src.country": "country",
  "ip.geoip.country": "country",
  "ip.src.asnum": "asn",
  "ip.geoip.asnum": "asn",
};

/** `ip.src.country in {"CN" "RU"}`, `ip.src.asnum eq 13335`: one `match.cf` test (a country upper-case, as given). */
function cfTest(name: "country" | "asn", op: Op, values: readonly Value[], refuse: (why: string) => Translated) {
  const texts = values.map((v) => (v.kind === "string" ? v.text : v.kind === "number" ? String(v.n) : null));
  if (texts.length === 0 || texts.some((t) => t === null || t === "") || (op !== "eq" && op !== "ne" && op !== "in"))
    return refuse(`the client's ${name} is matched with eq, ne or in of quoted codes or numbers`);
  const list = texts as string[];
  if (name === "country" && list.some((t) => !/^[A-Z0-9]{2}$/.test(t)))
    return refuse("a country is a two-letter code in capitals, as Cloudflare gives it");
  const base = { in: "cf", name, ignoreCase: false, not: op === "ne" } as const;
  const condition: MatchCondition =
    list.length === 1
      ? { ...base, test: "equals", value: list[0]! }
      : { ...base, test: "matches", value: `^(?:${list.map(escapeRegex).join("|")})$` };
  return { ...ANY, conditions: [condition] };
}

function strings(values: readonly Value[]): string[] | null {
  return values.every((v) => v.kind === "string") ? values.map((v) => (v as { text: string }).text) : null;
}

/** Sluice matches the canonical path, lower-case: a path written with capitals is matched ignoring case (stricter). */
function pathTest(field: Field, op: Op, values: string[] | null, refuse: (why: string) => Translated): Translated {
  if (values === null || values.length === 0) return refuse("the path is compared with quoted paths");
  if (op === "wildcard" || op === "strict wildcard") {
    // `*` is any run of characters: a path (none), a prefix (`/api/*`) or an ending (`*.php`) is a route.
    const pieces = values.length === 1 ? values[0]!.split("*") : [];
    const as: Op | null =
      pieces.length === 1
        ? "eq"
        : pieces.length !== 2
          ? null
          : pieces[1] === ""
            ? "starts_with"
            : pieces[0] === ""
              ? "ends_with"
              : null;
    if (as === null) return refuse("a path wildcard is read as a path, a prefix (/api/*) or an ending (*.php)");
    return pathTest(field, as, [pieces.join("")], refuse);
  }
  if (op === "matches") {
    const literal = literalRegex(values[0]!);
    if (literal === null)
      return refuse("a path regex is read only as ^/text (a prefix), ^/text$ (the path) or text$ (an ending)");
    return pathTest(field, literal.op, [literal.text], refuse);
  }
  if (field.lower && values.some((v) => v !== v.toLowerCase()))
    return refuse("lower() of the path never equals a text with capitals");
  const notes =
    !field.lower && values.some((v) => v !== v.toLowerCase())
      ? [`Sluice matches ${values.join(", ")} ignoring case (unless PATH_CASE_SENSITIVE); Cloudflare as written`]
      : [];
  const routes: string[] = [];
  for (const value of values.map((v) => v.toLowerCase())) {
    const pattern = pathPattern(op, value);
    if (pattern === null)
      return refuse(`the path is matched with eq, ne, in, wildcard, starts_with or ends_with, not ${op}`);
    if (op === "ends_with" && value.includes("/"))
      return refuse("a suffix route ends the path's last segment, so its text holds no /");
    const route = compileRoute(`* ${pattern}`);
    if ("error" in route || value.includes("*"))
      return refuse(`${JSON.stringify(value)} cannot be a route (${"error" in route ? route.error : "a literal *"})`);
    routes.push(route.source);
  }
  return op === "ne" ? { ...ANY, except: routes, notes } : { ...ANY, routes, notes };
}

/** A regex that is an anchored literal (`^/api/`, `^/login$`, `\\.php$`) as the test it is; else `null`. */
function literalRegex(re: string): { op: Op; text: string } | null {
  const m = /^(\^?)((?:[^\\.*+?()[\]{}|^$]|\\[^A-Za-z0-9])*)(\$?)$/.exec(re);
  if (m === null || (m[1] === "" && m[3] === "")) return null;
  const text = m[2]!.replace(/\\(.)/g, "$1");
  return { op: m[1] === "" ? "ends_with" : m[3] === "" ? "starts_with" : "eq", text };
}

/** `starts_with "/api/"` is `/api/**`, which also matches `/api` (one trailing slash is ignored: stricter). */
function pathPattern(op: Op, value: string): string | null {
  if (op === "eq" || op === "in" || op === "ne") return value;
  if (op === "starts_with") return `${value}**`;
  if (op === "ends_with") return `/**${value}`;
  return null;
}

const TESTS: Readonly<Record<string, MatchCondition["test"]>> = {
  eq: "equals",
  ne: "equals",
  contains: "contains",
  matches: "matches",
  starts_with: "prefix",
  ends_with: "suffix",
  in: "matches",
};

// long: one check per way a Cloudflare test of a value can differ from a condition, each with its message
function conditionTest(
  field: Field,
  source: MatchCondition["in"],
  op: Op,
  values: readonly Value[],
  refuse: (why: string) => Translated,
): Translated {
  const name = source === "header" ? (HEADER_FIELDS[field.name] ?? field.key?.toLowerCase()) : field.key;
  if (name === undefined || name === null) return refuse(`${field.name} needs a name in ["..."]`);
  if (!(source === "header" ? HEADER_NAME : COOKIE_OR_QUERY_NAME).test(name))
    return refuse(`${JSON.stringify(name)} is not a ${source} name a condition takes`);
  const mapField = MAPS[field.name] !== undefined;
  const base = { in: source, name, ignoreCase: false, not: false } as const;
  if (field.len) {
    // len(http.request.headers["x"]) > 0: the request sends it (Cloudflare's own advice for a present value).
    const n = values.length === 1 && values[0]!.kind === "number" ? values[0]!.n : null;
    const sent = (op === "gt" && n === 0) || (op === "ne" && n === 0) || (op === "ge" && n === 1);
    const absent = (op === "eq" || op === "le") && n === 0;
    if (!mapField || field.index !== null || (!sent && !absent))
      return refuse("len() is read only as > 0 (sent) or eq 0 (not sent) of a header, cookie or query map");
    return { ...ANY, conditions: [{ ...base, test: "present", value: "", not: absent }] };
  }
  if (mapField && field.index !== 0 && field.index !== "*")
    return refuse(`${field.name}["${name}"] is read as its first value, [0], or any value, [*]`);
  const texts = strings(values);
  if ((op === "wildcard" || op === "strict wildcard") && texts?.length === 1 && texts[0] !== "") {
    // `wildcard` ignores case, `strict wildcard` does not; `*` is any run of characters, the whole value matched.
    const value = `^${texts[0]!.split("*").map(escapeRegex).join(".*")}$`;
    const ignoreCase = op === "wildcard" || field.lower;
    return { ...ANY, conditions: [readsEmpty({ ...base, test: "matches", value, ignoreCase, not: false }, !mapField)] };
  }
  const test = TESTS[op];
  if (test === undefined || texts === null || texts.length === 0)
    return refuse(`a value is tested with eq, ne, contains, matches, wildcard, starts_with, ends_with or in { "..." }`);
  if (texts.some((t) => t === "")) return refuse("an empty value: a condition compares with a non-empty text");
  // A regex with capitals too: Sluice's ignore_case would match what lower() never gives (\D and \W included).
  if (field.lower && texts.some((t) => t !== t.toLowerCase()))
    return refuse("lower() of a value never equals a text with capitals");
  const value = op === "in" ? `^(?:${texts.map(escapeRegex).join("|")})$` : texts[0]!;
  if (test === "matches" && regexError(value, field.lower) !== null)
    return refuse(`not a JavaScript regular expression: ${regexError(value, field.lower)}`);
  // `http.user_agent` and the like are "" for a request without the header: `ne` passes it, as missing_as_empty says.
  const condition: MatchCondition = { ...base, test, value, ignoreCase: field.lower, not: op === "ne" };
  return { ...ANY, conditions: [readsEmpty(condition, !mapField)] };
}

/** Why a field is not something a Sluice rule matches on. */
function fieldReason(field: Field): string {
  const name = field.name;
  if (name === "http.host" || name === "http.request.full_uri" || name === "http.request.uri")
    return `${name}: rules match no host, and the path only without its query`;
  if (name.startsWith("ip."))
    return `${name}: rules match no address or network, and of places only the country and AS number (match.cf; a key can count by them)`;
  if (name.startsWith("cf.")) return `${name} is Cloudflare's own field, which a Worker's rule cannot test`;
  if (name.startsWith("http.response.")) return `${name} is a response field: a counting expression's, not a match's`;
  if (name.startsWith("http.request.body")) return `${name}: rules do not read the body`;
  return `${name} is not a field the import maps to a rule's match`;
}
