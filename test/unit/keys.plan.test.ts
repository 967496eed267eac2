/**
 * `sluice plan` on a `key: global` rule (docs/rules.md, "Keys"): Shiplane's search-origin added, replayed on 600
 * searches in one second from 120 addresses, each within its own per-address limit, so every flip is the global
 * budget's. And a version 2 request trace with a composite key, read by `simulate`.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
});
