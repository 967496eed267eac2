/**
 * `sluice import nginx` on a map over several flag maps written together (src/migrate/nginx_map_concat.ts): the
 * corpus's hectcastro (`map $limit_header$limit_arg $limit_key`: the Authorization header, else the `token` query
 * parameter, else the address) as one rule per key, each with the presence tests that pick it; what cannot be said is
 * refused with its reason.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { conditionPasses } from "../../src/request/match.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const FLAGS = `map $http_authorization $limit_header { default 0; "~.+" 1; }
map $arg_token $limit_arg { default 0; "~.+" 1; }`;

function imported(maps: string): ImportResult {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-map-concat-"));
  const file = join(dir, "nginx.conf");
  writeFileSync(
    file,
    `http {\n${maps}\nlimit_req_zone $k zone=a:1m rate=5r/s;\nserver { location /api/ { limit_req zone=a; } }\n}\n`,
  );
  const result = importNginx(readNginxConfig(file));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const rules = (r: ImportResult) =>
  r.rules.map((x) => ({ header: x.match.header, query: x.match.query, identity: x.match.identity, key: x.key }));
const said = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`).join("\n");

describe("a map over flag maps", () => {
  it("hectcastro: the Authorization header, else the token parameter, else the address: one rule each", () => {
    const r = imported(
      `${FLAGS}\nmap $limit_header$limit_arg $k { default $remote_addr; "~1." $http_authorization; "01" $arg_token; }`,
    );
    expect(rules(r)).toEqual([
      {
        header: ['{ name: authorization, matches: "^$", missing_as_empty: true }'],
        query: ['{ name: token, matches: "^$", missing_as_empty: true }'],
        identity: "ip",
        key: undefined,
      },
      {
        header: ['{ name: authorization, matches: "^$", not: true, missing_as_empty: true }'],
        query: undefined,
        identity: "api_key",
        key: undefined,
      },
      {
        header: ['{ name: authorization, matches: "^$", missing_as_empty: true }'],
        query: ['{ name: token, matches: "^$", not: true, missing_as_empty: true }'],
        identity: undefined,
        key: ["{ query: token }"],
      },
    ]);
    expect(r.rules.map((x) => x.id)).toEqual(["a-api", "a-api-2", "a-api-3"]);
    expect(said(r)).toMatch(
      /map \$limit_header\$limit_arg \$k gives \$remote_addr \(the authorization header not sent or empty, the token query parameter not sent or empty\); \$http_authorization \(the authorization header sent with a value\); \$arg_token .*one rule per key/,
    );
    expect(said(r)).toMatch(/NGINX counts them in one zone, so a value two of them share would be one budget there/);
  });

  it.each([
    ["only both sent", '"11" $binary_remote_addr', [["has a value", "has a value"]]],
    ["a regex ignoring case, an empty default", '"~*^1" $binary_remote_addr', [["has a value", undefined]]],
    ["strings compared ignoring case, text between", null, [[undefined, "has a value"]]],
    ["every combination one key: no test", "default $binary_remote_addr", [[undefined, undefined]]],
  ])("%s", (_, entries, expected) => {
    const outer =
      entries === null
        ? `map $limit_header:$limit_arg $k { "0:1" $binary_remote_addr; "1:1" $binary_remote_addr; default ""; }`
        : `map $limit_header$limit_arg $k { ${entries}; }`;
    const r = imported(`${FLAGS}\n${outer}`);
    const tests = r.rules.map((x) => [
      x.match.header?.[0]?.includes("not: true") ? "has a value" : x.match.header?.[0] && "empty",
      x.match.query?.[0]?.includes("not: true") ? "has a value" : x.match.query?.[0] && "empty",
    ]);
    expect(tests).toEqual(expected);
    expect(r.rules.every((x) => x.match.identity === "ip")).toBe(true);
  });

  // NGINX reads a header sent empty as it reads one not sent: `""`, which the flag map's `default 0` takes (the real
  // NGINX: `map $http_x_a $f { default 0; "~." 1; }` gives 0 for `X-A:`). A `present` test would count it as sent.
  it("a value sent empty picks the rule a value not sent picks, as in NGINX", () => {
    const r = imported(
      `${FLAGS}\nmap $limit_header$limit_arg $k { default $remote_addr; "~1." $http_authorization; "01" $arg_token; }`,
    );
    const parsed = parseRules(rulesYaml(r, "test"), "imported.yaml").rules;
    const picks = (authorization: string | null, token: string | null) =>
      parsed
        .filter((rule) =>
          (rule.match.conditions ?? []).every((c) => conditionPasses(c, c.name === "token" ? token : authorization)),
        )
        .map((rule) => rule.match.identity ?? "key");
    expect(picks("", "t")).toEqual(picks(null, "t"));
    expect(picks("", null)).toEqual(picks(null, null));
    expect(picks("", "")).toEqual(["ip"]);
    expect(picks("Bearer x", "")).toEqual(["api_key"]);
    expect(picks(null, "t")).toEqual(["key"]);
  });

  it("a flag map's `~.*` also takes a request without the value (strings, then regexes in order)", () => {
    const r = imported(
      `map $http_x_a $fa { "~.*" 1; default 0; }\nmap $arg_b $fb { default 0; "~." 1; }\nmap $fa$fb $k { "10" $binary_remote_addr; default ""; }`,
    );
    expect(rules(r)).toEqual([
      {
        header: undefined,
        query: ['{ name: b, matches: "^$", missing_as_empty: true }'],
        identity: "ip",
        key: undefined,
      },
    ]);
  });

  it.each([
    [
      '"11" $binary_remote_addr; "00" $binary_remote_addr; default ""',
      /gives \$binary_remote_addr to requests that send some of the authorization header, the token query parameter in a mix that no set of tests picks alone/,
    ],
    ['default ""', /gives every request an empty key, so NGINX limits nothing with it/],
    ['"11" $other; default ""', /gives \$other, itself a map: one map over another is not imported/],
  ])("refused: %s", (entries, message) => {
    const r = imported(`${FLAGS}\nmap $http_x_o $other { default 1; }\nmap $limit_header$limit_arg $k { ${entries}; }`);
    expect(r.rules).toEqual([]);
    expect(said(r)).toMatch(message);
  });

  it.each([
    [
      "map $http_x_a$arg_b $k { default $binary_remote_addr; }",
      /\$http_x_a is not a map \(its values cannot be listed\)/,
    ],
    [
      'map $http_x_a $fa { gold 1; default 0; }\nmap $fa$limit_arg $k { "11" $binary_remote_addr; default ""; }',
      /\$fa tests particular values, not only whether one is sent/,
    ],
    [
      'map $uri $fa { ~^/x 1; default 0; }\nmap $fa$limit_arg $k { "11" $binary_remote_addr; default ""; }',
      /\$fa is a map over \$uri, not over a header, cookie or query value/,
    ],
    [
      'map $http_x_a $fa { "~." $http_x_a; default 0; }\nmap $fa$limit_arg $k { "11" $binary_remote_addr; default ""; }',
      /\$fa gives a variable, not a constant/,
    ],
    ['map $limit_arg$limit_arg $k { "11" $binary_remote_addr; default ""; }', /it reads one variable twice/],
  ])("an inner variable that is not a flag map: %s", (maps, message) => {
    const r = imported(`${FLAGS}\n${maps}`);
    expect(r.rules).toEqual([]);
    expect(said(r)).toMatch(message);
  });
});
