/**
 * `sluice import nginx`: real-world-shaped nginx.conf snippets with the rules and the report each must give, the
 * malformed configurations with their errors, and the command's output and exit status.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { alternatives, mayOverlap } from "../../src/migrate/nginx_routes.ts";
import { type DraftRule, type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

/** The files of one configuration in a fresh folder; the path of the first (the main file). */
function conf(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return join(dir, Object.keys(files)[0]!);
}

const http = (body: string) => `events {}\nhttp {\n${body}\n}\n`;

/** A rule in one line: `id route identity fields`. */
function line(rule: DraftRule): string {
  const fields = rule.fields
    .filter(([k]) => k !== "algorithm")
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const except = rule.match.except === undefined ? "" : ` except ${rule.match.except.join(",")}`;
  const header = rule.match.header === undefined ? "" : ` header ${rule.match.header.join(",")}`;
  const key =
    rule.key === undefined ? rule.match.identity : `key=${rule.key === "global" ? "global" : rule.key.join("+")}`;
  return `${rule.id} ${rule.match.route ?? "*"}${except}${header} ${key} ${fields}`;
}

function imported(files: Record<string, string>): ImportResult {
  const result = importNginx(readNginxConfig(conf(files)));
  // Every import must be a rule file the validator accepts.
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const reportOf = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`);

const ZONE_IP = "limit_req_zone $binary_remote_addr zone=ip:10m rate=10r/s;";

describe("nginx.conf snippets: the rules and the report", () => {
  it.each([
    [
      "1 one zone for the whole server",
      { "nginx.conf": http(`${ZONE_IP}\nserver { listen 80; limit_req zone=ip burst=20 nodelay; }`) },
      ["ip * ip rate=10/s burst=20 nodelay=true status=503"],
      [],
    ],
    [
      "2 burst 0 and the default status (503, not Sluice's 429)",
      { "nginx.conf": http(`${ZONE_IP}\nserver { location /api/ { limit_req zone=ip; } }`) },
      ["ip-api * /api/** ip rate=10/s burst=0 delay=0 status=503"],
      [],
    ],
    [
      "3 delay=N and limit_req_status",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req_status 429;\nserver { location / { limit_req zone=ip burst=12 delay=8; } }`,
        ),
      },
      ["ip * ip rate=10/s burst=12 delay=8 status=429"],
      [],
    ],
    [
      "4 several limit_req in one location: both apply (composition)",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req_zone $http_x_api_key zone=key:10m rate=100r/m;\nserver { location /v1/ { limit_req zone=ip burst=5; limit_req zone=key burst=50 nodelay; } location / {} }`,
        ),
      },
      [
        "ip-v1 * /v1/** ip rate=10/s burst=5 delay=0 status=503",
        "key-v1 * /v1/** api_key rate=100/min burst=50 nodelay=true status=503",
      ],
      ["approximate: limit_req_zone $http_x_api_key zone=key:10m rate=100r/m: NGINX rounds 100r/m down to 1666"],
    ],
    [
      "5 a location's limit_req replaces the inherited one",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req_zone $binary_remote_addr zone=login:1m rate=1r/s;\nserver { limit_req zone=ip burst=20; location /login { limit_req zone=login; } location / {} }`,
        ),
      },
      [
        "login-login * /login** ip rate=1/s burst=0 delay=0 status=503",
        "ip * /** except * /login** ip rate=10/s burst=20 delay=0 status=503",
      ],
      [],
    ],
    [
      "6 an exact location (=)",
      { "nginx.conf": http(`${ZONE_IP}\nserver { location = /v1/login { limit_req zone=ip burst=2; } }`) },
      ["ip-v1-login * /v1/login ip rate=10/s burst=2 delay=0 status=503"],
      [],
    ],
    [
      "7 limit_req_dry_run on: a shadow rule",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { limit_req_dry_run on; location /api/ { limit_req zone=ip burst=3; } }`,
        ),
      },
      ["ip-api-dry-run * /api/** ip rate=10/s burst=3 delay=0 status=503 mode=shadow"],
      [],
    ],
    [
      "8 include of a zones file and a server glob",
      {
        "nginx.conf": http("include zones.conf;\ninclude sites/*.conf;"),
        "zones.conf": ZONE_IP,
        "sites/api.conf": "server { location /api/ { limit_req zone=ip burst=4 nodelay; } }",
      },
      ["ip-api * /api/** ip rate=10/s burst=4 nodelay=true status=503"],
      [],
    ],
    [
      "9 a key Sluice cannot say ($request_id) is left out",
      { "nginx.conf": http("limit_req_zone $request_id zone=t:1m rate=1r/s;\nserver { limit_req zone=t; }") },
      [],
      [
        "left out: limit_req_zone $request_id zone=t:1m rate=1r/s: Sluice has no key part for $request_id",
        "left out: limit_req zone=t: its zone's key has no Sluice identity",
      ],
    ],
    [
      "10 limit_conn is a concurrency rule, with limit_conn_status and limit_conn_dry_run inherited",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_conn_zone $binary_remote_addr zone=c:10m;\nlimit_conn_status 429;\n` +
            "server { limit_conn c 10; limit_req zone=ip;\n" +
            "  location /v1/reports/ { limit_conn c 3; limit_conn_dry_run on; } }",
        ),
      },
      [
        "ip * ip rate=10/s burst=0 delay=0 status=503",
        "c-v1-reports-dry-run * /v1/reports/** ip limit=3 status=429 mode=shadow",
        "c * /** except * /v1/reports/** ip limit=10 status=429",
      ],
      [
        "note: limit_conn_zone $binary_remote_addr zone=c:10m: counted by client address (CF-Connecting-IP); IPv6 clients share one budget per /64 unless IPV6_PREFIX=128",
        "note: limit_conn_zone $binary_remote_addr zone=c:10m: a slot is a lease of slot_ttl (60s unless set), renewed while its request runs, so a crashed isolate never holds one for long",
      ],
    ],
    [
      "11 r/m rounding: both of NGINX's roundings with their numbers",
      {
        "nginx.conf": http(
          "limit_req_zone $remote_addr zone=slow:1m rate=7r/m;\nserver { limit_req zone=slow burst=3; }",
        ),
      },
      ["slow * ip rate=7/min burst=3 delay=0 status=503"],
      [
        "approximate: limit_req_zone $remote_addr zone=slow:1m rate=7r/m: NGINX rounds 7r/m down to 116 requests per 1000 s, so it admits one request every 8,621 ms where Sluice's exact 7/min admits one every 8,571.4 ms",
        "approximate: limit_req_zone $remote_addr zone=slow:1m rate=7r/m: NGINX rounds down what leaked since the last admitted request and moves its clock to now: admissions less than 9 ms apart leak nothing",
      ],
    ],
    [
      "12 3r/m: whole milli-requests, so only the leak rounding",
      { "nginx.conf": http("limit_req_zone $remote_addr zone=m:1m rate=3r/m;\nserver { limit_req zone=m; }") },
      ["m * ip rate=3/min burst=0 delay=0 status=503"],
      [
        "approximate: limit_req_zone $remote_addr zone=m:1m rate=3r/m: NGINX rounds down what leaked since the last admitted request and moves its clock to now: admissions less than 20 ms apart leak nothing",
      ],
    ],
    [
      "13 a header key: key: [{ header }], an empty one not limited (key_missing: skip)",
      {
        "nginx.conf": http(
          "limit_req_zone $http_x_tenant zone=tenant:1m rate=50r/s;\nserver { location /v2/ { limit_req zone=tenant burst=100 nodelay; } }",
        ),
      },
      [
        "tenant-v2 * /v2/** key={ header: x-tenant } rate=50/s burst=100 nodelay=true status=503 key_missing=skip key_client_chosen=accept",
      ],
      [
        "note: limit_req_zone $http_x_tenant zone=tenant:1m rate=50r/s: counted by { header: x-tenant }; a request with an empty key is not limited, as in NGINX (key_missing: skip)",
      ],
    ],
    [
      "14 a regex location mapped to a route",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location ~ ^/v1/users/[0-9]+/orders$ { limit_req zone=ip burst=1; } }`,
        ),
      },
      ["ip-v1-users-orders * /v1/users/*/orders ip rate=10/s burst=1 delay=0 status=503"],
      [],
    ],
    [
      // A path's ending is a route (`**.php`); a regex location wins over a prefix one, so the prefix's rule leaves its
      // paths out. A regex that is not a path's ending nor literal segments is still left out with its reason.
      "15 a regex location of a path's ending is a route; others are reported",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location ~ \\.php$ { limit_req zone=ip; } location ~* \\.(?:ico|jpe?g)$ { limit_req zone=ip burst=5; } location ~ ^/admin/.*\\.cgi$ { limit_req zone=ip burst=4; } location /api/ { limit_req zone=ip burst=2; } location ~ \\.py(/|$) { limit_req zone=ip burst=3; } location / {} }`,
        ),
      },
      [
        "ip-php * /**.php ip rate=10/s burst=0 delay=0 status=503",
        "ip-ico * /**.ico,* /**.jpeg,* /**.jpg ip rate=10/s burst=5 delay=0 status=503",
        "ip-admin-cgi * /admin/**.cgi ip rate=10/s burst=4 delay=0 status=503",
        "ip-api * /api/** except * /**.php,* /**.ico,* /**.jpeg,* /**.jpg ip rate=10/s burst=2 delay=0 status=503",
      ],
      [
        "approximate: limit_req zone=ip (location ~ \\.php$): the route also matches the path with one trailing slash",
        "approximate: limit_req zone=ip burst=5 (location ~* \\.(?:ico|jpe?g)$): the route also matches the path with one trailing slash; ~* ignores case",
        "approximate: limit_req zone=ip burst=2 (location /api/) also applies to requests NGINX sends to location ~ \\.py(/|$), which cannot be written as a route to leave them out",
        "left out: location ~ \\.py(/|$): cannot be written as a Sluice route, so limit_req zone=ip burst=3 is not applied there",
      ],
    ],
    [
      "16 one zone in two locations: one state, so one rule with both routes",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location /a/ { limit_req zone=ip burst=5; } location /b/ { limit_req zone=ip burst=5; } location / {} }`,
        ),
      },
      ["ip-a * /a/**,* /b/** ip rate=10/s burst=5 delay=0 status=503"],
      ["approximate: limit_req zone=ip burst=5 (location /a/): the route also matches /a itself"],
    ],
    [
      "17 two servers with limits: rules do not match by host",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { server_name a.example; limit_req zone=ip burst=1; }\nserver { server_name b.example; limit_req zone=ip burst=9; }`,
        ),
      },
      ["ip * ip rate=10/s burst=1 delay=0 status=503", "ip-2 * ip rate=10/s burst=9 delay=0 status=503"],
      [
        "approximate: several server blocks have limits: Sluice rules do not match by host, so each applies to every host",
      ],
    ],
    [
      "18 delay above burst is nodelay; nested location inherits",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location /api/ { limit_req zone=ip burst=2 delay=5; location /api/admin/ { } } }`,
        ),
      },
      ["ip-api * /api/** ip rate=10/s burst=2 nodelay=true status=503"],
      [],
    ],
    [
      "19 a server-level limit_req with locations below and no location / (crashed with a TypeError)",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req_zone $binary_remote_addr zone=login:1m rate=1r/s;\nserver { limit_req zone=ip burst=20 nodelay; location /v1/login { limit_req zone=login burst=2; } location /v1/search { } }`,
        ),
      },
      [
        "login-v1-login * /v1/login** ip rate=1/s burst=2 delay=0 status=503",
        "ip * /** except * /v1/login** ip rate=10/s burst=20 nodelay=true status=503",
      ],
      [],
    ],
    [
      "20 server-level limits, a zone shared by two locations, a dry-run location, two keys in one location",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req_zone $binary_remote_addr zone=login:1m rate=1r/s;\nlimit_req_zone $http_x_tenant zone=t:1m rate=5r/s;\nlimit_req_status 429;\nserver { limit_req zone=ip burst=20 nodelay; location /v1/login { limit_req zone=login burst=2; } location /v1/signup { limit_req zone=login burst=2; } location /v1/search { } location /v1/reports { limit_req_dry_run on; } location /v1/orders { limit_req zone=ip burst=20 nodelay; limit_req zone=t burst=5; } }`,
        ),
      },
      [
        "login-v1-login * /v1/login**,* /v1/signup** ip rate=1/s burst=2 delay=0 status=429",
        "ip * /** except * /v1/login**,* /v1/signup**,* /v1/reports** ip rate=10/s burst=20 nodelay=true status=429",
        "ip-v1-reports-dry-run * /v1/reports** ip rate=10/s burst=20 nodelay=true status=429 mode=shadow",
        "t-v1-orders * /v1/orders** key={ header: x-tenant } rate=5/s burst=5 delay=0 status=429 key_missing=skip key_client_chosen=accept",
      ],
      [
        "approximate: zone ip is read by 2 rules (ip, ip-v1-reports-dry-run) with different settings: NGINX keeps one state per key for the zone, Sluice one per rule",
      ],
    ],
    [
      "21 NGINX's choice of location: exact, longest prefix, ^~, then regexes before plain prefixes",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location /api/ { limit_req zone=ip burst=1; } location = /api/health { } location /api/admin/ { } location ~ ^/api/v[0-9]+/export$ { } location ^~ /static/ { limit_req zone=ip burst=1; } location ~ ^/static/x$ { } }`,
        ),
      },
      ["ip-api * /api/**,* /static/** except * /api/health,* /api/admin/** ip rate=10/s burst=1 delay=0 status=503"],
      [],
    ],
    [
      "22 composite and other keys: $binary_remote_addr$uri, $cookie_*$arg_*, $server_name, a constant",
      {
        "nginx.conf": http(
          `limit_req_zone $binary_remote_addr$uri zone=a:1m rate=10r/s;\nlimit_req_zone $cookie_s$arg_p zone=b:1m rate=1r/s;\nlimit_req_zone $server_name zone=c:1m rate=100r/s;\nlimit_req_zone origin zone=d:1m rate=200r/s;\nserver { server_name api.example.com; location / { limit_req zone=a; limit_req zone=b; limit_req zone=c; limit_req zone=d; } }`,
        ),
      },
      [
        "a * key=ip+path rate=10/s burst=0 delay=0 status=503 key_missing=empty",
        "b * key={ cookie: s }+{ query: p } rate=1/s burst=0 delay=0 status=503 key_missing=skip key_client_chosen=accept",
        'c * key={ const: "api.example.com" } rate=100/s burst=0 delay=0 status=503 key_missing=empty',
        "d * key=global rate=200/s burst=0 delay=0 status=503",
      ],
      [
        'note: limit_req_zone origin zone=d:1m rate=200r/s: the constant key "origin" is one budget for every client',
        "approximate: limit_req_zone $cookie_s$arg_p zone=b:1m rate=1r/s: counted by { cookie: s } + { query: p }; a request with none of them is not limited, as in NGINX (key_missing: skip); one with only some of them is not limited either, where NGINX counts it by the ones it has",
      ],
    ],
    [
      // NGINX answers `return` in its rewrite phases, before limit_req counts (preaccess): measured with nginx 1.22,
      // 25 requests at once to `location /health { return 200; }` under a server-level burst of 20 are all 200.
      "23 a location or server that answers with return is never limited",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nlimit_req zone=ip burst=20 nodelay;\nserver { listen 80; return 301 https://$host$request_uri; }\nserver { listen 443; location = /health { return 200; } location /api/ { location /api/x { return 204; } } location /old/ { if ($arg_a) { return 403; } } }`,
        ),
      },
      ["ip * /** except * /health,* /api/x** ip rate=10/s burst=20 nodelay=true status=503"],
      [
        "note: server (requests no location matches): `return 301 https://$host$request_uri` answers its requests before NGINX's limit_req counts them",
        "note: location = /health: `return 200` answers its requests before NGINX's limit_req counts them",
        "note: location /api/x: `return 204` answers its requests",
      ],
    ],
    [
      // docs/rules.md's key parts have `method`; the import said "Sluice has no key part for $request_method".
      "24 $request_method is the method part",
      {
        "nginx.conf": http(
          `limit_req_zone $binary_remote_addr$request_method zone=m:1m rate=5r/s;\nserver { location /api/ { limit_req zone=m; } }`,
        ),
      },
      ["m-api * /api/** key=ip+method rate=5/s burst=0 delay=0 status=503 key_missing=empty"],
      [],
    ],
    [
      // docs/rules.md's key parts have `api_key` with others; the import said "Sluice has no key part for
      // $http_x_api_key (it keys on ... headers ...)" for a key it takes alone.
      "25 the API key's headers with other variables are the api_key part, approximate as alone",
      {
        "nginx.conf": http(
          `limit_req_zone $http_x_api_key$uri zone=k:1m rate=5r/s;\nlimit_req_zone $binary_remote_addr:$http_authorization zone=a:1m rate=5r/s;\nserver { location /api/ { limit_req zone=k; limit_req zone=a; } }`,
        ),
      },
      [
        "k-api * /api/** key=api_key+path rate=5/s burst=0 delay=0 status=503 key_missing=empty",
        "a-api * /api/** key=ip+api_key rate=5/s burst=0 delay=0 status=503 key_missing=empty",
      ],
      [
        "approximate: limit_req_zone $http_x_api_key$uri zone=k:1m rate=5r/s: counted by api_key + path; a request missing a part counts it as empty (key_missing: empty), as NGINX counts it by the rest of its key; a caller without an account record is counted by its address (unverified: by_address), where NGINX counts every distinct value",
        'approximate: limit_req_zone $binary_remote_addr:$http_authorization zone=a:1m rate=5r/s: counted by ip + api_key (the text ":" between them only separates)',
      ],
    ],
    [
      // A proxy's client address headers mean the client address; keyed by their text, a client sets its own (a fresh
      // budget per value): the ip part, approximate, never `key_client_chosen: accept` on a header anyone can send.
      "26 X-Forwarded-For and X-Real-IP are the client address, approximate",
      {
        "nginx.conf": http(
          `limit_req_zone $http_x_forwarded_for zone=f:1m rate=5r/s;\nlimit_req_zone $http_x_real_ip$uri zone=r:1m rate=5r/s;\nlimit_conn_zone $http_x_forwarded_for zone=c:1m;\nserver { location /api/ { limit_req zone=f; limit_req zone=r; limit_conn c 3; } }`,
        ),
      },
      [
        "f-api * /api/** ip rate=5/s burst=0 delay=0 status=503",
        "r-api * /api/** key=ip+path rate=5/s burst=0 delay=0 status=503 key_missing=empty",
        "c-api * /api/** ip limit=3 status=503",
      ],
      [
        "approximate: limit_req_zone $http_x_forwarded_for zone=f:1m rate=5r/s: counted by client address (CF-Connecting-IP), the address a proxy puts in x-forwarded-for; NGINX counts by the header's text, which a client can also set itself",
        "approximate: limit_req_zone $http_x_real_ip$uri zone=r:1m rate=5r/s: counted by ip + path",
        "approximate: limit_conn_zone $http_x_forwarded_for zone=c:1m: counted by client address (CF-Connecting-IP)",
      ],
    ],
    [
      // `location @backend { limit_req ...; }` behind `try_files $uri @backend` (a common shape) was dropped without a
      // word: 0 rules, 0 left out, exit 0. Which requests try_files sends there no path says (a file's absence).
      "27 a named location's own limit is left out with its reason",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location / { try_files $uri @backend; } location @backend { limit_req zone=ip burst=10; } location /api/ { limit_req zone=ip; } }`,
        ),
      },
      ["ip-api * /api/** ip rate=10/s burst=0 delay=0 status=503"],
      [
        "left out: location @backend (a named location: requests reach it by try_files, error_page or an internal redirect, not by their path): cannot be written as a Sluice route, so limit_req zone=ip burst=10 is not applied there",
      ],
    ],
    [
      // A regex location of literal alternatives is one route per alternative (NGINX sends each alternative's paths
      // there); one that is not a route after expanding (a `.` that means any character) is still left out.
      "28 a regex location's alternatives (v1|v2) are one route each",
      {
        "nginx.conf": http(
          `${ZONE_IP}\nserver { location ~ ^/api/(v1|v2)/users { limit_req zone=ip; } location ~ ^/(a.b|c)/x$ { limit_req zone=ip burst=2; } location / { } }`,
        ),
      },
      ["ip-api-v1-users * /api/v1/users**,* /api/v2/users** ip rate=10/s burst=0 delay=0 status=503"],
      [
        "left out: location ~ ^/(a.b|c)/x$: cannot be written as a Sluice route, so limit_req zone=ip burst=2 is not applied there",
      ],
    ],
    [
      // NGINX's way to limit bots: a map of User-Agent values to a key (strings ignoring case, `~*` regexes), here
      // through a second map of its constants (the corpus's nginx-limit-crawlers), and an exempt string.
      "29 a map of a header's values is match.header; a map over it is read through",
      {
        "nginx.conf": http(
          `map $http_user_agent $bot { default 0; ~*googlebot 1; ~*bingbot 1; "Friendly Bot" 0; }\nmap $bot $bot_key { 1 $binary_remote_addr; default ""; }\nmap $http_x_sdk $old_sdk { default ""; ~^1\\. $binary_remote_addr; legacy $binary_remote_addr; }\nlimit_req_zone $bot_key zone=bots:1m rate=1r/s;\nlimit_req_zone $old_sdk zone=sdk:1m rate=2r/s;\nserver { location / { limit_req zone=bots; limit_req zone=sdk; } }`,
        ),
      },
      [
        'bots * header { name: user-agent, matches: "(?:googlebot)|(?:bingbot)", ignore_case: true },{ name: user-agent, matches: "^Friendly Bot$", ignore_case: true, not: true } ip rate=1/s burst=0 delay=0 status=503',
        'sdk * header { name: x-sdk, matches: "(?:^1\\\\.)|(?:^[lL][eE][gG][aA][cC][yY]$)" } ip rate=2/s burst=0 delay=0 status=503',
      ],
      [
        "note: limit_req_zone $bot_key zone=bots:1m rate=1r/s: map $bot $bot_key (over map $http_user_agent $bot): only requests whose user-agent header has a value it lists get a key (match.header)",
      ],
    ],
    [
      // What one rule cannot say stays left out with why: an exempting regex that takes a value listed for the key
      // (strings are tried first), regexes of both cases.
      "30 a header map one rule cannot say is left out",
      {
        "nginx.conf": http(
          `map $http_user_agent $k1 { default $binary_remote_addr; ~*bot ""; goodbot $binary_remote_addr; }\nmap $http_user_agent $k2 { default ""; ~bot $binary_remote_addr; ~*crawl $binary_remote_addr; }\nlimit_req_zone $k1 zone=a:1m rate=1r/s;\nlimit_req_zone $k2 zone=b:1m rate=1r/s;\nserver { location / { limit_req zone=a; limit_req zone=b; } }`,
        ),
      },
      [],
      [
        "left out: limit_req_zone $k1 zone=a:1m rate=1r/s: map $http_user_agent $k1: requests that do not send the user-agent header, or send a value it does not list, get the key $binary_remote_addr, and one test cannot say which values it leaves out (a value listed for the key that an exempting regex also takes, regexes of both cases, or regexes giving the key beside exempting ones)",
        "left out: limit_req_zone $k2 zone=b:1m rate=1r/s: map $http_user_agent $k2: its regexes mix ~ (case) and ~* (any case), which one test cannot say",
      ],
    ],
    [
      // A conf.d file NGINX includes inside http: its http-level limit reaches every server's requests.
      "31 limits in a file with no server block apply to every request",
      { "nginx.conf": `${ZONE_IP}\nlimit_req zone=ip burst=3;\n` },
      ["ip * ip rate=10/s burst=3 delay=0 status=503"],
      [
        "note: limit_req in http with no server block here: NGINX applies it to every server's requests, so it is imported for every request",
      ],
    ],
  ] as const)("%s", (_name, files, rules, report) => {
    const result = imported(files as Record<string, string>);
    expect(result.rules.map(line)).toEqual(rules);
    const items = reportOf(result).filter(
      (r) =>
        !r.startsWith("note: limit_req_zone $binary_remote_addr") && !r.startsWith("note: limit_req_zone $remote_addr"),
    );
    for (const expected of report) expect(items.some((i) => i.startsWith(expected))).toBe(true);
    expect(items.length).toBeGreaterThanOrEqual(report.length);
  });

  it("names the directive each rule came from in a comment", () => {
    const path = conf({
      "nginx.conf": http(`${ZONE_IP}\nserver {\n  location /api/ {\n    limit_req zone=ip burst=20 nodelay;\n  }\n}`),
    });
    const yaml = rulesYaml(importNginx(readNginxConfig(path)), "test");
    expect(yaml).toContain(
      `# from ${path}:6: limit_req zone=ip burst=20 nodelay (location /api/; zone ip at ${path}:3: ${ZONE_IP.slice(0, -1)})`,
    );
  });
});

