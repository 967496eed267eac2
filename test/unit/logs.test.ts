/**
 * Access logs as request traces: samples of each kind (NGINX, Envoy, Cloudflare Logpush) with malformed lines, the
 * `sluice trace from` command (bad lines reported with their numbers, never fatal; late lines put back in order),
 * and the round trip: a generated request trace printed as an NGINX log and parsed back is the same trace.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { hashedValue } from "../../src/replay/log_fields.ts";
import { startTimeReader } from "../../src/replay/log_start_time.ts";
import {
  cloudflareParser,
  edgeStartMs,
  envoyParser,
  formatNginxLine,
  type LogParser,
  NGINX_COMBINED,
  nginxParser,
  nginxSample,
  parseIsoMs,
  parseTimeLocal,
} from "../../src/replay/logs.ts";
import { Reorder } from "../../src/replay/reorder.ts";
import { emptyRequestLine, parseRequestLineInto, type RequestLine } from "../../src/replay/request_trace.ts";
import { runCli } from "../support/io.ts";
import { seeded } from "../support/random.ts";

function parser(p: LogParser | { error: string }): LogParser {
  if ("error" in p) throw new Error(p.error);
  return p;
}

/**
 * Every line parsed: the request (without cost, and without the answer: `answersOf` reads those, and
 * test/unit/replay.durations.test.ts what the origin answered) or the error.
 */
function parseAll(p: LogParser, text: string): (RequestLine | string | null)[] {
  return text.split("\n").map((l) => {
    const slot = emptyRequestLine();
    const r = p.parse(l, slot);
    return r === true ? { ...slot, answered: null, outcome: undefined } : r;
  });
}

/** Every line's answer as the log says it: `status/limited` (limited: `y`, `n` or `?`). */
function answersOf(p: LogParser, text: string): string[] {
  return text.split("\n").map((l) => {
    const slot = emptyRequestLine();
    if (p.parse(l, slot) !== true || slot.answered === null) return "none";
    const { status, limited } = slot.answered;
    return `${status}/${limited === null ? "?" : limited ? "y" : "n"}`;
  });
}

const req = (
  tMs: number,
  method: string,
  path: string,
  address: string | null,
  key: string | null = null,
  user: string | null = null,
): RequestLine => ({
  tMs,
  method,
  path,
  address,
  key,
  user,
  cost: null,
  answered: null,
});

function tmp(name: string, text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "sluice-logs-")), name);
  writeFileSync(path, text);
  return path;
}

