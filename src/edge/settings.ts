/**
 * Settings: how the Worker runs (bindings and vars), turned into one typed object in one place. Rules say what to
 * limit; settings say where to forward, which plan an unknown caller gets, which header carries the user id.
 * A malformed var falls back to its default with one warning line, so a typo never turns every request into a 500.
 */

import type { SluiceDelegate } from "../object/delegate.ts";
import type { SluiceLimiter } from "../object/limiter.ts";
import type { AmbiguousPaths, PathOptions } from "../request/canonical_path.ts";
import { UPSTREAM_PROFILES, type UpstreamProfile } from "../request/upstream_profile.ts";
import { DEFAULT_TIMEOUT_MS } from "../rules/types.ts";

/** The Worker's bindings and vars, as wrangler.toml declares them. */
export interface Env {
  /** One Durable Object per (rule, key). */
  readonly LIMITER: DurableObjectNamespace<SluiceLimiter>;
  /** One delegate per (rule, hot key, region) (src/object/delegate.ts); absent: hot keys stay with their object. */
  readonly DELEGATE?: DurableObjectNamespace<SluiceDelegate>;
  /** Account records: SHA-256 hex of the API key -> JSON `{ "plan": "growth", ... }`. */
  readonly ACCOUNTS: KVNamespace;
  readonly UPSTREAM_URL?: string;
  readonly PASS_THROUGH?: string;
  readonly ECHO_ORIGIN?: string;
  readonly DEFAULT_PLAN?: string;
  readonly USER_HEADER?: string;
  readonly IPV6_PREFIX?: string;
  readonly API_KEY_QUERY?: string;
  readonly PLAN_CACHE_TTL_MS?: string;
  readonly LIMITER_TIMEOUT_MS?: string;
  readonly MAX_KEYS?: string;
  readonly KEY_LOOKUPS_PER_MIN?: string;
  readonly PATH_CASE_SENSITIVE?: string;
  readonly PATH_KEEP_ENCODED_SLASH?: string;
  readonly PATH_KEEP_PARAMS?: string;
  readonly PATH_AMBIGUOUS?: string;
  readonly UPSTREAM_PROFILE?: string;
  /** Secret (`wrangler secret put ADMIN_TOKEN`): enables /_sluice/. Never in wrangler.toml. */
  readonly ADMIN_TOKEN?: string;
  /** Secret (`wrangler secret put KEY_HASH_SECRET`): when set, keys are HMAC-SHA256'd instead of SHA-256'd. */
  readonly KEY_HASH_SECRET?: string;
  /** Optional Workers Analytics Engine dataset: one data point per decision. */
  readonly METRICS?: AnalyticsEngineDataset;
  /** The fleet view (admin/fleet.ts): the Cloudflare account whose Analytics Engine holds METRICS' points. */
  readonly AE_ACCOUNT_ID?: string;
  /** The fleet view: the dataset METRICS writes to. Default `sluice_decisions`. */
  readonly AE_DATASET?: string;
  /** Secret (`wrangler secret put AE_API_TOKEN`): an API token with Account Analytics: Read, for the fleet view. */
  readonly AE_API_TOKEN?: string;
  /** The fleet view: the Cloudflare API's base URL. Default `https://api.cloudflare.com/client/v4`. */
  readonly AE_API_BASE?: string;
}

/** The vars and secrets: the string-valued part of `Env`. */
export type Vars = Omit<Env, "LIMITER" | "DELEGATE" | "ACCOUNTS" | "METRICS">;

/** A shorter admin token is refused (the admin surface stays off), so a guessable token never guards it. */
export const MIN_ADMIN_TOKEN_CHARS = 16;

/**
 * Where admitted requests go. Exactly one is chosen, never by accident: `UPSTREAM_URL` (Sluice as a proxy in front
 * of that origin), `PASS_THROUGH = "true"` (Sluice on a zone route: the request goes on to the zone's own origin),
 * or, only when neither is set, `ECHO_ORIGIN = "true"` (the built-in echo origin, for local development: `npm start`
 * sets it). With none of them, or a bad or ambiguous value, the gateway answers every request with a 500 that says
 * what to set (`none`); the admin API and the service binding still work.
 */
export type Origin =
  | { readonly kind: "upstream"; readonly url: URL }
  | { readonly kind: "pass_through" }
  | { readonly kind: "echo" }
  | { readonly kind: "none"; readonly problem: string };

