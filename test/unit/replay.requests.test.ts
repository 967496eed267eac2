/**
 * Request traces replayed through the whole rule set as the gateway runs it (src/replay/engine.ts): canonical path,
 * routes, callers (unverified keys by address), plans and per-account limits from an accounts file, cost_by_route,
 * composition and refunds, shadow rules, 401 and 400; and the commands that read them (simulate, compare, plan).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readAccountsFile } from "../../src/replay/accounts.ts";
import { Replayer, type ReplayOptions } from "../../src/replay/engine.ts";
import {
  emptyRequestLine,
  formatRequestLine,
  parseRequestLineInto,
  type RequestLine,
  requestTraceHeader,
} from "../../src/replay/request_trace.ts";
import { compileRules } from "../../src/request/match.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

const RULES = `
- id: free-global
  match: { plan: free, identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 3
- id: growth-global
  match: { plan: growth, identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 10
- id: login-per-ip
  match: { route: "POST /v1/login", identity: ip }
  algorithm: fixed_window
  limit: 2
  window: min
- id: bulk
  match: { route: "POST /v1/labels:batch", identity: api_key }
  algorithm: token_bucket
  rate_per_s: 1
  burst: 20
  cost_by_route: { "POST /v1/labels:batch": 10 }
- id: admin-only
  match: { route: "DELETE /v1/accounts/*", identity: api_key }
  algorithm: fixed_window
  limit: 100
  window: min
  unverified: reject
- id: tracking-shadow
  match: { route: "GET /v1/tracking/**", identity: api_key }
  algorithm: fixed_window
  limit: 1
  window: min
  mode: shadow
`;

function rules(yaml = RULES): ResolvedRule[] {
  const parsed = parseRules(yaml, "rules.yaml");
  expect(parsed.errors).toEqual([]);
  return parsed.rules;
}

const SETTINGS: ReplayOptions["settings"] = {
  defaultPlan: "free",
  ipv6PrefixBits: 64,
  path: { caseSensitive: false, keepEncodedSlash: false, keepParams: false },
  ambiguousPaths: "refuse",
  upstreamProfile: "any",
};

function accounts(rs: readonly ResolvedRule[], records: Record<string, unknown>): ReplayOptions {
  const read = readAccountsFile(JSON.stringify(records), "accounts.json", compileRules(rs));
  if ("errors" in read) throw new Error(read.errors.join("\n"));
  return { settings: SETTINGS, accounts: read.accounts };
}

const r = (
  tMs: number,
  method: string,
  path: string,
  address: string | null,
  key: string | null = null,
  cost: number | null = null,
): RequestLine => ({
  tMs,
  method,
  path,
  address,
  key,
  user: null,
  cost,
  answered: null,
});

/** Each request's verdict (`admit`, `deny:<rules>`, ...) and the rules that applied. */
function replay(replayer: Replayer, lines: readonly RequestLine[]): string[] {
  return lines.map((line) => {
    const { verdict, answers } = replayer.request(line);
    const applied = answers.map((a) => `${replayer.rules[a.rule]!.id}${a.refunded ? "(refunded)" : ""}`).join(",");
    const kind =
      verdict.kind === "deny"
        ? `deny:${verdict.rules.map((i) => replayer.rules[i]!.id).join("+")}`
        : verdict.kind === "unauthorized" || verdict.kind === "too_costly"
          ? `${verdict.kind}:${replayer.rules[verdict.rule]!.id}`
          : verdict.kind;
    return `${kind} [${applied}]`;
  });
}