describe("NGINX access logs", () => {
  const TIMED =
    '$remote_addr - $remote_user [$time_local] $msec $request_time "$request" $status "$http_x_api_key" "$http_x_user_id"';

  it("combined: whole-second times (with a warning), the query dropped, \\x escapes undone, bad lines said", () => {
    const p = parser(nginxParser(NGINX_COMBINED));
    expect(p.warnings[0]).toContain("whole seconds");
    const lines = [
      '192.0.2.10 - - [01/Dec/2026:10:00:00 +0000] "GET /v1/quotes?zip=10115 HTTP/1.1" 200 512 "-" "curl/8.5"',
      '198.51.100.7 - alice [01/Dec/2026:11:00:01 +0100] "POST /v1/labels:batch HTTP/2.0" 429 0 "-" "a \\x22quoted\\x22 agent"',
      "not a log line",
      '192.0.2.10 - - [01/Dec/2026:10:00:00 +0000] "\\x16\\x03\\x01" 400 0 "-" "-"',
      '192.0.2.10 - - [31/Foo/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 0 "-" "-"',
      "",
    ];
    expect(parseAll(p, lines.join("\n"))).toEqual([
      req(Date.UTC(2026, 11, 1, 10), "GET", "/v1/quotes", "192.0.2.10"),
      req(Date.UTC(2026, 11, 1, 10, 0, 1), "POST", "/v1/labels:batch", "198.51.100.7"),
      "does not match the log format",
      'not a request line: "\\u0016\\u0003\\u0001"',
      'unreadable time "31/Foo/2026:10:00:00 +0000"',
      null,
    ]);
  });

  it("$msec with $request_time: the request's start, in ms; the API key and user from their headers", () => {
    const p = parser(nginxParser(TIMED));
    expect(p.warnings).toEqual([]);
    const line =
      '2001:db8::1 - - [01/Dec/2026:10:00:00 +0000] 1796119200.250 0.120 "GET /v1/tracking/1Z99 HTTP/1.1" 200 "sk_live_9" "u-17"';
    expect(parseAll(p, line)).toEqual([
      req(1796119200130, "GET", "/v1/tracking/1Z99", "2001:db8::1", "sk_live_9", hashedValue("u-17")),
    ]);
  });

  it("the key from Authorization: Bearer when the format logs it", () => {
    const p = parser(nginxParser('$remote_addr $msec "$request" "$http_authorization"'));
    expect(parseAll(p, '192.0.2.1 1796119200.001 "GET / HTTP/1.1" "Bearer sk_x"')).toEqual([
      req(1796119200001, "GET", "/", "192.0.2.1", "sk_x"),
    ]);
  });

  it("a format without a time or a request is refused", () => {
    expect(nginxParser("$remote_addr $request")).toEqual({
      error: "the log format has no time ($msec, $time_iso8601 or $time_local)",
    });
    expect(nginxParser("$remote_addr $msec")).toEqual({
      error: "the log format has no request ($request, or $request_method and $request_uri)",
    });
  });

  it("reads $time_local with its offset", () => {
    expect(parseTimeLocal("10/Oct/2000:13:55:36 -0700")).toBe(Date.UTC(2000, 9, 10, 20, 55, 36));
    expect(parseTimeLocal("29/Feb/2024:23:59:59 +0530")).toBe(Date.UTC(2024, 1, 29, 18, 29, 59));
  });

  // Date.UTC rolls fields over (31 Feb is 3 March, hour 24 the next day): a time no clock shows is unreadable, not
  // another time. Each row is one field out of its range; the NGINX and ISO readers share the check (utcMs).
  it.each([
    ["31/Feb/2026:00:00:00 +0000", "2026-02-31T00:00:00Z"],
    ["29/Feb/2026:00:00:00 +0000", "2026-02-29T00:00:00Z"],
    ["31/Apr/2026:00:00:00 +0000", "2026-04-31T00:00:00Z"],
    ["00/Jan/2026:00:00:00 +0000", "2026-01-00T00:00:00Z"],
    ["01/Jan/2026:24:00:00 +0000", "2026-01-01T24:00:00Z"],
    ["01/Jan/2026:00:60:00 +0000", "2026-01-01T00:60:00Z"],
    ["01/Jan/2026:00:00:60 +0000", "2026-01-01T00:00:60Z"],
    ["01/Jan/2026:00:00:00 +2400", "2026-01-01T00:00:00+24:00"],
    ["01/Jan/2026:00:00:00 -0060", "2026-01-01T00:00:00-00:60"],
  ])("%s and %s are unreadable", (local, iso) => {
    expect(parseTimeLocal(local)).toBeNaN();
    expect(parseIsoMs(iso)).toBeNaN();
  });

  it("months 00 and 13 are unreadable ISO times; a valid one with a fraction and offset is read", () => {
    expect(parseIsoMs("2026-13-01T00:00:00Z")).toBeNaN();
    expect(parseIsoMs("2026-00-10T00:00:00Z")).toBeNaN();
    expect(parseIsoMs("2026-12-31T23:59:59.9999+05:30")).toBe(Date.UTC(2026, 11, 31, 18, 29, 59, 999));
  });

  it("a log line at a time no clock shows is left out with its reason", () => {
    const p = parser(nginxParser('$remote_addr [$time_local] "$request"'));
    const iso = parser(envoyParser('[%START_TIME%] "%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL%"'));
    expect(parseAll(p, '192.0.2.1 [31/Feb/2026:00:00:00 +0000] "GET / HTTP/1.1"')).toEqual([
      'unreadable time "31/Feb/2026:00:00:00 +0000"',
    ]);
    expect(parseAll(iso, '[2026-02-31T00:00:00.000Z] "GET / HTTP/1.1"')).toEqual([
      'unreadable %START_TIME% "2026-02-31T00:00:00.000Z"',
    ]);
  });

  it("round trip: a generated request trace printed as an NGINX log and parsed back is the same trace", () => {
    const random = seeded(20);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
    const addresses = ["192.0.2.1", "198.51.100.23", "203.0.113.254", "2001:db8::7", "2001:db8:1:2::ff"];
    const paths = ["/", "/v1/quotes", "/v1/labels:batch", "/v1/addresses/a%2Fb/validate", "/V1//public/x/"];
    let t = 1_796_119_200_000;
    const trace: RequestLine[] = [];
    for (let i = 0; i < 500; i++) {
      t += Math.floor(random() * 50);
      trace.push(
        req(
          t,
          pick(["GET", "POST", "HEAD", "DELETE"]),
          pick(paths),
          pick([...addresses, null]),
          pick(["sk_a", "sk_b9", null]),
          pick([hashedValue("u1"), null]),
        ),
      );
    }
    const log = trace.map((r) => formatNginxLine(TIMED, r)).join("\n");
    const p = parser(nginxParser(TIMED));
    expect(parseAll(p, log)).toEqual(trace);
  });
});