export interface Settings {
  /** Where admitted requests go (see `Origin`). */
  readonly origin: Origin;
  /** Plan for anonymous callers and API keys without an account record. Default `free`. */
  readonly defaultPlan: string;
  /** Trusted header carrying the authenticated user id, lower-cased. Default `x-user-id`. */
  readonly userHeader: string;
  /** IPv6 clients share one budget per prefix of this many bits (0..128). Default 64. */
  readonly ipv6PrefixBits: number;
  /** Query parameters that carry an API key (identity.ts), `API_KEY_QUERY` comma-separated; `none` for none. Default `api_key`. */
  readonly apiKeyQuery: readonly string[];
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
  /**
   * A path holding an encoded separator (`%2F`, `%5C`): `refuse` it with 400 (default), or `forward` the path as
   * matched (canonical_path.ts). `PATH_AMBIGUOUS`.
   */
  readonly ambiguousPaths: AmbiguousPaths;
  /** The upstream's router, for its own equivalences (upstream_profile.ts). `UPSTREAM_PROFILE`, default `any`. */
  readonly upstreamProfile: UpstreamProfile;
  /** The admin bearer token; `null`: the admin surface answers 404. */
  readonly adminToken: string | null;
  /** HMAC key for key hashes; `null`: plain SHA-256. */
  readonly keyHashSecret: string | null;
  /** The fleet view's Analytics Engine SQL API; `null` (off) unless both `AE_ACCOUNT_ID` and `AE_API_TOKEN` are set. */
  readonly fleet: FleetSettings | null;
  /** Problems found in the vars, reported once per isolate. */
  readonly warnings: readonly string[];
}

