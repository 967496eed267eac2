/**
 * A `map $http_NAME $key` that gives the key only to requests whose header has some values (NGINX's way to limit
 * bots by `User-Agent`, or one client version), as `match.header`: the values the map lists, in one regular
 * expression. NGINX compares a map's strings ignoring case and tries them before its regexes (`~`, `~*` ignoring
 * case), in order, before `default` (ngx_http_map_module). A request without the header reads as the empty value.
 */
import { conditionPasses } from "../request/match.ts";
import { escapeRegex } from "../rules/match_conditions.ts";
import type { MatchCondition } from "../rules/types.ts";
import { emptyTest } from "./empty_test.ts";

/** A map as this file reads it: its entries in order and its `default` (nginx_map_sources.ts `NginxMap`). */
interface ListedMap {
  readonly entries: readonly { readonly value: string; readonly result: string }[];
  readonly fallback: string;
}

/** The conditions under which the map (`said`: how the report names it) gives its one key, or why one rule cannot. */
export function headerConditions(
  map: ListedMap,
  said: string,
  source: MatchCondition["in"],
  header: string,
): readonly MatchCondition[] | { refused: string } {
  const refuse = (why: string) => ({ refused: `${said}: ${why}` });
  const noun = nounOf(source, header);
  const given = map.entries.filter((e) => e.result !== "");
  if (map.fallback !== "") {
    const exempted = given.every((e) => e.result === map.fallback) ? allButExempt(map, source, header) : null;
    if (exempted !== null) return exempted;
    return refuse(
      `requests that do not send the ${noun}, or send a value it does not list, get the key ${map.fallback}, and one test cannot say which values it leaves out (a value listed for the key that an exempting regex also takes, regexes of both cases, or regexes giving the key beside exempting ones)`,
    );
  }
  // Strings are tried before regexes: an empty key's regex can take only from the key's regexes, in order.
  const empty = map.entries.filter((e) => e.result === "" && e.value !== "" && !e.value.startsWith("~"));
  if (
    given.some((e) => e.value.startsWith("~")) &&
    map.entries.some((e) => e.result === "" && e.value.startsWith("~"))
  ) {
    return refuse(
      "a regex that gives an empty key (or another key) beside regexes that give the key (tried in order) is not imported",
    );
  }
  const wanted = alternation(given.map((e) => e.value));
  if ("refused" in wanted) return refuse(wanted.refused);
  const conditions: MatchCondition[] = [{ in: source, name: header, test: "matches", ...wanted, not: false }];
  // A listed value that gives an empty key wins over the regexes (strings come first): left out by a second test.
  if (empty.length > 0) {
    const exempt = alternation(empty.map((e) => e.value));
    if ("refused" in exempt) return refuse(exempt.refused);
    conditions.push({ in: source, name: header, test: "matches", ...exempt, not: true });
  }
  // NGINX reads a missing header as "": a map that gives "" the key limits requests without it, as these then do.
  return conditions.every((c) => conditionPasses(c, "")) ? conditions.map(missingAsEmpty) : conditions;
}

const missingAsEmpty = (c: MatchCondition): MatchCondition => ({ ...c, missingAsEmpty: true });

/**
 * A map whose `default` gives the key and whose listed values exempt (`default $binary_remote_addr; ~*bot "";`):
 * one `not` test of the exempt values, a request without the value read as "" (as NGINX reads it). Values listed
 * with the key too are `default`'s anyway, unless an exempting regex takes them (strings are tried first): then
 * `null`, for one test cannot say it. `null` too when the regexes cannot share one expression.
 */
function allButExempt(map: ListedMap, source: MatchCondition["in"], name: string): MatchCondition[] | null {
  const exempt = map.entries.filter((e) => e.result === "");
  const regexes = exempt.filter((e) => e.value.startsWith("~"));
  const keyed = map.entries.filter((e) => e.result !== "");
  if (regexes.length > 0 && keyed.some((e) => e.value.startsWith("~"))) return null;
  if (exempt.length === 0) return null;
  const alt = alternation(exempt.map((e) => e.value));
  if ("refused" in alt) return null;
  const c: MatchCondition = { in: source, name, test: "matches", ...alt, not: true, missingAsEmpty: true };
  // A value listed with the key that an exempting regex takes: NGINX gives it the key, this test would not.
  return keyed.every((e) => conditionPasses(c, e.value)) ? [c] : null;
}