describe("what the log says the proxy answered", () => {
  it("NGINX: $status, and $limit_req_status when logged (a dry run's REJECTED_DRY_RUN let the request through)", () => {
    const plain = parser(nginxParser('$msec "$request" $status'));
    expect(
      answersOf(plain, '1.000 "GET / HTTP/1.1" 503\n1.001 "GET / HTTP/1.1" 200\n1.002 "GET / HTTP/1.1" -'),
    ).toEqual(["503/?", "200/?", "none"]);
    const withLimit = parser(nginxParser('$msec "$request" $status $limit_req_status'));
    const lines = ["REJECTED", "PASSED", "REJECTED_DRY_RUN", "-"].map(
      (v, i) => `1.00${i} "GET / HTTP/1.1" ${i === 0 ? 503 : 200} ${v}`,
    );
    expect(answersOf(withLimit, lines.join("\n"))).toEqual(["503/y", "200/n", "200/n", "200/?"]);
  });

  it("Envoy: %RESPONSE_CODE%, rate limited when %RESPONSE_FLAGS% hold RL", () => {
    const p = parser(envoyParser('[%START_TIME%] "%REQ(:METHOD)% %REQ(:PATH)%" %RESPONSE_CODE% %RESPONSE_FLAGS%'));
    const lines = ["429 RL", "200 -", "503 UH,RL"].map((v) => `[2026-12-04T10:00:00.000Z] "GET /" ${v}`);
    expect(answersOf(p, lines.join("\n"))).toEqual(["429/y", "200/n", "503/y"]);
  });
});

/** Every line's outcome (what the origin answered): `status/duration_ms` (`?`: not known), or `none`. */
function outcomesOf(p: LogParser, lines: readonly string[]): string[] {
  return lines.map((l) => {
    const slot = emptyRequestLine();
    if (p.parse(l, slot) !== true || slot.outcome === null || slot.outcome === undefined) return "none";
    return `${slot.outcome.status}/${slot.outcome.durationMs ?? "?"}`;
  });
}