/** Where the fleet view reads Analytics Engine. */
export interface FleetSettings {
  readonly accountId: string;
  readonly dataset: string;
  readonly apiToken: string;
  /** No trailing slash. */
  readonly apiBase: string;
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

/** How paths are read and which upstream router they go to: the settings of canonical_path.ts and request_shape.ts. */
function routingSettings(
  text: (name: keyof Vars) => string,
  warnings: string[],
): Pick<Settings, "path" | "ambiguousPaths" | "upstreamProfile"> {
  const flag = (name: keyof Vars): boolean => {
    const raw = text(name).toLowerCase();
    if (raw === "" || raw === "false") return false;
    if (raw === "true") return true;
    warnings.push(`${name}: must be true or false, got ${JSON.stringify(text(name))}; using false`);
    return false;
  };
  const choice = <T extends string>(name: keyof Vars, allowed: readonly T[], fallback: T): T => {
    const raw = text(name).toLowerCase();
    if (raw === "") return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    warnings.push(
      `${name}: must be one of ${allowed.join(", ")}, got ${JSON.stringify(text(name))}; using ${fallback}`,
    );
    return fallback;
  };
  const upstreamProfile = choice("UPSTREAM_PROFILE", UPSTREAM_PROFILES, "any");
  const ambiguousPaths = choice<AmbiguousPaths>("PATH_AMBIGUOUS", ["refuse", "forward"], "refuse");
  const path = {
    caseSensitive: flag("PATH_CASE_SENSITIVE"),
    keepEncodedSlash: flag("PATH_KEEP_ENCODED_SLASH"),
    keepParams: flag("PATH_KEEP_PARAMS"),
  };
  if (path.keepEncodedSlash && (upstreamProfile === "nginx" || upstreamProfile === "flask"))
    warnings.push(
      `PATH_KEEP_ENCODED_SLASH: ${upstreamProfile} decodes %2F into a separator, so it would route what Sluice counted as one segment as two; use it only with an upstream that keeps %2F as data`,
    );
  return { path, ambiguousPaths, upstreamProfile };
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

  const flag = (name: keyof typeof env): boolean => {
    const raw = text(name).toLowerCase();
    if (raw === "" || raw === "false") return false;
    if (raw === "true") return true;
    warnings.push(`${name}: must be true or false, got ${JSON.stringify(text(name))}; using false`);
    return false;
  };
  const origin = originOf(text("UPSTREAM_URL"), flag("PASS_THROUGH"), flag("ECHO_ORIGIN"));
  if (origin.kind === "none") warnings.push(origin.problem);
  const timeout = text("LIMITER_TIMEOUT_MS");
  const { path, ambiguousPaths, upstreamProfile } = routingSettings(text, warnings);
  const adminToken = (env.ADMIN_TOKEN ?? "").trim();
  if (adminToken !== "" && adminToken.length < MIN_ADMIN_TOKEN_CHARS)
    warnings.push(`ADMIN_TOKEN: must be at least ${MIN_ADMIN_TOKEN_CHARS} characters; the admin API stays off`);
  const keyHashSecret = env.KEY_HASH_SECRET ?? "";
  return {
    origin,
    defaultPlan: text("DEFAULT_PLAN") === "" ? "free" : text("DEFAULT_PLAN"),
    userHeader: (text("USER_HEADER") === "" ? "X-User-Id" : text("USER_HEADER")).toLowerCase(),
    ipv6PrefixBits: int("IPV6_PREFIX", 64, 0, 128),
    apiKeyQuery: apiKeyQueryOf(text("API_KEY_QUERY"), warnings),
    planCacheTtlMs: int("PLAN_CACHE_TTL_MS", 30_000, 0, 86_400_000),
    keyLookupsPerMin: int("KEY_LOOKUPS_PER_MIN", 30, 1, 1_000_000),
    limiterTimeoutMs: timeout === "" ? null : int("LIMITER_TIMEOUT_MS", DEFAULT_TIMEOUT_MS, 1, 600_000),
    maxKeys: int("MAX_KEYS", 100_000, 1, 50_000_000),
    path,
    ambiguousPaths,
    upstreamProfile,
    adminToken: adminToken.length >= MIN_ADMIN_TOKEN_CHARS ? adminToken : null,
    keyHashSecret: keyHashSecret === "" ? null : keyHashSecret,
    fleet: fleetSettings(
      text("AE_ACCOUNT_ID"),
      text("AE_DATASET"),
      text("AE_API_TOKEN"),
      text("AE_API_BASE"),
      warnings,
    ),
    warnings,
  };
}

/** `API_KEY_QUERY`: parameter names, comma-separated (empty: `api_key`; `none`: no key is read from the query). */
function apiKeyQueryOf(raw: string, warnings: string[]): readonly string[] {
  if (raw === "") return ["api_key"];
  if (raw.toLowerCase() === "none") return [];
  const names = raw.split(",").map((n) => n.trim());
  const bad = names.filter((n) => !/^[A-Za-z0-9_.~-]{1,64}$/.test(n));
  if (bad.length === 0) return names;
  warnings.push(
    `API_KEY_QUERY: must be parameter names separated by commas, or none; got ${JSON.stringify(raw)}; using api_key`,
  );
  return ["api_key"];
}

const SET_AN_ORIGIN =
  'set UPSTREAM_URL to your API\'s URL, or PASS_THROUGH = "true" on a zone route in front of your origin, or ECHO_ORIGIN = "true" for local development only';

/** The origin the vars choose; `none` with the reason when they choose none or more than one. */
function originOf(upstream: string, passThrough: boolean, echo: boolean): Origin {
  const none = (why: string): Origin => ({
    kind: "none",
    problem: `Sluice has no origin for admitted requests: ${why}; ${SET_AN_ORIGIN} (wrangler.toml [vars]). The service binding needs none.`,
  });
  if (upstream !== "" && passThrough) return none("UPSTREAM_URL and PASS_THROUGH are both set, choose one");
  if (upstream !== "") {
    let url: URL;
    try {
      url = new URL(upstream);
    } catch {
      return none(`UPSTREAM_URL is not a URL, got ${JSON.stringify(upstream)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      return none(`UPSTREAM_URL must be an http(s) URL, got ${JSON.stringify(upstream)}`);
    return { kind: "upstream", url };
  }
  if (passThrough) return { kind: "pass_through" };
  if (echo) return { kind: "echo" };
  return none("none is set");
}

/** The fleet view's settings: off unless the account id and the token are both set; a bad value is warned and off. */
function fleetSettings(
  accountId: string,
  dataset: string,
  apiToken: string,
  apiBase: string,
  warnings: string[],
): FleetSettings | null {
  if (accountId === "" && apiToken === "") return null;
  if (accountId === "" || apiToken === "") {
    warnings.push("AE_ACCOUNT_ID and AE_API_TOKEN: the fleet view needs both; it stays off");
    return null;
  }
  if (!/^[0-9a-f]{32}$/i.test(accountId)) {
    warnings.push(
      `AE_ACCOUNT_ID: must be a 32-digit hex account id, got ${JSON.stringify(accountId)}; the fleet view stays off`,
    );
    return null;
  }
  const name = dataset === "" ? "sluice_decisions" : dataset;
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name)) {
    warnings.push(
      `AE_DATASET: must be a dataset name (letters, digits, _), got ${JSON.stringify(name)}; the fleet view stays off`,
    );
    return null;
  }
  let base = "https://api.cloudflare.com/client/v4";
  if (apiBase !== "") {
    try {
      const url = new URL(apiBase);
      if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("not http(s)");
      base = url.href.replace(/\/+$/, "");
    } catch (e) {
      warnings.push(
        `AE_API_BASE: must be an http(s) URL, got ${JSON.stringify(apiBase)} (${String(e)}); the fleet view stays off`,
      );
      return null;
    }
  }
  return { accountId, dataset: name, apiToken, apiBase: base };
}
