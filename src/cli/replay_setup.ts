/**
 * What a request replay needs besides the rules, from the command line and the project: the Worker's settings as
 * `wrangler.toml`'s `[vars]` give them (default plan, IPv6 prefix, path options; defaults when there is no such
 * file), and the accounts file given with `--accounts`.
 */
import { existsSync, readFileSync } from "node:fs";
import { parseSettings, type Vars } from "../edge/settings.ts";
import { readAccountsFile } from "../replay/accounts.ts";
import type { ReplayOptions } from "../replay/engine.ts";
import { compileRules } from "../request/match.ts";
import type { ResolvedRule } from "../rules/types.ts";

/** `NAME = "value"` lines of the `[vars]` table of a wrangler.toml. */
export function wranglerVars(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  let inVars = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("[")) inVars = line === "[vars]";
    else if (inVars) {
      const m = /^([A-Z0-9_]+)\s*=\s*"([^"]*)"/.exec(line);
      if (m !== null) vars[m[1]!] = m[2]!;
    }
  }
  return vars;
}

/** The replay's options, or the messages of a bad accounts file. */
export function replayOptions(
  rules: readonly ResolvedRule[],
  accountsPath: string | undefined,
  wranglerToml = "wrangler.toml",
): { options: ReplayOptions } | { errors: string[] } {
  const vars = existsSync(wranglerToml) ? wranglerVars(readFileSync(wranglerToml, "utf8")) : {};
  const settings = parseSettings(vars as Vars);
  if (accountsPath === undefined) return { options: { settings, accounts: null } };
  let text: string;
  try {
    text = readFileSync(accountsPath, "utf8");
  } catch (err) {
    return {
      errors: [`${accountsPath}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`],
    };
  }
  const read = readAccountsFile(text, accountsPath, compileRules(rules));
  return "errors" in read ? read : { options: { settings, accounts: read.accounts } };
}