describe("what the origin answered: Envoy's %RESPONSE_CODE% and %DURATION%, Logpush's status and times", () => {
  it("Envoy: %DURATION% (ms, start to last byte out) beside %RESPONSE_CODE%; the default format has both", () => {
    const p = parser(envoyParser());
    expect(p.outcomes).toBe(true);
    const lines = [
      '[2026-12-01T10:00:00.310Z] "POST /v1/export HTTP/1.1" 200 - 0 58 1234 10 "203.0.113.9" "curl/8" "r1" "api" "10.0.0.5:80"',
      '[2026-12-01T10:00:00.311Z] "POST /v1/login HTTP/2" 401 - 0 0 7 - "203.0.113.9" "-" "r2" "api" "-"',
      '[2026-12-01T10:00:00.312Z] "GET / HTTP/1.1" 0 DC 0 0 5 - "-" "-" "r3" "api" "-"',
    ];
    expect(outcomesOf(p, lines)).toEqual(["200/1234", "401/7", "none"]);
    const noDuration = parser(envoyParser("[%START_TIME%] %REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %DURATION%"));
    expect(outcomesOf(noDuration, ["[2026-12-01T10:00:00.000Z] GET /a 503 -"])).toEqual(["503/?"]);
    const neither = parser(envoyParser("[%START_TIME%] %REQ(:METHOD)% %REQ(:PATH)%"));
    expect(neither.outcomes).toBe(false);
    expect(outcomesOf(neither, ["[2026-12-01T10:00:00.000Z] GET /a"])).toEqual(["none"]);
  });

  it("Logpush: EdgeResponseStatus, and EdgeEndTimestamp less EdgeStartTimestamp, else OriginResponseDurationMs", () => {
    const p = cloudflareParser();
    expect(p.outcomes).toBe(true);
    const base = { ClientIP: "198.51.100.4", ClientRequestMethod: "POST", ClientRequestURI: "/v1/export" };
    const at = (fields: Record<string, unknown>) => JSON.stringify({ ...base, ...fields });
    const lines = [
      // unixnano, as Logpush writes it by default (19 digits: written as text here, beyond a double's exact range)
      `${at({ EdgeResponseStatus: 200 }).slice(0, -1)},"EdgeStartTimestamp":1796119200123456789,"EdgeEndTimestamp":1796119202623456789}`,
      at({
        EdgeStartTimestamp: "2026-12-01T10:00:00.5Z",
        EdgeEndTimestamp: "2026-12-01T10:00:00.75Z",
        EdgeResponseStatus: 401,
      }),
      at({ EdgeStartTimestamp: 1796119201, OriginResponseDurationMs: 42, EdgeResponseStatus: "503" }),
      // an end before the start is not a duration: the origin's own, if given
      at({ EdgeStartTimestamp: 1796119201000, EdgeEndTimestamp: 1796119200000, EdgeResponseStatus: 200 }),
      at({ EdgeStartTimestamp: 1796119201, OriginResponseDurationMs: 42 }),
      at({ EdgeStartTimestamp: 1796119201, EdgeResponseStatus: 0 }),
    ];
    expect(outcomesOf(p, lines)).toEqual(["200/2500", "401/250", "503/42", "200/?", "none", "none"]);
  });

  it("trace from envoy writes the status and duration_ms columns, which simulate reads back", async () => {
    const log = tmp(
      "envoy.log",
      '[2026-12-01T10:00:00.310Z] "POST /v1/export HTTP/1.1" 200 - 0 58 1234 10 "203.0.113.9" "curl/8" "r1" "api" "-"\n',
    );
    const r = await runCli(["trace", "from", "envoy", log]);
    expect(r.code).toBe(0);
    const [, columns, line] = r.stdout.split("\n");
    expect(columns).toMatch(/,status,duration_ms$/);
    expect(line).toMatch(/^1796119200310,POST,\/v1\/export,203\.0\.113\.9,.*,200,1234$/);
  });
});

describe("Envoy access logs (the default format)", () => {
  it("reads the start time in ms, the first X-Forwarded-For hop, and says what it cannot", () => {
    const p = parser(envoyParser());
    expect(p.warnings).toEqual([
      "client addresses are the first X-Forwarded-For hop (the default format logs no downstream address)",
      "the log has no API key (add %REQ(X-API-KEY)% to the format)",
    ]);
    const lines = [
      '[2026-12-01T10:00:00.310Z] "GET /v1/quotes?x=1 HTTP/1.1" 200 - 0 58 12 10 "203.0.113.9, 10.0.0.1" "curl/8" "req-1" "api.example" "10.0.0.5:8080"',
      '[2026-12-01T10:00:00.311Z] "POST /v1/login HTTP/2" 429 RL 0 0 0 - "-" "-" "req-2" "api.example" "-"',
      '[yesterday] "GET / HTTP/1.1" 200 - 0 0 0 - "-" "-" "-" "-" "-"',
      "garbage",
    ];
    expect(parseAll(p, lines.join("\n"))).toEqual([
      req(Date.UTC(2026, 11, 1, 10, 0, 0, 310), "GET", "/v1/quotes", "203.0.113.9"),
      req(Date.UTC(2026, 11, 1, 10, 0, 0, 311), "POST", "/v1/login", null),
      'unreadable %START_TIME% "yesterday"',
      "does not match the log format",
    ]);
  });

  it("a custom format with the downstream address and the key", () => {
    const p = parser(
      envoyParser("%START_TIME% %REQ(:METHOD)% %REQ(:PATH)% %DOWNSTREAM_REMOTE_ADDRESS% %REQ(X-API-KEY)%\n"),
    );
    expect(p.warnings).toEqual([]);
    expect(parseAll(p, "2026-12-01T10:00:00.000Z GET /a [2001:db8::2]:443 sk_1")).toEqual([
      req(Date.UTC(2026, 11, 1, 10), "GET", "/a", "2001:db8::2", "sk_1"),
    ]);
  });
});

