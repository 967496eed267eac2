/**
 * `match.header`, `match.cookie`, `match.query` (src/rules/match_conditions.ts, src/request/match.ts
 * `conditionPasses`): what each spelling resolves to, each mistake's message with its place, and a table of
 * (condition, value) -> passes.
 */
import { describe, expect, it } from "vitest";
import { conditionPasses } from "../../src/request/match.ts";
import { printRule } from "../../src/rules/fields.ts";
import { nestedRepetition } from "../../src/rules/match_conditions.ts";
import type { MatchCondition } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ALGO = "  algorithm: gcra\n  rate: 10/s\n  burst: 20\n";
const rule = (match: string) => parseRules(`- id: r\n  match: ${match}\n${ALGO}`, "h.yaml");
const cond = (c: Partial<MatchCondition> & Pick<MatchCondition, "test">): MatchCondition => ({
  in: "header",
  name: "x-h",
  value: "",
  ignoreCase: false,
  not: false,
  ...c,
});

describe("match.header: what each spelling resolves to", () => {
  it.each<[string, MatchCondition[]]>([
    [
      "{ header: { name: X-Plan, equals: gold }, identity: ip }",
      [cond({ name: "x-plan", test: "equals", value: "gold" })],
    ],
    [
      "{ header: [{ name: X-Sdk, prefix: '1.' }, { name: User-Agent, matches: 'bot$', ignore_case: true }], identity: ip }",
      [
        cond({ name: "x-sdk", test: "prefix", value: "1." }),
        cond({ name: "user-agent", test: "matches", value: "bot$", ignoreCase: true }),
      ],
    ],
    ["{ header: { name: X-A, present: true }, identity: ip }", [cond({ name: "x-a", test: "present" })]],
    ["{ header: { name: X-A, present: false }, identity: ip }", [cond({ name: "x-a", test: "present", not: true })]],
    ["{ header: { name: X-A, present: false, not: true }, identity: ip }", [cond({ name: "x-a", test: "present" })]],
    [
      "{ header: { name: X-A, suffix: x, not: true }, identity: ip }",
      [cond({ name: "x-a", test: "suffix", value: "x", not: true })],
    ],
    ["{ header: { name: X-V, equals: 2 }, identity: ip }", [cond({ name: "x-v", test: "equals", value: "2" })]],
    // Cookie and query names keep their case (they are case-sensitive); every source's conditions, in that order.
    [
      "{ query: { name: Format, equals: csv }, cookie: { name: Session, present: false }, header: { name: X-A, present: true }, identity: ip }",
      [
        cond({ name: "x-a", test: "present" }),
        cond({ in: "cookie", name: "Session", test: "present", not: true }),
        cond({ in: "query", name: "Format", test: "equals", value: "csv" }),
      ],
    ],
  ])("%s", (match, conditions) => {
    const { rules, errors } = rule(match);
    expect(errors).toEqual([]);
    expect(rules[0]!.match.conditions).toEqual(conditions);
  });

  it("a rule without it has none, and prints as any", () => {
    const { rules } = rule("{ identity: ip }");
    expect(rules[0]!.match.conditions).toBeUndefined();
    expect(Object.fromEntries(printRule(rules[0]!))).toMatchObject({
      "match.header": "any",
      "match.cookie": "any",
      "match.query": "any",
    });
  });

  it("match.cf: where Cloudflare says the client is, printed back", () => {
    const { rules } = rule(
      "{ cf: [{ name: country, matches: '^(?:CN|RU)$' }, { name: asn, equals: '13335', not: true }], identity: ip }",
    );
    expect(rules[0]!.match.conditions).toEqual([
      cond({ in: "cf", name: "country", test: "matches", value: "^(?:CN|RU)$" }),
      cond({ in: "cf", name: "asn", test: "equals", value: "13335", not: true }),
    ]);
    expect(Object.fromEntries(printRule(rules[0]!))["match.cf"]).toBe(
      '{ name: country, matches: "^(?:CN|RU)$" }, { name: asn, equals: "13335", not: true }',
    );
  });

  it("missing_as_empty: read, and printed back", () => {
    const { rules } = rule("{ header: { name: X-A, equals: b, not: true, missing_as_empty: true }, identity: ip }");
    expect(rules[0]!.match.conditions).toEqual([
      cond({ name: "x-a", test: "equals", value: "b", not: true, missingAsEmpty: true }),
    ]);
    expect(Object.fromEntries(printRule(rules[0]!))["match.header"]).toBe(
      '{ name: x-a, equals: "b", not: true, missing_as_empty: true }',
    );
    const off = rule("{ header: { name: X-A, equals: b, missing_as_empty: false }, identity: ip }");
    expect(off.rules[0]!.match.conditions).toEqual([cond({ name: "x-a", test: "equals", value: "b" })]);
  });

  it("prints in rule-file terms", () => {
    const { rules } = rule(
      "{ header: [{ name: X-A, contains: b, not: true }, { name: X-B, present: false }], identity: ip }",
    );
    expect(Object.fromEntries(printRule(rules[0]!))["match.header"]).toBe(
      '{ name: x-a, contains: "b", not: true }, { name: x-b, present: false }',
    );
  });
});

