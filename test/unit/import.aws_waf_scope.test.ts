/**
 * `sluice import aws-waf`: each scope-down statement as the match it must give (routes, except, conditions), and each
 * one the import cannot say left out with the part it names, so no rule is written with a test dropped.
 */
import { describe, expect, it } from "vitest";
import { importAwsWaf } from "../../src/migrate/aws_import.ts";
import { readIpSet } from "../../src/migrate/aws_ip_set.ts";
import { rulesYaml } from "../../src/migrate/report.ts";
import { conditionPasses } from "../../src/request/match.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import {
  and,
  byte,
  header,
  imported,
  kinds,
  line,
  method,
  not,
  type Obj,
  or,
  path,
  scoped,
  tt,
} from "../support/aws_waf.ts";

const query = (name: string, s: string, c = "EXACTLY") => byte({ SingleQueryArgument: { Name: name } }, s, c);
const cookie = (name: string, s: string) =>
  byte({ Cookies: { MatchPattern: { IncludedCookies: [name] }, MatchScope: "VALUE", OversizeHandling: "MATCH" } }, s);
const size = (name: string, ComparisonOperator = "GT", Size = 0) => ({
  SizeConstraintStatement: {
    FieldToMatch: { SingleHeader: { Name: name } },
    ComparisonOperator,
    Size,
    TextTransformations: tt("NONE"),
  },
});
const regex = (name: string, RegexString: string) => ({
  RegexMatchStatement: { RegexString, FieldToMatch: { SingleHeader: { Name: name } }, TextTransformations: tt("NONE") },
});
const geo = (...CountryCodes: string[]) => ({ GeoMatchStatement: { CountryCodes } });

const TAIL = "ip limit=100 window=min status=403";

describe("scope-down statements as a match", () => {
  it.each<[string, Obj, string]>([
    ["a path", path("/login"), "* /login"],
    ["a prefix", path("/api/", "STARTS_WITH"), "* /api/**"],
    ["a prefix without a slash", path("/api", "STARTS_WITH"), "* /api**"],
    ["an ending", path(".php", "ENDS_WITH"), "* /**.php"],
    ["a path lower-cased", path("/login", "EXACTLY", "LOWERCASE", "URL_DECODE"), "* /login"],
    ["POST /login", and(path("/login"), method("POST")), "POST /login"],
    ["post after LOWERCASE", and(path("/login"), byte({ Method: {} }, "post", "EXACTLY", "LOWERCASE")), "POST /login"],
    ["an OR of paths", or(path("/a"), path("/b", "STARTS_WITH")), "* /a|* /b**"],
    ["NOT of a path", not(path("/health")), "* except=* /health"],
    [
      "a path and NOT of another",
      and(path("/api/", "STARTS_WITH"), not(path("/api/health"))),
      "* /api/** except=* /api/health",
    ],
    ["a header", header("X-Plan", "free"), '* header={ name: x-plan, equals: "free" }'],
    ["a header prefix", header("user-agent", "curl/", "STARTS_WITH"), '* header={ name: user-agent, prefix: "curl/" }'],
    [
      "a header suffix, lower-cased",
      header("user-agent", "bot", "ENDS_WITH", "LOWERCASE"),
      '* header={ name: user-agent, suffix: "bot", ignore_case: true }',
    ],
    ["a header contains", header("user-agent", "bot", "CONTAINS"), '* header={ name: user-agent, contains: "bot" }'],
    [
      "a header word",
      header("user-agent", "bot", "CONTAINS_WORD"),
      '* header={ name: user-agent, matches: "\\\\bbot\\\\b" }',
    ],
    ["a regex", regex("user-agent", "^curl/[0-9]+"), '* header={ name: user-agent, matches: "^curl/[0-9]+" }'],
    ["a query argument", query("format", "csv"), '* query={ name: format, equals: "csv" }'],
    ["a cookie", cookie("tier", "free"), '* cookie={ name: tier, equals: "free" }'],
    // AWS fails a value sent empty (size 0) as it fails one not sent: "not empty", a missing value read as empty.
    [
      "a header sent with a value",
      size("x-api-key"),
      '* header={ name: x-api-key, matches: "^$", not: true, missing_as_empty: true }',
    ],
    [
      "a header not sent or empty (AWS's own example)",
      not(size("user-agent")),
      '* header={ name: user-agent, matches: "^$", missing_as_empty: true }',
    ],
    [
      "NOT of a header test: a request without it passes, as in AWS",
      not(header("x-internal", "yes")),
      '* header={ name: x-internal, equals: "yes", not: true, missing_as_empty: true }',
    ],
    ["a country", geo("CN"), '* cf={ name: country, equals: "CN" }'],
    ["countries", geo("CN", "RU"), '* cf={ name: country, matches: "^(?:CN|RU)$" }'],
    [
      "outside countries",
      not(geo("US", "CA")),
      '* cf={ name: country, matches: "^(?:US|CA)$", not: true, missing_as_empty: true }',
    ],
    ["an AS number", { AsnMatchStatement: { AsnList: [64496] } }, '* cf={ name: asn, equals: "64496" }'],
    [
      "all of them",
      and(path("/login"), method("POST"), header("x-plan", "free"), geo("CN")),
      'POST /login header={ name: x-plan, equals: "free" } cf={ name: country, equals: "CN" }',
    ],
    ["a SearchString in base64, as the CLI prints it", path("L2xvZ2lu"), "* /login"],
  ])("%s", (_, scope, want) => {
    expect(imported(scoped(scope)).rules.map(line)).toEqual([`r ${want} ${TAIL}`]);
  });

  it.each<[string, Obj, RegExp]>([
    ["a path with capitals", path("/Login"), /^Sluice matches \/Login ignoring case/],
    [
      "a query argument's name",
      query("format", "csv"),
      /^AWS finds query argument format under any spelling of its name/,
    ],
    ["a regex", regex("user-agent", "bot"), /^AWS runs the regex as PCRE/],
  ])("%s is approximate", (_, scope, message) => {
    expect(kinds(imported(scoped(scope)), "approximate")[0]).toMatch(message);
  });

  it("a size over 0 and its NOT decide a value sent empty as one not sent, as AWS does", () => {
    const passes = (scope: Obj, value: string | null) => {
      const rules = parseRules(rulesYaml(imported(scoped(scope)), "t"), "x.yaml").rules;
      return (rules[0]!.match.conditions ?? []).every((c) => conditionPasses(c, value));
    };
    expect([passes(size("x-api-key"), "k"), passes(size("x-api-key"), ""), passes(size("x-api-key"), null)]).toEqual([
      true,
      false,
      false,
    ]);
    const without = not(size("x-api-key"));
    expect([passes(without, "k"), passes(without, ""), passes(without, null)]).toEqual([false, true, true]);
  });

  it("notes a SearchString read as base64", () => {
    expect(kinds(imported(scoped(path("L2xvZ2lu"))), "note")).toContain(
      'SearchString "L2xvZ2lu" read as base64 (as aws wafv2 get-web-acl prints it): "/login"',
    );
  });
});

