/**
 * src/migrate/json_at.ts: the values JSON.parse gives (for any JSON, and for numbers at the edges of a double), where
 * each value starts, and syntax errors with their place and reason.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JsonSyntaxError, MAX_DEPTH, readJson } from "../../src/migrate/json_at.ts";

describe("readJson reads what JSON.parse reads", () => {
  it("for any JSON, compact or indented", () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: "binary" }), fc.constantFrom(undefined, 2, "\t"), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        expect(readJson(text).value).toEqual(JSON.parse(text));
      }),
    );
  });

  it.each([
    "-0",
    "1e400",
    "-1e400",
    "5e-324",
    "2e-324",
    "0.1",
    "1E+2",
    "1e-2",
    "9007199254740993",
    "123456789012345678901234567890",
    "0.30000000000000004",
    "1.7976931348623157e308",
  ])("the number %s", (text) => {
    expect(Object.is(readJson(text).value, JSON.parse(text))).toBe(true);
    expect(Object.is((readJson(`{"n": [${text}]}`).value as { n: number[] }).n[0], JSON.parse(text))).toBe(true);
  });

  it.each([
    String.raw`"a\"b\\c\/d\b\f\n\r\t"`,
    String.raw`"\u00e9\uD83D\uDE00"`,
    String.raw`"\ud800"`,
    '"\u2028 é 😀"',
    '"\u007f"',
  ])("the string %s", (text) => {
    expect(readJson(text).value).toBe(JSON.parse(text));
  });

  it('keeps "__proto__" an own key, as JSON.parse does', () => {
    const text = '{"__proto__": {"x": 1}, "a": 2}';
    const value = readJson(text).value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(["__proto__", "a"]);
    expect(value).toEqual(JSON.parse(text));
  });

  it("skips a byte order mark, which JSON.parse refuses", () => {
    const json = readJson('\ufeff{"a": 1}');
    expect(json.value).toEqual({ a: 1 });
    expect(json.start).toEqual({ line: 1, col: 1 });
  });
});

describe("readJson: where each value starts", () => {
  const text = ["{", '  "rules": [', '    {"a": 1,', '     "b": [true, null]},', '    "x"', "  ]", "}"].join("\r\n");
  const json = readJson(text);
  const root = json.value as { rules: [{ a: number; b: unknown[] }, string] };
  const rules = root.rules;

  it.each([
    ["the document", () => json.start, [1, 1]],
    ["the root object", () => json.at(root), [1, 1]],
    ["rules", () => json.at(root, "rules"), [2, 12]],
    ["rules[0]", () => json.at(rules, 0), [3, 5]],
    ["rules[0].a", () => json.at(rules[0], "a"), [3, 11]],
    ["rules[0].b", () => json.at(rules[0], "b"), [4, 11]],
    ["rules[0].b[1]", () => json.at(rules[0].b, 1), [4, 18]],
    ["rules[1]", () => json.at(rules, 1), [5, 5]],
    ["a missing key: its object", () => json.at(rules[0], "c"), [3, 5]],
    ["a missing index: its list", () => json.at(rules, 7), [2, 12]],
  ] as const)("%s", (_, at, [line, col]) => {
    expect(at()).toEqual({ line, col });
  });
});

describe("readJson: malformed JSON, with the place and the reason", () => {
  it.each([
    ["", "1:1: the file is empty: no JSON value in it"],
    ["  \n ", "2:2: the file is empty: no JSON value in it"],
    ['{"a": 1,}', '1:8: a comma before "}": JSON allows no trailing comma'],
    ["[\n  1,\n  2,\n]", '3:4: a comma before "]": JSON allows no trailing comma'],
    ['{\n  "a": [1, 2', "2:13: the file ends inside the list opened at 2:8 (is it cut short?)"],
    ['{\n  "a": 1,\n', "3:1: the file ends inside the object opened at 1:1 (is it cut short?)"],
    ['{"a": ', "1:7: the file ends inside the object opened at 1:1 (is it cut short?)"],
    ['{"a": "b', "1:9: the file ends inside the string opened at 1:7 (is it cut short?)"],
    ['{"a": 1}\n}', '2:1: "}" after the JSON value, which ended at 1:9'],
    ['{"a": 1} {"b": 2}', '1:10: "{" after the JSON value, which ended at 1:9'],
    ["{'a': 1}", `1:2: expected a key in double quotes, got "'"`],
    ["{a: 1}", '1:2: expected a key in double quotes, got "a"'],
    ["{\"a\": 'b'}", "1:7: a JSON string is in double quotes, not single ones"],
    ['// rules\n{"a": 1}', "1:1: JSON has no comments"],
    ['{"a": 1 /* one */}', '1:9: expected "," or "}" after the value of "a", got "/"'],
    ['{"a": 01}', "1:7: 01 is not a JSON number"],
    ['{"a": .5}', "1:7: .5 is not a JSON number"],
    ['{"a": 1.}', "1:7: 1. is not a JSON number"],
    ['{"a": 0x1F}', "1:7: 0x1F is not a JSON number"],
    ['{"a": -Infinity}', "1:7: -Infinity is not a JSON number"],
    ['{"a": NaN}', "1:7: NaN is not a JSON value (its words are true, false and null)"],
    ['{"a": True}', "1:7: True is not a JSON value (its words are true, false and null)"],
    ['{"a" 1}', '1:6: expected ":" after the key "a", got "1"'],
    ['{"a": 1 "b": 2}', '1:9: expected "," or "}" after the value of "a", got "\\""'],
    ["[1 2]", '1:4: expected "," or "]" after item 0 of the list, got "2"'],
    ["[,1]", '1:2: "," where a value was expected'],
    [String.raw`"a\qb"`, String.raw`1:3: "\\q" is not a JSON escape (\" \\ \/ \b \f \n \r \t \uXXXX)`],
    [String.raw`"\u12"`, String.raw`1:2: "\\u" is not a JSON escape (\" \\ \/ \b \f \n \r \t \uXXXX)`],
    ['{"a": "one\ntwo"}', "1:11: a string not closed on its line (a line break in one is written \\n)"],
    ['"a\tb"', "1:3: U+0009 in a string (write it as an escape)"],
    ["\u00a0{}", "1:1: U+00A0 where a value was expected"],
  ])("%j: %s", (text, message) => {
    expect(() => readJson(text)).toThrow(JsonSyntaxError);
    let thrown: unknown;
    try {
      readJson(text);
    } catch (err) {
      thrown = err;
    }
    expect((thrown as Error).message).toBe(message);
    expect(() => JSON.parse(text)).toThrow();
    expect((thrown as JsonSyntaxError).parsable).toBe(false);
  });

  it.each([
    [
      '{"a": 1,\n "a": 2}',
      '2:2: the key "a" twice in one object (first at 1:2): JSON.parse would keep the last silently; keep one of them',
    ],
    [
      `${"[".repeat(MAX_DEPTH + 1)}${"]".repeat(MAX_DEPTH + 1)}`,
      `1:${MAX_DEPTH + 1}: objects and lists nested more than ${MAX_DEPTH} deep`,
    ],
  ])("refuses what JSON.parse reads: %j: %s", (text, message) => {
    expect(() => readJson(text)).toThrow(JsonSyntaxError);
    expect(() => readJson(text)).toThrow(message);
    expect(() => JSON.parse(text)).not.toThrow();
    expect(() => readJson(text)).toThrow(expect.objectContaining({ parsable: true }));
  });

  it(`reads ${MAX_DEPTH} deep`, () => {
    expect(() => readJson(`${"[".repeat(MAX_DEPTH)}${"]".repeat(MAX_DEPTH)}`)).not.toThrow();
  });
});
