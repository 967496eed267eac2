/**
 * `sluice accounts` (in process, --dry-run: the real write into wrangler dev's local KV is test/e2e/overrides.test.ts):
 * the record it would write, checked against the rules with the rule-file messages, and the production command.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const VERSION = "1796100000000";
/** `--dry-run`, with a fixed record version (the default is the time of the change: its own test below). */
const run = (...args: string[]) => runCli(["accounts", "--dry-run", "--record-version", VERSION, ...args]);

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
    const json = `{"plan":"growth","limits":{"growth-global":{"rate":"250/s","burst":500}},"version":${VERSION}}`;
    expect(r.stdout).toBe(
      `account ${sha("sk_acme_live")}: ${json}\n--dry-run: nothing written\nfor the deployed namespace:\n` +
        `  npx wrangler kv key put --binding ACCOUNTS --remote ${sha("sk_acme_live")} '${json}'\n`,
    );
    expect(r.stdout).not.toContain("sk_acme_live");
  });

  it("stamps every record with the time of the change in ms, so the key's object obeys the newest record", async () => {
    const before = Date.now();
    const r = await runCli(["accounts", "--dry-run", "--key", "sk_acme_live", "--plan", "growth"]);
    const after = Date.now();
    expect(r.code).toBe(0);
    const version = Number(/"version":(\d+)/.exec(r.stdout)?.[1]);
    expect(version).toBeGreaterThanOrEqual(before);
    expect(version).toBeLessThanOrEqual(after);
    const bad = await runCli(["accounts", "--dry-run", "--key", "k", "--plan", "growth", "--record-version", "1.5"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--record-version needs a non-negative integer, got "1.5"');
  });

  it("takes the hash instead of the key, and quotes the JSON for the shell", async () => {
    const hash = sha("x");
    const r = await run("--key-sha256", hash, "--plan", "o'brien", "--allow-unknown-plan");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`--remote ${hash} '{"plan":"o'\\''brien","version":${VERSION}}'`);
    expect(r.stderr).toContain(`warning: no rule names plan "o'brien" (rules name: free, growth, scale)`);
  });

  it("an unknown plan is an error, with the plan it was probably meant to be; nothing is written", async () => {
    const r = await runCli(["accounts", "--key", "sk_growth_demo", "--plan", "growht", "--persist-to", "/nonexistent"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      '--plan: no rule names plan "growht" (rules name: free, growth, scale), so this key would escape every ' +
        'plan-scoped rule; did you mean "growth"? (for a plan whose rules ship later, give --allow-unknown-plan)\n' +
        "nothing written\n",
    );
  });

  it("an override may not make the rule's lease.units larger than the override's capacity", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-accounts-"));
    const rules = join(dir, "lease.yaml");
    writeFileSync(
      rules,
      "- id: g\n  match: { plan: growth, identity: api_key }\n  algorithm: token_bucket\n  rate: 100/s\n" +
        "  burst: 200\n  lease: { units: 50 }\n",
    );
    const small = await run(
      "--rules",
      rules,
      "--key",
      "k",
      "--plan",
      "growth",
      "--limit",
      "g.rate=10/s",
      "--limit",
      "g.burst=20",
    );
    expect(small.code).toBe(1);
    expect(small.stderr).toBe(
      "--limit g.lease.units: must be at most this override's capacity 20 (its burst), got the rule's 50: raise " +
        "burst or lower the rule's lease.units\nnothing written\n",
    );
    const enough = await run(
      "--rules",
      rules,
      "--key",
      "k",
      "--plan",
      "growth",
      "--limit",
      "g.rate=10/s",
      "--limit",
      "g.burst=50",
    );
    expect(enough.code).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it("checks every override with the rule-file messages, writes nothing, exits 2 (an unknown rule id)", async () => {
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
    expect(r.code).toBe(2);
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

  it("a deny rule has no limits to override, and says so", async () => {
    const r = await run("--key", "k", "--plan", "growth", "--limit", "admin-office-only.limit=5");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "--limit admin-office-only: a deny rule: it refuses what its match names and has no limits to set\nnothing written\n",
    );
  });

  it("an override must give every parameter of the rule's algorithm", async () => {
    const r = await run("--key", "k", "--plan", "growth", "--limit", "growth-global.burst=500");
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      '--limit growth-global.rate: required for gcra: "<amount>/<duration>" such as 250/s (or rate_per_s: <count per second>)\nnothing written\n',
    );
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

describe("sluice accounts show and delete (a local namespace of their own, through wrangler)", () => {
  const persistTo = mkdtempSync(join(tmpdir(), "sluice-accounts-kv-"));
  const accounts = (...args: string[]) => runCli(["accounts", ...args, "--persist-to", persistTo]);
  const hash = sha("sk_show_me");

  it("show prints the record as the Worker reads it; delete removes it; both print the remote command", async () => {
    const put = await accounts(
      "--key",
      "sk_show_me",
      "--plan",
      "growth",
      "--limit",
      "growth-global.rate=5/s",
      "--limit",
      "growth-global.burst=7",
      "--record-version",
      "5",
    );
    expect(put.code).toBe(0);
    const shown = await accounts("show", "sk_show_me");
    expect(shown.stderr).toBe("");
    expect(shown.code).toBe(0);
    expect(shown.stdout).toBe(
      `account ${hash} in the local ACCOUNTS namespace (${persistTo}):\n` +
        '  {"plan":"growth","limits":{"growth-global":{"rate":"5/s","burst":7}},"version":5}\n' +
        "  plan: growth\n  override growth-global: gcra 5/s, burst 7\n" +
        `for the deployed namespace:\n  npx wrangler kv key get --binding ACCOUNTS --remote ${hash}\n`,
    );
    expect(shown.stdout).not.toContain("sk_show_me");

    const dry = await accounts("delete", "--key-sha256", hash, "--dry-run");
    expect(dry.stdout).toContain("--dry-run: nothing deleted");

    const deleted = await accounts("delete", "sk_show_me");
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toBe(
      `account ${hash}: deleted from the local ACCOUNTS namespace (${persistTo}) ` +
        '(was {"plan":"growth","limits":{"growth-global":{"rate":"5/s","burst":7}},"version":5})\n' +
        `for the deployed namespace:\n  npx wrangler kv key delete --binding ACCOUNTS --remote ${hash}\n`,
    );
    const gone = await accounts("show", "sk_show_me");
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe(
      `account ${hash}: no record in the local ACCOUNTS namespace (${persistTo}) (the key is on the default plan)\n`,
    );
    expect((await accounts("delete", "sk_show_me")).stdout).toContain("no record");
    rmSync(persistTo, { recursive: true, force: true });
  }, 240_000);

  it.each([
    [["show"], "give KEY or --key-sha256 HEX"],
    [["show", "a", "b"], 'unexpected argument "b"'],
    [["delete", "k", "--plan", "x"], "unknown option --plan"],
  ])("%j: usage error (exit 2)", async (args, message) => {
    const r = await runCli(["accounts", ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`sluice accounts: ${message}`);
  });
});
