/**
 * `sluice accounts`: write one account record (API key -> plan, and optional per-account limits), checked first
 * against the rules by the reader the Worker uses (src/rules/account.ts, so the rule-file validator and its
 * messages), into the local ACCOUNTS namespace that `wrangler dev` reads, and print the command that writes the same
 * record to the deployed namespace. `accounts show KEY` and `accounts delete KEY` read and remove one record the same
 * way. The raw key is only hashed, never written or printed.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { systemClock } from "../isolate/time.ts";
import { describeRule } from "../replay/run.ts";
import { readAccount } from "../rules/account.ts";
import { closest } from "../rules/closest.ts";
import { loadRules } from "../rules/load.ts";
import { notAParameterOf } from "../rules/params.ts";
import type { AlgorithmParams, DenyRule, ResolvedRule } from "../rules/types.ts";
import { parseYamlValue } from "../rules/yaml.ts";
import { type CommandInfo, commandArgs, EXIT_CODES, inputError, rulePaths, usageError } from "./args.ts";
import type { Io } from "./io.ts";

const HELP = `Usage: sluice accounts (--key KEY | --key-sha256 HEX) --plan PLAN [--limit RULE.FIELD=VALUE]...
                      [--rules PATH]... [--persist-to DIR] [--dry-run] [--allow-unknown-plan] [--record-version N]

  sluice accounts show (KEY | --key-sha256 HEX) [--rules PATH]... [--persist-to DIR]
  sluice accounts delete (KEY | --key-sha256 HEX) [--persist-to DIR] [--dry-run]

Writes one account record into the local ACCOUNTS KV namespace (the one \`npm start\` and \`wrangler dev\` use; with
--persist-to, the one under DIR), and prints the \`wrangler kv key put\` command for the deployed namespace. The
record is stored under the SHA-256 hex of the API key (give the key, or its hash with --key-sha256) as JSON:
  {"plan":"growth","limits":{"growth-global":{"rate":"250/s","burst":500}},"version":1796100000000}

--limit gives this account its own parameters for a rule, one field per flag, spelled as in a rule file (values
are read as YAML scalars, so 500 is a number and 250/s a rate). A rule overridden must get all the parameters its
algorithm takes (they replace the rule's; the algorithm stays), must be scope: global, counted by api_key, and
apply to the account's plan. Everything is checked against the rules (default: rules/) before anything is
written, with the messages a rule file gets. The record replaces any record the key had. The Worker reads it
within PLAN_CACHE_TTL_MS (default 30 s); the key's state carries over to the new limit as on a redeploy.
Every record carries a "version", the time of the change in ms (--record-version N to give one): the key's
Durable Object obeys the newest record it has seen, while isolates may still cache the old one.

  sluice accounts --key sk_acme_live --plan growth --limit growth-global.rate=250/s --limit growth-global.burst=500

--plan must be a plan some rule names (match.plan): an account on a plan no rule names would escape every
plan-scoped rule. --allow-unknown-plan writes it anyway (for a plan whose rules ship later).
--dry-run checks the record and prints it and the command, writing nothing.

show prints the key's record from the local namespace, checked against the rules as the Worker reads it, and the
command that reads it from the deployed one; exit 1 when the key has no record. delete removes the key's record
(the key is then on the default plan, counted by its address) and prints the command for the deployed namespace.
${EXIT_CODES}`;

/** What is wrong with the record `accounts` would write, in the command's own flag names. */
function recordProblems(
  record: unknown,
  rules: readonly ResolvedRule[],
  unknown: ReadonlyMap<string, string | null>,
): string[] {
  const reading = readAccount(record, rules, "--limit");
  return [
    ...reading.recordErrors.map((m) => m.replace(/^--limit: /, "--plan: ")),
    ...reading.limitErrors.map((m) => {
      const ruleId = /^--limit: (.*?): no such rule is deployed/.exec(m)?.[1];
      return (ruleId === undefined ? undefined : unknown.get(ruleId)) ?? m.replace(/^--limit: /, "--limit ");
    }),
  ];
}