describe("the gateway's steps, replayed", () => {
  it("match.route as a list and match.except: NGINX's one location per request, as an import writes it", () => {
    const nginx = `
- id: login
  match: { route: ["* /v1/login**", "* /v1/signup**"], identity: ip }
  algorithm: leaky_queue
  rate: 1/s
  burst: 0
- id: catch-all
  match: { route: "* /**", except: ["* /v1/login**", "* /v1/signup**"], identity: ip }
  algorithm: leaky_queue
  rate: 100/s
  burst: 100
`;
    const replayer = new Replayer(rules(nginx), { settings: SETTINGS, accounts: null });
    const paths = ["/v1/login", "/v1/signup", "/v1/loginx/a", "/v1/search", "/"];
    expect(
      replay(
        replayer,
        paths.map((p, i) => r(i, "POST", p, "192.0.2.1")),
      ),
    ).toEqual([
      "admit [login]",
      // One zone over both locations: one budget.
      "deny:login [login]",
      "deny:login [login]",
      "admit [catch-all]",
      "admit [catch-all]",
    ]);
  });

  it("matches routes on the canonical path (case, slashes, dot segments, encodings) and HEAD as GET", () => {
    const replayer = new Replayer(rules(), { settings: SETTINGS, accounts: null });
    const spellings = ["/v1/login", "/V1//login/", "/v1/./x/../login", "/v1/%6Cogin", "/v1/login;jsessionid=1"];
    const out = replay(
      replayer,
      spellings.map((p, i) => r(i, "POST", p, "192.0.2.1")),
    );
    // A caller without a key is unverified: free-global counts it by its address (and is refunded on a denial).
    expect(out).toEqual([
      "admit [free-global,login-per-ip]",
      "admit [free-global,login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
    ]);
    expect(replay(replayer, [r(9, "HEAD", "/v1/tracking/1", null, "sk_a")])).toEqual([
      "admit [free-global,tracking-shadow]",
    ]);
  });

  it("without an accounts file, every key is verified on the default plan and counted by itself", () => {
    const replayer = new Replayer(rules(), { settings: SETTINGS, accounts: null });
    const lines = [0, 1, 2, 3].map((i) => r(0, "GET", "/v1/quotes", "192.0.2.1", `sk_${i}`));
    expect(replay(replayer, lines)).toEqual(Array(4).fill("admit [free-global]"));
  });

  it("with one, unknown keys are unverified: the default plan, counted by their address", () => {
    const rs = rules();
    const replayer = new Replayer(rs, accounts(rs, { sk_known: { plan: "growth" } }));
    const made_up = [0, 1, 2, 3].map((i) => r(0, "GET", "/v1/quotes", "192.0.2.1", `sk_made_up_${i}`));
    expect(replay(replayer, made_up)).toEqual([
      "admit [free-global]",
      "admit [free-global]",
      "admit [free-global]",
      "deny:free-global [free-global]",
    ]);
    // The known key is on growth: its own, larger budget.
    expect(
      replay(
        replayer,
        Array.from({ length: 5 }, () => r(0, "GET", "/", "192.0.2.1", "sk_known")),
      ),
    ).toEqual(Array(5).fill("admit [growth-global]"));
  });

  it("an accounts file keyed by hash, with per-account limits; hashed keys in the trace", () => {
    const rs = rules();
    const hash = createHash("sha256").update("sk_big").digest("hex");
    const replayer = new Replayer(
      rs,
      accounts(rs, { [hash]: { plan: "free", limits: { "free-global": { rate_per_s: 1, burst: 1 } } } }),
    );
    const lines = [r(0, "GET", "/", null, "sk_big"), r(0, "GET", "/", null, `sha256:${hash}`)];
    expect(replay(replayer, lines)).toEqual(["admit [free-global]", "admit [free-global]"]);
    // The override (burst 1) applies to the raw key; its hashed spelling is another budget.
    expect(replay(replayer, [r(1, "GET", "/", null, "sk_big")])).toEqual(["deny:free-global [free-global]"]);
  });

  it("cost_by_route prices the request; a cost above an enforcing rule's capacity is refused with nothing charged", () => {
    const replayer = new Replayer(rules(), { settings: SETTINGS, accounts: null });
    const batch = r(0, "POST", "/v1/labels:batch", null, "sk_a");
    expect(replay(replayer, [batch, batch, batch])).toEqual([
      "admit [free-global,bulk]",
      "admit [free-global,bulk]",
      "deny:bulk [free-global(refunded),bulk]",
    ]);
    expect(replay(replayer, [r(0, "GET", "/", null, "sk_b", 5)])).toEqual(["too_costly:free-global []"]);
  });

  it("composition: a denial gives back what the admitting rules charged", () => {
    const replayer = new Replayer(rules(), { settings: SETTINGS, accounts: null });
    // login-per-ip (2 per minute) denies the third login; free-global (burst 3) is refunded, so it still has room.
    const logins = [0, 1, 2, 3, 4].map(() => r(0, "POST", "/v1/login", "192.0.2.9", "sk_c"));
    expect(replay(replayer, logins)).toEqual([
      "admit [free-global,login-per-ip]",
      "admit [free-global,login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
      "deny:login-per-ip [free-global(refunded),login-per-ip]",
    ]);
    expect(replay(replayer, [r(0, "GET", "/", null, "sk_c")])).toEqual(["admit [free-global]"]);
  });

  it("shadow rules answer but never block; unverified: reject answers 401 before anything is counted", () => {
    const rs = rules();
    const replayer = new Replayer(rs, accounts(rs, {}));
    const tracking = [0, 1].map(() => r(0, "GET", "/v1/tracking/x", "192.0.2.3", "sk_x"));
    expect(replay(replayer, tracking)).toEqual([
      "admit [free-global,tracking-shadow]",
      "admit [free-global,tracking-shadow]",
    ]);
    expect(replay(replayer, [r(0, "DELETE", "/v1/accounts/7", "192.0.2.3", "sk_x")])).toEqual([
      "unauthorized:admin-only []",
    ]);
  });

  it("an unreadable path is a 400, as at the edge", () => {
    const replayer = new Replayer(rules(), { settings: SETTINGS, accounts: null });
    expect(replay(replayer, [r(0, "GET", "/v1/%zz", null, "sk_a")])).toEqual(["bad_request []"]);
  });
});

