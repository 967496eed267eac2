/**
 * Settings: how the Worker runs (bindings and vars), turned into one typed object in one place. Rules say what to
 * limit; settings say where to forward, which plan an unknown caller gets, which header carries the user id.
 * A malformed var falls back to its default with one warning line, so a typo never turns every request into a 500.
 */

import type { SluiceLimiter } from "../object/limiter.ts";
import type { PathOptions } from "../request/canonical_path.ts";
import { DEFAULT_TIMEOUT_MS } from "../rules/types.ts";

/** The Worker's bindings and vars, as wrangler.toml declares them. */
export interface Env {
  /** One Durable Object per (rule, key). */
  readonly LIMITER: DurableObjectNamespace<SluiceLimiter>;
  /** Account records: SHA-256 hex of the API key -> JSON `{ "plan": "growth", ... }`. */
  readonly ACCOUNTS: KVNamespace;
  readonly UPSTREAM_URL?: string;
  readonly DEFAULT_PLAN?: string;
  readonly USER_HEADER?: string;
  readonly IPV6_PREFIX?: string;
  readonly PLAN_CACHE_TTL_MS?: string;
  readonly LIMITER_TIMEOUT_MS?: string;
  readonly MAX_KEYS?: string;
  readonly KEY_LOOKUPS_PER_MIN?: string;
  readonly PATH_CASE_SENSITIVE?: string;
  readonly PATH_KEEP_ENCODED_SLASH?: string;
  readonly PATH_KEEP_PARAMS?: string;
  /** Secret (`wrangler secret put ADMIN_TOKEN`): enables /_sluice/. Never in wrangler.toml. */
  readonly ADMIN_TOKEN?: string;
  /** Secret (`wrangler secret put KEY_HASH_SECRET`): when set, keys are HMAC-SHA256'd instead of SHA-256'd. */
  readonly KEY_HASH_SECRET?: string;
  /** Optional Workers Analytics Engine dataset: one data point per decision. */
  readonly METRICS?: AnalyticsEngineDataset;
}

/** The vars and secrets: the string-valued part of `Env`. */
export type Vars = Omit<Env, "LIMITER" | "ACCOUNTS" | "METRICS">;

/** A shorter admin token is refused (the admin surface stays off), so a guessable token never guards it. */
export const MIN_ADMIN_TOKEN_CHARS = 16;

export interface Settings {
  /** Origin admitted requests go to (path and query are appended); `null`: the built-in echo origin answers. */
  readonly upstreamUrl: URL | null;
  /** Plan for anonymous callers and API keys without an account record. Default `free`. */
  readonly defaultPlan: string;
  /** Trusted header carrying the authenticated user id, lower-cased. Default `x-user-id`. */
  readonly userHeader: string;
  /** IPv6 clients share one budget per prefix of this many bits (0..128). Default 64. */
  readonly ipv6PrefixBits: number;
  /** How long an account record (or its absence) is cached in the isolate, ms. Default 30000. */
  readonly planCacheTtlMs: number;
  /** Account lookups (KV reads of keys not cached) one client address may cause per minute, per isolate. Default 30. */
  readonly keyLookupsPerMin: number;
  /**
   * Overrides every rule's `timeout_ms` when set (slow local or CI machines); `null`: each rule's own. A malformed
   * value falls back to `DEFAULT_TIMEOUT_MS` (250), the rules' own default.
   */
  readonly limiterTimeoutMs: number | null;
  /** Keys one `scope: local` rule keeps in this isolate before evicting the least recently used. Default 100000. */
  readonly maxKeys: number;
  /**
   * How request paths are brought to one form before matching (canonical_path.ts). Each relaxation is off by
   * default: `PATH_CASE_SENSITIVE`, `PATH_KEEP_ENCODED_SLASH`, `PATH_KEEP_PARAMS` (`true` or `false`).
   */
  readonly path: PathOptions;
  /** The admin bearer token; `null`: the admin surface answers 404. */
  readonly adminToken: string | null;
  /** HMAC key for key hashes; `null`: plain SHA-256. */
  readonly keyHashSecret: string | null;
  /** Problems found in the vars, reported once per isolate. */
  readonly warnings: readonly string[];
}

