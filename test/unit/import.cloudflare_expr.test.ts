/**
 * `sluice import cloudflare`: rule expressions as a Sluice match (routes, except, conditions) or the reason they
 * cannot be one, and characteristics as a key.
 */
import { describe, expect, it } from "vitest";
import { type Findings, keyOf } from "../../src/migrate/cloudflare_count.ts";
import { ExpressionSyntaxError, parseExpression } from "../../src/migrate/cloudflare_expr.ts";
import { selectionOf } from "../../src/migrate/cloudflare_match.ts";
import { printCondition } from "../../src/rules/match_conditions.ts";

/** A selection as one line: `route=... except=... header=...`, or `refused: <reason>`. */
function match(expression: string): string {
  const s = selectionOf(parseExpression(expression));
  if ("refused" in s) return `refused: ${s.refused}`;
  return [
    `route=${s.routes === null ? "any" : s.routes.join("|")}`,
    ...(s.except.length === 0 ? [] : [`except=${s.except.join("|")}`]),
    ...s.conditions.map((c) => `${c.in}=${printCondition(c)}`),
    ...(s.addresses === undefined ? [] : [`address=${s.addresses.join("|")}`]),
    ...(s.exceptAddresses === undefined ? [] : [`except_address=${s.exceptAddresses.join("|")}`]),
  ].join(" ");
}

const H = 'http.request.headers["x-plan"]';