/** How the report names what a condition reads: `x-plan header`, `token query parameter`, `client's country`. */
export function nounOf(source: MatchCondition["in"], name: string): string {
  if (source === "cf") return `client's ${name} (as Cloudflare locates it; NGINX's GeoIP database may differ)`;
  return `${name} ${source === "query" ? "query parameter" : source}`;
}

/**
 * A map that gives several keys by the value (`"" umbrella; ~bot $http_user_agent;` ... `default ""`), as one rule
 * per key: the values giving it, with other keys' strings (tried first) left out by a `not` test, and `""` (a request
 * without the value, or with it empty) as `matches: ^$` with `missing_as_empty`; `default`'s key, if any, for every value no other key takes (`allButExempt`).
 * Regexes for one key at most.
 */
export function keysByValue(
  map: ListedMap,
  said: string,
  source: MatchCondition["in"],
  name: string,
): { readonly variants: readonly { key: string; conditions: readonly MatchCondition[] }[] } | { refused: string } {
  const noun = nounOf(source, name);
  const keys = [...new Set([...map.entries.map((e) => e.result), map.fallback].filter((r) => r !== ""))];
  const variants: { key: string; conditions: readonly MatchCondition[] }[] = [];
  for (const key of keys) {
    const mine = map.entries.filter((e) => e.result === key);
    if (mine.some((e) => e.value === "")) {
      if (mine.length > 1 || map.fallback === key)
        return {
          refused: `${said}: ${key} is given to requests without the ${noun} and to others too: one rule cannot say both`,
        };
      variants.push({
        key,
        conditions: [emptyTest(source, name, true)],
      });
      continue;
    }
    // The default's key is every other value's exemption; another key's test leaves "" to the key given it.
    const own = map.fallback === key ? map.entries : map.entries.filter((e) => e.value !== "");
    const one = {
      entries: own.map((e) => ({ value: e.value, result: e.result === key ? key : "" })),
      fallback: map.fallback === key ? key : "",
    };
    const conditions = headerConditions(one, said, source, name);
    if ("refused" in conditions) return conditions;
    if (map.fallback !== key && map.entries.some((e) => e.value === "") && conditions.some((c) => c.missingAsEmpty))
      return { refused: `${said}: ${key}'s regexes take the empty value, which "" gives another key` };
    variants.push({ key, conditions });
  }
  return { variants };
}

/**
 * Map values as one regular expression: strings (ignoring case, as NGINX compares them) whole, regexes as written.
 * `~*` regexes ignore case, `~` ones do not: the two cannot share one expression's flag.
 */
function alternation(values: readonly string[]): { value: string; ignoreCase: boolean } | { refused: string } {
  const caseless = values.some((v) => v.startsWith("~*"));
  const cased = values.some((v) => v.startsWith("~") && !v.startsWith("~*"));
  if (caseless && cased) return { refused: "its regexes mix ~ (case) and ~* (any case), which one test cannot say" };
  const parts = values.map((v) =>
    v.startsWith("~*") ? v.slice(2) : v.startsWith("~") ? v.slice(1) : `^${literal(v, cased)}$`,
  );
  const value = parts.length === 1 ? parts[0]! : parts.map((p) => `(?:${p})`).join("|");
  try {
    new RegExp(value);
  } catch (err) {
    return { refused: `its regex ${JSON.stringify(value)} is not one JavaScript reads (${(err as Error).message})` };
  }
  return { value, ignoreCase: !cased };
}

/** A map string as a regex: escaped; with `cased` (beside case-sensitive regexes), each letter in both cases. */
function literal(text: string, cased: boolean): string {
  const escaped = escapeRegex(text);
  return cased ? escaped.replace(/[A-Za-z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`) : escaped;
}
