/**
 * `match.header`, `match.cookie` and `match.query`: a rule that applies only to requests whose headers, cookies or
 * query values pass its conditions (all of them), as Envoy's `header_value_match` and `query_parameter_value_match`
 * and Cloudflare's rule expressions say. Each is one condition or a list: `{ name: X-Plan, equals: gold }`, with one
 * test of `equals`, `prefix`, `suffix`, `contains`, `matches` (a regular expression) or `present` (`true`, or
 * `false` for requests without it), and `ignore_case`, `not` (present, and failing the test) and `missing_as_empty`
 * (a value not sent is tested as `""`). This file reads and prints them; src/request/match.ts tests a request.
 */
import { COOKIE_OR_QUERY_NAME, HEADER_NAME } from "./key.ts";
import { describe, type Raw } from "./raw.ts";
import { type RuleErrors, unknownKey } from "./read.ts";
import type { MatchCondition } from "./types.ts";

/** The `request.cf` fields a `match.cf` condition reads: where Cloudflare says the client is, as the key parts are. */
export const CF_FIELDS = ["country", "asn", "colo", "ja4"] as const;
const CF_NAME = new RegExp(`^(?:${CF_FIELDS.join("|")})$`);

const TESTS = ["equals", "prefix", "suffix", "contains", "matches", "present"] as const;
const KEYS = ["name", ...TESTS, "ignore_case", "not", "missing_as_empty"] as const;
const TAKES = `a condition takes name, one of ${TESTS.join(", ")}, and ignore_case, not and missing_as_empty`;
/** The longest text a condition compares with: a rule is configuration, not data. */
const MAX_VALUE = 4096;

/** What each source's conditions read, and an example of one. */
const SOURCES = {
  header: { example: "{ name: X-Plan, equals: gold }", name: HEADER_NAME, what: "a header name such as X-Plan" },
  cookie: {
    example: "{ name: session, present: true }",
    name: COOKIE_OR_QUERY_NAME,
    what: "a cookie name (printable, no spaces, at most 64 characters)",
  },
  query: {
    example: "{ name: format, equals: csv }",
    name: COOKIE_OR_QUERY_NAME,
    what: "a query parameter name (printable, no spaces, at most 64 characters)",
  },
  cf: { example: "{ name: country, equals: CN }", name: CF_NAME, what: `one of ${CF_FIELDS.join(", ")}` },
} as const;

export type ConditionSource = keyof typeof SOURCES;
export const CONDITION_SOURCES = Object.keys(SOURCES) as ConditionSource[];

/** `match.<in>` from a rule file: one condition or a non-empty list; `undefined` after reporting what is wrong. */
export function readConditions(
  v: Raw | undefined,
  source: ConditionSource,
  e: RuleErrors,
): readonly MatchCondition[] | undefined {
  const list = Array.isArray(v) ? v : [v];
  const field = `match.${source}`;
  if (list.length === 0) {
    e.add(
      field,
      `must be a condition such as ${SOURCES[source].example} or a non-empty list of them, got an empty list`,
    );
    return undefined;
  }
  const out = list.map((c, i) => readCondition(c, Array.isArray(v) ? `${field}[${i}]` : field, source, e));
  return out.every((c) => c !== undefined) ? (out as MatchCondition[]) : undefined;
}

function readCondition(
  v: Raw | undefined,
  field: string,
  source: ConditionSource,
  e: RuleErrors,
): MatchCondition | undefined {
  const { example, name: nameRe, what } = SOURCES[source];
  if (!(v instanceof Map)) {
    e.add(field, `must be a mapping such as ${example}, got ${describe(v)}`);
    return undefined;
  }
  const before = e.count;
  for (const key of v.keys()) {
    if ((KEYS as readonly string[]).includes(key)) continue;
    e.add(`${field}.${key}`, unknownKey(key, KEYS, TAKES, e));
  }
  const name = v.get("name");
  if (typeof name !== "string" || !nameRe.test(name)) e.add(`${field}.name`, `must be ${what}, got ${describe(name)}`);
  const given = TESTS.filter((t) => v.has(t));
  // A misspelt test (`equal`) was named by its did-you-mean already.
  if (given.length !== 1 && !(given.length === 0 && TESTS.some((t) => e.suggested.has(t)))) {
    const got = given.length === 0 ? "none" : given.join(" and ");
    e.add(field, `must give one test of ${TESTS.join(", ")}, got ${got}`);
  }
  const ignoreCase = flag(v, `${field}.ignore_case`, "ignore_case", e);
  const not = flag(v, `${field}.not`, "not", e);
  const missingAsEmpty = flag(v, `${field}.missing_as_empty`, "missing_as_empty", e);
  const test = given[0];
  if (test === "present" && missingAsEmpty !== undefined) {
    e.add(
      `${field}.missing_as_empty`,
      "reads a value not sent as empty for a value test; present tests whether it is sent: drop one of them",
    );
  }
  const value = test === undefined ? undefined : testValue(test, v.get(test), `${field}.${test}`, ignoreCase, e);
  if (e.count > before || test === undefined || value === undefined) return undefined;
  // `present: false` is `present` negated: one spelling of "the header is absent".
  const absent = test === "present" && value === false;
  return {
    in: source,
    name: source === "header" ? (name as string).toLowerCase() : (name as string),
    test,
    value: typeof value === "string" ? value : "",
    ignoreCase: ignoreCase ?? false,
    not: absent ? !(not ?? false) : (not ?? false),
    ...(missingAsEmpty === true ? { missingAsEmpty: true as const } : {}),
  };
}

