/**
 * `sluice accounts` (in process, --dry-run: the real write into wrangler dev's local KV is test/e2e/overrides.test.ts):
 * the record it would write, checked against the rules with the rule-file messages, and the production command.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const run = (...args: string[]) => runCli(["accounts", "--dry-run", ...args]);

describe("sluice accounts", () => {
  it("prints the record under the key's SHA-256 and the wrangler command for production, never the raw key", async () => {
    const r = await run(
      "--key",
      "sk_acme_live",
      "--plan",
      "growth",
      "--limit",
      "growth-global.rate=250/s",
      "--limit",
      "growth-global.burst=500",
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const json = '{"plan":"growth","limits":{"growth-global":{"rate":"250/s","burst":500}}}';
    expect(r.stdout).toBe(
      `account ${sha("sk_acme_live")}: ${json}\n--dry-run: nothing written\nfor the deployed namespace:\n` +
        `  npx wrangler kv key put --binding ACCOUNTS --remote ${sha("sk_acme_live")} '${json}'\n`,
    );
    expect(r.stdout).not.toContain("sk_acme_live");
  });

  it("takes the hash instead of the key, and quotes the JSON for the shell", async () => {
    const hash = sha("x");
    const r = await run("--key-sha256", hash, "--plan", "o'brien");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`--remote ${hash} '{"plan":"o'\\''brien"}'`);
    expect(r.stderr).toContain(`warning: no rule names plan "o'brien" (rules name: free, growth, scale)`);
  });

  it("checks every override with the rule-file messages, writes nothing, exits 1", async () => {
    const r = await run(
      "--key",
      "k",
      "--plan",
      "growth",
      "--limit",
      "growth-global.rate=250/s",
      "--limit",
      "growth-global.burst=lots",
      "--limit",
      "growth-globl.burst=5",
      "--limit",
      "free-global.rate_per_s=100",
      "--limit",
      "login-per-ip.limit=50",
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      [
        '--limit growth-global.burst: must be a positive integer, got "lots"',
        '--limit growth-globl: no such rule is deployed; did you mean "growth-global"?',
        "--limit free-global.limits: the rule applies to plan free, not to this account's plan growth, so the override would never apply",
        "--limit login-per-ip.limits: only scope: global rules counted by api_key take a per-account override; this one is scope: global, identity: ip",
        "nothing written",
        "",
      ].join("\n"),
    );
  });

  it("an override must give every parameter of the rule's algorithm", async () => {
    const r = await run("--key", "k", "--plan", "growth", "--limit", "growth-global.burst=500");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--limit growth-global.rate_per_s: required for gcra (or rate: "<amount>/<duration>")');
  });

  it.each([
    [["--plan", "growth"], "give --key KEY or --key-sha256 HEX"],
    [["--key", "k", "--key-sha256", sha("k"), "--plan", "growth"], "give --key KEY or --key-sha256 HEX"],
    [["--key-sha256", "ABC", "--plan", "growth"], '--key-sha256 must be 64 lower-case hex digits, got "ABC"'],
    [["--key", "k"], "--plan PLAN is required"],
    [["--key", "k", "--plan", "growth", "--limit", "burst=5"], "--limit must be RULE.FIELD=VALUE"],
    [["--key", "k", "--plan", "growth", "--limit", "growth-global.burst=[1"], "--limit growth-global.burst: "],
  ])("%j: usage error (exit 2)", async (args, message) => {
    const r = await run(...args);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`sluice accounts: ${message}`);
  });
});