describe("the request trace format", () => {
  it("round trips, and names what is wrong with a line", () => {
    const line = r(1796119200000, "POST", "/v1/a,b", "2001:db8::1", "sk_1", 3);
    const text = formatRequestLine(line);
    expect(text).toBe("1796119200000,POST,/v1/a%2Cb,2001:db8::1,sk_1,,3\n");
    const slot = emptyRequestLine();
    expect(parseRequestLineInto(text.trimEnd(), slot)).toBe(true);
    expect(slot).toEqual({ ...line, path: "/v1/a%2Cb", outcome: null });
    expect
      .soft(parseRequestLineInto("1,GET,/a,,,", slot))
      .toBe("expected 7 fields (t_ms,method,path,address,key,user,cost), got 6: 1,GET,/a,,,");
    expect
      .soft(parseRequestLineInto("x,GET,/a,,,,", slot))
      .toBe('t_ms must be an integer number of milliseconds, got "x"');
    expect.soft(parseRequestLineInto("1,G3T,/a,,,,", slot)).toBe('method must be letters, got "G3T"');
    expect.soft(parseRequestLineInto("1,GET,a,,,,", slot)).toBe('path must start with /, got "a"');
    expect.soft(parseRequestLineInto("1,GET,/a,,sha256:abc,,", slot)).toContain("a hashed key must be sha256: and 64");
    expect.soft(parseRequestLineInto("1,GET,/a,,,,0", slot)).toBe('cost must be empty or a positive integer, got "0"');
    // An address the gateway refuses (400) was read as no address, which turns every ip rule and ip key part off for
    // the line: a replay admitted what the Worker refuses. Now the line is refused, saying which field.
    for (const address of ["not-an-ip", "192.0.2.1:80", "[2001:db8::1]", "192.0.2.1 192.0.2.2", "fe80::1%eth0"]) {
      expect
        .soft(parseRequestLineInto(`1,GET,/a,${address},,,`, slot))
        .toBe(
          `address must be one IPv4 or IPv6 address (no port, brackets, zone or list), got ${JSON.stringify(address)}`,
        );
    }
    expect.soft(parseRequestLineInto("1,GET,/a,::ffff:192.0.2.1,,,", slot)).toBe(true);
  });
});

function traceFile(lines: readonly RequestLine[], extra = ""): string {
  const path = join(mkdtempSync(join(tmpdir(), "sluice-req-")), "requests.csv");
  writeFileSync(path, requestTraceHeader() + lines.map(formatRequestLine).join("") + extra);
  return path;
}

function rulesFile(yaml = RULES): string {
  const path = join(mkdtempSync(join(tmpdir(), "sluice-rules-")), "rules.yaml");
  writeFileSync(path, yaml);
  return path;
}

