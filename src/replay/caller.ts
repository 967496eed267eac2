/**
 * Who a replayed request is, as the gateway's "who is calling" step decides it (src/edge/caller.ts), from a trace
 * line instead of headers: the identities through the gateway's own readers (identity.ts), the account by the SHA-256
 * of the API key, and a caller without a verified key on the default plan, counted by its address. The key "hashes"
 * are the identity values themselves: a replay names no object, so nothing is hashed but the account lookup.
 */
import { createHash } from "node:crypto";
import type { Account } from "../isolate/account_cache.ts";
import type { AmbiguousPaths, PathOptions } from "../request/canonical_path.ts";
import { identityKey } from "../request/identity.ts";
import type { CompiledRule, RequestFacts } from "../request/match.ts";
import type { UpstreamProfile } from "../request/upstream_profile.ts";
import type { DenyRule, Identity } from "../rules/types.ts";
import type { RequestLine } from "./request_trace.ts";

/** What a request replay needs beyond the rules. */
export interface ReplayOptions {
  /** The deny rules (src/rules/deny.ts), which refuse a request before any rule is asked. Default none. */
  readonly denies?: readonly DenyRule[];
  /** The Worker's settings a replay reads (src/edge/settings.ts has them all). */
  readonly settings: {
    readonly defaultPlan: string;
    readonly ipv6PrefixBits: number;
    readonly path: PathOptions;
    readonly ambiguousPaths: AmbiguousPaths;
    readonly upstreamProfile: UpstreamProfile;
  };
  /**
   * Account records by the SHA-256 hex of the API key. `null`: no accounts file, and every API key in the trace is
   * taken as verified on the default plan.
   */
  readonly accounts: ReadonlyMap<string, Account> | null;
}

export interface Caller {
  readonly facts: Pick<RequestFacts, "plan" | "keyHashes" | "unverified" | "overrides">;
  /** Rule ids with this account's own parameters. */
  readonly overridden: ReadonlySet<string>;
  /** Who the request is in reports: the API key, else the user, else the address. */
  readonly reportKey: string | null;
}

const NO_OVERRIDES: ReadonlyMap<string, CompiledRule> = new Map();
const NO_IDS: ReadonlySet<string> = new Set();
const HASHED = "sha256:";

export function callerOf(line: RequestLine, options: ReplayOptions): Caller {
  const { settings, accounts } = options;
  const id = (identity: Identity, raw: string | null) =>
    raw === null ? null : identityKey(identity, raw, { userHeader: "", ipv6PrefixBits: settings.ipv6PrefixBits });
  const hashed = line.key?.startsWith(HASHED) === true;
  const apiKey = hashed ? line.key : id("api_key", line.key);
  const ip = id("ip", line.address);
  const user = id("user", line.user);
  const reportKey = apiKey ?? user ?? ip;
  const account = accountOf(apiKey, hashed, accounts, settings.defaultPlan);
  if (account !== null) {
    return {
      facts: {
        plan: account.plan,
        keyHashes: { api_key: apiKey, ip, user },
        unverified: null,
        overrides: account.overrides,
      },
      overridden: account.overrides.size === 0 ? NO_IDS : new Set(account.overrides.keys()),
      reportKey,
    };
  }
  return {
    facts: {
      plan: settings.defaultPlan,
      keyHashes: { api_key: null, ip, user },
      unverified: { keyHash: ip === null ? null : `unverified:${ip}` },
      overrides: NO_OVERRIDES,
    },
    overridden: NO_IDS,
    reportKey,
  };
}

/** The key's account; without an accounts file, every key is verified on the default plan. */
function accountOf(
  apiKey: string | null,
  hashed: boolean,
  accounts: ReadonlyMap<string, Account> | null,
  defaultPlan: string,
): Account | null {
  if (apiKey === null) return null;
  if (accounts === null) return { plan: defaultPlan, overrides: NO_OVERRIDES };
  const hash = hashed ? apiKey.slice(HASHED.length) : createHash("sha256").update(apiKey).digest("hex");
  return accounts.get(hash) ?? null;
}