describe("Cloudflare expressions as a match", () => {
  it.each([
    ["true", "route=any"],
    ["", "route=any"],
    ['http.request.uri.path eq "/login"', "route=* /login"],
    ['http.request.uri.path == "/login"', "route=* /login"],
    ['http.request.uri.path eq "/Login"', "route=* /login"],
    ['lower(http.request.uri.path) eq "/login"', "route=* /login"],
    ['starts_with(http.request.uri.path, "/api/")', "route=* /api/**"],
    ['starts_with(http.request.uri.path, "/api")', "route=* /api**"],
    ['ends_with(http.request.uri.path, ".php")', "route=* /**.php"],
    ['http.request.uri.path in {"/a" "/b"}', "route=* /a|* /b"],
    ['(http.request.uri.path matches "^/api/")', "route=* /api/**"],
    ['http.request.uri.path ~ "^/login$"', "route=* /login"],
    ['http.request.uri.path matches "\\\\.php$"', "route=* /**.php"],
    // `wildcard` (and `strict wildcard`): `*` any run of characters, as public rulesets write their paths.
    ['http.request.uri.path wildcard r"/api"', "route=* /api"],
    ['(http.request.uri.path wildcard r"/api") or (http.request.uri.path wildcard r"/login")', "route=* /api|* /login"],
    ['http.request.uri.path wildcard "/api/*"', "route=* /api/**"],
    ['http.request.uri.path strict wildcard "*.php"', "route=* /**.php"],
    [
      'http.request.uri.path wildcard "/a/*/b"',
      'refused: `http.request.uri.path wildcard "/a/*/b"`: a path wildcard is read as a path, a prefix (/api/*) or an ending (*.php)',
    ],
    [
      'http.user_agent wildcard "*bot*"',
      'route=any header={ name: user-agent, matches: "^.*bot.*$", ignore_case: true }',
    ],
    [`${H}[0] strict wildcard "Pro.*"`, 'route=any header={ name: x-plan, matches: "^Pro\\\\..*$" }'],
    ['http.request.method eq "POST"', "route=POST /**"],
    ['http.request.uri.path eq "/login" and http.request.method eq "POST"', "route=POST /login"],
    ['http.request.uri.path eq "/login" && http.request.method in {"POST" "PUT"}', "route=POST /login|PUT /login"],
    ['http.request.uri.path eq "/a" or http.request.uri.path eq "/b"', "route=* /a|* /b"],
    [
      '(http.request.uri.path eq "/a" and http.request.method eq "GET") or http.request.uri.path eq "/b"',
      "route=GET /a|* /b",
    ],
    [
      'starts_with(http.request.uri.path, "/api/") and http.request.uri.path ne "/api/health"',
      "route=* /api/** except=* /api/health",
    ],
    [
      'starts_with(http.request.uri.path, "/api/") and not http.request.uri.path in {"/api/a" "/api/b"}',
      "route=* /api/** except=* /api/a|* /api/b",
    ],
    ['starts_with(http.request.uri.path, "/api/") and http.request.uri.path eq "/api/x"', "route=* /api/x"],
    ['http.request.method ne "GET"', "route=any except=GET /**"],
    [`${H}[0] eq "free"`, 'route=any header={ name: x-plan, equals: "free" }'],
    [`any(${H}[*] eq "free")`, 'route=any header={ name: x-plan, equals: "free" }'],
    [`any(lower(${H}[*])[*] eq "free")`, 'route=any header={ name: x-plan, equals: "free", ignore_case: true }'],
    [`${H}[0] ne "gold"`, 'route=any header={ name: x-plan, equals: "gold", not: true }'],
    [`any(${H}[*] contains "fr")`, 'route=any header={ name: x-plan, contains: "fr" }'],
    [`${H}[0] matches "^f.*e$"`, 'route=any header={ name: x-plan, matches: "^f.*e$" }'],
    [`${H}[0] ~ "bot"`, 'route=any header={ name: x-plan, matches: "bot" }'],
    [`starts_with(${H}[0], "fr")`, 'route=any header={ name: x-plan, prefix: "fr" }'],
    [`ends_with(${H}[0], "ee")`, 'route=any header={ name: x-plan, suffix: "ee" }'],
    [`${H}[0] in {"free" "a.b"}`, 'route=any header={ name: x-plan, matches: "^(?:free|a\\\\.b)$" }'],
    [`len(${H}) > 0`, "route=any header={ name: x-plan, present: true }"],
    [`len(${H}) eq 0`, "route=any header={ name: x-plan, present: false }"],
    ['http.request.headers["X-Plan"][0] eq "free"', 'route=any header={ name: x-plan, equals: "free" }'],
    ['http.user_agent contains "bot"', 'route=any header={ name: user-agent, contains: "bot" }'],
    ['any(http.request.cookies["session"][*] eq "x")', 'route=any cookie={ name: session, equals: "x" }'],
    ['http.request.uri.args["format"][0] eq "csv"', 'route=any query={ name: format, equals: "csv" }'],
    [
      `http.request.uri.path eq "/form" and any(http.request.headers["content-type"][*] eq "application/x-www-form-urlencoded")`,
      'route=* /form header={ name: content-type, equals: "application/x-www-form-urlencoded" }',
    ],
    [
      `(http.request.method eq "POST") and (${H}[0] eq "free")`,
      'route=POST /** header={ name: x-plan, equals: "free" }',
    ],
    ['http.request.uri.path eq r"/raw"', "route=* /raw"],
    // Where Cloudflare places the client: `match.cf`, which reads the same request.cf fields.
    ['ip.src.country in {"CN" "RU"}', 'route=any cf={ name: country, matches: "^(?:CN|RU)$" }'],
    ['ip.geoip.country ne "US"', 'route=any cf={ name: country, equals: "US", not: true }'],
    ["ip.src.asnum eq 13335", 'route=any cf={ name: asn, equals: "13335" }'],
    ['not ip.src.country in {"CN"}', 'route=any cf={ name: country, equals: "CN", not: true, missing_as_empty: true }'],
    // The client address Cloudflare saw (ip.src) is the gateway's CF-Connecting-IP: match.address, except_address.
    ["ip.src in {198.51.100.0/24 2001:db8::/32}", "route=any address=198.51.100.0/24|2001:db8::/32"],
    ["ip.src eq 203.0.113.7", "route=any address=203.0.113.7"],
    ["ip.src ne 203.0.113.7", "route=any except_address=203.0.113.7"],
    [
      'starts_with(http.request.uri.path, "/api/") and not ip.src in {203.0.113.0/28 2001:db8:1::/48}',
      "route=* /api/** except_address=203.0.113.0/28|2001:db8:1::/48",
    ],
    ["not ip.src ne 203.0.113.7", "route=any address=203.0.113.7"],
    ["ip.src ne 203.0.113.7 and ip.src ne 203.0.113.9", "route=any except_address=203.0.113.7|203.0.113.9"],
    // `not` of one condition: a request without the header passes it (Cloudflare's `not` of a test it fails).
    [`not ${H}[0] eq "a"`, 'route=any header={ name: x-plan, equals: "a", not: true, missing_as_empty: true }'],
    [
      'not http.user_agent contains "bot"',
      'route=any header={ name: user-agent, contains: "bot", not: true, missing_as_empty: true }',
    ],
    [`not len(${H}) > 0`, "route=any header={ name: x-plan, present: false }"],
    // http.user_agent is "" without the header: `ne` passes such a request, and a test "" passes reads it so too.
    [
      'http.user_agent ne "curl"',
      'route=any header={ name: user-agent, equals: "curl", not: true, missing_as_empty: true }',
    ],
    [
      'http.user_agent wildcard "*"',
      'route=any header={ name: user-agent, matches: "^.*$", ignore_case: true, missing_as_empty: true }',
    ],
  ])("%s -> %s", (expression, want) => {
    expect(match(expression === "" ? "true" : expression)).toBe(want);
  });

  it.each([
    ['http.host eq "a.com"', "http.host: rules match no host"],
    ["ip.src in $office", "$office is a list whose items the rule's JSON does not hold"],
    ["ip.src in {10.0.0.0/33}", "10.0.0.0/33 is not an address or a CIDR range"],
    ["ip.src in {10.0.0.0/8} and ip.src in {10.1.0.0/16}", "two client address tests that must both hold"],
    ["ip.src in {10.0.0.0/8} or ip.src in {192.0.2.0/24}", "an or of tests other than the path and method"],
    ['not (ip.src in {10.0.0.0/8} and http.request.uri.path eq "/a")', "not of an ip.src test beside others"],
    ["ip.src.continent eq 203.0.113.1", "of places only the country and AS number"],
    ['ip.src.country eq "cn"', "a two-letter code in capitals"],
    ['ip.src.country contains "C"', "matched with eq, ne or in"],
    ['ip.src.continent eq "AS"', "of places only the country and AS number"],
    ["cf.bot_management.verified_bot", "cf.bot_management.verified_bot is Cloudflare's own field"],
    ['http.request.uri.path matches "^/api/v[0-9]+/"', "a path regex is read only as"],
    ['http.request.uri.path matches "admin"', "a path regex is read only as"],
    [
      'http.request.uri.path contains "/admin"',
      "the path is matched with eq, ne, in, wildcard, starts_with or ends_with, not contains",
    ],
    ['ends_with(http.request.uri.path, "/x.php")', "a suffix route ends the path's last segment"],
    ['http.request.uri.path eq "/a/*"', "a literal *"],
    ['http.request.uri.path eq "login"', "the path must start with /"],
    [`${H}[0] eq "a" or ${H}[0] eq "b"`, "an or of tests other than the path and method"],
    // Its opposite with missing_as_empty would fail a request without the header too, which `not` passes.
    [`not any(${H}[*] matches ".*")`, "not of something other than path and method tests or one condition"],
    [`${H}[0] eq "a" xor ${H}[0] eq "b"`, "xor"],
    ['starts_with(http.request.uri.path, "/a") and ends_with(http.request.uri.path, ".json")', "are not one route"],
    ['http.request.uri.path eq "/a" and http.request.uri.path eq "/b"', "no request passes"],
    [`${H} eq "a"`, "is read as its first value, [0], or any value, [*]"],
    [`${H}[0] gt "a"`, "a value is tested with eq"],
    [`${H}[0] eq ""`, "an empty value"],
    [`lower(${H}[0]) eq "Free"`, "never equals a text with capitals"],
    [`lower(${H}[0]) in {"free" "Gold"}`, "never equals a text with capitals"],
    [`lower(${H}[0]) matches "^[A-Z]"`, "never equals a text with capitals"],
    [
      'lookup_json_string(http.request.body.raw, "a") eq "b"',
      'lookup_json_string(http.request.body.raw, "a") is a function',
    ],
    ["false", "`false` matches no request"],
    ['http.request.method eq "post"', "upper-case"],
  ])("%s is refused: %s", (expression, why) => {
    const got = match(expression);
    expect(got).toMatch(/^refused: /);
    expect(got).toContain(why);
  });

  it.each([
    ['http.request.uri.path eq "/a', "a string at character 26 is not closed"],
    ['(http.request.uri.path eq "/a"', 'expected ")" at the end'],
    ["http.request.uri.path eq", "expected a value at the end"],
    ['http.request.uri.path eq "/a" "/b"', 'unexpected "/b"'],
  ])("%s does not parse: %s", (expression, why) => {
    expect(() => parseExpression(expression)).toThrow(ExpressionSyntaxError);
    expect(() => parseExpression(expression)).toThrow(why);
  });
});