// Envoy's access log docs: "START_TIME can be customized using a format string", strftime's fields plus %s (epoch
// seconds) and %f / %1f..%9f (fraction, 9 digits by default), written in UTC: "%START_TIME(%s.%3f)%" is their example.
describe("Envoy's %START_TIME(FORMAT)%", () => {
  const at = Date.UTC(2026, 11, 7, 0, 0, 0, 123);
  it.each([
    ["%s.%3f", "1796601600.123", at],
    ["%s.%6f", "1796601600.123999", at],
    ["%s.%f", "1796601600.123456789", at],
    ["%s", "1796601600", at - 123],
    ["%Y/%m/%dT%H:%M:%S%z %s", "2026/12/07T00:00:00+0000 1796601600", at - 123],
    ["%Y-%m-%dT%H:%M:%S.%3fZ", "2026-12-07T00:00:00.123Z", at],
    ["%FT%T.%3f%z", "2026-12-07T05:30:00.123+0530", at],
    ["%d/%b/%Y:%T %z", "07/Dec/2026:00:00:00 +0000", at - 123],
    ["%e %b %Y %T", " 7 Dec 2026 00:00:00", at - 123],
    ["100%% %s", "100% 1796601600", at - 123],
    ["%d/%b/%Y:%T %z", "31/Feb/2026:00:00:00 +0000", Number.NaN],
    ["%s.%3f", "1796601600", Number.NaN],
  ])("%s reads %j", (spec, text, ms) => {
    const read = startTimeReader(spec);
    if ("error" in read) throw new Error(read.error);
    expect(read(text)).toBe(ms);
  });

  it.each([
    ["%j", "%START_TIME(%j)%: %j is not read (only %Y %m %d %e %b %H %M %S %T %F %z, %s and %f)"],
    ["%Y-%m-%d", "%START_TIME(%Y-%m-%d)%: needs %s, or the date and the time to the second (%Y %m %d %H %M %S)"],
  ])("%s is refused with its reason", (spec, error) => {
    expect(startTimeReader(spec)).toEqual({ error });
    expect(envoyParser(`%START_TIME(${spec})% %REQ(:METHOD)% %REQ(:PATH)%`)).toEqual({ error });
  });

  it("in a text and a JSON format; whole seconds are said", () => {
    const text = parser(envoyParser("%START_TIME(%s.%3f)% %REQ(:METHOD)% %REQ(:PATH)% %DOWNSTREAM_REMOTE_ADDRESS%"));
    expect(text.warnings.join("\n")).not.toMatch(/whole seconds/);
    expect(parseAll(text, "1796601600.123 GET /a 192.0.2.7:5000\n1796601600 GET /a 192.0.2.7:5000")).toEqual([
      req(at, "GET", "/a", "192.0.2.7"),
      'unreadable %START_TIME% "1796601600"',
    ]);
    const json = parser(
      envoyParser('{"t":"%START_TIME(%s)%","m":"%REQ(:METHOD)%","p":"%REQ(:PATH)%","a":"%DOWNSTREAM_REMOTE_ADDRESS%"}'),
    );
    expect(json.warnings.join("\n")).toMatch(/\(%START_TIME\(%s\)%\) are whole seconds/);
    expect(parseAll(json, '{"t":"1796601600","m":"GET","p":"/a","a":"192.0.2.7:5000"}')).toEqual([
      req(at - 123, "GET", "/a", "192.0.2.7"),
    ]);
  });
});

