/**
 * `sluice import nginx` on a named location's own limits (src/migrate/nginx_named.ts). NGINX counts a request once, in
 * the first place with a `limit_req` whose key it has, and a request reaches `location @f` only after that place
 * (try_files, error_page, X-Accel-Redirect): where every place has a limit whose key every request has, @f's limits
 * never count (a note, nothing left out, and no "also applies" difference); otherwise they are left out with their
 * reason. `npm run test:nginx` (scripts/nginx-named-differential.ts) checks both against the real NGINX.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const ZONES = `limit_req_zone $binary_remote_addr zone=ip:1m rate=5r/s;
limit_req_zone $binary_remote_addr$uri zone=ipuri:1m rate=5r/s;
limit_req_zone $http_x_k zone=hdr:1m rate=5r/s;
limit_req_zone $binary_remote_addr zone=slow:1m rate=1r/m;`;

function imported(server: string): ImportResult {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-named-"));
  const file = join(dir, "nginx.conf");
  writeFileSync(file, `http {\n${ZONES}\nserver {\n${server}\nlocation @f { limit_req zone=slow; }\n}\n}\n`);
  const result = importNginx(readNginxConfig(file));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const said = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`).join("\n");
const NEVER = /note: location @f \(a named location.*\): limit_req zone=slow never counts: NGINX counts a request once/;
const LEFT_OUT = /left out: location @f .*: cannot be written as a Sluice route, so limit_req zone=slow is not applied/;

describe("a named location's own limits", () => {
  it.each([
    ["every place keyed by the address", "limit_req zone=ip; location /a/ { try_files $uri @f; }"],
    ["a key of the address and the path", "location / { limit_req zone=ipuri; try_files $uri @f; }"],
    ["a place answered by a return, no error_page to @f", "limit_req zone=ip; location = /h { return 200; }"],
  ])("never count where every request is counted first: %s", (_, server) => {
    const r = imported(server);
    expect(said(r)).toMatch(NEVER);
    expect(said(r)).not.toMatch(/left out:/);
    expect(said(r)).not.toMatch(/also applies to requests NGINX sends to location @f/);
    expect(r.rules.some((x) => x.id.includes("slow"))).toBe(false);
  });

  it.each([
    ["a place without limits", "location / { try_files $uri @f; } location /api/ { limit_req zone=ip; }"],
    ["a key a request may lack", "location / { limit_req zone=hdr; try_files $uri @f; }"],
    ["a return with an error_page to @f", "limit_req zone=ip; error_page 404 = @f; location = /h { return 404; }"],
  ])("left out where a request can reach them uncounted: %s", (_, server) => {
    const r = imported(server);
    expect(said(r)).toMatch(LEFT_OUT);
    expect(said(r)).not.toMatch(NEVER);
  });
});