describe("Cloudflare characteristics as a key", () => {
  const key = (...cs: string[]) => {
    const found: Findings = { approximate: [], notes: [], leftOut: [] };
    const k = keyOf(
      cs.map((value, i) => ({ value, at: `cf.json:${i + 1}:1` })),
      found,
    );
    const text =
      k.identity !== null ? `identity=${k.identity}` : k.key === "global" ? "global" : `key=${k.key!.join("+")}`;
    return { text: `${text}${k.clientChosen ? " accept" : ""}`, found };
  };

  it.each([
    [["cf.colo.id"], "global"],
    [["cf.colo.id", "ip.src"], "identity=ip"],
    [["cf.colo.id", "ip.src", 'http.request.headers["x-api-key"]'], "key=ip+api_key"],
    [["cf.colo.id", 'http.request.headers["X-Tenant"]'], "key={ header: x-tenant } accept"],
    [["cf.colo.id", "ip.src", 'http.request.headers["x-tenant"]'], "key=ip+{ header: x-tenant }"],
    [["cf.colo.id", 'http.request.cookies["session"]'], "key={ cookie: session } accept"],
    [["cf.colo.id", 'http.request.uri.args["page"]'], "key={ query: page } accept"],
    [["cf.colo.id", "http.host"], "key=host"],
    [["cf.colo.id", "ip.src", "http.request.uri.path"], "key=ip+path"],
    [["cf.colo.id", "ip.src.asnum"], "key=asn"],
    [["cf.colo.id", "ip.src.country"], "key=country"],
    [["cf.colo.id", "ip.geoip.country", "http.host"], "key=country+host"],
    [["cf.colo.id", "cf.bot_management.ja4"], "key=ja4 accept"],
    [["cf.colo.id", "ip.src", "ip.src"], "identity=ip"],
  ])("%j -> %s", (characteristics, want) => {
    const { text, found } = key(...characteristics);
    expect(text).toBe(want);
    expect(found.leftOut).toEqual([]);
    expect(found.approximate.some((f) => f.message.includes("per data center") && f.at === "cf.json:1:1")).toBe(true);
  });

  it.each([
    ["cf.unique_visitor_id", "IP with NAT support"],
    ["cf.bot_management.ja3_hash", "no JA3 part"],
    ['lookup_json_string(http.request.body.raw, "user")', "not one Sluice has a key part for"],
    ['http.request.body.form["user"]', "not one Sluice has a key part for"],
    ['http.request.headers["cookie"]', "is not a header name a key part takes"],
  ])("%s is left out: %s", (characteristic, why) => {
    const { found } = key("cf.colo.id", characteristic);
    expect(found.leftOut).toEqual([{ message: expect.stringContaining(why), at: "cf.json:2:1" }]);
  });
});