describe("scope-down statements the import cannot say: the rule left out, naming the part", () => {
  const S = "ScopeDownStatement";
  it.each<[string, Obj, string]>([
    [
      "a label",
      { LabelMatchStatement: { Scope: "LABEL", Key: "x" } },
      `${S}.LabelMatchStatement: labels are set by AWS WAF's other rules, which a Sluice rule does not see`,
    ],
    [
      "an IP set whose file is not given",
      { IPSetReferenceStatement: { ARN: "arn:aws:wafv2:x" } },
      `${S}.IPSetReferenceStatement: the IP set arn:aws:wafv2:x is kept in AWS: give its addresses with --ip-set FILE (aws wafv2 get-ip-set --scope SCOPE --name NAME --id ID > FILE)`,
    ],
    [
      "a regex pattern set",
      { RegexPatternSetReferenceStatement: { ARN: "arn" } },
      `${S}.RegexPatternSetReferenceStatement: a regex pattern set is an ARN of patterns kept in AWS, not in the file`,
    ],
    [
      "an OR of headers",
      or(header("a", "1"), header("b", "2")),
      `${S}.OrStatement: an OR of tests other than the path and the method (a rule's conditions must all hold)`,
    ],
    [
      "NOT of two headers",
      not(and(header("a", "1"), header("b", "2"))),
      `${S}.NotStatement: NOT of something other than path and method tests or one condition`,
    ],
    [
      "a path CONTAINS",
      path("admin", "CONTAINS"),
      `${S}.ByteMatchStatement: the path is matched with EXACTLY, STARTS_WITH or ENDS_WITH, not CONTAINS`,
    ],
    [
      "an ending with a slash",
      path("/x.php", "ENDS_WITH"),
      `${S}.ByteMatchStatement: a suffix route ends the path's last segment, so its text holds no /`,
    ],
    [
      "a path without its slash",
      path("login"),
      `${S}.ByteMatchStatement: a path starts with /, so EXACTLY "login" never matches`,
    ],
    [
      "capitals after LOWERCASE",
      header("x", "Free", "EXACTLY", "LOWERCASE"),
      `${S}.ByteMatchStatement: after LOWERCASE, "Free" (with capitals) never matches`,
    ],
    [
      "a header URL-decoded",
      header("x", "a b", "EXACTLY", "URL_DECODE"),
      `${S}.ByteMatchStatement: TextTransformations URL_DECODE: Sluice compares the value as sent, so it cannot say this test`,
    ],
    [
      "the query string",
      byte({ QueryString: {} }, "a=1", "CONTAINS"),
      `${S}.ByteMatchStatement.FieldToMatch.QueryString: the whole query string: a condition tests one query argument (SingleQueryArgument)`,
    ],
    [
      "the body",
      byte({ Body: { OversizeHandling: "MATCH" } }, "x", "CONTAINS"),
      `${S}.ByteMatchStatement.FieldToMatch.Body: the body: rules do not read it`,
    ],
    [
      "two cookies",
      byte({ Cookies: { MatchPattern: { IncludedCookies: ["a", "b"] }, MatchScope: "VALUE" } }, "x"),
      `${S}.ByteMatchStatement.FieldToMatch.Cookies: a cookie condition tests one cookie's value: MatchPattern.IncludedCookies with one name, MatchScope VALUE`,
    ],
    [
      "a size",
      size("x", "GT", 100),
      `${S}.SizeConstraintStatement: a size is read only as GT 0 (the value is sent), not GT 100`,
    ],
    [
      "a method STARTS_WITH",
      byte({ Method: {} }, "P", "STARTS_WITH"),
      `${S}.ByteMatchStatement: the method is matched with EXACTLY and its name in capitals (lower-case after LOWERCASE)`,
    ],
    [
      "paths that overlap",
      and(path("/a", "STARTS_WITH"), path(".php", "ENDS_WITH")),
      `${S}.AndStatement: the paths /a** and /**.php both tested: the requests matching both are not one route`,
    ],
  ])("%s", (_, scope, message) => {
    const result = imported(scoped(scope));
    expect(result.rules).toEqual([]);
    expect(kinds(result, "left out")).toEqual([message]);
  });
});

