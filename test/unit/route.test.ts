/** Route patterns: compile errors, and a table of (pattern, method, path) -> match. */
import { describe, expect, it } from "vitest";
import { compileRoute, routeMatches } from "../../src/rules/route.ts";
import type { RoutePattern } from "../../src/rules/types.ts";

function compiled(source: string): RoutePattern {
  const p = compileRoute(source);
  if ("error" in p) throw new Error(p.error);
  return p;
}

describe("compileRoute", () => {
  it.each([
    ["POST /v1/labels:batch", "POST", ["v1", "labels:batch"]],
    ["post /v1/login", "POST", ["v1", "login"]],
    ["* /v1/**", "*", ["v1", "**"]],
    ["GET /", "GET", []],
    ["GET /**", "GET", ["**"]],
    ["GET /v1/*/labels/", "GET", ["v1", "*", "labels"]],
    ["  GET   /v1  ", "GET", ["v1"]],
    ["* /v1/login**", "*", ["v1", "login**"]],
    ["* /**.php", "*", ["**.php"]],
    ["GET /admin/**.php", "GET", ["admin", "**.php"]],
  ])("%j compiles to %s %j", (source, method, segments) => {
    expect(compileRoute(source)).toEqual({ source, method, segments });
  });

  it("is plain JSON data", () => {
    const p = compiled("GET /v1/*/x");
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
  });

  it.each([
    ["", 'must be "METHOD /path", e.g. "POST /v1/labels:batch", got ""'],
    ["/v1/login", 'must be "METHOD /path", e.g. "POST /v1/labels:batch", got "/v1/login"'],
    ["GET /a /b", 'must be "METHOD /path", e.g. "POST /v1/labels:batch", got "GET /a /b"'],
    ["G3T /v1", 'the method must be letters (GET, POST, ...) or * for any, got "G3T /v1"'],
    ["GET v1", 'the path must start with /, got "GET v1"'],
    ["GET /v1?x=1", 'a route matches the path only, without ? or #, got "GET /v1?x=1"'],
    ["GET /v1//x", 'the path has an empty segment (//), got "GET /v1//x"'],
    ["GET /**/x", '** may only be the last segment, got "GET /**/x"'],
    [
      "GET /v1/x*",
      '* must be a whole segment, or ** begin or end the last one ("x*" mixes it with other characters), got "GET /v1/x*"',
    ],
    [
      "GET /v1/***",
      '* must be a whole segment, or ** begin or end the last one ("***" mixes it with other characters), got "GET /v1/***"',
    ],
    [
      "GET /v1/x**/y",
      '* must be a whole segment, or ** begin or end the last one ("x**" mixes it with other characters), got "GET /v1/x**/y"',
    ],
    [
      "GET /**.php/x",
      '* must be a whole segment, or ** begin or end the last one ("**.php" mixes it with other characters), got "GET /**.php/x"',
    ],
    [
      "GET /**x**",
      '* must be a whole segment, or ** begin or end the last one ("**x**" mixes it with other characters), got "GET /**x**"',
    ],
    [
      "GET /**.p*p",
      '* must be a whole segment, or ** begin or end the last one ("**.p*p" mixes it with other characters), got "GET /**.p*p"',
    ],
    ["GET /v1/../x", 'the path has a . or .. segment (requests are matched with them resolved), got "GET /v1/../x"'],
    [
      "GET /v1/caf%C3%A9",
      'write the path decoded, without % or ; (requests are matched decoded, with ;parameters removed), got "GET /v1/caf%C3%A9"',
    ],
    [
      "GET /v1/login;x",
      'write the path decoded, without % or ; (requests are matched decoded, with ;parameters removed), got "GET /v1/login;x"',
    ],
  ])("%j: %s", (source, error) => {
    expect(compileRoute(source)).toEqual({ error });
  });
});

