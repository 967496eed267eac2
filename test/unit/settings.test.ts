import { describe, expect, it } from "vitest";
import { parseSettings } from "../../src/edge/settings.ts";
import { DEFAULT_TIMEOUT_MS } from "../../src/rules/types.ts";

const SET_AN_ORIGIN =
  'set UPSTREAM_URL to your API\'s URL, or PASS_THROUGH = "true" on a zone route in front of your origin, or ECHO_ORIGIN = "true" for local development only (wrangler.toml [vars]). The service binding needs none.';

describe("origin", () => {
  it.each([
    [{}, "none is set"],
    [
      { UPSTREAM_URL: "https://api.example.com", PASS_THROUGH: "true" },
      "UPSTREAM_URL and PASS_THROUGH are both set, choose one",
    ],
    [{ UPSTREAM_URL: "not a url", ECHO_ORIGIN: "true" }, 'UPSTREAM_URL is not a URL, got "not a url"'],
    [{ PASS_THROUGH: "yes" }, "none is set"],
  ])("%j chooses no origin and says what to set", (vars, why) => {
    const s = parseSettings(vars);
    const problem = `Sluice has no origin for admitted requests: ${why}; ${SET_AN_ORIGIN}`;
    expect(s.origin).toEqual({ kind: "none", problem });
    expect(s.warnings).toContain(problem);
  });

  it.each([
    [
      { UPSTREAM_URL: "https://api.example.com/v1", ECHO_ORIGIN: "true" },
      { kind: "upstream", url: new URL("https://api.example.com/v1") },
    ],
    [{ PASS_THROUGH: "true", ECHO_ORIGIN: "true" }, { kind: "pass_through" }],
    [{ PASS_THROUGH: "TRUE" }, { kind: "pass_through" }],
    [{ ECHO_ORIGIN: "true" }, { kind: "echo" }],
  ])("%j chooses %j (the echo origin only when nothing else is set)", (vars, origin) => {
    expect(parseSettings(vars).origin).toEqual(origin);
  });
});

