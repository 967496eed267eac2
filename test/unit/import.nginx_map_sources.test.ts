/**
 * `sluice import nginx` on `map` blocks over each kind of source (src/migrate/nginx_map_sources.ts): what becomes a
 * rule's routes, except or key, and what is refused with its reason.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

function imported(map: string, server = "server { limit_req zone=a; }"): ImportResult {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-map-sources-"));
  const file = join(dir, "nginx.conf");
  writeFileSync(file, `http {\n${map}\nlimit_req_zone $k zone=a:1m rate=5r/s;\n${server}\n}\n`);
  const result = importNginx(readNginxConfig(file));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const counting = (r: ImportResult) =>
  r.rules.map((x) => ({
    route: x.match.route,
    except: x.match.except,
    identity: x.match.identity,
    key: x.key,
    missing: x.fields.find(([f]) => f === "key_missing")?.[1],
  }));

describe("maps Sluice can say", () => {
  it.each([
    [
      "methods given an empty key are left out",
      'map $request_method $k { default $binary_remote_addr; GET ""; HEAD ""; }',
      undefined,
      { route: undefined, except: ["GET /**", "HEAD /**"], identity: "ip", key: undefined, missing: undefined },
    ],
    [
      "only some methods get a key: routes with the method",
      'map $request_method $k { default ""; ~^(POST|PUT)$ $binary_remote_addr; }',
      undefined,
      { route: ["POST /**", "PUT /**"], except: undefined, identity: "ip", key: undefined, missing: undefined },
    ],
    [
      "only some methods, under a location: the location's routes with the method",
      'map $request_method $k { default ""; ~*^(post)$ $binary_remote_addr; }',
      "server { location /api/ { limit_req zone=a; } location / { } }",
      { route: "POST /api/**", except: undefined, identity: "ip", key: undefined, missing: undefined },
    ],
    [
      "only some paths get a key: match.route",
      'map $uri $k { default ""; /login $binary_remote_addr; ~^/api/ $binary_remote_addr; }',
      undefined,
      { route: ["* /login", "* /api/**"], except: undefined, identity: "ip", key: undefined, missing: undefined },
    ],
    [
      "a header sent (any value) gives itself: key_missing: skip",
      'map $http_x_tenant $k { ~. $http_x_tenant; default ""; }',
      undefined,
      { route: undefined, except: undefined, identity: undefined, key: ["{ header: x-tenant }"], missing: "skip" },
    ],
    [
      "a header sent gives the address with it",
      'map $http_x_tenant $k { "" ""; default $binary_remote_addr$http_x_tenant; }',
      undefined,
      {
        route: undefined,
        except: undefined,
        identity: undefined,
        key: ["ip", "{ header: x-tenant }"],
        missing: "skip",
      },
    ],
    [
      "a cookie",
      'map $cookie_session $k { default $cookie_session; "" ""; }',
      undefined,
      { route: undefined, except: undefined, identity: undefined, key: ["{ cookie: session }"], missing: "skip" },
    ],
    [
      "a query value",
      'map $arg_token $k { "" ""; default $arg_token; }',
      undefined,
      { route: undefined, except: undefined, identity: undefined, key: ["{ query: token }"], missing: "skip" },
    ],
    [
      "addresses that are never a client's on Cloudflare",
      'map $remote_addr $k { default $binary_remote_addr; 127.0.0.1 ""; 10.1.2.3 ""; ::1 ""; }',
      undefined,
      { route: undefined, except: undefined, identity: "ip", key: undefined, missing: undefined },
    ],
    [
      "one constant for every request: a global budget",
      'map $http_x_anything $k { default "origin"; }',
      undefined,
      { route: undefined, except: undefined, identity: undefined, key: "global", missing: undefined },
    ],
  ])("%s", (_name, map, server, expected) => {
    const r = imported(map, server);
    expect(counting(r)).toEqual([expected]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it.each([
    // The default gives the key and listed values exempt: one `not` test, a request without the value read as ""
    // (as NGINX reads a missing header), so it is limited too (was left out).
    [
      'map $arg_agent $k { default $binary_remote_addr; ~*bot ""; }',
      "query",
      '{ name: agent, matches: "bot", ignore_case: true, not: true, missing_as_empty: true }',
    ],
    [
      'map $http_x_plan $k { default $binary_remote_addr; internal ""; }',
      "header",
      '{ name: x-plan, matches: "^internal$", ignore_case: true, not: true, missing_as_empty: true }',
    ],
    [
      'map $cookie_plan $k { default $binary_remote_addr; ~bot ""; "" ""; }',
      "cookie",
      '{ name: plan, matches: "(?:bot)|(?:^$)", not: true, missing_as_empty: true }',
    ],
  ] as const)("%s: every request but those exempted (match.%s)", (map, source, condition) => {
    const r = imported(map);
    expect(r.rules.map((x) => [x.match[source], x.match.identity])).toEqual([[[condition], "ip"]]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(
      /every request gets the key but those whose .* has a value it exempts/,
    );
  });

  it.each([
    // A value listed for the key that an exempting regex also takes: strings are tried first, so NGINX gives it the
    // key, which one `not` test cannot say.
    'map $http_x_a $k { default $binary_remote_addr; ~^bot ""; bot-good $binary_remote_addr; }',
    'map $http_x_a $k { default $binary_remote_addr; ~^bot ""; ~^b $binary_remote_addr; }',
  ])("an exemption one test cannot say is left out: %s", (map) => {
    const r = imported(map);
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(/one test cannot say which values it leaves out/);
  });

  it("several keys, one of them the default: the default's key for every value no other key takes", () => {
    const r = imported("map $http_x_plan $k { default $remote_addr; pro $http_x_plan; }");
    expect(r.rules.map((x) => [x.match.header, x.match.identity ?? x.key])).toEqual([
      [['{ name: x-plan, matches: "^pro$", ignore_case: true }'], ["{ header: x-plan }"]],
      [['{ name: x-plan, matches: "^pro$", ignore_case: true, not: true, missing_as_empty: true }'], "ip"],
    ]);
  });

  it.each([
    // Which requests carry a value, when the key is not that value: a presence condition (was left out).
    [
      'map $http_x_tenant $k { "" ""; default $binary_remote_addr; }',
      "header",
      '{ name: x-tenant, matches: "^$", not: true, missing_as_empty: true }',
    ],
    [
      'map $cookie_session $k { "" $binary_remote_addr; default ""; }',
      "cookie",
      '{ name: session, matches: "^$", missing_as_empty: true }',
    ],
    [
      'map $arg_debug $k { "" ""; default $binary_remote_addr; }',
      "query",
      '{ name: debug, matches: "^$", not: true, missing_as_empty: true }',
    ],
  ] as const)("%s: limits by whether the value is sent (match.%s)", (map, source, condition) => {
    const r = imported(map);
    expect(r.rules.map((x) => [x.match[source], x.match.identity])).toEqual([[[condition], "ip"]]);
  });

  it("an API key falling back to the address is identity: api_key, which counts a caller without a key by address", () => {
    for (const header of ["authorization", "x_api_key"]) {
      const r = imported(`map $http_${header} $k { default $http_${header}; "" $binary_remote_addr; }`);
      expect(r.rules.map((x) => x.match.identity)).toEqual(["api_key"]);
      const said = r.report.map((i) => `${i.kind}: ${i.message}`).join("\n");
      expect(said).toMatch(
        /approximate: .*the API key, and the address for a request without one; counted by API key .*a request without one by its address/,
      );
      expect(said).not.toMatch(/does not limit a request without one/);
    }
  });

  it("a map giving several keys by a header's value is one rule per key (the corpus's pgporada)", () => {
    const r = imported(
      'map $http_user_agent $k { "" umbrella; ~^curl/ $http_user_agent; Free-Bot f; default ""; }',
      "server { location /api/ { limit_req zone=a; } }",
    );
    expect(r.rules.map((x) => [x.match.header, x.key, x.match.identity])).toEqual([
      [['{ name: user-agent, matches: "^$", missing_as_empty: true }'], "global", undefined],
      [
        [
          '{ name: user-agent, matches: "^curl/" }',
          '{ name: user-agent, matches: "^Free-Bot$", ignore_case: true, not: true }',
        ],
        ["{ header: user-agent }"],
        undefined,
      ],
      [['{ name: user-agent, matches: "^Free-Bot$", ignore_case: true }'], "global", undefined],
    ]);
    const said = r.report.map((i) => i.message).join("\n");
    expect(said).toMatch(/gives umbrella, \$http_user_agent, f by the user-agent header's value: one rule per key/);
    expect(said).not.toMatch(/read by 3 rules/);
  });

  it.each([
    [
      'map $http_x_a $k { ~^a $binary_remote_addr; ~^b $http_x_a; default ""; }',
      /a regex that gives an empty key \(or another key\) beside regexes/,
    ],
    [
      'map $http_x_a $k { "" umbrella; x umbrella; y $http_x_a; default ""; }',
      /umbrella is given to requests without the x-a header and to others too/,
    ],
  ])("several keys one rule each cannot say: %s", (map, message) => {
    const r = imported(map);
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(message);
  });

  it("says what the map leaves out", () => {
    const r = imported('map $request_method $k { default $binary_remote_addr; GET ""; }');
    expect(r.report.map((i) => i.message).join("\n")).toMatch(
      /map \$request_method \$k: GET requests get an empty key, so NGINX does not limit them \(match.except\)/,
    );
    const a = imported('map $remote_addr $k { default $binary_remote_addr; 127.0.0.1 ""; }');
    expect(a.report.map((i) => i.message).join("\n")).toMatch(
      /127.0.0.1 is never a client's address on Cloudflare \(CF-Connecting-IP is public\), so it changes nothing/,
    );
  });

  it.each([
    [
      'map $remote_addr $k { default $binary_remote_addr; 127.0.0.1 ""; 203.0.113.7 ""; }',
      [undefined, ["203.0.113.7"]],
      /NGINX does not limit requests from 203.0.113.7 \(an allowlist: match.except_address\)/,
    ],
    [
      'map $remote_addr $k { default ""; 198.51.100.1 $binary_remote_addr; 2001:db8::7 $binary_remote_addr; }',
      [["198.51.100.1", "2001:db8::7"], undefined],
      /only requests from 198.51.100.1, 2001:db8::7 get a key \(match.address\)/,
    ],
    [
      'map $remote_addr $k { default $binary_remote_addr; ~^203\\.0\\.113\\. ""; ~^203\\.0\\.113\\.5$ $binary_remote_addr; "~^192\\.0\\.2\\.\\d+$" ""; ~^10\\. ""; }',
      [undefined, ["203.0.113.0/24", "192.0.2.0/24"]],
      /NGINX does not limit requests from 203.0.113.0\/24, 192.0.2.0\/24 \(an allowlist: match.except_address\)/,
    ],
  ])("map $remote_addr: the addresses given the key or an empty one: %s", (map, expected, message) => {
    const r = imported(map);
    expect(r.rules.map((x) => [x.match.address, x.match.except_address])).toEqual([expected]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(message);
  });

  it("map $server_name: resolved per server block, a server given an empty key gets no rule", () => {
    const r = imported(
      'map $server_name $k { default ""; API.example.com $binary_remote_addr; }',
      "server { server_name api.example.com; limit_req zone=a; }\nserver { server_name www.example.com; limit_req zone=a; }",
    );
    expect(counting(r)).toEqual([
      { route: undefined, except: undefined, identity: "ip", key: undefined, missing: undefined },
    ]);
    expect(r.rules[0]!.source).toMatch(/^.*nginx\.conf:4: limit_req zone=a/);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "note: limit_req zone=a: server www.example.com: its zone's map gives this server an empty key, so NGINX does not limit its requests (no rule)",
    );
  });

  it("a key given only on paths no limited location reaches limits nothing, and says so", () => {
    const r = imported(
      'map $uri $k { default ""; /login $binary_remote_addr; }',
      "server { location /api/ { limit_req zone=a; } location / { } }",
    );
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`).join("\n")).toMatch(
      /note: limit_req zone=a: its key is given only on \* \/login, where it does not apply: it limits nothing/,
    );
  });
});

describe("maps refused with their reason", () => {
  it.each([
    [
      "another header falling back to the address",
      'map $http_x_tenant $k { default $http_x_tenant; "" $binary_remote_addr; }',
      /gives \$http_x_tenant when the header x-tenant is sent and \$binary_remote_addr when not: a Sluice key has no part that falls back to another/,
    ],
    [
      "a query value falling back to the address",
      'map $arg_key $k { default $arg_key; "" $binary_remote_addr; }',
      /no part that falls back to another\n/,
    ],
    [
      "a regex of the address other than a prefix of whole octets",
      'map $remote_addr $k { default $binary_remote_addr; ~^203\\.0\\.11 ""; }',
      /~\^203\\\.0\\\.11 is a regex other than a prefix of whole octets/,
    ],
    [
      "a map compares the address as text: a range there never matches",
      'map $remote_addr $k { default $binary_remote_addr; 203.0.113.0/24 ""; }',
      /203.0.113.0\/24: a map compares \$remote_addr as text, so a range never matches it \(a geo block reads ranges\)/,
    ],
    [
      "by host",
      'map $host $k { default $binary_remote_addr; internal.example.com ""; }',
      /depends on the host, and Sluice rules do not match by host/,
    ],
    [
      "by a server name pattern",
      'map $server_name $k { default ""; ~^api $binary_remote_addr; }',
      /"~\^api" is a pattern, not a server name; only exact names can be resolved per server block/,
    ],
    [
      "a method regex that is not a list",
      'map $request_method $k { default ""; ~POST $binary_remote_addr; }',
      /"~POST" is not a method or an anchored list of methods/,
    ],
    [
      "a path regex giving an empty key beside paths given the key",
      'map $uri $k { default ""; ~^/api/ $binary_remote_addr; ~^/api/health ""; }',
      /a regex that gives an empty key beside entries that give the key .* cannot be said as routes/,
    ],
    [
      "a source of several variables",
      'map $http_x$uri $k { default ""; a $binary_remote_addr; }',
      /map \$http_x\$uri \$k: a map over several variables is imported when each is a map of whether a header, cookie or query value is sent \(constants\), and \$http_x is not a map/,
    ],
  ])("%s", (_name, map, message) => {
    const r = imported(map);
    expect(r.rules).toEqual([]);
    const leftOut = r.report.filter((i) => i.kind === "left out").map((i) => i.message);
    expect(leftOut.join("\n")).toMatch(message);
  });
});

describe("keys of several variables: what a request missing some of them gets", () => {
  it.each([
    ["$binary_remote_addr$http_x_tenant", "empty", "note"],
    ["$http_x_tenant:$http_x_user", "empty", "note"],
    ["$http_x_tenant", "skip", "note"],
    ["$http_x_tenant$http_x_user", "skip", "approximate"],
  ])("%s: key_missing: %s (%s)", (key, missing, kind) => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-missing-"));
    const file = join(dir, "nginx.conf");
    writeFileSync(file, `http {\nlimit_req_zone ${key} zone=a:1m rate=5r/s;\nserver { limit_req zone=a; }\n}\n`);
    const r = importNginx(readNginxConfig(file));
    expect(r.rules.map((x) => x.fields.find(([f]) => f === "key_missing")?.[1])).toEqual([missing]);
    expect(r.report.find((i) => i.message.startsWith(`limit_req_zone ${key} `))?.kind).toBe(kind);
  });

  it("a map that empties the key when the value it reads is missing keeps skip beside the address", () => {
    const r = imported('map $http_x_tenant $k { "" ""; default $binary_remote_addr$http_x_tenant; }');
    expect(counting(r)[0]?.missing).toBe("skip");
  });
});