describe("match.header: each mistake, its message", () => {
  it.each([
    [
      "{ header: [], identity: ip }",
      "h.yaml:2:20: r.match.header: must be a condition such as { name: X-Plan, equals: gold } or a non-empty list of them, got an empty list",
    ],
    [
      "{ header: X-Plan, identity: ip }",
      'h.yaml:2:20: r.match.header: must be a mapping such as { name: X-Plan, equals: gold }, got "X-Plan"',
    ],
    [
      "{ header: { name: X-Plan, equal: gold }, identity: ip }",
      'h.yaml:2:36: r.match.header.equal: unknown key; did you mean "equals"?',
    ],
    [
      "{ header: { name: 'X Plan', equals: gold }, identity: ip }",
      'h.yaml:2:28: r.match.header.name: must be a header name such as X-Plan, got "X Plan"',
    ],
    [
      "{ header: { name: X-Plan }, identity: ip }",
      "h.yaml:2:20: r.match.header: must give one test of equals, prefix, suffix, contains, matches, present, got none",
    ],
    [
      "{ header: [{ name: X-Plan, equals: a, prefix: b }], identity: ip }",
      "h.yaml:2:21: r.match.header[0]: must give one test of equals, prefix, suffix, contains, matches, present, got equals and prefix",
    ],
    [
      "{ header: { name: X-Plan, equals: '' }, identity: ip }",
      'h.yaml:2:44: r.match.header.equals: must be a non-empty text of at most 4096 characters, got ""',
    ],
    [
      "{ header: { name: X-Plan, present: yes }, identity: ip }",
      'h.yaml:2:45: r.match.header.present: must be true (the request carries it) or false (it does not), got "yes"',
    ],
    [
      "{ header: { name: X-Plan, equals: a, not: 1 }, identity: ip }",
      "h.yaml:2:52: r.match.header.not: must be true or false, got 1",
    ],
    [
      "{ header: { name: X-Plan, present: false, missing_as_empty: true }, identity: ip }",
      "h.yaml:2:70: r.match.header.missing_as_empty: reads a value not sent as empty for a value test; present tests whether it is sent: drop one of them",
    ],
    [
      "{ header: { name: X-Plan, equals: a, missing_as_empty: 'yes' }, identity: ip }",
      'h.yaml:2:65: r.match.header.missing_as_empty: must be true or false, got "yes"',
    ],
    [
      "{ header: { name: X-Plan, equals: a, missing: empty }, identity: ip }",
      'h.yaml:2:47: r.match.header.missing: unknown key; did you mean "missing_as_empty"?',
    ],
    [
      "{ cookie: { name: 'a b', present: true }, identity: ip }",
      'h.yaml:2:28: r.match.cookie.name: must be a cookie name (printable, no spaces, at most 64 characters), got "a b"',
    ],
    [
      "{ query: [], identity: ip }",
      "h.yaml:2:19: r.match.query: must be a condition such as { name: format, equals: csv } or a non-empty list of them, got an empty list",
    ],
    [
      "{ cf: { name: contry, equals: CN }, identity: ip }",
      'h.yaml:2:24: r.match.cf.name: must be one of country, asn, colo, ja4, got "contry"',
    ],
    [
      "{ qurey: { name: a, present: true }, identity: ip }",
      'h.yaml:2:12: r.match.qurey: unknown key; did you mean "query"?',
    ],
  ])("%#: %s", (match, message) => {
    const { rules, errors } = rule(match);
    expect(rules).toEqual([]);
    expect(errors).toEqual([message]);
  });

  it.each([
    [
      "{ header: { equals: gold }, identity: ip }",
      /r\.match\.header\.name: must be a header name such as X-Plan, got an empty value/,
    ],
    [
      "{ header: { name: X-A, equals: true }, identity: ip }",
      /r\.match\.header\.equals: must be a non-empty text of at most 4096 characters, got true/,
    ],
    [
      `{ header: { name: X-A, equals: '${"a".repeat(4097)}' }, identity: ip }`,
      /must be a non-empty text of at most 4096 characters/,
    ],
    [
      "{ header: { name: X-A, wibble: 1 }, identity: ip }",
      /r\.match\.header\.wibble: unknown key \(a condition takes name, one of equals, prefix, suffix, contains, matches, present, and ignore_case, not and missing_as_empty\)/,
    ],
  ])("%#: refused: %s", (match, message) => {
    const { rules, errors } = rule(match);
    expect(rules).toEqual([]);
    expect(errors.some((m) => message.test(m))).toBe(true);
  });

  it("a text test is not a regular expression: `(` is a valid value to compare with; 4096 characters are allowed", () => {
    expect(rule("{ header: { name: X-A, equals: '(' }, identity: ip }").errors).toEqual([]);
    expect(rule(`{ header: { name: X-A, prefix: '${"a".repeat(4096)}' }, identity: ip }`).errors).toEqual([]);
  });

  it("prints ignore_case", () => {
    const { rules } = rule("{ header: { name: X-A, matches: 'a+', ignore_case: true }, identity: ip }");
    expect(Object.fromEntries(printRule(rules[0]!))["match.header"]).toBe(
      '{ name: x-a, matches: "a+", ignore_case: true }',
    );
  });

  it("a regular expression that does not compile names why", () => {
    const { errors } = rule("{ header: { name: User-Agent, matches: 'bot(' }, identity: ip }");
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^h\.yaml:2:\d+: r\.match\.header\.matches: is not a regular expression: .*bot\(/);
  });
});

