/**
 * Settings: how the Worker runs (bindings and vars), turned into one typed object in one place. Rules say what to
 * limit; settings say where to forward, which plan an unknown caller gets, which header carries the user id.
 * A malformed var falls back to its default with one warning line, so a typo never turns every request into a 500.
 */
import type { SluiceLimiter } from "./limiter.ts";

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
}

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
  /** Overrides every rule's `timeout_ms` when set (slow local or CI machines); `null`: each rule's own. */
  readonly limiterTimeoutMs: number | null;
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
export function parseSettings(env: Omit<Env, "LIMITER" | "ACCOUNTS">): Settings {
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
  const timeout = text("LIMITER_TIMEOUT_MS");
  return {
    upstreamUrl,
    defaultPlan: text("DEFAULT_PLAN") === "" ? "free" : text("DEFAULT_PLAN"),
    userHeader: (text("USER_HEADER") === "" ? "X-User-Id" : text("USER_HEADER")).toLowerCase(),
    ipv6PrefixBits: int("IPV6_PREFIX", 64, 0, 128),
    planCacheTtlMs: int("PLAN_CACHE_TTL_MS", 30_000, 0, 86_400_000),
    limiterTimeoutMs: timeout === "" ? null : int("LIMITER_TIMEOUT_MS", 50, 1, 600_000),
    warnings,
  };
}