function flag(v: Map<string, Raw>, field: string, key: string, e: RuleErrors): boolean | undefined {
  if (!v.has(key)) return undefined;
  const x = v.get(key);
  if (typeof x === "boolean") return x;
  e.add(field, `must be true or false, got ${describe(x)}`);
  return undefined;
}

function testValue(
  test: MatchCondition["test"],
  x: Raw | undefined,
  field: string,
  ignoreCase: boolean | undefined,
  e: RuleErrors,
): string | boolean | undefined {
  if (test === "present") {
    if (typeof x === "boolean") return x;
    e.add(field, `must be true (the request carries it) or false (it does not), got ${describe(x)}`);
    return undefined;
  }
  const text = typeof x === "bigint" ? String(x) : x;
  if (typeof text !== "string" || text === "" || text.length > MAX_VALUE) {
    e.add(field, `must be a non-empty text of at most ${MAX_VALUE} characters, got ${describe(x)}`);
    return undefined;
  }
  if (test === "matches") {
    const bad = regexError(text, ignoreCase === true);
    if (bad !== null) {
      e.add(field, `is not a regular expression: ${bad}`);
      return undefined;
    }
    const nested = nestedRepetition(text);
    if (nested !== null) {
      e.warn(
        field,
        `${JSON.stringify(nested)} repeats a group that repeats inside: on a crafted value that can take exponential time (catastrophic backtracking), and the Worker tests every request that carries the value; write it without the nested repetition`,
      );
    }
  }
  return text;
}

/**
 * The first group repeated without bound (`*`, `+`, `{n,}`) that itself holds a repetition, as written (`(a+)+`):
 * JavaScript's backtracking engine can take exponential time on it. `null` when there is none. Escapes and classes
 * are skipped; `(?:`, `(?=` and the like open a group as `(` does.
 */
export function nestedRepetition(source: string): string | null {
  const open: { start: number; repeats: boolean }[] = [];
  let closed: { start: number; repeats: boolean } | null = null;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === "\\") {
      i++;
      closed = null;
    } else if (c === "[") {
      while (i < source.length && source[i] !== "]") i += source[i] === "\\" ? 2 : 1;
      closed = null;
    } else if (c === "(") {
      open.push({ start: i, repeats: false });
      if (source[i + 1] === "?") i++;
      closed = null;
    } else if (c === ")") {
      closed = open.pop() ?? null;
      if (closed?.repeats === true && open.length > 0) open[open.length - 1]!.repeats = true;
    } else if (c === "*" || c === "+" || c === "{" || c === "?") {
      const end = c === "{" ? source.indexOf("}", i) : i;
      const unbounded = c === "*" || c === "+" || (c === "{" && /^\{\d+,\}$/.test(source.slice(i, end + 1)));
      if (unbounded && closed?.repeats === true) return source.slice(closed.start, end + 1);
      // `{n}` repeats a fixed number of times: no choice to backtrack over.
      const exact = c === "{" && /^\{\d+\}$/.test(source.slice(i, end + 1));
      if (open.length > 0 && !exact) open[open.length - 1]!.repeats = true;
      if (c === "{" && end > i) i = end;
      closed = null;
    } else closed = null;
  }
  return null;
}

/** `text` as a regular expression that matches it literally (for a `matches` test built from a literal). */
export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** Why `source` is not a JavaScript regular expression, or `null`. */
export function regexError(source: string, ignoreCase: boolean): string | null {
  try {
    new RegExp(source, ignoreCase ? "i" : "");
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** A condition as a rule file writes it: `{ name: x-plan, equals: gold }`. */
export function printCondition(c: MatchCondition): string {
  const test = c.test === "present" ? `present: ${!c.not}` : `${c.test}: ${JSON.stringify(c.value)}`;
  const more = [
    ...(c.ignoreCase ? ["ignore_case: true"] : []),
    ...(c.not && c.test !== "present" ? ["not: true"] : []),
    ...(c.missingAsEmpty === true ? ["missing_as_empty: true"] : []),
  ];
  return `{ ${[`name: ${c.name}`, test, ...more].join(", ")} }`;
}