describe("IP sets given with --ip-set: match.address, and NOT as match.except_address", () => {
  const ARN = "arn:aws:wafv2:us-east-1:123456789012:regional/ipset/office/a1b2";
  const office = readIpSet(
    JSON.stringify({
      IPSet: { Name: "office", ARN, IPAddressVersion: "IPV4", Addresses: ["203.0.113.0/28", "198.51.100.7/32"] },
    }),
    "office.json",
  );
  const withSets = (scope: Obj) => {
    const result = importAwsWaf(JSON.stringify({ WebACL: { Rules: [scoped(scope)] } }), "acl.json", [office]);
    expect(parseRules(rulesYaml(result, "test"), "x.yaml").errors).toEqual([]);
    return result;
  };
  const ref = { IPSetReferenceStatement: { ARN } };

  it.each<[string, Obj, unknown]>([
    ["the set's clients only", ref, [["203.0.113.0/28", "198.51.100.7/32"], undefined]],
    ["every client but the set's (AWS's own example)", not(ref), [undefined, ["203.0.113.0/28", "198.51.100.7/32"]]],
    [
      "beside a path test",
      and(path("/api/", "STARTS_WITH"), not(ref)),
      [undefined, ["203.0.113.0/28", "198.51.100.7/32"]],
    ],
  ])("%s", (_, scope, expected) => {
    const r = withSets(scope);
    expect(r.rules.map((x) => [x.match.address, x.match.except_address])).toEqual([expected]);
  });

  it.each<[string, Obj, string]>([
    ["an OR of sets", or(ref, ref), "an OR of tests other than the path and the method"],
    ["two sets that must both hold", and(ref, ref), "two client address tests that must both hold"],
    ["NOT of a set and a path", not(and(ref, path("/a"))), "NOT of an IP set beside other tests"],
  ])("left out with the reason: %s", (_, scope, message) => {
    expect(kinds(withSets(scope), "left out").join("\n")).toContain(message);
  });

  it("a forwarded-address set is approximate: Sluice reads the connecting client", () => {
    const r = withSets({ IPSetReferenceStatement: { ARN, IPSetForwardedIPConfig: { HeaderName: "X-Forwarded-For" } } });
    expect(kinds(r, "approximate").join("\n")).toMatch(/AWS reads the address from a forwarded header/);
  });

  it.each([
    [
      { IPSet: { ARN, Addresses: ["203.0.113.7/24"] } },
      /IPSet.Addresses\[0\]: "203.0.113.7\/24" has bits set below its \/24/,
    ],
    [{ IPSet: { ARN, IPAddressVersion: "IPV6", Addresses: ["203.0.113.0/24"] } }, /an IPV6 set holds IPv6 ranges only/],
    [{ IPSet: { Addresses: [] } }, /IPSet: needs ARN/],
    [[1, 2], /expected an IP set/],
  ])("an IP set file AWS would not hold is refused, with where and why: %j", (json, message) => {
    expect(() => readIpSet(JSON.stringify(json), "set.json")).toThrow(message);
  });
});
