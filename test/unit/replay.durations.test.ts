/**
 * What the origin answered, in request traces and replays (src/replay/request_trace.ts, src/replay/outcomes.ts): the
 * `status,duration_ms,response:NAME` columns, `trace from nginx` reading `$status` and `$request_time` exactly, and
 * the engine charging `count_when`/`cost_header` rules, banning, and holding concurrency slots over
 * `[t_ms, t_ms + duration_ms)`: a property against an independent fold over the requests' intervals.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Replayer } from "../../src/replay/engine.ts";
import { nginxParser } from "../../src/replay/logs.ts";
import {
  columnsOf,
  emptyRequestLine,
  formatRequestLineIn,
  parseRequestLineInto,
  type RequestLine,
} from "../../src/replay/request_trace.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

const RULES = `
- id: exports
  match: { route: "POST /v1/export", identity: api_key }
  algorithm: concurrency
  limit: 2
- id: failed-logins
  match: { route: "POST /v1/login", identity: ip }
  algorithm: sliding_log
  limit: 2
  window: 10s
  count_when: { status: [401, 403] }
  block_for: 60s
- id: query-cost
  match: { route: "POST /v1/graphql", identity: api_key }
  algorithm: fixed_window
  limit: 10
  window: h
  cost_header: X-Query-Cost
`;

function file(name: string, text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "sluice-durations-")), name);
  writeFileSync(path, text);
  return path;
}

const HEAD =
  "# sluice request trace v1\nt_ms,method,path,address,key,user,cost,status,duration_ms,response:x-query-cost\n";

async function verdicts(lines: readonly string[]): Promise<string[]> {
  const res = await runCli([
    "simulate",
    "--rules",
    file("rules.yaml", RULES),
    "--trace",
    file("t.csv", HEAD + lines.join("\n")),
  ]);
  expect(res.stderr).toBe("");
  return res.stdout
    .trim()
    .split("\n")
    .map((l) => (JSON.parse(l) as { verdict: string }).verdict);
}

describe("the request trace's outcome columns", () => {
  it("parse, round trip, and say what is wrong", () => {
    const v1 = columnsOf("t_ms,method,path,address,key,user,cost,status,duration_ms,response:x-query-cost", 1);
    if (typeof v1 === "string") throw new Error(v1);
    const slot = emptyRequestLine();
    expect(parseRequestLineInto("5,POST,/q,192.0.2.1,sk_a,,,200,123,7", slot, v1)).toBe(true);
    expect(slot.outcome).toEqual({ status: 200, durationMs: 123, headers: new Map([["x-query-cost", "7"]]) });
    expect(formatRequestLineIn(slot, v1)).toBe("5,POST,/q,192.0.2.1,sk_a,,,200,123,7\n");
    expect(parseRequestLineInto("5,POST,/q,,,,,,,", slot, v1)).toBe(true);
    expect(slot.outcome).toBeNull();
    expect(parseRequestLineInto("5,POST,/q,,,,,200,,", slot, v1)).toBe(true);
    expect(slot.outcome).toEqual({ status: 200, durationMs: null });
    expect(parseRequestLineInto("5,POST,/q,,,,,99,1,", slot, v1)).toBe(
      'status must be an HTTP status from 100 to 599, got "99"',
    );
    expect(parseRequestLineInto("5,POST,/q,,,,,200,0.5,", slot, v1)).toContain(
      "duration_ms must be empty or an integer",
    );
    expect(columnsOf("t_ms,method,path,address,key,user,cost,host", 1)).toBe(
      'a column must be status, duration_ms or response:NAME (lower-case), got "host"',
    );
    const v2 = columnsOf("t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,header:x-t,status", 2);
    expect(v2).toEqual({ version: 2, extras: ["header:x-t", "status"] });
  });
});

describe("simulate on a request trace with what the origin answered", () => {
  it("concurrency: a slot is held from t_ms until t_ms + duration_ms, and given back then", async () => {
    const v = await verdicts([
      "1000,POST,/v1/export,192.0.2.1,sk_a,,,200,500,",
      "1100,POST,/v1/export,192.0.2.1,sk_a,,,200,1000,",
      "1200,POST,/v1/export,192.0.2.1,sk_a,,,200,100,",
      "1499,POST,/v1/export,192.0.2.1,sk_a,,,200,100,",
      "1500,POST,/v1/export,192.0.2.1,sk_a,,,200,100,",
      "1550,POST,/v1/export,192.0.2.1,sk_a,,,200,,",
      "1600,POST,/v1/export,192.0.2.1,sk_a,,,200,,",
      "2100,POST,/v1/export,192.0.2.1,sk_a,,,200,,",
      "61599,POST,/v1/export,192.0.2.1,sk_a,,,200,10,",
      "61600,POST,/v1/export,192.0.2.1,sk_a,,,200,10,",
    ]);
    // 1500's slot is back at 1600 and 1100's at 2100; an unknown duration holds its slot until its lease ends (60 s).
    expect(v).toEqual([
      ...["allowed", "allowed", "denied", "denied", "allowed", "denied", "allowed", "allowed"],
      ...["denied", "allowed"],
    ]);
  });

  it("count_when: only matching statuses are charged, at their response; the charge that does not fit bans", async () => {
    const v = await verdicts([
      "2000,POST,/v1/login,192.0.2.9,,,,200,10,",
      "2100,POST,/v1/login,192.0.2.9,,,,401,10,",
      "2200,POST,/v1/login,192.0.2.9,,,,500,10,",
      "2300,POST,/v1/login,192.0.2.9,,,,403,500,",
      "2400,POST,/v1/login,192.0.2.9,,,,401,10,",
      "2800,POST,/v1/login,192.0.2.9,,,,200,10,",
      "2801,POST,/v1/login,192.0.2.9,,,,200,10,",
      "62799,POST,/v1/login,192.0.2.9,,,,200,10,",
      "62800,POST,/v1/login,192.0.2.9,,,,200,10,",
    ]);
    // 401 (2110) and 401 (2410) fill the log (the 200 and the 500 charge nothing): the request at 2800 is refused and
    // starts a ban to 62800, exactly block_for (the 403 answering at 2800, after it, does not extend it).
    expect(v).toEqual([
      ...["allowed", "allowed", "allowed", "allowed", "allowed"],
      ...["denied", "denied", "denied", "allowed"],
    ]);
  });

  it("cost_header: the response column's value is charged, else the request's cost", async () => {
    const v = await verdicts([
      "3000,POST,/v1/graphql,192.0.2.1,sk_b,,,200,10,7",
      "3100,POST,/v1/graphql,192.0.2.1,sk_b,,,200,10,",
      "3200,POST,/v1/graphql,192.0.2.1,sk_b,,,200,10,abc",
      "3300,POST,/v1/graphql,192.0.2.1,sk_b,,,200,10,",
      "3400,POST,/v1/graphql,192.0.2.1,sk_b,,,200,10,",
    ]);
    expect(v).toEqual(["allowed", "allowed", "allowed", "allowed", "denied"]);
  });
});

describe("compare on a t_ms,key,cost,status,duration_ms trace", () => {
  it("holds each concurrency slot for its request's duration", async () => {
    const rules = file(
      "c.yaml",
      "- id: exports\n  match: { identity: api_key }\n  algorithm: concurrency\n  limit: 1\n",
    );
    const trace = "t_ms,key,cost,status,duration_ms\n0,a,1,200,100\n50,a,1,200,100\n100,a,1,200,100\n150,a,1,200,10\n";
    const res = await runCli(["compare", "--rules", rules, "--trace", file("k.csv", trace)]);
    expect(res.code).toBe(0);
    // 0 holds its slot until 100: 50 is refused, 100 admitted, 150 refused (without durations: only the first).
    expect(res.stdout).toMatch(/exports\s+concurrency 1 in flight, slot_ttl 60 s\s+2\s+2\s+0/);
  });
});

describe("trace from nginx: $status and $request_time", () => {
  const format = '$remote_addr [$msec] "$request" $status $request_time "$http_x_api_key"';

  it("writes status,duration_ms; seconds with ms become exact ms", async () => {
    const log = file(
      "access.log",
      [
        '192.0.2.1 [1796119200.623] "POST /v1/export HTTP/1.1" 200 0.123 "sk_a"',
        '192.0.2.1 [1796119201.005] "POST /v1/export HTTP/1.1" 503 1.005 "sk_a"',
        '192.0.2.1 [1796119202.005] "POST /v1/export HTTP/1.1" 200 - "sk_a"',
      ].join("\n"),
    );
    const res = await runCli(["trace", "from", "nginx", log, "--format", format]);
    expect(res.code).toBe(0);
    const [magic, columnLine, ...lines] = res.stdout.trimEnd().split("\n");
    expect(magic).toBe("# sluice request trace v2");
    expect(columnLine).toMatch(/^t_ms,method,.*,status,duration_ms$/);
    // In start order ($msec less $request_time), the keys hashed; the status and duration last.
    expect(lines.map((l) => [l.split(",")[0], l.split(",").slice(-2).join(",")])).toEqual([
      ["1796119200000", "503,1005"],
      ["1796119200500", "200,123"],
      ["1796119202005", "200,"],
    ]);
  });

  it("property: any ms duration logged as seconds reads back as the same integer", () => {
    const p = nginxParser(format);
    if ("error" in p) throw new Error(p.error);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 999_999_999 }), (ms) => {
        const seconds = `${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, "0")}`;
        const slot = emptyRequestLine();
        const line = `192.0.2.1 [1796119200.000] "GET /a HTTP/1.1" 200 ${seconds} "-"`;
        expect(p.parse(line, slot)).toBe(true);
        expect(slot.outcome).toEqual({ status: 200, durationMs: ms });
      }),
      { numRuns: 500 },
    );
  });

  it("a log without $status writes no outcome columns", async () => {
    const res = await runCli(
      ["trace", "from", "nginx", "-", "--format", '$remote_addr [$msec] "$request"'],
      '192.0.2.1 [1796119200.623] "GET /a HTTP/1.1"\n',
    );
    expect(res.stdout.split("\n")[1]).not.toMatch(/status|duration_ms/);
  });
});

interface Req {
  readonly tMs: number;
  readonly durationMs: number | null;
}

/**
 * The independent fold: a request is admitted iff fewer than `limit` admitted ones hold a slot at its time: over its
 * whole duration when known (renewed), else for `slot_ttl`.
 */