describe("parseSettings", () => {
  it("fills every default", () => {
    expect(parseSettings({ ECHO_ORIGIN: "true" })).toEqual({
      origin: { kind: "echo" },
      defaultPlan: "free",
      userHeader: "x-user-id",
      ipv6PrefixBits: 64,
      apiKeyQuery: ["api_key"],
      planCacheTtlMs: 30_000,
      keyLookupsPerMin: 30,
      limiterTimeoutMs: null,
      maxKeys: 100_000,
      path: { caseSensitive: false, keepEncodedSlash: false, keepParams: false },
      ambiguousPaths: "refuse",
      upstreamProfile: "any",
      adminToken: null,
      keyHashSecret: null,
      fleet: null,
      warnings: [],
    });
  });

  it("reads UPSTREAM_PROFILE and PATH_AMBIGUOUS; an unknown value falls back to the safe default, with a warning", () => {
    expect(
      parseSettings({ UPSTREAM_PROFILE: " Rails ", PATH_AMBIGUOUS: "forward", ECHO_ORIGIN: "true" }),
    ).toMatchObject({
      upstreamProfile: "rails",
      ambiguousPaths: "forward",
      warnings: [],
    });
    const bad = parseSettings({ UPSTREAM_PROFILE: "django", PATH_AMBIGUOUS: "allow", ECHO_ORIGIN: "true" });
    expect(bad).toMatchObject({ upstreamProfile: "any", ambiguousPaths: "refuse" });
    expect(bad.warnings).toEqual([
      'UPSTREAM_PROFILE: must be one of any, nginx, express, go, flask, spring, rails, laravel, got "django"; using any',
      'PATH_AMBIGUOUS: must be one of refuse, forward, got "allow"; using refuse',
    ]);
    const nginx = parseSettings({ UPSTREAM_PROFILE: "nginx", PATH_KEEP_ENCODED_SLASH: "true", ECHO_ORIGIN: "true" });
    expect(nginx.warnings[0]).toContain("nginx decodes %2F into a separator");
  });

  it("reads the secrets and MAX_KEYS; a short ADMIN_TOKEN keeps the admin API off, with a warning", () => {
    const secrets = { MAX_KEYS: "5000", ADMIN_TOKEN: " 0123456789abcdef ", KEY_HASH_SECRET: "s", ECHO_ORIGIN: "true" };
    expect(parseSettings(secrets)).toMatchObject({
      maxKeys: 5000,
      adminToken: "0123456789abcdef",
      keyHashSecret: "s",
      warnings: [],
    });
    const short = parseSettings({ ADMIN_TOKEN: "hunter2", MAX_KEYS: "0", ECHO_ORIGIN: "true" });
    expect(short.adminToken).toBeNull();
    expect(short.maxKeys).toBe(100_000);
    expect(short.warnings).toEqual([
      "ADMIN_TOKEN: must be at least 16 characters; the admin API stays off",
      `MAX_KEYS: must be an integer from 1 to 50000000, got "0"; using 100000`,
    ]);
  });

  it("reads the vars as wrangler.toml writes them", () => {
    const s = parseSettings({
      UPSTREAM_URL: "https://api.example.com/base",
      DEFAULT_PLAN: "anonymous",
      USER_HEADER: "X-Auth-User",
      IPV6_PREFIX: "56",
      PLAN_CACHE_TTL_MS: "0",
      LIMITER_TIMEOUT_MS: "250",
    });
    expect(s.origin).toEqual({ kind: "upstream", url: new URL("https://api.example.com/base") });
    expect(s).toMatchObject({
      defaultPlan: "anonymous",
      userHeader: "x-auth-user",
      ipv6PrefixBits: 56,
      planCacheTtlMs: 0,
      limiterTimeoutMs: 250,
      warnings: [],
    });
  });

  it("falls back to the default, with a warning naming the var, for a malformed value", () => {
    const s = parseSettings({ IPV6_PREFIX: "129", PLAN_CACHE_TTL_MS: "30s", UPSTREAM_URL: "ftp://x" });
    expect(s.ipv6PrefixBits).toBe(64);
    expect(s.planCacheTtlMs).toBe(30_000);
    expect(s.origin.kind).toBe("none");
    expect(s.warnings).toEqual([
      `Sluice has no origin for admitted requests: UPSTREAM_URL must be an http(s) URL, got "ftp://x"; ${SET_AN_ORIGIN}`,
      `IPV6_PREFIX: must be an integer from 0 to 128, got "129"; using 64`,
      `PLAN_CACHE_TTL_MS: must be an integer from 0 to 86400000, got "30s"; using 30000`,
    ]);
  });

  it.each(["0", "50ms", "-1", "1.5", "600001"])(
    "a malformed LIMITER_TIMEOUT_MS (%s) falls back to the rules' default timeout, 250 ms",
    (raw) => {
      const s = parseSettings({ LIMITER_TIMEOUT_MS: raw, ECHO_ORIGIN: "true" });
      expect(DEFAULT_TIMEOUT_MS).toBe(250);
      expect(s.limiterTimeoutMs).toBe(DEFAULT_TIMEOUT_MS);
      expect(s.warnings).toEqual([
        `LIMITER_TIMEOUT_MS: must be an integer from 1 to 600000, got ${JSON.stringify(raw)}; using 250`,
      ]);
    },
  );

  it("reads the path relaxations (each off by default); anything but true or false is a warning", () => {
    expect(
      parseSettings({ PATH_CASE_SENSITIVE: "true", PATH_KEEP_ENCODED_SLASH: "TRUE", PATH_KEEP_PARAMS: "false" }).path,
    ).toEqual({
      caseSensitive: true,
      keepEncodedSlash: true,
      keepParams: false,
    });
    const s = parseSettings({ PATH_KEEP_PARAMS: "yes", ECHO_ORIGIN: "true" });
    expect(s.path.keepParams).toBe(false);
    expect(s.warnings).toEqual([`PATH_KEEP_PARAMS: must be true or false, got "yes"; using false`]);
  });
});

describe("the fleet view's settings", () => {
  const ACCOUNT = "0123456789abcdef0123456789abcdef";
  it.each([
    [{}, null, []],
    [
      { AE_ACCOUNT_ID: ACCOUNT, AE_API_TOKEN: "t" },
      {
        accountId: ACCOUNT,
        dataset: "sluice_decisions",
        apiToken: "t",
        apiBase: "https://api.cloudflare.com/client/v4",
      },
      [],
    ],
    [
      { AE_ACCOUNT_ID: ACCOUNT, AE_API_TOKEN: "t", AE_DATASET: "mine", AE_API_BASE: "http://127.0.0.1:9/client/v4/" },
      { accountId: ACCOUNT, dataset: "mine", apiToken: "t", apiBase: "http://127.0.0.1:9/client/v4" },
      [],
    ],
    [{ AE_ACCOUNT_ID: ACCOUNT }, null, ["AE_ACCOUNT_ID and AE_API_TOKEN: the fleet view needs both; it stays off"]],
    [
      { AE_ACCOUNT_ID: "acme", AE_API_TOKEN: "t" },
      null,
      ['AE_ACCOUNT_ID: must be a 32-digit hex account id, got "acme"; the fleet view stays off'],
    ],
    [
      { AE_ACCOUNT_ID: ACCOUNT, AE_API_TOKEN: "t", AE_DATASET: "x; DROP" },
      null,
      ['AE_DATASET: must be a dataset name (letters, digits, _), got "x; DROP"; the fleet view stays off'],
    ],
  ])("%j", (vars, fleet, warnings) => {
    const settings = parseSettings(vars);
    expect(settings.fleet).toEqual(fleet);
    expect(settings.warnings.filter((w) => w.startsWith("AE_"))).toEqual(warnings);
  });
});
