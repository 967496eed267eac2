#!/usr/bin/env node
// Load the demo accounts into the local ACCOUNTS KV namespace that `wrangler dev` uses (offline, no Cloudflare
// account needed). Records are stored the way the Worker reads them: under the SHA-256 hex of the API key, never the
// raw key, as JSON `{ "plan": "..." }`.
//
//   node scripts/seed-accounts.mjs [--persist-to DIR]
//
// `npm start` runs this before `wrangler dev`. For a deployed namespace, put records the same way without --local:
//   npx wrangler kv key put --binding ACCOUNTS --remote "$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)" '{"plan":"growth"}'
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The demo API keys documented in the README. */
export const DEMO_ACCOUNTS = [
  { key: "sk_free_demo", plan: "free" },
  { key: "sk_free_demo_2", plan: "free" },
  { key: "sk_growth_demo", plan: "growth" },
  { key: "sk_scale_demo", plan: "scale" },
];

const sha256Hex = (text) => createHash("sha256").update(text).digest("hex");

const args = process.argv.slice(2);
const persistAt = args.indexOf("--persist-to");
const persistTo = persistAt >= 0 ? args[persistAt + 1] : undefined;
if (persistAt >= 0 && persistTo === undefined) {
  process.stderr.write("seed-accounts: --persist-to needs a directory\n");
  process.exit(2);
}

const WRANGLER_ENV = { ...process.env, WRANGLER_SEND_METRICS: "false", WRANGLER_HIDE_BANNER: "true" };
const local = (args) => {
  const all = ["wrangler", "kv", ...args, "--binding", "ACCOUNTS", "--local"];
  if (persistTo !== undefined) all.push("--persist-to", persistTo);
  const result = spawnSync("npx", all, { encoding: "utf8", env: WRANGLER_ENV });
  if (result.status !== 0) {
    process.stderr.write(result.stdout + result.stderr);
    process.stderr.write("seed-accounts: could not use the local ACCOUNTS namespace\n");
    process.exit(result.status ?? 1);
  }
  return result.stdout;
};

// A demo key that already has a record keeps it: overrides set on it (`sluice accounts --key sk_growth_demo ...`,
// as the README shows) survive a restart. Only missing records are written.
const present = new Set(JSON.parse(local(["key", "list"])).map((k) => k.name));
const missing = DEMO_ACCOUNTS.filter(({ key }) => !present.has(sha256Hex(key)));
const kept = DEMO_ACCOUNTS.filter(({ key }) => present.has(sha256Hex(key)));
if (missing.length > 0) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-seed-"));
  try {
    const file = join(dir, "accounts.json");
    const records = missing.map(({ key, plan }) => ({ key: sha256Hex(key), value: JSON.stringify({ plan }) }));
    writeFileSync(file, JSON.stringify(records));
    local(["bulk", "put", file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const list = (accounts) => accounts.map(({ key, plan }) => `${key} (${plan})`).join(", ");
if (missing.length > 0)
  process.stdout.write(`seeded demo accounts into the local ACCOUNTS namespace: ${list(missing)}\n`);
if (kept.length > 0) {
  process.stdout.write(
    `kept the demo accounts already there, with any overrides: ${kept.map((a) => a.key).join(", ")}\n`,
  );
}