describe("whether two routes may match one request (which location NGINX picks)", () => {
  it.each([
    ["* /**.php", "* /api/**", true],
    ["* /**.php", "* /index.php", true],
    ["* /**.php", "* /index.html", false],
    ["* /**.php", "* /a/*", true],
    ["* /**.php", "* /api**", true],
    ["* /**.php", "* /", false],
    ["* /**.php", "* /**.cgi", false],
    ["* /**.php", "* /**x.php", true],
    ["* /admin/**.php", "* /**.php", true],
    ["* /admin/**.php", "* /other/x.php", false],
    ["* /admin/**.cgi", "* /**.php", false],
    ["* /a/**", "* /b/**", false],
    ["* /a**", "* /ab/c", true],
  ])("%s and %s: %s", (a, b, expected) => {
    expect(mayOverlap(a, b)).toBe(expected);
    expect(mayOverlap(b, a)).toBe(expected);
  });

  it("an earlier regex location is not said to lose requests to a later one that cannot be a route", () => {
    const result = imported({
      "nginx.conf": http(
        `${ZONE_IP}\nserver { location ~ \\.php$ { limit_req zone=ip; } location ~ \\.py(/|$) { limit_req zone=ip burst=3; } location /api/ { limit_req zone=ip burst=2; } }`,
      ),
    });
    const losing = reportOf(result).filter((r) => r.includes("also applies to requests NGINX sends to"));
    expect(losing).toEqual([
      "approximate: limit_req zone=ip burst=2 (location /api/) also applies to requests NGINX sends to location ~ \\.py(/|$), which cannot be written as a route to leave them out",
    ]);
  });
});

