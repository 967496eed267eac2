/**
 * `npm start`'s helpers: the local admin token (generated into .dev.vars when missing, printed only then, other lines
 * kept) and the demo accounts (seeded when missing; a demo key with a record, overrides included, keeps it).
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain-JavaScript script, without types
import { ensureAdminToken } from "../../scripts/dev-admin-token.mjs";
import { runCli } from "../support/io.ts";

const ensure = ensureAdminToken as (file: string, pageUrl: string) => string;

describe("the local admin token", () => {
  it("is generated into .dev.vars when missing, printed once, then only pointed at; other lines are kept", () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-devvars-"));
    const file = join(dir, ".dev.vars");
    writeFileSync(file, "KEY_HASH_SECRET=abc");
    const first = ensure(file, "http://127.0.0.1:8787/_sluice/");
    const token = /^ADMIN_TOKEN=([0-9a-f]{48})$/m.exec(readFileSync(file, "utf8"))?.[1];
    expect(token).toBeDefined();
    expect(readFileSync(file, "utf8").startsWith("KEY_HASH_SECRET=abc\n")).toBe(true);
    expect(first).toContain(`  ${token}\n`);
    expect(first).toContain("admin page: http://127.0.0.1:8787/_sluice/");
    const second = ensure(file, "http://127.0.0.1:8787/_sluice/");
    expect(second).not.toContain(token!);
    expect(second).toBe(`admin page: http://127.0.0.1:8787/_sluice/ (log in with ADMIN_TOKEN from ${file})\n`);
    expect(readFileSync(file, "utf8").match(/ADMIN_TOKEN=/g)).toHaveLength(1);
    // A file it creates is readable by its owner only.
    const fresh = join(dir, "fresh.vars");
    ensure(fresh, "http://127.0.0.1:8787/_sluice/");
    expect(statSync(fresh).mode & 0o077).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("the demo accounts", () => {
  it("are seeded when missing, and a demo key's override survives the next seeding (a restart)", async () => {
    const persistTo = mkdtempSync(join(tmpdir(), "sluice-seed-test-"));
    const seed = () =>
      spawnSync(process.execPath, ["scripts/seed-accounts.mjs", "--persist-to", persistTo], { encoding: "utf8" });
    const first = seed();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toContain("seeded demo accounts into the local ACCOUNTS namespace: sk_free_demo (free)");
    const args = ["accounts", "--key", "sk_growth_demo", "--plan", "growth", "--persist-to", persistTo];
    const put = await runCli([...args, "--limit", "growth-global.rate=250/s", "--limit", "growth-global.burst=500"]);
    expect(put.code, put.stderr).toBe(0);
    const again = seed();
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toBe(
      "kept the demo accounts already there, with any overrides: sk_free_demo, sk_free_demo_2, sk_growth_demo, sk_scale_demo\n",
    );
    const shown = await runCli(["accounts", "show", "sk_growth_demo", "--persist-to", persistTo]);
    const hash = createHash("sha256").update("sk_growth_demo").digest("hex");
    expect(shown.stdout).toContain(`account ${hash} in the local ACCOUNTS namespace`);
    expect(shown.stdout).toContain("override growth-global: gcra 250/s, burst 500");
    rmSync(persistTo, { recursive: true, force: true });
  }, 240_000);
});