const cache = new WeakMap<object, Settings>();

/** The settings for `env`, parsed once per `env` object (once per isolate in practice). */
export function settingsOf(env: Env): Settings {
  const hit = cache.get(env);
  if (hit !== undefined) return hit;
  const settings = parseSettings(env);
  for (const w of settings.warnings) console.warn(JSON.stringify({ event: "settings_warning", message: w }));
  cache.set(env, settings);
  return settings;
}

/** Pure: vars -> settings, with every default filled in and every problem listed. */
export function parseSettings(env: Vars): Settings {
  const warnings: string[] = [];
  const text = (name: keyof typeof env): string => (env[name] ?? "").trim();
  const int = (name: keyof typeof env, fallback: number, min: number, max: number): number => {
    const raw = text(name);
    if (raw === "") return fallback;
    if (/^\d+$/.test(raw)) {
      const n = Number(raw);
      if (n >= min && n <= max) return n;
    }
    warnings.push(`${name}: must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}; using ${fallback}`);
    return fallback;
  };

  let upstreamUrl: URL | null = null;
  const upstream = text("UPSTREAM_URL");
  if (upstream !== "") {
    try {
      const url = new URL(upstream);
      if (url.protocol === "http:" || url.protocol === "https:") upstreamUrl = url;
      else
        warnings.push(`UPSTREAM_URL: must be an http(s) URL, got ${JSON.stringify(upstream)}; using the echo origin`);
    } catch (e) {
      warnings.push(`UPSTREAM_URL: ${String(e)}; using the echo origin`);
    }
  }
  const flag = (name: keyof typeof env): boolean => {
    const raw = text(name).toLowerCase();
    if (raw === "" || raw === "false") return false;
    if (raw === "true") return true;
    warnings.push(`${name}: must be true or false, got ${JSON.stringify(text(name))}; using false`);
    return false;
  };
  const timeout = text("LIMITER_TIMEOUT_MS");
  const adminToken = (env.ADMIN_TOKEN ?? "").trim();
  if (adminToken !== "" && adminToken.length < MIN_ADMIN_TOKEN_CHARS)
    warnings.push(`ADMIN_TOKEN: must be at least ${MIN_ADMIN_TOKEN_CHARS} characters; the admin API stays off`);
  const keyHashSecret = env.KEY_HASH_SECRET ?? "";
  return {
    upstreamUrl,
    defaultPlan: text("DEFAULT_PLAN") === "" ? "free" : text("DEFAULT_PLAN"),
    userHeader: (text("USER_HEADER") === "" ? "X-User-Id" : text("USER_HEADER")).toLowerCase(),
    ipv6PrefixBits: int("IPV6_PREFIX", 64, 0, 128),
    planCacheTtlMs: int("PLAN_CACHE_TTL_MS", 30_000, 0, 86_400_000),
    keyLookupsPerMin: int("KEY_LOOKUPS_PER_MIN", 30, 1, 1_000_000),
    limiterTimeoutMs: timeout === "" ? null : int("LIMITER_TIMEOUT_MS", DEFAULT_TIMEOUT_MS, 1, 600_000),
    maxKeys: int("MAX_KEYS", 100_000, 1, 50_000_000),
    path: {
      caseSensitive: flag("PATH_CASE_SENSITIVE"),
      keepEncodedSlash: flag("PATH_KEEP_ENCODED_SLASH"),
      keepParams: flag("PATH_KEEP_PARAMS"),
    },
    adminToken: adminToken.length >= MIN_ADMIN_TOKEN_CHARS ? adminToken : null,
    keyHashSecret: keyHashSecret === "" ? null : keyHashSecret,
    warnings,
  };
}