describe("a regex location's alternatives", () => {
  it.each([
    ["^/api/(v1|v2)/users", ["^/api/v1/users", "^/api/v2/users"]],
    ["^/api/(?:v1|v2)/", ["^/api/v1/", "^/api/v2/"]],
    ["^/(a|b)/(.*)", ["^/a/(.*)", "^/b/(.*)"]],
    ["^/x/(a|b)$", ["^/x/a$", "^/x/b$"]],
    ["^/(a|b)?/x", []],
    ["^/(a|b)+/x", []],
    ["^/(a|b)/(c|d)", []],
    ["^/(a|b/c)/x", []],
    ["^/x|^/y", []],
    ["\\.(?:ico|jpe?g)$", ["\\.ico$", "\\.jpeg$", "\\.jpg$"]],
    ["\\.(x\\.?y|z)$", ["\\.x\\.y$", "\\.xy$", "\\.z$"]],
    [
      "^/(a0|a1|a2|a3|a4|a5|a6|a7|a8|a9|a10|a11|a12|a13|a14|a15|a16|a17|a18|a19|a20|a21|a22|a23|a24|a25|a26|a27|a28|a29|a30|a31|a32)/",
      [],
    ],
  ])("%s: %j", (re, expected) => {
    expect(alternatives(re)).toEqual(expected);
  });
});