describe("the commands on request traces", () => {
  const logins = [0, 1, 2].map((i) => r(i, "POST", "/v1/login", "192.0.2.9", "sk_c"));

  it("simulate prints the gateway's answer and each rule's decision per request", async () => {
    const res = await runCli(["simulate", "--rules", rulesFile(), "--trace", traceFile(logins)]);
    expect(res.code).toBe(0);
    const out = res.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { verdict: string; status: number; rules: { rule: string; refunded?: boolean }[] });
    expect(
      out.map((o) => [o.verdict, o.status, o.rules.map((x) => `${x.rule}${x.refunded ? "*" : ""}`).join(",")]),
    ).toEqual([
      ["allowed", 200, "free-global,login-per-ip"],
      ["allowed", 200, "free-global,login-per-ip"],
      ["denied", 429, "free-global*,login-per-ip"],
    ]);
  });

  // A trace saved by a spreadsheet or a Windows editor starts with a UTF-8 byte order mark: the first line was then not
  // "# sluice request trace v2", and every line was "expected 7 fields" (a version 2 trace read as version 1).
  it("a byte order mark before the first line is not part of it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-req-"));
    const path = join(dir, "bom.csv");
    writeFileSync(
      path,
      "\uFEFF# sluice request trace v2\r\nt_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4\r\n" +
        "0,GET,/v1/quotes,192.0.2.1,,,,,,,,\r\n",
    );
    const res = await runCli(["simulate", "--rules", rulesFile(), "--trace", path]);
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout) as { verdict: string }).toMatchObject({ verdict: "allowed" });
    const keyed = join(dir, "keyed.csv");
    writeFileSync(keyed, "\uFEFFt_ms,key,cost\n0,a,1\n");
    const k = await runCli(["simulate", "--rules", rulesFile(), "--rule", "free-global", "--trace", keyed]);
    expect(k.stderr).toBe("");
    expect(JSON.parse(k.stdout) as { key: string }).toMatchObject({ key: "a", allowed: true });
  });

  it("simulate reports every malformed line with its number (exit 2) and prints nothing for them", async () => {
    const res = await runCli([
      "simulate",
      "--rules",
      rulesFile(),
      "--trace",
      traceFile(logins, "5,GET\n6,GET,/x,,,,\n7,??,/x,,,,\n"),
    ]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/requests\.csv:6: expected 7 fields/);
    expect(res.stderr).toMatch(/requests\.csv:8: method must be letters/);
  });

  it("simulate still needs --rule for a t_ms,key,cost trace", async () => {
    const res = await runCli(["simulate", "--rules", rulesFile()], "0,a,1\n");
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("--rule RULE_ID is required for a t_ms,key,cost trace");
  });

  it("compare counts, per rule, the requests it applied to", async () => {
    const res = await runCli(["compare", "--rules", rulesFile(), "--trace", traceFile(logins)]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("The gateway's answers: 2 admitted, 1 denied.");
    expect(res.stdout).toMatch(/login-per-ip\s+fixed_window 2 per 60 s\s+2\s+1\s+0/);
    expect(res.stdout).toMatch(/growth-global\s+token_bucket 1\/s, burst 10\s+0\s+0\s+0/);
  });

  it("plan replays a change of match on a request trace, per rule and per caller", async () => {
    const after = RULES.replace('route: "POST /v1/login"', 'route: "POST /v1/log-in"');
    const res = await runCli(["plan", "--from", rulesFile(), "--to", rulesFile(after), "--trace", traceFile(logins)]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("match.route: POST /v1/login -> POST /v1/log-in");
    expect(res.stdout).toMatch(/login-per-ip\s+changed\s+0\s+1/);
    expect(res.stdout).toMatch(/requests\s+0\s+1/);
    expect(res.stdout).toMatch(/sk_c\s+1\s+0\s+1/);
  });

  it("plan on a t_ms,key trace names the rules limited to routes or plans and leaves them out of the totals", async () => {
    const after = RULES.replace("limit: 2\n", "limit: 1\n").replace("burst: 3", "burst: 1");
    const res = await runCli(
      ["plan", "--from", rulesFile(), "--to", rulesFile(after), "--trace", "-"],
      "0,k,1\n0,k,1\n0,k,1\n",
    );
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/free-global\s+changed\s+-\s+- \(not replayed: only plan free\)/);
    expect(res.stdout).toMatch(/login-per-ip\s+changed\s+-\s+- \(not replayed: only POST \/v1\/login\)/);
    expect(res.stdout).toMatch(/total\s+0\s+0/);
  });
});
