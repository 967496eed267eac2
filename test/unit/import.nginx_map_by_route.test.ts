/**
 * `sluice import nginx` on a map giving several keys by path or method (src/migrate/nginx_map.ts `keysByRoute`): one
 * rule per key on the routes that get it, each key reading the map as if the others gave an empty key where they can
 * take a request from it (path strings, methods and the default always; another key's regex only before one of its
 * own that may match the same paths). What routes cannot say leaves the whole map out.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

function imported(map: string): ImportResult {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-map-by-route-"));
  const file = join(dir, "nginx.conf");
  writeFileSync(
    file,
    `http {\n${map}\nlimit_req_zone $k zone=a:1m rate=5r/s;\nserver { location / { limit_req zone=a; } }\n}\n`,
  );
  const result = importNginx(readNginxConfig(file));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const rules = (r: ImportResult) =>
  r.rules.map((x) => ({ route: x.match.route, except: x.match.except, by: x.match.identity ?? x.key }));

describe("a map giving several keys by path or method: one rule per key", () => {
  it("paths: each key on its own routes; a string another key lists is left out of a key's prefix", () => {
    const r = imported(
      'map $uri $k { ~^/api/ $binary_remote_addr; ~^/search/ $http_x_tenant; /api/login $http_user_agent; default ""; }',
    );
    expect(rules(r)).toEqual([
      { route: "* /api/**", except: ["* /api/login"], by: "ip" },
      { route: "* /search/**", except: ["* /api/login"], by: ["{ header: x-tenant }"] },
      { route: "* /api/login", except: undefined, by: ["{ header: user-agent }"] },
    ]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(
      /map \$uri \$k gives \$binary_remote_addr, \$http_x_tenant, \$http_user_agent by \$uri: one rule per key/,
    );
  });

  it("the default's key on every path the others do not take", () => {
    const r = imported('map $uri $k { ~^/api/ $http_x_tenant; /health ""; default $binary_remote_addr; }');
    expect(rules(r)).toEqual([
      { route: "* /api/**", except: ["* /health"], by: ["{ header: x-tenant }"] },
      { route: undefined, except: ["* /api/**", "* /health"], by: "ip" },
    ]);
  });

  it("methods: each key on routes of its methods, the default's on the others'", () => {
    const r = imported(
      'map $request_method $k { POST $binary_remote_addr; ~^(GET|HEAD)$ $http_x_tenant; default "1"; }',
    );
    expect(rules(r)).toEqual([
      { route: "POST /**", except: undefined, by: "ip" },
      { route: ["GET /**", "HEAD /**"], except: undefined, by: ["{ header: x-tenant }"] },
      { route: undefined, except: ["POST /**", "GET /**", "HEAD /**"], by: "global" },
    ]);
  });

  it("an earlier regex of another key that takes this one's paths leaves the map out (NGINX tries regexes in order)", () => {
    const r = imported('map $uri $k { ~^/a $binary_remote_addr; ~^/a/b $http_x_tenant; default ""; }');
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => i.message).join("\n")).toMatch(/a regex that gives an empty key beside entries/);
  });
});