describe("malformed nginx.conf: the error names the file and line", () => {
  it.each([
    [
      "a missing ;",
      http("limit_req_zone $binary_remote_addr zone=ip:10m rate=10r/s\n"),
      /nginx\.conf:\d+:\d+: .*(no ending ";"|unexpected "}")/,
    ],
    ["an unclosed block", "events {}\nhttp {\n server {\n", /nginx\.conf:3: unexpected end of file, expecting "}"/],
    ["an unterminated quote", 'http { log_format x "abc; }', /nginx\.conf:1:21: unterminated double quote/],
    ["a stray }", "events {}\n}\n", /nginx\.conf:2:1: unexpected "}"/],
    [
      "a bad rate",
      http("limit_req_zone $binary_remote_addr zone=ip:10m rate=1.5r/s;"),
      /nginx\.conf:3: limit_req_zone: invalid rate "rate=1\.5r\/s"; NGINX refuses this configuration/,
    ],
    [
      "an unknown zone",
      http("server { limit_req zone=nope; }"),
      /nginx\.conf:3: limit_req: no limit_req_zone defines zone "nope"/,
    ],
    [
      "a zone defined twice",
      http(`${ZONE_IP}\n${ZONE_IP}`),
      /nginx\.conf:4: limit_req_zone: zone "ip" is already defined/,
    ],
    [
      "a bad limit_req parameter",
      http(`${ZONE_IP}\nserver { limit_req zone=ip brust=5; }`),
      /nginx\.conf:4: limit_req: invalid parameter "brust=5"/,
    ],
    [
      "a bad status",
      http(`${ZONE_IP}\nlimit_req_status 200;`),
      /nginx\.conf:4: limit_req_status: value must be between 400 and 599/,
    ],
    ["no http block", "events {}\n", /no http \{ \.\.\. \} block/],
    [
      "a missing include",
      http("include missing.conf;"),
      /nginx\.conf:3: left out: include missing\.conf: no such file .*missing\.conf/,
    ],
  ])("%s", async (_name, text, message) => {
    const path = conf({ "nginx.conf": text });
    const r = await runCli(["import", "nginx", path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  });
});

describe("sluice import nginx", () => {
  const partial = http(
    "limit_req_zone $binary_remote_addr zone=ip:10m rate=10r/s;\nlimit_req_zone $request_id zone=t:1m rate=1r/s;\nserver { location /a/ { limit_req zone=ip; } location /b/ { limit_req zone=t; } }",
  );

  it("prints the report and exits 1, writing nothing, when something was left out", async () => {
    const path = conf({ "nginx.conf": partial });
    const r = await runCli(["import", "nginx", path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("1 rule written; 1 approximate, 2 left out");
    expect(r.stderr).toContain("nothing written; rerun with --allow-partial");
  });

  it("--allow-partial exits 0; --out writes a file sluice validate accepts", async () => {
    const path = conf({ "nginx.conf": partial });
    const out = join(path, "..", "imported.yaml");
    const r = await runCli(["import", "nginx", path, "--allow-partial", "--out", out]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    const v = await runCli(["validate", out]);
    expect(v.code).toBe(0);
  });

  it("says what it expects on a usage error", async () => {
    const r = await runCli(["import", "haproxy", "x.cfg"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('expected "nginx", "envoy", "cloudflare" or "aws-waf", got "haproxy"');
  });
});

// NGINX's access module is not a limit: it stays NGINX's, and the report says so once, pointing at deny rules.
describe("allow and deny", () => {
  it("are noted once, not imported", () => {
    const r = imported({
      "nginx.conf": http(
        `${ZONE_IP}\nserver { listen 80; location /admin/ { allow 203.0.113.0/28; deny all; limit_req zone=ip; } location /x/ { deny 198.51.100.7; } }`,
      ),
    });
    expect(r.rules.map((x) => x.match.route)).toEqual(["* /admin/**"]);
    expect(r.report.filter((i) => /allow or deny/.test(i.message)).map((i) => `${i.kind}: ${i.message}`)).toEqual([
      'note: allow 203.0.113.0/28, and every other allow or deny: access rules, not limits, so not imported (NGINX keeps them); a blocklist at the edge is a deny rule (docs/rules.md, "Refusing outright")',
    ]);
  });
});