// [pattern, method, path, matches]
const TABLE: [string, string, string, boolean][] = [
  // Literal segments; colons are ordinary characters.
  ["POST /v1/labels:batch", "POST", "/v1/labels:batch", true],
  ["POST /v1/labels:batch", "POST", "/v1/labels", false],
  ["POST /v1/labels:batch", "POST", "/v1/labels:batchx", false],
  ["POST /v1/labels", "POST", "/v1/labels:batch", false],
  ["POST /v1/login", "POST", "/v1/xlogin", false],
  ["POST /v1/labels", "POST", "/v1/labels/x", false],
  ["POST /v1/labels", "POST", "/v1", false],
  ["POST /v1/labels", "POST", "/V1/labels", false],
  // Methods: exact, upper-cased, or any.
  ["POST /v1/login", "GET", "/v1/login", false],
  ["POST /v1/login", "post", "/v1/login", true],
  ["* /v1/login", "DELETE", "/v1/login", true],
  ["* /v1/login", "GET", "/v1/logout", false],
  // `*` is exactly one non-empty segment.
  ["GET /v1/*/labels", "GET", "/v1/acme/labels", true],
  ["GET /v1/*/labels", "GET", "/v1/labels", false],
  ["GET /v1/*/labels", "GET", "/v1//labels", false],
  ["GET /v1/*/labels", "GET", "/v1/a/b/labels", false],
  ["GET /v1/*", "GET", "/v1/x", true],
  ["GET /v1/*", "GET", "/v1", false],
  ["GET /v1/*", "GET", "/v1/", false],
  ["GET /v1/*", "GET", "/v1/x/y", false],
  // A trailing `/**` matches any rest, including nothing.
  ["GET /v1/tracking/**", "GET", "/v1/tracking", true],
  ["GET /v1/tracking/**", "GET", "/v1/tracking/", true],
  ["GET /v1/tracking/**", "GET", "/v1/tracking/abc", true],
  ["GET /v1/tracking/**", "GET", "/v1/tracking/a/b/c", true],
  ["GET /v1/tracking/**", "GET", "/v1/trackingx", false],
  ["GET /v1/tracking/**", "GET", "/v1", false],
  ["GET /**", "GET", "/", true],
  ["GET /**", "GET", "/anything/at/all", true],
  ["GET /v1/*/**", "GET", "/v1/a", true],
  ["GET /v1/*/**", "GET", "/v1", false],
  // `text**` ends a route as NGINX's prefix locations do: the rest starts with `text`, slash or not.
  ["* /v1/login**", "GET", "/v1/login", true],
  ["* /v1/login**", "GET", "/v1/loginx", true],
  ["* /v1/login**", "GET", "/v1/login/", true],
  ["* /v1/login**", "GET", "/v1/login/a/b", true],
  ["* /v1/login**", "GET", "/v1/logi", false],
  ["* /v1/login**", "GET", "/v1", false],
  ["* /v1/login**", "GET", "/v2/login", false],
  // `**text` ends a route as NGINX's `~ \.php$` does: the rest, slashes and all, ends with `text`.
  ["* /**.php", "GET", "/index.php", true],
  ["* /**.php", "GET", "/a/b/c.php", true],
  ["* /**.php", "GET", "/.php", true],
  ["* /**.php", "GET", "/a.php/", true], // one trailing slash is ignored, as everywhere
  ["* /**.php", "GET", "/a.phpx", false],
  ["* /**.php", "GET", "/a.php/x", false],
  ["* /**.php", "GET", "/php", false],
  ["* /**.php", "GET", "/", false],
  ["* /admin/**.php", "GET", "/admin/x.php", true],
  ["* /admin/**.php", "GET", "/admin/a/x.php", true],
  ["* /admin/**.php", "GET", "/admin.php", false],
  ["* /admin/**.php", "GET", "/admin", false],
  ["* /admin/**.php", "GET", "/other/x.php", false],
  ["* /v1/*/**.pdf", "GET", "/v1/acme/x.pdf", true],
  ["* /v1/*/**.pdf", "GET", "/v1/x.pdf", false],
  // Root.
  ["GET /", "GET", "/", true],
  ["GET /", "GET", "/v1", false],
  // Trailing slash: one is ignored, on either side, so a slash cannot step around a limit.
  ["POST /v1/login", "POST", "/v1/login/", true],
  ["POST /v1/login/", "POST", "/v1/login", true],
  ["POST /v1/login", "POST", "/v1/login//", false],
  // Not a path.
  ["GET /**", "GET", "", false],
  ["GET /**", "GET", "v1/x", false],
];

describe("routeMatches", () => {
  it.each(TABLE)("%s vs %s %s -> %s", (pattern, method, path, expected) => {
    expect(routeMatches(compiled(pattern), method, path)).toBe(expected);
  });
});