describe("Cloudflare Logpush http_requests", () => {
  it("reads EdgeStartTimestamp in each format, the headers, and reports bad records", () => {
    const p = cloudflareParser({ keyHeader: "x-api-key", userHeader: "x-user-id" });
    const base = { ClientIP: "198.51.100.4", ClientRequestMethod: "GET", ClientRequestURI: "/v1/quotes?a=1" };
    const lines = [
      // A unixnano timestamp as Logpush writes it: 19 digits, more than a double holds exactly.
      `${JSON.stringify({ ...base, RequestHeaders: { "x-api-key": "sk_9" } }).slice(0, -1)},"EdgeStartTimestamp":1796119200123456789}`,
      JSON.stringify({ ...base, EdgeStartTimestamp: "2026-12-01T10:00:00.5Z" }),
      JSON.stringify({ ...base, EdgeStartTimestamp: 1796119201 }),
      JSON.stringify({ ...base, EdgeStartTimestamp: "soon" }),
      "{not json",
      JSON.stringify({ EdgeStartTimestamp: 1796119201 }),
      // What a replay would read as no address (every ip rule off for it), where the gateway answers 400.
      JSON.stringify({ ...base, EdgeStartTimestamp: 1796119201, ClientIP: "198.51.100.4:443" }),
      "[1,2]",
      JSON.stringify({ ...base }),
    ];
    const t = Date.UTC(2026, 11, 1, 10);
    expect(parseAll(p, lines.join("\n"))).toEqual([
      req(1796119200123, "GET", "/v1/quotes", "198.51.100.4", "sk_9"),
      req(t + 500, "GET", "/v1/quotes", "198.51.100.4"),
      req(t + 1000, "GET", "/v1/quotes", "198.51.100.4"),
      'unreadable EdgeStartTimestamp "soon"',
      "not JSON",
      "no ClientRequestMethod or ClientRequestURI",
      'the client address must be one IPv4 or IPv6 address (no port, brackets, zone or list), got "198.51.100.4:443"',
      "not a JSON object",
      "no EdgeStartTimestamp",
    ]);
    expect(edgeStartMs("1796119200123")).toBe(1796119200123);
  });
});

describe("lines put back in start order", () => {
  // Measured with nginx 1.22 (7r/m burst=3, six requests sent together): two started in one millisecond, NGINX queued
  // one and refused the other; the refusal was logged 17 s earlier, so the replay refused the first and queued the
  // second, and `plan --from nginx:` counted two flips where NGINX and Sluice agreed.
  it("within one instant, a request the log says was refused comes after the ones it admitted", () => {
    const at = (tMs: number, path: string, limited: boolean | null): RequestLine => ({
      ...emptyRequestLine(),
      tMs,
      path,
      answered: { status: limited === true ? 429 : 200, limited },
    });
    const out: string[] = [];
    const r = new Reorder(60_000, (l) => out.push(l.path));
    for (const l of [at(5, "/refused", true), at(0, "/a", false), at(5, "/queued", false), at(5, "/unknown", null)])
      r.add(l);
    r.flush();
    expect(out).toEqual(["/a", "/queued", "/unknown", "/refused"]);
  });
});

describe("sluice trace from", () => {
  it("writes a request trace, reports every bad line with its number, and puts late lines back in order", async () => {
    const format = '$remote_addr $msec $request_time "$request"';
    const log = tmp(
      "access.log",
      [
        '192.0.2.1 1796119200.500 0.000 "GET /a HTTP/1.1"',
        "oops",
        '192.0.2.2 1796119200.900 0.600 "GET /slow HTTP/1.1"',
        '192.0.2.1 1796119200.400 0.000 "GET /b HTTP/1.1"',
        "also bad",
      ].join("\n"),
    );
    const r = await runCli(["trace", "from", "nginx", log, "--format", format]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      "# sluice request trace v2\nt_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4\n" +
        "1796119200300,GET,/slow,192.0.2.2,,,,,,,,\n1796119200400,GET,/b,192.0.2.1,,,,,,,,\n" +
        "1796119200500,GET,/a,192.0.2.1,,,,,,,,\n",
    );
    expect(r.stderr).toContain(`${log}:2: does not match the log format`);
    expect(r.stderr).toContain(`${log}:5: does not match the log format`);
    expect(r.stderr).toContain(`${log}: 2 of 5 lines could not be read and were left out`);
    // It names the format it expected and shows a line written in it, which it reads back.
    expect(r.stderr).toContain(
      `${log}: expected log_format '${format}', a line like: 192.0.2.10 1733320800.125 0.004 "GET /v1/quotes HTTP/1.1"\n`,
    );
    expect(parseAll(parser(nginxParser(format)), nginxSample(format))[0]).not.toBeTypeOf("string");
    // What it wrote is a request trace.
    const slot = emptyRequestLine();
    const columns = { version: 2, extras: [] } as const;
    for (const l of r.stdout.split("\n").slice(2, -1)) expect(parseRequestLineInto(l, slot, columns)).toBe(true);
  });

  it("reads the format from an nginx.conf's access_log", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-logs-"));
    writeFileSync(
      join(dir, "nginx.conf"),
      "http {\n  log_format ms '$remote_addr $msec \"$request\"';\n  access_log /var/log/a.log ms;\n}\n",
    );
    writeFileSync(join(dir, "a.log"), '203.0.113.1 1796119200.007 "PUT /x HTTP/1.1"\n');
    const r = await runCli(["trace", "from", "nginx", join(dir, "a.log"), "--conf", join(dir, "nginx.conf")]);
    expect(r.stdout.split("\n")[2]).toBe("1796119200007,PUT,/x,203.0.113.1,,,,,,,,");
  });

  it("exits 1 when no line can be read, and stops at 20 shown", async () => {
    const log = tmp("bad.log", Array.from({ length: 30 }, (_, i) => `bad ${i}`).join("\n"));
    const r = await runCli(["trace", "from", "cloudflare", log]);
    expect(r.code).toBe(1);
    expect(r.stderr.split("\n").filter((l) => l.endsWith(": not JSON"))).toHaveLength(20);
    expect(r.stderr).toContain("30 of 30 lines could not be read and were left out (the first 20 shown: lines 1, 2,");
  });

  it("usage errors", async () => {
    expect((await runCli(["trace", "into", "nginx"])).stderr).toContain('expected "from", got "into"');
    expect((await runCli(["trace", "from", "apache", "x"])).stderr).toContain(
      "expected nginx, envoy, cloudflare or aws-waf",
    );
  });
});

