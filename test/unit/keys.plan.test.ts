/**
 * `sluice plan` on a `key: global` rule (docs/rules.md, "Keys"): Shiplane's search-origin added, replayed on 600
 * searches in one second from 120 addresses, each within its own per-address limit, so every flip is the global
 * budget's. And a version 2 request trace with a composite key, read by `simulate`.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

const SHIPPED = "test/fixtures/shipped/shiplane.yaml";
const T0 = 1796119200000;

describe("plan shows what a key: global rule would have done", () => {
  it("search-origin added: 201 of 600 searches in one second flip to denied", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-keys-plan-"));
    const shipped = readFileSync(SHIPPED, "utf8");
    const start = shipped.indexOf("# The search backend answers");
    const end = shipped.indexOf("  burst: 200\n", start) + "  burst: 200\n".length;
    expect(start).toBeGreaterThan(0);
    writeFileSync(join(dir, "before.yaml"), shipped.slice(0, start) + shipped.slice(end));
    const lines = ["# sluice request trace v1", "t_ms,method,path,address,key,user,cost"];
    for (let i = 0; i < 600; i++) {
      lines.push(`${T0 + Math.floor((i * 1000) / 600)},GET,/v1/search/labels,198.51.100.${(i % 120) + 1},,,`);
    }
    writeFileSync(join(dir, "requests.csv"), `${lines.join("\n")}\n`);
    const r = await runCli([
      "plan",
      "--from",
      join(dir, "before.yaml"),
      "--to",
      SHIPPED,
      "--trace",
      join(dir, "requests.csv"),
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("search-origin: added (gcra 200/s, burst 200)");
    expect(r.stdout).toMatch(/search-origin +added +201 +0\n/);
    expect(r.stdout).toMatch(/requests +201 +0\n/);
  });
});

describe("docs/rules.md's commands for it run as written", () => {
  // The done-when: plan shows what the shipped key: global rule would have done on a trace. The docs once gave
  // `plan --from HEAD --trace requests.csv`, which from a fresh checkout has no requests.csv, and HEAD already has the
  // rule (nothing added, nothing flips). Their block is run here with sh in a folder shaped like a checkout (rules/
  // holding the shipped file, wrangler.toml), `npx sluice` being this checkout's bin/sluice.mjs.
  it("writes the rules without search-origin and 600 searches, and plan shows 201 flips", () => {
    const doc = readFileSync("docs/rules.md", "utf8");
    const at = doc.indexOf("What a global budget would have done");
    const start = doc.indexOf("```sh\n", at) + "```sh\n".length;
    const block = doc.slice(start, doc.indexOf("```\n", start));
    expect(at).toBeGreaterThan(0);
    expect(block).toContain("npx sluice plan --from out/before/ --to rules/ --trace out/searches.csv");
    const dir = mkdtempSync(join(tmpdir(), "sluice-keys-docs-"));
    mkdirSync(join(dir, "rules"));
    copyFileSync(SHIPPED, join(dir, "rules", "shiplane.yaml"));
    copyFileSync("wrangler.toml", join(dir, "wrangler.toml"));
    const sluice = `${JSON.stringify(process.execPath)} ${JSON.stringify(resolve("bin/sluice.mjs"))}`;
    const out = execFileSync("sh", ["-c", block.replaceAll("npx sluice", sluice)], { cwd: dir, encoding: "utf8" });
    expect(out).toContain("search-origin: added (gcra 200/s, burst 200)");
    expect(out).toMatch(/1 added, 0 removed, 0 changed, \d+ unchanged\n/);
    expect(out).toMatch(/search-origin +added +201 +0\n/);
    expect(out).toMatch(/requests +201 +0\n/);
  });
});

describe("a version 2 request trace through simulate", () => {
  it("keys a composite rule by its columns: two tenants behind one /24 are two budgets; two values are 400", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-keys-v2-"));
    writeFileSync(
      join(dir, "rules.yaml"),
      `- id: tenant
  match: { route: "* /v1/**" }
  key: [{ ip: { v4: 24 } }, { header: X-Tenant-Id }]
  algorithm: fixed_window
  limit: 1
  window: h
`,
    );
    const trace = [
      "# sluice request trace v2",
      "t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,header:x-tenant-id",
      `${T0},GET,/v1/a,192.0.2.1,,,,api.example.com,,,,,acme`,
      `${T0 + 1},GET,/v1/a,192.0.2.99,,,,api.example.com,,,,, acme `,
      `${T0 + 2},GET,/v1/a,192.0.2.5,,,,api.example.com,,,,,other`,
      `${T0 + 3},GET,/v1/a,192.0.2.5,,,,api.example.com,,,,,a%2C b`,
    ];
    writeFileSync(join(dir, "t.csv"), `${trace.join("\n")}\n`);
    const r = await runCli(["simulate", "--rules", join(dir, "rules.yaml"), "--trace", join(dir, "t.csv")]);
    expect(r.stderr).toBe("");
    const out = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { status?: number; verdict?: string });
    expect(out.map((o) => o.status)).toEqual([200, 429, 200, 400]);
  });

  // A trace written for other rules (or a version 1 trace) has no column for a header the rules key on: every request
  // read it as missing, one shared budget per /24 here, and nothing said so (3 of these 4 requests were refused).
  it("warns when the trace has no column for a header the rules key on", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-keys-v2-"));
    writeFileSync(
      join(dir, "rules.yaml"),
      `- id: tenant
  match: { route: "* /v1/**" }
  key: [{ ip: { v4: 24 } }, { header: X-Tenant-Id }, { cookie: team }]
  algorithm: fixed_window
  limit: 1
  window: h
`,
    );
    const v2 = [
      "# sluice request trace v2",
      "t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,cookie:team",
    ];
    const v1 = ["# sluice request trace v1", "t_ms,method,path,address,key,user,cost"];
    for (const [name, head, tail] of [
      ["v2.csv", v2, ","],
      ["v1.csv", v1, ""],
    ] as const) {
      const lines = [0, 1, 2, 3].map((i) => `${T0 + i},GET,/v1/a,192.0.2.${i + 1},,,${tail === "" ? "" : ",,,,,,"}`);
      writeFileSync(join(dir, name), `${[...head, ...lines].join("\n")}\n`);
      const r = await runCli(["simulate", "--rules", join(dir, "rules.yaml"), "--trace", join(dir, name)]);
      const missing = name === "v1.csv" ? "cookie:team, header:x-tenant-id" : "header:x-tenant-id";
      expect(r.stderr).toBe(
        `${join(dir, name)}: warning: the trace has no ${missing} column: rules keyed on ${
          name === "v1.csv" ? "them read them" : "it read it"
        } as missing (sluice trace from --rules writes the columns the rules name)\n`,
      );
    }
  });
});

describe("plan and compare on a composite key change", () => {
  const rule = (key: string) => `- id: tenant
  match: { route: "* /v1/**" }
  key: ${key}
  key_client_chosen: accept
  algorithm: fixed_window
  limit: 2
  window: h
`;
  function setUp() {
    const dir = mkdtempSync(join(tmpdir(), "sluice-keys-composite-"));
    writeFileSync(join(dir, "before.yaml"), rule("[{ ip: { v4: 24 } }, { header: X-Tenant-Id }]"));
    writeFileSync(join(dir, "after.yaml"), rule("[{ header: X-Tenant-Id }]"));
    // Two tenants, each from two /24 networks: 8 acme and 6 other requests, alternating networks.
    const lines = [
      "# sluice request trace v2",
      "t_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,header:x-tenant-id",
    ];
    let i = 0;
    for (const tenant of ["acme", "acme", "acme", "other", "acme", "other", "other"]) {
      for (const net of ["192.0.2", "198.51.100"]) {
        lines.push(`${T0 + i},GET,/v1/a,${net}.${i + 1},,,,api.example.com,,,,,${tenant}`);
        i++;
      }
    }
    writeFileSync(join(dir, "t.csv"), `${lines.join("\n")}\n`);
    return dir;
  }

  it("plan: dropping the /24 from [ip/24, tenant] merges budgets; 4 requests flip to denied", async () => {
    const dir = setUp();
    const r = await runCli([
      "plan",
      "--from",
      join(dir, "before.yaml"),
      "--to",
      join(dir, "after.yaml"),
      "--trace",
      join(dir, "t.csv"),
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("  key: ip/24/IPV6_PREFIX, header:x-tenant-id -> header:x-tenant-id\n");
    // Before: 4 budgets of 2 (acme and other per network): 8 admitted. After: 2 budgets of 2: 4 admitted.
    expect(r.stdout).toMatch(/tenant +changed +4 +0\n/);
    expect(r.stdout).toMatch(/requests +4 +0\n/);
  });

  it("compare: each side's answers and its busiest composite key", async () => {
    const dir = setUp();
    const before = await runCli(["compare", "--rules", join(dir, "before.yaml"), "--trace", join(dir, "t.csv")]);
    const after = await runCli(["compare", "--rules", join(dir, "after.yaml"), "--trace", join(dir, "t.csv")]);
    expect(before.code).toBe(0);
    // The keys the rule counted: 2 tenants x 2 networks, then 2 tenants. The 14 callers (addresses) are not keys: the
    // header once said 18 and 16 (the engine numbers callers and keys together).
    expect(before.stdout).toContain(": 14 requests, 4 keys,");
    expect(after.stdout).toContain(": 14 requests, 2 keys,");
    expect(before.stdout).toContain("The gateway's answers: 8 admitted, 6 denied.");
    expect(before.stdout).toMatch(
      /tenant +fixed_window 2 per 1 h +8 +6 +0 +2 in 1 h \(key \["192\.0\.2\.0\/24","acme"\]\)/,
    );
    expect(after.stdout).toContain("The gateway's answers: 4 admitted, 10 denied.");
    expect(after.stdout).toMatch(/tenant +fixed_window 2 per 1 h +4 +10 +0 +2 in 1 h \(key acme\)/);
  });
});