describe("conditionPasses: a condition against a header's value (null: not sent)", () => {
  it.each<[Partial<MatchCondition> & Pick<MatchCondition, "test">, string | null, boolean]>([
    [{ test: "equals", value: "gold" }, "gold", true],
    [{ test: "equals", value: "gold" }, "Gold", false],
    [{ test: "equals", value: "gold", ignoreCase: true }, "GOLD", true],
    [{ test: "equals", value: "gold" }, "gold, gold", false],
    [{ test: "equals", value: "gold" }, null, false],
    [{ test: "prefix", value: "1." }, "1.4.2", true],
    [{ test: "prefix", value: "1." }, "11.0", false],
    [{ test: "suffix", value: "bot" }, "googlebot", true],
    [{ test: "suffix", value: "bot" }, "bots", false],
    [{ test: "contains", value: "Bot" }, "Mozilla (Googlebot)", false],
    [{ test: "contains", value: "Bot", ignoreCase: true }, "Mozilla (Googlebot)", true],
    [{ test: "matches", value: "^v[0-9]+$" }, "v12", true],
    [{ test: "matches", value: "^v[0-9]+$" }, "v12x", false],
    [{ test: "matches", value: "BOT", ignoreCase: true }, "a-bot-b", true],
    [{ test: "matches", value: "bot" }, null, false],
    [{ test: "present" }, "", true],
    [{ test: "present" }, null, false],
    [{ test: "present", not: true }, null, true],
    [{ test: "present", not: true }, "x", false],
    // `not`: the header is sent and fails the test; a header not sent passes no value test (Envoy's invert_match).
    [{ test: "equals", value: "gold", not: true }, "silver", true],
    [{ test: "equals", value: "gold", not: true }, "gold", false],
    [{ test: "equals", value: "gold", not: true }, null, false],
    [{ test: "matches", value: "bot", not: true }, "curl/8", true],
    // `missing_as_empty`: a value not sent is tested as "" (NGINX's missing header, Envoy's treat_missing_header_as_empty).
    [{ test: "matches", value: "bot", not: true, missingAsEmpty: true }, null, true],
    [{ test: "matches", value: "bot", not: true, missingAsEmpty: true }, "a bot", false],
    [{ test: "equals", value: "gold", missingAsEmpty: true }, null, false],
    [{ test: "prefix", value: "x", not: true, missingAsEmpty: true }, "", true],
  ])("%j with %j: %s", (c, value, expected) => {
    expect(conditionPasses(cond(c), value)).toBe(expected);
  });
});

describe("a regex that repeats a repeating group: a warning (catastrophic backtracking on a crafted value)", () => {
  it.each([
    ["(a+)+", "(a+)+"],
    ["(a*)*b", "(a*)*"],
    ["^(?:\\w+\\s?)*$", "(?:\\w+\\s?)*"],
    ["([a-z]+){2,}", "([a-z]+){2,}"],
    ["(a{2,})+", "(a{2,})+"],
    ["(x|y)+", null],
    ["bot|crawler", null],
    ["^.*bot.*$", null],
    ["(a+)?", null],
    ["(ab){1,3}", null],
    ["(a{2})+", null],
    ["\\(a+\\)+", null],
    ["[(a+)]+", null],
  ])("%s: %s", (source, nested) => {
    expect(nestedRepetition(source)).toBe(nested);
  });

  it("is a warning with the field's place, and the rule is still valid", () => {
    const { rules, errors, warnings } = rule(
      "{ header: { name: User-Agent, matches: '^(\\w+\\s?)*$' }, identity: ip }",
    );
    expect(errors).toEqual([]);
    expect(rules).toHaveLength(1);
    expect(warnings).toEqual([
      'h.yaml:2:49: r.match.header.matches: warning: "(\\\\w+\\\\s?)*" repeats a group that repeats inside: on a crafted value that can take exponential time (catastrophic backtracking), and the Worker tests every request that carries the value; write it without the nested repetition',
    ]);
  });
});