describe("a log read directly by simulate, compare and plan: no raw API key in what they print", () => {
  // Logs hold keys as clients sent them; `trace from` writes them hashed, and a replay of the log itself must not
  // print them either (simulate's `caller` and `key`, compare's and plan's callers).
  const line = (i: number, key: string) =>
    JSON.stringify({
      ClientIP: "198.51.100.4",
      ClientRequestMethod: "GET",
      ClientRequestURI: "/v1/tracking/1Z99",
      RequestHeaders: { "x-api-key": key },
      EdgeStartTimestamp: 1796119200000 + i,
    });

  it("simulate shows the key as sha256:<hex>, the same hash `trace from` writes", async () => {
    const log = tmp("cf.log", `${[0, 1, 2].map((i) => line(i, "sk_live_secret9")).join("\n")}\n`);
    const r = await runCli(["simulate", "--trace", log]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("sk_live_secret9");
    const first = JSON.parse(r.stdout.split("\n")[0]!) as { caller: string; rules: { key: string }[] };
    expect(first.caller).toBe(hashedValue("sk_live_secret9"));
    expect(first.rules.map((d) => d.key)).toContain(hashedValue("sk_live_secret9"));
    const traced = await runCli(["trace", "from", "cloudflare", log]);
    expect(traced.stdout).toContain(`,${hashedValue("sk_live_secret9")},`);
  });

  it("puts the lines back in start order, as `trace from` does", async () => {
    // A log is written as requests end: NGINX's delayed request comes after the ones that started later, and was
    // replayed after them (with a "back in time" warning), so `plan --from nginx:` flipped it where NGINX had queued it.
    const log = tmp("cf.log", `${[40, 0, 7].map((i) => line(i, "sk_live_order")).join("\n")}\n`);
    const r = await runCli(["simulate", "--trace", log]);
    expect(r.code).toBe(0);
    const times = r.stdout
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { t_ms: number }).t_ms - 1796119200000);
    expect(times).toEqual([0, 7, 40]);
    expect(r.stderr).not.toContain("back in time");
  });

  it("a key the gateway would not read (not a token68) is no key: the caller is the address", async () => {
    const log = tmp("cf.log", `${line(0, "sk=live")}\n`);
    const r = await runCli(["simulate", "--trace", log]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("sk=live");
    expect((JSON.parse(r.stdout.split("\n")[0]!) as { caller: string }).caller).toBe("198.51.100.4");
    const traced = await runCli(["trace", "from", "cloudflare", log]);
    expect(traced.stdout.split("\n")[2]).toMatch(/^1796119200000,GET,\/v1\/tracking\/1Z99,198\.51\.100\.4,,/);
  });
});