export async function runAccounts(args: string[], io: Io): Promise<number> {
  const cmd = { name: "accounts", help: HELP, stdout: io.stdout, stderr: io.stderr };
  if (args[0] === "show" || args[0] === "delete") return runOne(args[0], args.slice(1), cmd, io);
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "key", "key-sha256", "plan", "limit", "persist-to", "record-version"],
    repeated: ["rules", "limit"],
    booleans: ["dry-run", "allow-unknown-plan"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const hashOrExit = keyHashOf(cmd, parsed.values.get("key")?.[0], parsed.values.get("key-sha256")?.[0], "--key KEY");
  if (typeof hashOrExit === "number") return hashOrExit;
  const hash = hashOrExit.hash;
  const plan = parsed.values.get("plan")?.[0];
  if (plan === undefined) return usageError(cmd, "--plan PLAN is required");
  const limits = limitsOf(cmd, parsed.values.get("limit") ?? []);
  if (typeof limits === "number") return limits;

  const loaded = loadRules(rulePaths(parsed));
  if (loaded.errors.length > 0) return inputError(io, loaded.errors);
  const version = recordVersionOf(parsed.values.get("record-version")?.[0], systemClock());
  if (typeof version === "string") return usageError(cmd, version);
  const record = Object.keys(limits).length === 0 ? { plan, version } : { plan, limits, version };
  const unknown = unknownLimitRules(limits, loaded.rules, loaded.denies);
  const problems = recordProblems(record, loaded.rules, unknown);
  // An unknown rule id is a usage error (exit 2), as for every command; the other problems are reported with it.
  if (problems.length > 0) return inputError(io, [...problems, "nothing written"], unknown.size > 0 ? 2 : 1);
  const unnamed = planNamedByNoRule(plan, loaded.rules);
  if (unnamed !== null) {
    if (!parsed.booleans.has("allow-unknown-plan")) {
      const guess = closest(plan, [...new Set(loaded.rules.flatMap((r) => r.match.plans ?? []))]);
      return inputError(io, [
        `--plan: ${unnamed}, so this key would escape every plan-scoped rule` +
          `${guess === null ? "" : `; did you mean "${guess}"?`} (for a plan whose rules ship later, give ` +
          "--allow-unknown-plan)",
        "nothing written",
      ]);
    }
    io.stderr.write(`warning: ${unnamed}; only rules for any plan apply to it\n`);
  }

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

/**
 * The record's own rules version: `--record-version N` when given, else the time of the change in ms. Every record
 * written carries one, so the key's Durable Object obeys the newest record (an override given, changed or taken
 * away) over the older one an isolate may still cache (src/isolate/account_cache.ts).
 */
export function recordVersionOf(given: string | undefined, nowMs: number): number | string {
  if (given === undefined) return nowMs;
  const n = Number(given);
  return /^\d+$/.test(given) && Number.isSafeInteger(n)
    ? n
    : `--record-version needs a non-negative integer, got ${JSON.stringify(given)}`;
}

/** The `--limit RULE.FIELD=VALUE` flags as a record's `limits`, or a usage error's exit status. */
function limitsOf(cmd: CommandInfo, flags: readonly string[]): Record<string, Record<string, unknown>> | number {
  const limits: Record<string, Record<string, unknown>> = {};
  for (const flag of flags) {
    const m = /^([A-Za-z0-9_.-]+)\.([a-z_]+)=(.*)$/s.exec(flag);
    if (m === null)
      return usageError(cmd, `--limit must be RULE.FIELD=VALUE, e.g. growth-global.burst=500, got "${flag}"`);
    const [, ruleId, field, text] = m as unknown as [string, string, string, string];
    const value = parseYamlValue(text);
    if ("error" in value) return usageError(cmd, `--limit ${ruleId}.${field}: ${value.error}`);
    limits[ruleId] ??= {};
    limits[ruleId][field] = value.value;
  }
  return limits;
}

/**
 * The `--limit` rule ids that name no rule, each with what to say when it is not a plain typo: `growth-global.lease.
 * units=5` reads as rule "growth-global.lease" (ids may hold dots), field "units", but means a nested field of
 * growth-global, which a per-account override cannot set. (`null`: readAccount's "no such rule" message says it.)
 */
function unknownLimitRules(
  limits: Record<string, Record<string, unknown>>,
  rules: readonly ResolvedRule[],
  denies: readonly DenyRule[] = [],
): Map<string, string | null> {
  const unknown = new Map<string, string | null>();
  for (const [ruleId, fields] of Object.entries(limits)) {
    if (rules.some((r) => r.id === ruleId)) continue;
    if (denies.some((r) => r.id === ruleId)) {
      unknown.set(ruleId, `--limit ${ruleId}: a deny rule: it refuses what its match names and has no limits to set`);
      continue;
    }
    const owner = rules.find((r) => ruleId.startsWith(`${r.id}.`));
    if (owner === undefined) {
      unknown.set(ruleId, null);
      continue;
    }
    const field = `${ruleId.slice(owner.id.length + 1)}.${Object.keys(fields)[0]}`;
    unknown.set(
      ruleId,
      `--limit ${owner.id}.${field}: "${field}" is ${notAParameterOf(owner.algorithm)}; --limit RULE.FIELD sets ` +
        "one of the rule's algorithm parameters for this account",
    );
  }
  return unknown;
}

/** What is wrong when no rule names `plan` (a typo gives the account only the rules that match any plan). */
function planNamedByNoRule(plan: string, rules: readonly ResolvedRule[]): string | null {
  const named = new Set(rules.flatMap((r) => r.match.plans ?? []));
  if (named.has(plan)) return null;
  return `no rule names plan "${plan}" (rules name: ${[...named].sort().join(", ") || "none"})`;
}

/**
 * The key's SHA-256 hex from the raw key or the hash given, or a usage error's exit status. `keyName` is how the
 * raw key is given (`--key KEY`, or the positional `KEY` of show and delete).
 */
function keyHashOf(
  cmd: CommandInfo,
  key: string | undefined,
  givenHash: string | undefined,
  keyName: string,
): { readonly hash: string } | number {
  if ((key === undefined) === (givenHash === undefined)) return usageError(cmd, `give ${keyName} or --key-sha256 HEX`);
  if (givenHash !== undefined && !/^[0-9a-f]{64}$/.test(givenHash)) {
    return usageError(cmd, `--key-sha256 must be 64 lower-case hex digits, got "${givenHash}"`);
  }
  if (key === "") return usageError(cmd, `${keyName.split(" ")[0]} must not be empty`);
  return { hash: givenHash ?? createHash("sha256").update(key!).digest("hex") };
}

/** `accounts show KEY` and `accounts delete KEY`. */
function runOne(action: "show" | "delete", args: string[], cmd: CommandInfo, io: Io): number {
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "key-sha256", "persist-to"],
    repeated: ["rules"],
    booleans: action === "delete" ? ["dry-run"] : [],
    positionals: true,
  });
  if (typeof parsed === "number") return parsed;
  if (parsed.positionals.length > 1) return usageError(cmd, `unexpected argument "${parsed.positionals[1]}"`);
  const hashOrExit = keyHashOf(cmd, parsed.positionals[0], parsed.values.get("key-sha256")?.[0], "KEY");
  if (typeof hashOrExit === "number") return hashOrExit;
  const { hash } = hashOrExit;
  const persistTo = parsed.values.get("persist-to")?.[0];
  const where = `the local ACCOUNTS namespace (${persistTo ?? ".wrangler/state"})`;
  if (action === "show") {
    const loaded = loadRules(rulePaths(parsed));
    if (loaded.errors.length > 0) return inputError(io, loaded.errors);
    const got = localKv(["get", hash], persistTo);
    if ("error" in got) return inputError(io, [`could not read ${where}: ${got.error}`]);
    const remote = `for the deployed namespace:\n  npx wrangler kv key get --binding ACCOUNTS --remote ${hash}\n`;
    if (got.output === KV_NOT_FOUND) {
      io.stdout.write(remote);
      return inputError(io, [`account ${hash}: no record in ${where} (the key is on the default plan)`]);
    }
    io.stdout.write(`account ${hash} in ${where}:\n  ${got.output}\n`);
    const status = describeRecord(got.output, loaded.rules, io);
    io.stdout.write(remote);
    return status;
  }
  const dryRun = parsed.booleans.has("dry-run");
  if (!dryRun) {
    const got = localKv(["get", hash], persistTo);
    if ("error" in got) return inputError(io, [`could not read ${where}: ${got.error}`]);
    if (got.output === KV_NOT_FOUND) {
      io.stdout.write(`account ${hash}: no record in ${where}, nothing to delete\n`);
    } else {
      const deleted = localKv(["delete", hash], persistTo);
      if ("error" in deleted) return inputError(io, [`could not write ${where}: ${deleted.error}`]);
      io.stdout.write(`account ${hash}: deleted from ${where} (was ${got.output})\n`);
    }
  } else {
    io.stdout.write(`account ${hash}: --dry-run: nothing deleted\n`);
  }
  io.stdout.write(`for the deployed namespace:\n  npx wrangler kv key delete --binding ACCOUNTS --remote ${hash}\n`);
  return 0;
}

