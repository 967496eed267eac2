import { describe, expect, it } from "vitest";
import { parseSettings } from "../../src/worker/settings.ts";

describe("parseSettings", () => {
  it("fills every default", () => {
    expect(parseSettings({})).toEqual({
      upstreamUrl: null,
      defaultPlan: "free",
      userHeader: "x-user-id",
      ipv6PrefixBits: 64,
      planCacheTtlMs: 30_000,
      limiterTimeoutMs: null,
      warnings: [],
    });
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
    expect(s.upstreamUrl?.href).toBe("https://api.example.com/base");
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
    expect(s.upstreamUrl).toBeNull();
    expect(s.warnings).toEqual([
      `UPSTREAM_URL: must be an http(s) URL, got "ftp://x"; using the echo origin`,
      `IPV6_PREFIX: must be an integer from 0 to 128, got "129"; using 64`,
      `PLAN_CACHE_TTL_MS: must be an integer from 0 to 86400000, got "30s"; using 30000`,
    ]);
  });
});
