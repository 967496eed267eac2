/**
 * `sluice import nginx` on the shapes the importer corpus found (docs/testing.md, "The importer corpus"): `map` keys,
 * files without an `http` block (conf.d/, sites-enabled/), includes that name no file here (`--root`), zones no
 * limit uses, and regex locations that are prefixes (`^/1/(.*)`, `^/api`, `[^/]+`).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig, type UnreadInclude } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-maps-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function imported(text: string, root?: string): ImportResult {
  const dir = folder({ "nginx.conf": text });
  const unread: UnreadInclude[] = [];
  const result = importNginx(readNginxConfig(join(dir, "nginx.conf"), { unread, absoluteUnder: root ?? dir }), unread);
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const said = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`);

describe("map keys", () => {
  it("a map of a cookie's or a query parameter's values: match.cookie, match.query (names as written)", () => {
    const r = imported(`http {
  map $cookie_Plan $trial { default ""; trial $binary_remote_addr; }
  map $arg_format $export { default ""; ~^(csv|xlsx)$ $binary_remote_addr; }
  limit_req_zone $trial zone=t:1m rate=5r/s;
  limit_req_zone $export zone=e:1m rate=1r/s;
  server { limit_req zone=t; limit_req zone=e; }
}`);
    expect(r.rules.map((x) => [x.id, x.match.cookie, x.match.query, x.match.identity])).toEqual([
      ["t", ['{ name: Plan, matches: "^trial$", ignore_case: true }'], undefined, "ip"],
      ["e", undefined, ['{ name: format, matches: "^(csv|xlsx)$" }'], "ip"],
    ]);
    expect(said(r).join("\n")).toMatch(
      /only requests whose format query parameter has a value it lists get a key \(match.query\); NGINX's \$arg_ is the first value as sent/,
    );
  });

  it("a map $uri giving an empty key to some paths: those paths become match.except", () => {
    const r = imported(`http {
  map $uri $limited { default $binary_remote_addr; /health ""; ~^/static/ ""; }
  limit_req_zone $limited zone=a:1m rate=5r/s;
  server { limit_req zone=a burst=5; }
}`);
    expect(r.rules.map((x) => [x.match.route, x.match.except, x.match.identity])).toEqual([
      [undefined, ["* /health", "* /static/**"], "ip"],
    ]);
    expect(said(r).join("\n")).toMatch(/requests to \* \/health, \* \/static\/\*\* get an empty key/);
  });

  it.each([
    ["a geo", "geo $k { default 1; 10.0.0.0/8 0; }", /comes from a geo block \(address ranges\)/],
    [
      "a map over a map",
      "map $http_x $m { default 1; }\nmap $m $k { default $m; }",
      /gives \$m, itself a map: one map over another is not imported/,
    ],
    ["an empty key for everyone", 'map $uri $k { default ""; }', /gives every request an empty key/],
    [
      "a variable njs computes (the corpus's nth-block): said as such, with what to do",
      "js_set $k extractUser.extractUser;",
      /\$k is computed by code in NGINX \(js_set extractUser.extractUser\), which a Worker does not run: if it is who the caller is .*count by user \(USER_HEADER\)/,
    ],
  ])("refused with its reason: %s", (_name, map, message) => {
    const r = imported(`http {\n${map}\nlimit_req_zone $k zone=a:1m rate=5r/s;\nserver { limit_req zone=a; }\n}`);
    expect(r.rules).toEqual([]);
    const leftOut = r.report.filter((i) => i.kind === "left out").map((i) => i.message);
    expect(leftOut.join("\n")).toMatch(message);
  });

  // NGINX's own allowlist example ("Rate Limiting with NGINX and NGINX Plus", nginx.com): a geo gives each client
  // range a value, a map turns it into the key or an empty one. Ranges that are never a client's CF-Connecting-IP
  // (private, loopback, link-local, wholly) change nothing; a public one cannot be said.
  const allowlist = (geo: string, map = 'map $limit $limit_key { 0 ""; 1 $binary_remote_addr; }') =>
    imported(`http {
${geo}
${map}
limit_req_zone $limit_key zone=a:1m rate=5r/s;
server { limit_req zone=a; }
}`);

  it.each([
    "geo $limit { default 1; 10.0.0.0/8 0; 192.168.0.0/24 0; }",
    "geo $remote_addr $limit { default 1; 127.0.0.1 0; 172.16.0.0/12 0; 169.254.0.0/16 0; ::1 0; fd00::/8 0; }",
    "geo $limit { default 1; 10.0.0.0/8 0; 10.1.0.0/16 1; fe80::/10 0; }",
  ])("an allowlist of ranges no client has is the address key: %s", (geo) => {
    const r = allowlist(geo);
    expect(r.rules.map((x) => [x.match.identity, x.match.except])).toEqual([["ip", undefined]]);
    expect(said(r).join("\n")).toMatch(
      /map \$limit \$limit_key \(over geo \$limit, by client address\): .* (is|are) never a client's address on Cloudflare \(CF-Connecting-IP is public\), so (it changes|they change) nothing/,
    );
  });

  it("a geo's ranges in a file it includes are read where the include stands, as NGINX reads them", () => {
    const dir = folder({
      "nginx.conf":
        'http {\ngeo $limit { default 1; include allow.geo; }\nmap $limit $k { 0 ""; 1 $binary_remote_addr; }\nlimit_req_zone $k zone=a:1m rate=5r/s;\nserver { limit_req zone=a; }\n}\n',
      "allow.geo": "10.0.0.0/8 0;\n198.51.100.7 0;\n",
    });
    const r = importNginx(readNginxConfig(join(dir, "nginx.conf"), { unread: [], absoluteUnder: dir }), []);
    expect(r.rules.map((x) => x.match.except_address)).toEqual([["198.51.100.7"]]);
    expect(said(r).join("\n")).toMatch(/requests from 198\.51\.100\.7 \(an allowlist: match.except_address\)/);
  });

  it("the same allowlist, its values the other way round (a map default, a geo without one)", () => {
    const r = allowlist(
      "geo $limit { 10.0.0.0/8 yes; }",
      'map $limit $limit_key { yes ""; default $binary_remote_addr; }',
    );
    expect(r.rules.map((x) => x.match.identity)).toEqual(["ip"]);
  });

  it.each([
    ["a public range", "geo $limit { default 1; 10.0.0.0/8 0; 203.0.113.0/24 0; }", undefined, ["203.0.113.0/24"]],
    ["a range wider than private space", "geo $limit { default 1; 172.0.0.0/8 0; }", undefined, ["172.0.0.0/8"]],
    [
      "a range deleted again, and one given twice (the later value)",
      "geo $limit { default 1; 203.0.113.0/24 1; 198.51.100.0/24 0; delete 198.51.100.0/24; 203.0.113.0/24 0; }",
      undefined,
      ["203.0.113.0/24"],
    ],
    [
      "every IPv4 client (geo's IPv6 ones are apart)",
      "geo $limit { default 1; 0.0.0.0/0 0; }",
      undefined,
      ["0.0.0.0/0"],
    ],
    ["only some ranges limited", "geo $limit { default 0; 198.51.100.0/24 1; }", ["198.51.100.0/24"], undefined],
    [
      "only a range, but a smaller one inside it",
      "geo $limit { default 0; 198.51.100.0/24 1; 198.51.100.0/28 0; 2001:db8::/32 1; }",
      ["198.51.100.0/24", "2001:db8::/32"],
      ["198.51.100.0/28"],
    ],
  ])("an allowlist as match.address and match.except_address: %s", (_name, geo, only, except) => {
    const r = allowlist(geo);
    expect(r.rules.map((x) => [x.match.address, x.match.except_address, x.match.identity])).toEqual([
      [only, except, "ip"],
    ]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it("a geo giving several keys: one rule per key, on the clients that get it", () => {
    const r = allowlist(
      "geo $limit { default free; 198.51.100.0/24 partner; 203.0.113.0/28 office; }",
      'map $limit $limit_key { free $binary_remote_addr; partner "partner"; office ""; }',
    );
    expect(r.rules.map((x) => [x.match.address, x.match.except_address, x.key ?? x.match.identity])).toEqual([
      [["198.51.100.0/24"], undefined, "global"],
      [undefined, ["198.51.100.0/24", "203.0.113.0/28"], "ip"],
    ]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it("ranges as starts and ends: each as the CIDR blocks that cover it; proxy lines noted", () => {
    const r = allowlist(
      "geo $limit { ranges; default 1; proxy 192.0.2.1; 10.0.0.0-10.255.255.255 0; 203.0.113.1-203.0.113.14 0; }",
    );
    expect(r.rules.map((x) => x.match.except_address)).toEqual([
      ["203.0.113.1/32", "203.0.113.2/31", "203.0.113.4/30", "203.0.113.8/30", "203.0.113.12/31", "203.0.113.14/32"],
    ]);
    expect(said(r).join("\n")).toMatch(
      /its proxy lines: NGINX reads the client from X-Forwarded-For behind these proxies/,
    );
  });

  it.each([
    [
      "a limited range inside an exempt one (geo takes the longest)",
      "geo $limit { default 1; 203.0.113.0/24 0; 203.0.113.128/25 1; }",
      /203\.0\.113\.128\/25 gets the key inside 203\.0\.113\.0\/24, which does not: a rule cannot apply inside a range it leaves out/,
    ],
    [
      "overlapping ranges",
      "geo $limit { ranges; default 1; 203.0.113.0-203.0.113.20 0; 203.0.113.10-203.0.113.30 0; }",
      /its 203\.0\.113\.10-203\.0\.113\.30 overlaps another of its ranges/,
    ],
    [
      "a delete of the default (NGINX's 0.0.0.0/0)",
      "geo $limit { default 1; 203.0.113.0/24 0; delete 0.0.0.0/0; }",
      /its delete 0\.0\.0\.0\/0 deletes its default, which is not read here/,
    ],
    [
      "a geo of a header",
      "geo $http_x_real_ip $limit { default 1; 10.0.0.0/8 0; }",
      /over geo \$limit of \$http_x_real_ip\): a Sluice rule cannot match on ranges of its value/,
    ],
  ])("an allowlist refused with its reason: %s", (_name, geo, message) => {
    const r = allowlist(geo);
    expect(r.rules).toEqual([]);
    expect(
      r.report
        .filter((i) => i.kind === "left out")
        .map((i) => i.message)
        .join("\n"),
    ).toMatch(message);
  });

  it("a map that is the key itself with an empty value kept empty is the key", () => {
    const r = imported(`http {
  map $http_x_tenant $t { default $http_x_tenant; "" ""; }
  limit_req_zone $t zone=a:1m rate=5r/s;
  server { limit_req zone=a; }
}`);
    expect(r.rules.map((x) => x.key)).toEqual([["{ header: x-tenant }"]]);
    expect(r.rules[0]!.fields).toContainEqual(["key_missing", "skip"]);
  });
});

describe("files as NGINX includes them", () => {
  it("a file without http { } is read as the inside of one, and says so", () => {
    const r = imported(
      "limit_req_zone $binary_remote_addr zone=a:1m rate=5r/s;\nserver { location /api/ { limit_req zone=a; } }\n",
    );
    expect(r.rules.map((x) => x.match.route)).toEqual(["* /api/**"]);
    expect(said(r)[0]).toMatch(/note: no http \{ \.\.\. \} block: read as a file that NGINX includes inside http/);
  });

  it("an include that names nothing here is left out; a stock file is only noted; --root reads absolute paths", () => {
    const text =
      "http {\ninclude mime.types;\ninclude /etc/nginx/conf.d/*.conf;\nlimit_req_zone $binary_remote_addr zone=a:1m rate=5r/s;\n}\n";
    const bare = imported(text);
    expect(said(bare)).toEqual([
      expect.stringMatching(/^note: include mime.types: no such file .* \(NGINX's stock file: no limits in it\)$/),
      expect.stringMatching(/^left out: include \/etc\/nginx\/conf.d\/\*.conf: no such folder .*, so any limits/),
      expect.stringMatching(
        /^note: limit_req_zone \$binary_remote_addr zone=a:1m rate=5r\/s: counted by client address/,
      ),
      "note: zone a: no limit_req uses it in the files read, so it limits nothing here",
    ]);
    const root = folder({ "etc/nginx/conf.d/api.conf": "server { location /api/ { limit_req zone=a; } }\n" });
    const rooted = imported(text, root);
    expect(rooted.rules.map((x) => x.match.route)).toEqual(["* /api/**"]);
  });

  it("sluice import nginx --root, and --root refused for envoy", async () => {
    const root = folder({ "etc/nginx/conf.d/api.conf": "server { location /api/ { limit_req zone=a; } }\n" });
    const dir = folder({
      "nginx.conf":
        "http {\ninclude /etc/nginx/conf.d/*.conf;\nlimit_req_zone $binary_remote_addr zone=a:1m rate=5r/s;\n}\n",
    });
    const r = await runCli(["import", "nginx", join(dir, "nginx.conf"), "--root", root]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/route: "\* \/api\/\*\*"/);
    const e = await runCli(["import", "envoy", join(dir, "nginx.conf"), "--root", root]);
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(/--root is for nginx/);
  });
});

describe("regex locations that are prefixes", () => {
  it.each([
    ["~ ^/1/(.*)", "* /1/**"],
    ["~ ^/api", "* /api**"],
    ["~ ^/x/y.*", "* /x/y**"],
    ["~ ^/u/[^/]+$", "* /u/*"],
  ])("location %s is the route %s", (location, route) => {
    const r = imported(
      `http {\nlimit_req_zone $binary_remote_addr zone=a:1m rate=5r/s;\nserver { location ${location} { limit_req zone=a; } location / { } }\n}`,
    );
    expect(r.rules.map((x) => x.match.route)).toEqual([route]);
  });
});
