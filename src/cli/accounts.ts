/**
 * `sluice accounts`: write one account record (API key -> plan, and optional per-account limits), checked first
 * against the rules by the reader the Worker uses (src/rules/account.ts, so the rule-file validator and its
 * messages), into the local ACCOUNTS namespace that `wrangler dev` reads, and print the command that writes the same
 * record to the deployed namespace. The raw key is only hashed, never written or printed.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readAccount } from "../rules/account.ts";
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { parseYamlValue } from "../rules/yaml.ts";
import { commandArgs, EXIT_CODES, inputError, rulePaths, usageError } from "./args.ts";
import type { Io } from "./io.ts";

const HELP = `Usage: sluice accounts (--key KEY | --key-sha256 HEX) --plan PLAN [--limit RULE.FIELD=VALUE]...
                      [--rules PATH]... [--persist-to DIR] [--dry-run]

Writes one account record into the local ACCOUNTS KV namespace (the one \`npm start\` and \`wrangler dev\` use; with
--persist-to, the one under DIR), and prints the \`wrangler kv key put\` command for the deployed namespace. The
record is stored under the SHA-256 hex of the API key (give the key, or its hash with --key-sha256) as JSON:
  {"plan":"growth","limits":{"growth-global":{"rate":"250/s","burst":500}}}

--limit gives this account its own parameters for a rule, one field per flag, spelled as in a rule file (values
are read as YAML scalars, so 500 is a number and 250/s a rate). A rule overridden must get all the parameters its
algorithm takes (they replace the rule's; the algorithm stays), must be scope: global, counted by api_key, and
apply to the account's plan. Everything is checked against the rules (default: rules/) before anything is
written, with the messages a rule file gets. The record replaces any record the key had. The Worker reads it
within PLAN_CACHE_TTL_MS (default 30 s); the key's state carries over to the new limit as on a redeploy.

  sluice accounts --key sk_acme_live --plan growth --limit growth-global.rate=250/s --limit growth-global.burst=500

--dry-run checks the record and prints it and the command, writing nothing.
${EXIT_CODES}`;

export async function runAccounts(args: string[], io: Io): Promise<number> {
  const cmd = { name: "accounts", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "key", "key-sha256", "plan", "limit", "persist-to"],
    repeated: ["rules", "limit"],
    booleans: ["dry-run"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const key = parsed.values.get("key")?.[0];
  const givenHash = parsed.values.get("key-sha256")?.[0];
  if ((key === undefined) === (givenHash === undefined)) return usageError(cmd, "give --key KEY or --key-sha256 HEX");
  if (givenHash !== undefined && !/^[0-9a-f]{64}$/.test(givenHash)) {
    return usageError(cmd, `--key-sha256 must be 64 lower-case hex digits, got "${givenHash}"`);
  }
  if (key === "") return usageError(cmd, "--key must not be empty");
  const plan = parsed.values.get("plan")?.[0];
  if (plan === undefined) return usageError(cmd, "--plan PLAN is required");
  const limits: Record<string, Record<string, unknown>> = {};
  for (const flag of parsed.values.get("limit") ?? []) {
    const m = /^([A-Za-z0-9_.-]+)\.([a-z_]+)=(.*)$/s.exec(flag);
    if (m === null)
      return usageError(cmd, `--limit must be RULE.FIELD=VALUE, e.g. growth-global.burst=500, got "${flag}"`);
    const [, ruleId, field, text] = m as unknown as [string, string, string, string];
    const value = parseYamlValue(text);
    if ("error" in value) return usageError(cmd, `--limit ${ruleId}.${field}: ${value.error}`);
    limits[ruleId] ??= {};
    limits[ruleId][field] = value.value;
  }

  const loaded = loadRules(rulePaths(parsed));
  if (loaded.errors.length > 0) return inputError(io, loaded.errors);
  const record = Object.keys(limits).length === 0 ? { plan } : { plan, limits };
  const reading = readAccount(record, loaded.rules, "--limit");
  const problems = [
    ...reading.recordErrors.map((m) => m.replace(/^--limit: /, "--plan: ")),
    ...reading.limitErrors.map((m) => m.replace(/^--limit: /, "--limit ")),
  ];
  if (problems.length > 0) return inputError(io, [...problems, "nothing written"]);
  const unnamed = planNamedByNoRule(plan, loaded.rules);
  if (unnamed !== null) io.stderr.write(`warning: ${unnamed}\n`);

  const hash = givenHash ?? createHash("sha256").update(key!).digest("hex");
  const json = JSON.stringify(record);
  io.stdout.write(`account ${hash}: ${json}\n`);
  if (parsed.booleans.has("dry-run")) {
    io.stdout.write("--dry-run: nothing written\n");
  } else {
    const persistTo = parsed.values.get("persist-to")?.[0];
    const written = writeLocal(hash, json, persistTo);
    if (written !== null) return inputError(io, [`could not write the local ACCOUNTS namespace: ${written}`]);
    io.stdout.write(`wrote it into the local ACCOUNTS namespace (${persistTo ?? ".wrangler/state"})\n`);
  }
  io.stdout.write(
    `for the deployed namespace:\n  npx wrangler kv key put --binding ACCOUNTS --remote ${hash} ${shellQuote(json)}\n`,
  );
  return 0;
}

/** A warning when no rule names `plan` (a typo gives the account only the rules that match any plan). */
function planNamedByNoRule(plan: string, rules: readonly ResolvedRule[]): string | null {
  const named = new Set(rules.flatMap((r) => r.match.plans ?? []));
  if (named.has(plan)) return null;
  return `no rule names plan "${plan}" (rules name: ${[...named].sort().join(", ") || "none"}); only rules for any plan apply to it`;
}

/** `wrangler kv key put --local`: `null` when written, else what went wrong. */
function writeLocal(hash: string, json: string, persistTo: string | undefined): string | null {
  const args = ["wrangler", "kv", "key", "put", "--binding", "ACCOUNTS", "--local", hash, json];
  if (persistTo !== undefined) args.push("--persist-to", persistTo);
  const result = spawnSync("npx", args, {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", WRANGLER_HIDE_BANNER: "true" },
  });
  if (result.status === 0) return null;
  return `${result.error?.message ?? ""}${result.stdout ?? ""}${result.stderr ?? ""}`.trim() || `exit ${result.status}`;
}

/** One POSIX shell word. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