/** What the Worker makes of a stored record: its plan and overrides, or the problems it logs (exit 1 if any). */
function describeRecord(text: string, rules: readonly ResolvedRule[], io: Io): number {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return inputError(io, [`the record is not JSON (${(error as Error).message}): the Worker uses the default plan`]);
  }
  const reading = readAccount(value, rules, "record");
  const { plan, limits } = reading.account;
  const lines = [`  plan: ${plan ?? "(none valid: the default plan applies)"}`];
  const unnamed = plan === null ? null : planNamedByNoRule(plan, rules);
  if (unnamed !== null) lines.push(`  warning: ${unnamed}; only rules for any plan apply to it`);
  for (const [ruleId, params] of limits) lines.push(`  override ${ruleId}: ${describeParams(params)}`);
  if (limits.size === 0) lines.push("  overrides: none (every rule's own limits apply)");
  io.stdout.write(`${lines.join("\n")}\n`);
  const problems = [...reading.recordErrors, ...reading.limitErrors];
  if (problems.length === 0) return 0;
  return inputError(io, [...problems, "the Worker logs these and uses the rule's own limits (or the default plan)"]);
}

/** An override's parameters in rule-file words: `rate 250/s, burst 500`. */
function describeParams(params: AlgorithmParams): string {
  return describeRule(params as ResolvedRule);
}

/** What `wrangler kv key get` prints for a key that has no value. */
const KV_NOT_FOUND = "Value not found";

/** `wrangler kv key <args> --local` on the ACCOUNTS binding: its standard output, or what went wrong. */
function localKv(
  args: string[],
  persistTo: string | undefined,
): { readonly output: string } | { readonly error: string } {
  const all = ["wrangler", "kv", "key", ...args, "--binding", "ACCOUNTS", "--local"];
  if (persistTo !== undefined) all.push("--persist-to", persistTo);
  const result = spawnSync("npx", all, {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", WRANGLER_HIDE_BANNER: "true" },
  });
  if (result.status === 0) return { output: (result.stdout ?? "").trim() };
  const why = `${result.error?.message ?? ""}${result.stdout ?? ""}${result.stderr ?? ""}`.trim();
  return { error: why || `exit ${result.status}` };
}

/** `wrangler kv key put --local`: `null` when written, else what went wrong. */
function writeLocal(hash: string, json: string, persistTo: string | undefined): string | null {
  const result = localKv(["put", hash, json], persistTo);
  return "error" in result ? result.error : null;
}

/** One POSIX shell word. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
