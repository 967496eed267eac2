/**
 * `sluice plan --from nginx:CONF --trace access.log`: the answers before are what NGINX answered, as its log says
 * (a limit status, or `$limit_req_status`), not a replay of the imported rules; flips are where Sluice differs.
 * The same for Cloudflare's rate limiting rules over a Logpush log (`--from cloudflare:RULES.json`).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

const CONF = `events {}
http {
  log_format timed '$remote_addr [$msec] "$request" $status';
  access_log logs/access.log timed;
  limit_req_zone $binary_remote_addr zone=ip:1m rate=1r/s;
  limit_req_status 429;
  server { location /api/ { limit_req zone=ip; } }
}
`;

/** One request a second apart at most 1/s: Sluice admits 0 ms and 1,500 ms, denies 100 ms and 200 ms. */
const line = (address: string, ms: number, path: string, status: number) =>
  `${address} [1796119200.${String(ms).padStart(3, "0")}] "GET ${path} HTTP/1.1" ${status}`;

async function plan(log: string[]): Promise<{ code: number; stdout: string; stderr: string; conf: string }> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-plan-nginx-"));
  writeFileSync(join(dir, "nginx.conf"), CONF);
  writeFileSync(join(dir, "access.log"), `${log.join("\n")}\n`);
  const imported = await runCli(["import", "nginx", join(dir, "nginx.conf"), "--out", join(dir, "rules.yaml")]);
  expect(imported.code).toBe(0);
  const r = await runCli([
    "plan",
    "--from",
    `nginx:${join(dir, "nginx.conf")}`,
    "--to",
    join(dir, "rules.yaml"),
    "--trace",
    join(dir, "access.log"),
  ]);
  return { code: r.code, stdout: r.stdout, stderr: r.stderr, conf: join(dir, "nginx.conf") };
}

const rows = (stdout: string) =>
  stdout
    .split("\n")
    .filter((l) => /^(ip-api|requests) /.test(l))
    .map((l) => l.split(/\s{2,}/).join("|"));

describe("sluice plan --from nginx: over NGINX's access log", () => {
  it("NGINX answered as Sluice does: 0 flips (not Sluice against itself: the log's statuses are the answers)", async () => {
    const r = await plan([
      line("192.0.2.1", 0, "/api/x", 200),
      line("192.0.2.1", 100, "/api/x", 429),
      line("192.0.2.1", 200, "/api/x", 429),
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Before: what the proxy answered");
    expect(r.stdout).toContain("no request is answered differently: 0 flips");
  });

  it("says the import in one line: its report is `sluice import`'s to print, not every command's again", async () => {
    const r = await plan([line("192.0.2.1", 0, "/api/x", 200)]);
    expect(r.stderr).toBe(
      `nginx:${r.conf}: imported as 1 rule; 1 approximate, 0 left out (\`sluice import nginx ${r.conf}\` says what and why)\n`,
    );
  });

  it("where the log says otherwise, each flip is counted and the denying rule named", async () => {
    const r = await plan([
      line("192.0.2.1", 0, "/api/x", 200),
      // NGINX let this one through (its clock, its rounding): Sluice denies it.
      line("192.0.2.1", 100, "/api/x", 200),
      line("192.0.2.1", 200, "/api/x", 429),
      // A 503 is an upstream's answer here (limit_req_status is 429), so NGINX admitted it and so does Sluice.
      line("198.51.100.7", 300, "/api/y", 503),
      // NGINX refused it; Sluice's rule does not apply off /api/: denied -> allowed.
      line("203.0.113.9", 400, "/other", 429),
    ]);
    expect(r.code).toBe(0);
    expect(rows(r.stdout)).toEqual(["ip-api|unchanged|1|0", "requests|1|1"]);
  });
});

/** One Cloudflare rate limiting rule: POST /v1/login, 1 request per 10 s per address, answered with 429. */
const CF_RULES = JSON.stringify({
  result: {
    rules: [
      {
        description: "login",
        expression: 'http.request.uri.path eq "/v1/login" and http.request.method eq "POST"',
        action: "block",
        ratelimit: {
          characteristics: ["cf.colo.id", "ip.src"],
          period: 10,
          requests_per_period: 1,
          mitigation_timeout: 0,
        },
      },
    ],
  },
});

/** A Logpush line: when (ms after a fixed instant), who, what Cloudflare answered. */
const logpush = (address: string, ms: number, status: number) =>
  JSON.stringify({
    ClientIP: address,
    ClientRequestMethod: "POST",
    ClientRequestURI: "/v1/login",
    EdgeStartTimestamp: `2026-12-01T10:00:0${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, "0")}Z`,
    EdgeResponseStatus: status,
  });

describe("sluice plan --from cloudflare: over a Logpush log", () => {
  it("the answers before are Cloudflare's statuses: agreeing gives 0 flips, a 200 Sluice would deny gives one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-plan-cloudflare-"));
    writeFileSync(join(dir, "rules.json"), CF_RULES);
    const imported = await runCli(["import", "cloudflare", join(dir, "rules.json"), "--out", join(dir, "rules.yaml")]);
    expect(imported.code).toBe(0);
    const run = async (lines: string[]) => {
      writeFileSync(join(dir, "http.log"), `${lines.join("\n")}\n`);
      const from = `cloudflare:${join(dir, "rules.json")}`;
      return runCli(["plan", "--from", from, "--to", join(dir, "rules.yaml"), "--trace", join(dir, "http.log")]);
    };
    const agree = await run([logpush("192.0.2.1", 0, 200), logpush("192.0.2.1", 500, 429)]);
    expect(agree.code).toBe(0);
    expect(agree.stdout).toContain("Before: what the proxy answered");
    expect(agree.stdout).toContain("no request is answered differently: 0 flips");
    // Cloudflare's counters lag: it let the second request through; Sluice denies it.
    const lagged = await run([logpush("192.0.2.1", 0, 200), logpush("192.0.2.1", 500, 200)]);
    expect(lagged.stdout).toMatch(/^login +unchanged +1 +0$/m);
  });
});