function fold(limit: number, ttlMs: number, reqs: readonly Req[]): boolean[] {
  const held: { fromMs: number; untilMs: number }[] = [];
  return reqs.map((r) => {
    const inFlight = held.filter((h) => h.fromMs <= r.tMs && r.tMs < h.untilMs).length;
    if (inFlight >= limit) return false;
    // A known duration: held to its end (the gateway renews the lease meanwhile); unknown: until the lease ends.
    const untilMs = r.tMs + (r.durationMs ?? ttlMs);
    held.push({ fromMs: r.tMs, untilMs });
    return true;
  });
}

describe("property: concurrency replayed with durations admits what the interval fold admits", () => {
  it("keyed and request traces alike", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 400 }),
            durationMs: fc.option(fc.integer({ min: 0, max: 2500 }), { nil: null, freq: 8 }),
          }),
          { minLength: 1, maxLength: 60 },
        ),
        (limit, raw) => {
          const yaml = `- id: c\n  match: { route: "POST /x", identity: api_key }\n  algorithm: concurrency\n  limit: ${limit}\n  slot_ttl: 2s\n`;
          const { rules, errors } = parseRules(yaml, "p.yaml");
          expect(errors).toEqual([]);
          let t = 1_800_000_000_000;
          const reqs = raw.map((r) => {
            t += r.gapMs;
            return { tMs: t, durationMs: r.durationMs };
          });
          const keyed = new Replayer(rules);
          const byKeyed = reqs.map(
            (r) => keyed.keyed(r.tMs, "k", 1, { status: 200, durationMs: r.durationMs })[0]!.decision!.allowed,
          );
          const requests = new Replayer(rules);
          const byRequest = reqs.map((r) => {
            const line: RequestLine = {
              ...emptyRequestLine(),
              tMs: r.tMs,
              method: "POST",
              path: "/x",
              key: "sk_k",
              outcome: { status: 200, durationMs: r.durationMs },
            };
            return requests.request(line).verdict.kind === "admit";
          });
          const expected = fold(limit, 2000, reqs);
          expect(byKeyed).toEqual(expected);
          expect(byRequest).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
