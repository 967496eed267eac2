/**
 * AWS WAF logs (src/replay/log_aws_waf.ts): `sluice trace from aws-waf LOG` as a request trace, and `sluice plan
 * --from aws-waf:ACL.json --trace LOG`, whose answers before are what WAF did (a rate-based rule's BLOCK is the
 * limiter's refusal), not a replay of the imported rules: flips are where Sluice would answer otherwise.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

/** One rate-based rule: 10 POSTs to /login per IP per 60 s, blocked with 429. */
const ACL = JSON.stringify({
  WebACL: {
    Name: "edge",
    Rules: [
      {
        Name: "login",
        Priority: 0,
        Action: { Block: { CustomResponse: { ResponseCode: 429 } } },
        Statement: {
          RateBasedStatement: {
            Limit: 10,
            EvaluationWindowSec: 60,
            AggregateKeyType: "IP",
            ScopeDownStatement: {
              ByteMatchStatement: {
                FieldToMatch: { UriPath: {} },
                PositionalConstraint: "EXACTLY",
                SearchString: "/login",
                TextTransformations: [{ Priority: 0, Type: "NONE" }],
              },
            },
          },
        },
        VisibilityConfig: { SampledRequestsEnabled: true, CloudWatchMetricsEnabled: true, MetricName: "login" },
      },
    ],
  },
});

const T0 = 1_796_119_200_000;

/** A WAF log line: when (ms after T0), what WAF did, and (for a block) the rule type and code sent. */
function waf(ms: number, action: "ALLOW" | "BLOCK", more: Record<string, unknown> = {}): string {
  return JSON.stringify({
    timestamp: T0 + ms,
    formatVersion: 1,
    webaclId: "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/edge/abc",
    terminatingRuleId: action === "BLOCK" ? "login" : "Default_Action",
    terminatingRuleType: action === "BLOCK" ? "RATE_BASED" : "REGULAR",
    action,
    httpSourceName: "ALB",
    httpRequest: {
      clientIp: "192.0.2.7",
      country: "DE",
      headers: [
        { name: "Host", value: "api.example.com:443" },
        { name: "User-Agent", value: "curl/8" },
        { name: "X-Tenant", value: "acme" },
      ],
      uri: "/login",
      args: "next=%2Fhome",
      httpVersion: "HTTP/1.1",
      httpMethod: "POST",
      requestId: `r${ms}`,
    },
    ...more,
  });
}

function dirWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-aws-waf-log-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe("sluice trace from aws-waf", () => {
  it("a WAF log as a request trace: time, method, path, address, host, country and a header the rules name", async () => {
    const rules =
      "- id: t\n  match: {}\n  key: [{ header: x-tenant }, country]\n  algorithm: fixed_window\n  limit: 5\n  window: min\n";
    const dir = dirWith({ "waf.log": `${waf(0, "ALLOW")}\n${waf(250, "BLOCK")}\n`, "rules.yaml": rules });
    const r = await runCli(["trace", "from", "aws-waf", join(dir, "waf.log"), "--rules", join(dir, "rules.yaml")]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[1]).toBe("t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,header:x-tenant");
    expect(lines.slice(2)).toEqual([
      `${T0},POST,/login,192.0.2.7,,,,api.example.com,,DE,,,acme`,
      `${T0 + 250},POST,/login,192.0.2.7,,,,api.example.com,,DE,,,acme`,
    ]);
  });

  it("a line that is not WAF's is reported with its number, and the run goes on", async () => {
    const dir = dirWith({ "waf.log": `${waf(0, "ALLOW")}\n{"timestamp": "soon"}\n` });
    const r = await runCli(["trace", "from", "aws-waf", join(dir, "waf.log")]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/waf\.log:2: .*no httpRequest/);
  });
});

describe("sluice plan --from aws-waf: over WAF's log", () => {
  it("the answers before are WAF's: agreeing gives 0 flips, a request WAF let through that Sluice denies, one", async () => {
    const dir = dirWith({ "acl.json": ACL });
    const imported = await runCli(["import", "aws-waf", join(dir, "acl.json"), "--out", join(dir, "rules.yaml")]);
    expect(imported.code).toBe(0);
    const run = async (lines: string[]) => {
      writeFileSync(join(dir, "waf.log"), `${lines.join("\n")}\n`);
      const from = `aws-waf:${join(dir, "acl.json")}`;
      return runCli(["plan", "--from", from, "--to", join(dir, "rules.yaml"), "--trace", join(dir, "waf.log")]);
    };
    // Ten admitted, the eleventh in the same minute over the limit.
    const ten = Array.from({ length: 10 }, (_, i) => waf(i * 100, "ALLOW"));
    const agree = await run([...ten, waf(1_500, "BLOCK", { responseCodeSent: 429 })]);
    expect(agree.code).toBe(0);
    expect(agree.stdout).toContain("Before: what the proxy answered");
    expect(agree.stdout).toContain("no request is answered differently: 0 flips");
    // WAF checks its rates about every 10 s: it let the eleventh through, which Sluice denies.
    const lagged = await run([...ten, waf(1_500, "ALLOW")]);
    expect(lagged.stdout).toMatch(/^login +unchanged +1 +0$/m);
    expect(readFileSync(join(dir, "rules.yaml"), "utf8")).toContain('route: "* /login"');
  });
});

describe("plan --from with the lists an import reads by reference", () => {
  it("--ip-set with --from aws-waf:, --list with --from cloudflare:, as the import takes them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-plan-sets-"));
    const arn = "arn:aws:wafv2:us-east-1:123456789012:regional/ipset/office/a1b2";
    const scope = { NotStatement: { Statement: { IPSetReferenceStatement: { ARN: arn } } } };
    const acl = JSON.parse(ACL) as {
      WebACL: { Rules: { Statement: { RateBasedStatement: Record<string, unknown> } }[] };
    };
    acl.WebACL.Rules[0]!.Statement.RateBasedStatement.ScopeDownStatement = scope;
    writeFileSync(join(dir, "acl.json"), JSON.stringify(acl));
    writeFileSync(join(dir, "set.json"), JSON.stringify({ IPSet: { ARN: arn, Addresses: ["203.0.113.0/28"] } }));
    writeFileSync(join(dir, "rules.yaml"), "[]\n");
    const to = ["--to", join(dir, "rules.yaml")];
    const without = await runCli(["plan", "--from", `aws-waf:${join(dir, "acl.json")}`, ...to]);
    expect(without.stderr).toContain("imported as 0 rules; 0 approximate, 1 left out");
    const r = await runCli([
      "plan",
      "--from",
      `aws-waf:${join(dir, "acl.json")}`,
      "--ip-set",
      join(dir, "set.json"),
      ...to,
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("imported as 1 rule");
    expect(r.stdout).toContain("login: removed");
    expect((await runCli(["plan", "--from", "HEAD", "--list", "nameless"])).code).toBe(2);
  });
});
