/**
 * `sluice trace from` writes request traces v2: the host, `request.cf`'s fields and the headers, cookies and query
 * parameters the rules' keys name, from NGINX, Envoy and Cloudflare Logpush logs; never a secret raw (the API key,
 * cookies, credential-named headers and queries as `sha256:` of the trimmed value), and a replay of the trace decides
 * as the values would.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { secretColumn } from "../../src/replay/log_fields.ts";
import { runCli } from "../support/io.ts";

const sha = (v: string) => `sha256:${createHash("sha256").update(v).digest("hex")}`;

const RULES = `- id: tenant
  match: { route: "* /v1/**" }
  key:
    - ip: { v4: 24 }
    - header: X-Tenant-Id
    - cookie: session
    - query: region
    - header: X-Session-Token
  algorithm: fixed_window
  limit: 1
  window: h
`;

function files(log: string, rules = RULES): { dir: string; log: string; rules: string } {
  const dir = mkdtempSync(join(tmpdir(), "sluice-trace-keys-"));
  writeFileSync(join(dir, "rules.yaml"), rules);
  writeFileSync(join(dir, "access.log"), log);
  return { dir, log: join(dir, "access.log"), rules: join(dir, "rules.yaml") };
}

const COLUMNS =
  "t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4," +
  "cookie:session,header:x-session-token,header:x-tenant-id,query:region";

describe("trace from nginx fills what the log has of the rules' key parts", () => {
  const format =
    '$remote_addr $msec "$request" $host "$http_x_tenant_id" "$http_x_session_token" "$http_cookie" "$http_x_api_key"';

  it("carries the host, headers, cookies and query values; hashes the key, the cookie and the token", async () => {
    const f = files(
      [
        '192.0.2.10 1796119200.000 "GET /v1/a?region=eu%2Dwest&x=1 HTTP/1.1" api.example.com "acme" "tok-1" "session=s3cret; theme=dark" "sk_live_1"',
        '192.0.2.11 1796119200.001 "GET /v1/a HTTP/1.1" api.example.com " acme " "-" "-" "-"',
      ].join("\n"),
    );
    const r = await runCli(["trace", "from", "nginx", f.log, "--format", format, "--rules", f.rules]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toBe("# sluice request trace v2");
    expect(lines[1]).toBe(COLUMNS);
    expect(lines[2]).toBe(
      `1796119200000,GET,/v1/a,192.0.2.10,${sha("sk_live_1")},,,api.example.com,,,,,${sha("s3cret")},${sha("tok-1")},acme,eu-west`,
    );
    // A header's value as the Worker reads it (the replay trims); nothing the line lacks.
    expect(lines[3]).toBe("1796119200001,GET,/v1/a,192.0.2.11,,,,api.example.com,,,,,,, acme ,");
    for (const secret of ["sk_live_1", "s3cret", "tok-1"]) expect(r.stdout).not.toContain(secret);
  });

  // $cookie_NAME and $arg_NAME hold the first of two values; the gateway refuses a cookie or parameter sent twice with
  // different values (400 two_values), so a trace built from them admitted what the Worker refuses.
  it("reads $http_cookie and the request's query before $cookie_NAME and $arg_NAME: a value sent twice shows", async () => {
    const both =
      '$remote_addr $msec "$request" $host "$http_x_tenant_id" "$cookie_session" "$http_cookie" "$arg_region" "$request_uri"';
    const f = files(
      '192.0.2.10 1796119200.000 "GET /v1/a?region=eu&region=us HTTP/1.1" api.example.com "acme" "s1" "session=s1; session=s2" "eu" "/v1/a?region=eu&region=us"',
    );
    const r = await runCli([
      "trace",
      "from",
      "nginx",
      f.log,
      "--format",
      both,
      "--rules",
      f.rules,
      "--out",
      join(f.dir, "t.csv"),
    ]);
    expect(r.code).toBe(0);
    const line = readFileSync(join(f.dir, "t.csv"), "utf8").split("\n")[2];
    expect(line).toBe(
      `1796119200000,GET,/v1/a,192.0.2.10,,,,api.example.com,,,,,${sha("s1")}&${sha("s2")},,acme,eu&us`,
    );
    const sim = await runCli(["simulate", "--rules", f.rules, "--trace", join(f.dir, "t.csv")]);
    expect(JSON.parse(sim.stdout) as { status: number; verdict: string }).toMatchObject({
      status: 400,
      verdict: "bad_request",
    });
  });

  // The user column is hashed; a rule keyed on the user's header as a plain header part wrote the same user id raw in
  // its column (and --user-header names another header just as well).
  it("a key part naming the user's or the key's header is hashed like the user and key columns", async () => {
    const rules =
      '- id: x\n  match: { route: "* /v1/**" }\n  key: [ip, { header: X-User-Id }, { header: X-Who }]\n  algorithm: fixed_window\n  limit: 1\n  window: h\n';
    const f = files('192.0.2.10 1796119200.000 "GET /v1/a HTTP/1.1" "alice@example.com" "bob"', rules);
    const fmt = '$remote_addr $msec "$request" "$http_x_user_id" "$http_x_who"';
    const r = await runCli(["trace", "from", "nginx", f.log, "--format", fmt, "--rules", f.rules]);
    expect(r.stdout.split("\n")[2]).toBe(
      `1796119200000,GET,/v1/a,192.0.2.10,,${sha("alice@example.com")},,,,,,,${sha("alice@example.com")},bob`,
    );
    const who = await runCli([
      "trace",
      "from",
      "nginx",
      f.log,
      "--format",
      fmt,
      "--rules",
      f.rules,
      "--user-header",
      "X-Who",
    ]);
    expect(who.stdout.split("\n")[2]).toBe(
      `1796119200000,GET,/v1/a,192.0.2.10,,${sha("bob")},,,,,,,alice@example.com,${sha("bob")}`,
    );
  });

  // trace from --help (and docs/rules.md's conventions) say exit 1 for invalid rules, as compare and plan answer; it
  // answered 2, the usage error's status, to a script telling the two apart.
  it("invalid --rules: every problem with its place, exit 1", async () => {
    const f = files(
      '192.0.2.10 1796119200.000 "GET /v1/a HTTP/1.1"',
      '- id: x\n  match: { route: "* /v1/**" }\n  key: [heder]\n',
    );
    const r = await runCli(["trace", "from", "nginx", f.log, "--format", format, "--rules", f.rules]);
    expect(r.stderr).toContain(`${f.rules}:3:9: x.key[0]: unknown key part "heder"; did you mean "header"?`);
    expect(r.stdout).toBe("");
    expect(r.code).toBe(1);
  });

  it("warns once about a column the log format cannot fill", async () => {
    const f = files('192.0.2.10 1796119200.000 "GET /v1/a HTTP/1.1"');
    const r = await runCli([
      "trace",
      "from",
      "nginx",
      f.log,
      "--format",
      '$remote_addr $msec "$request"',
      "--rules",
      f.rules,
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      "warning: the log has no cookie:session, header:x-session-token, header:x-tenant-id: rules keyed on them read them as missing",
    );
  });

  it("replayed, the hashed trace decides as the values would: a tenant's second request in the hour is refused", async () => {
    const rules = `- id: tenant-session
  match: { route: "* /v1/**" }
  key: [ip, { cookie: session }]
  algorithm: fixed_window
  limit: 1
  window: h
`;
    const f = files(
      [
        '192.0.2.10 1796119200.000 "GET /v1/a HTTP/1.1" h "-" "-" "session=abc" "-"',
        '192.0.2.10 1796119200.001 "GET /v1/a HTTP/1.1" h "-" "-" "session= abc ;x=1" "-"',
        '192.0.2.10 1796119200.002 "GET /v1/a HTTP/1.1" h "-" "-" "session=abd" "-"',
        '192.0.2.10 1796119200.003 "GET /v1/a HTTP/1.1" h "-" "-" "session=abc; session=abd" "-"',
      ].join("\n"),
      rules,
    );
    const out = join(f.dir, "trace.csv");
    const t = await runCli(["trace", "from", "nginx", f.log, "--format", format, "--rules", f.rules, "--out", out]);
    expect(t.code).toBe(0);
    const s = await runCli(["simulate", "--rules", f.rules, "--trace", out]);
    expect(s.stderr).toBe("");
    const statuses = s.stdout
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { status: number }).status);
    expect(statuses).toEqual([200, 429, 200, 400]);
  });
});

describe("simulate reads an access log directly, with the columns the rules' keys name", () => {
  it("a header-keyed rule counts per tenant from a Logpush log's RequestHeaders", async () => {
    const rules = `- id: per-tenant
  match: { route: "* /v1/**" }
  key: [ip, { header: X-Tenant-Id }]
  algorithm: fixed_window
  limit: 1
  window: h
`;
    const line = (tenant: string, ms: number) =>
      JSON.stringify({
        EdgeStartTimestamp: 1796119200000 + ms,
        ClientIP: "192.0.2.10",
        ClientRequestMethod: "GET",
        ClientRequestURI: "/v1/a",
        RequestHeaders: { "x-tenant-id": tenant },
      });
    const f = files([line("acme", 1), line("acme", 2), line("other", 3)].join("\n"), rules);
    const r = await runCli(["simulate", "--rules", f.rules, "--trace", f.log]);
    expect(r.code).toBe(0);
    const statuses = r.stdout
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { status: number }).status);
    expect(statuses).toEqual([200, 429, 200]);
  });
});

describe("trace from envoy and cloudflare", () => {
  it("Envoy: the authority, a header and the path's query", async () => {
    const format =
      "%START_TIME% %REQ(:METHOD)% %REQ(:PATH)% %DOWNSTREAM_REMOTE_ADDRESS% %REQ(:AUTHORITY)% %REQ(X-TENANT-ID)%";
    const f = files("2026-12-01T10:00:00.000Z GET /v1/a?region=us [2001:db8::2]:443 API.example.com:8443 acme");
    const r = await runCli(["trace", "from", "envoy", f.log, "--format", format, "--rules", f.rules]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[2]).toBe(
      `${Date.UTC(2026, 11, 1, 10)},GET,/v1/a,2001:db8::2,,,,API.example.com,,,,,,,acme,us`,
    );
    expect(r.stderr).toContain("the log has no cookie:session, header:x-session-token");
  });

  // Envoy's JSON access log (json_format): every line was "does not match the log format" and nothing was written.
  it("Envoy json_format: the fields its operators name; numbers as Envoy types them; the cookie and key hashed", async () => {
    const format = JSON.stringify({
      start: "%START_TIME%",
      method: "%REQ(:METHOD)%",
      path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
      code: "%RESPONSE_CODE%",
      flags: "%RESPONSE_FLAGS%",
      took: "%DURATION%",
      client: "%DOWNSTREAM_REMOTE_ADDRESS%",
      authority: "%REQ(:AUTHORITY)%",
      tenant: "%REQ(X-TENANT-ID)%",
      token: "%REQ(X-SESSION-TOKEN)%",
      cookie: "%REQ(COOKIE)%",
      key: "%REQ(X-API-KEY)%",
      note: "literal text, not read",
    });
    const record = {
      start: "2026-12-01T10:00:00.000Z",
      method: "GET",
      path: "/v1/a?region=us",
      code: 429,
      flags: "RL",
      took: 7,
      client: "[2001:db8::2]:443",
      authority: "api.example.com",
      tenant: "acme",
      token: "tok-1",
      cookie: "session=s-1; theme=dark",
      key: "sk_live_1",
      note: "x",
    };
    const log = [JSON.stringify(record), JSON.stringify({ ...record, tenant: null, client: "192.0.2.1:1" }), "[1]"];
    const f = files(log.join("\n"));
    const r = await runCli(["trace", "from", "envoy", f.log, "--format", format, "--rules", f.rules]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").slice(1, 4)).toEqual([
      `${COLUMNS},status,duration_ms`,
      `${Date.UTC(2026, 11, 1, 10)},GET,/v1/a,2001:db8::2,${sha("sk_live_1")},,,api.example.com,,,,,${sha("s-1")},${sha("tok-1")},acme,us,429,7`,
      `${Date.UTC(2026, 11, 1, 10)},GET,/v1/a,192.0.2.1,${sha("sk_live_1")},,,api.example.com,,,,,${sha("s-1")},${sha("tok-1")},,us,429,7`,
    ]);
    expect(r.stderr).toContain("access.log:3: not a JSON object");
    for (const raw of ["sk_live_1", "s-1", "tok-1", "dark"]) expect(r.stdout).not.toContain(raw);
    const text = await runCli(["trace", "from", "envoy", f.log, "--rules", f.rules]);
    expect(text.stderr).toContain("access.log:1: does not match the log format (a JSON line: give the json_format");
    // Read directly, the JSON log is none of the kinds a replay recognises: the message says how to convert it.
    const direct = await runCli(["simulate", "--rules", f.rules, "--trace", f.log]);
    expect(direct.stderr).toContain("access.log:1: not a trace this reads");
    expect(direct.stderr).toContain("JSON access log: sluice trace from envoy LOG --format FORMAT");
  });

  // Logpush logs User-Agent in a standard field; RequestHeaders holds only the headers a zone chose. A rule keyed on
  // User-Agent read every request as missing it (one shared budget) unless the zone also logged it as a custom field.
  it("Cloudflare Logpush: User-Agent and Referer from their standard fields when RequestHeaders lacks them", async () => {
    const rules = `- id: ua
  match: { route: "* /v1/**" }
  key: [ip, { header: User-Agent }, { header: Referer }]
  algorithm: fixed_window
  limit: 1
  window: h
`;
    const base = { ClientIP: "192.0.2.10", ClientRequestMethod: "GET", ClientRequestURI: "/v1/x" };
    const log = [
      { ...base, EdgeStartTimestamp: 1796464800, ClientRequestUserAgent: "curl/8, x", ClientRequestReferer: "" },
      { ...base, EdgeStartTimestamp: 1796464801, ClientRequestUserAgent: "a", RequestHeaders: { "user-agent": "b" } },
    ];
    const f = files(log.map((r) => JSON.stringify(r)).join("\n"), rules);
    const r = await runCli(["trace", "from", "cloudflare", f.log, "--rules", f.rules]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").slice(2, 4)).toEqual([
      "1796464800000,GET,/v1/x,192.0.2.10,,,,,,,,,,curl/8%2C x,,",
      "1796464801000,GET,/v1/x,192.0.2.10,,,,,,,,,,b,,",
    ]);
  });

  it("Cloudflare Logpush: host, ASN, country, colo, JA4, custom header and cookie fields", async () => {
    const record = {
      EdgeStartTimestamp: 1796119200123,
      ClientIP: "198.51.100.4",
      ClientRequestMethod: "GET",
      ClientRequestURI: "/v1/a?region=ap",
      ClientRequestHost: "api.example.com",
      ClientASN: 64500,
      ClientCountry: "nl",
      EdgeColoCode: "AMS",
      JA4: "t13d1516h2_8daaf6152771_02713d6af862",
      RequestHeaders: { "x-tenant-id": "acme", "x-session-token": "tok", "x-api-key": "sk_9" },
      Cookies: { session: "c00kie" },
    };
    const f = files(JSON.stringify(record));
    const r = await runCli(["trace", "from", "cloudflare", f.log, "--rules", f.rules]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[2]).toBe(
      `1796119200123,GET,/v1/a,198.51.100.4,${sha("sk_9")},,,api.example.com,64500,nl,AMS,t13d1516h2_8daaf6152771_02713d6af862,${sha("c00kie")},${sha("tok")},acme,ap,,`,
    );
    // The record says nothing of the answer: its status and duration_ms columns are empty (not known).
    expect(r.stdout.split("\n")[1]).toMatch(/,status,duration_ms$/);
  });
});

describe("which columns are secrets", () => {
  it.each([
    ["cookie:theme", true],
    ["header:x-session-token", true],
    ["header:authorization-v2", true],
    ["header:x-signature", true],
    ["query:api_key", true],
    ["header:x-tenant-id", false],
    ["query:region", false],
  ])("%s: %s", (column, secret) => {
    expect(secretColumn(column)).toBe(secret);
  });
});

describe("the user column is hashed as the gateway reads the user", () => {
  const USER_RULES = `- id: per-user
  match: { identity: user }
  algorithm: fixed_window
  limit: 1
  window: h
`;

  it.each([
    [
      "nginx",
      ["--format", '$remote_addr $msec "$request" "$http_x_user_id"'],
      (user: string, ms: number) => `192.0.2.10 1796119200.00${ms} "GET /v1/a HTTP/1.1" "${user}"`,
    ],
    [
      "cloudflare",
      [],
      (user: string, ms: number) =>
        JSON.stringify({
          EdgeStartTimestamp: `2026-12-01T10:00:00.00${ms}Z`,
          ClientIP: "192.0.2.10",
          ClientRequestMethod: "GET",
          ClientRequestURI: "/v1/a",
          RequestHeaders: { "x-user-id": user },
        }),
    ],
  ])(
    "%s: sha256 of the user in the trace, and a replay still counts one user in one budget",
    async (kind, extra, line) => {
      const f = files([line("u-17", 0), line("u-17", 1), line("u-18", 2)].join("\n"), USER_RULES);
      const r = await runCli(["trace", "from", kind, f.log, ...extra, "--rules", f.rules]);
      expect(r.code).toBe(0);
      const users = r.stdout
        .split("\n")
        .slice(2)
        .filter((l) => l !== "")
        .map((l) => l.split(",")[5]);
      expect(users).toEqual([sha("u-17"), sha("u-17"), sha("u-18")]);
      expect(r.stdout).not.toContain("u-17");
      const trace = join(f.dir, "trace.csv");
      writeFileSync(trace, r.stdout);
      const sim = await runCli(["simulate", "--trace", trace, "--rules", f.rules]);
      expect(sim.code).toBe(0);
      const statuses = sim.stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => (JSON.parse(l) as { status: number }).status);
      expect(statuses).toEqual([200, 429, 200]);
    },
  );
});
