/**
 * An accounts file for replays: the account records the gateway would read from KV, so a replay knows each API key's
 * plan and per-account limits. Either a JSON object of key -> record, or the `wrangler kv bulk` list
 * `[{"key": ..., "value": ...}]` (a value may be the record or its JSON text). A key is the SHA-256 hex of the API
 * key, as in KV, or the API key itself. Records are read by the gateway's reader (src/rules/account.ts), with its
 * messages; a file with a bad record is refused rather than replayed differently from what the gateway would do.
 */
import { createHash } from "node:crypto";
import type { Account } from "../isolate/account_cache.ts";
import { type CompiledRule, compileOverride } from "../request/match.ts";
import { readAccount } from "../rules/account.ts";

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function readAccountsFile(
  text: string,
  name: string,
  rules: readonly CompiledRule[],
): { accounts: Map<string, Account> } | { errors: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { errors: [`${name}: not JSON: ${(err as Error).message}`] };
  }
  const entries = entriesOf(value);
  if ("error" in entries) return { errors: [`${name}: ${entries.error}`] };
  const accounts = new Map<string, Account>();
  const errors: string[] = [];
  for (const [key, raw] of entries) {
    const hash = SHA256_HEX.test(key) ? key : createHash("sha256").update(key).digest("hex");
    let record: unknown = raw;
    if (typeof raw === "string") {
      try {
        record = JSON.parse(raw);
      } catch (err) {
        errors.push(`${name}: ${hash}: the value is not JSON: ${(err as Error).message}`);
        continue;
      }
    }
    const reading = readAccount(
      record,
      rules.map((c) => c.rule),
      `${name}: ${hash}`,
    );
    errors.push(...reading.recordErrors, ...reading.limitErrors);
    if (reading.account.plan === null) continue;
    const overrides = new Map<string, CompiledRule>();
    for (const [ruleId, params] of reading.account.limits) {
      const compiled = rules.find((c) => c.rule.id === ruleId);
      if (compiled !== undefined) overrides.set(ruleId, compileOverride(compiled, params));
    }
    accounts.set(hash, { plan: reading.account.plan, overrides });
  }
  return errors.length > 0 ? { errors } : { accounts };
}

function entriesOf(value: unknown): [string, unknown][] | { error: string } {
  if (Array.isArray(value)) {
    const out: [string, unknown][] = [];
    for (const [i, item] of value.entries()) {
      const entry = item as { key?: unknown; value?: unknown } | null;
      if (typeof entry !== "object" || entry === null || typeof entry.key !== "string") {
        return { error: `entry ${i}: expected {"key": ..., "value": ...}` };
      }
      out.push([entry.key, entry.value]);
    }
    return out;
  }
  if (typeof value === "object" && value !== null) return Object.entries(value);
  return { error: 'expected an object of key -> record, or a list of {"key": ..., "value": ...}' };
}
