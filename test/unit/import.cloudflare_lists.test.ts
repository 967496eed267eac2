/**
 * `sluice import cloudflare --list NAME=FILE` (src/migrate/cloudflare_lists.ts): a custom IP list an expression names
 * (`ip.src in $office`) read from the Lists API's answer, so `ip.src in $office` is `match.address` and its `not`
 * `match.except_address`; without the file the rule is left out, saying which flag gives it.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importCloudflare } from "../../src/migrate/cloudflare_import.ts";
import { readCloudflareList } from "../../src/migrate/cloudflare_lists.ts";
import { runCli } from "../support/io.ts";

const rule = (expression: string) =>
  JSON.stringify({
    rules: [
      {
        action: "block",
        expression,
        description: "r",
        enabled: true,
        ratelimit: { characteristics: ["ip.src", "cf.colo.id"], period: 60, requests_per_period: 100 },
      },
    ],
  });
const office = new Map([["office", ["203.0.113.0/28", "2001:db8:1::/48"]]]);

describe("Cloudflare IP lists", () => {
  it.each([
    ["not ip.src in $office", [undefined, ["203.0.113.0/28", "2001:db8:1::/48"]]],
    ["ip.src in $office", [["203.0.113.0/28", "2001:db8:1::/48"], undefined]],
    ['http.request.uri.path eq "/login" and not ip.src in $office', [undefined, ["203.0.113.0/28", "2001:db8:1::/48"]]],
  ])("%s", (expression, expected) => {
    const r = importCloudflare(rule(expression), "rules.json", office);
    expect(r.rules.map((x) => [x.match.address, x.match.except_address])).toEqual([expected]);
  });

  it("a list the import was not given leaves the rule out, naming the flag", () => {
    const r = importCloudflare(rule("not ip.src in $partners"), "rules.json", office);
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => i.message).join("\n")).toContain("give them with --list partners=FILE");
  });

  it.each([
    ['{"result": [{"ip": "203.0.113.0/28", "comment": "office"}]}', ["203.0.113.0/28"]],
    ['[{"ip": "2001:db8::/32"}]', ["2001:db8::/32"]],
  ])("reads the Lists API's items: %s", (text, items) => {
    expect(readCloudflareList(text, "l.json")).toEqual(items);
  });

  it.each([
    ['{"result": [{"hostname": {"url_hostname": "a.com"}}]}', /l.json:1:13: result\[0\]: .*got an item without "ip"/],
    ['{"result": {}}', /expected a list's items/],
  ])("refuses what is not an IP list's items, with where: %s", (text, message) => {
    expect(() => readCloudflareList(text, "l.json")).toThrow(message);
  });

  it("through the command line: --list NAME=FILE, only for cloudflare", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-cf-list-"));
    writeFileSync(join(dir, "rules.json"), rule("not ip.src in $office"));
    writeFileSync(join(dir, "office.json"), '{"result": [{"ip": "203.0.113.0/28"}]}');
    const out = join(dir, "out.yaml");
    const r = await runCli([
      "import",
      "cloudflare",
      join(dir, "rules.json"),
      "--list",
      `office=${join(dir, "office.json")}`,
      "--out",
      out,
    ]);
    expect(r.code).toBe(0);
    expect(readFileSync(out, "utf8")).toContain('except_address: ["203.0.113.0/28"]');
    expect((await runCli(["import", "cloudflare", join(dir, "rules.json"), "--list", "office"])).code).toBe(2);
    expect((await runCli(["import", "aws-waf", join(dir, "rules.json"), "--list", "a=b"])).code).toBe(2);
  });
});
