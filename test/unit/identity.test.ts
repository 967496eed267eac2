import { describe, expect, it } from "vitest";
import {
  apiKeyOf,
  clientAddressOf,
  clientIpKey,
  formatIpv6,
  identitiesOf,
  parseIpv6,
} from "../../src/request/identity.ts";

const h = (init: Record<string, string>) => new Headers(init);

describe("api key", () => {
  it.each([
    [{ Authorization: "Bearer sk_live_abc" }, "sk_live_abc"],
    [{ Authorization: "bearer   sk_live_abc  " }, "sk_live_abc"],
    [{ "X-API-Key": " sk_live_abc " }, "sk_live_abc"],
    [{ Authorization: "Bearer same-key", "X-API-Key": "same-key" }, "same-key"],
    [{ Authorization: "Basic dXNlcjpwYXNz", "X-API-Key": "from-header" }, "from-header"],
    [{ Authorization: "Bearer" }, null],
    [{ Authorization: "Bearer a b" }, null],
    [{ Authorization: "Bearer ab=cd" }, null],
    [{ Authorization: "Bearer abc==" }, "abc=="],
    [{ "X-API-Key": "k".repeat(513) }, null],
    [{ "X-API-Key": "k".repeat(512) }, "k".repeat(512)],
    [{}, null],
  ])("%j -> %s", (headers, expected) => {
    expect(apiKeyOf(h(headers))).toBe(expected);
  });

  it.each([
    [
      "two headers naming different keys",
      [
        ["Authorization", "Bearer from-auth"],
        ["X-API-Key", "from-header"],
      ],
    ],
    [
      "a made-up Bearer beside a key",
      [
        ["Authorization", "Bearer made-up"],
        ["X-API-Key", "sk_real"],
      ],
    ],
    [
      "a malformed Bearer beside a key",
      [
        ["Authorization", "Bearer a b"],
        ["X-API-Key", "sk_real"],
      ],
    ],
    [
      "X-API-Key repeated",
      [
        ["X-API-Key", "sk_a"],
        ["X-API-Key", "sk_a"],
      ],
    ],
    [
      "X-API-Key repeated, two keys",
      [
        ["X-API-Key", "sk_a"],
        ["X-API-Key", "sk_b"],
      ],
    ],
    [
      "Authorization repeated",
      [
        ["Authorization", "Bearer sk_a"],
        ["Authorization", "Bearer sk_a"],
      ],
    ],
    [
      "a Basic and a Bearer credential",
      [
        ["Authorization", "Basic dXNlcjpwYXNz"],
        ["Authorization", "Bearer sk_a"],
      ],
    ],
    ["a comma inside the token", [["Authorization", "Bearer sk_a,sk_b"]]],
  ] as const)("%s: refused as naming more than one key", (_name, pairs) => {
    const result = apiKeyOf(new Headers(pairs.map(([n, v]) => [n, v] as [string, string])));
    expect(result).toEqual({ error: expect.stringContaining("more than one API key") });
  });
});

describe("client address header", () => {
  it.each([
    "192.0.2.1, 192.0.2.1",
    "192.0.2.1,198.51.100.1",
    "2001:db8::1%eth0",
    "[2001:db8::1]",
    "[2001:db8::1]:443",
    "192.0.2.1:443",
    "",
    "unknown",
  ])("%j is not one address: refused", (value) => {
    expect(clientAddressOf(h({ "CF-Connecting-IP": value }), 64)).toEqual({
      error: expect.stringContaining("must be one IPv4 or IPv6 address"),
    });
  });

  it("no header is no address; one address is its key", () => {
    expect(clientAddressOf(h({}), 64)).toBeNull();
    expect(clientAddressOf(h({ "CF-Connecting-IP": " 192.0.2.1 " }), 64)).toBe("192.0.2.1");
  });
});

describe("client address", () => {
  it.each([
    ["203.0.113.7", 64, "203.0.113.7"],
    [" 203.0.113.7 ", 64, "203.0.113.7"],
    ["::ffff:203.0.113.7", 64, "203.0.113.7"],
    ["::FFFF:cb00:7107", 64, "203.0.113.7"],
    ["0:0:0:0:0:ffff:203.0.113.7", 64, "203.0.113.7"],
    ["2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"],
    ["2001:DB8:0001:0002::ffff", 64, "2001:db8:1:2::/64"],
    ["2001:db8::1", 64, "2001:db8::/64"],
    ["2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"],
    ["2001:db8:1:2:3:4:5:6", 56, "2001:db8:1::/56"],
    ["2001:db8:1:2ff:3:4:5:6", 56, "2001:db8:1:200::/56"],
    ["2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6/128"],
    ["::1", 128, "::1/128"],
    ["::", 64, "::/64"],
    ["256.1.1.1", 64, null],
    ["1.2.3", 64, null],
    ["fe80::1%eth0", 64, null],
    ["1:2:3:4:5:6:7:8:9", 64, null],
    ["1::2::3", 64, null],
    ["12345::", 64, null],
    ["", 64, null],
    ["example.com", 64, null],
  ])("%s /%i -> %s", (value, bits, expected) => {
    expect(clientIpKey(value, bits)).toBe(expected);
  });

  it("never reads X-Forwarded-For or X-Real-IP", () => {
    const ids = identitiesOf(h({ "X-Forwarded-For": "198.51.100.1", "X-Real-IP": "198.51.100.2" }), {
      userHeader: "x-user-id",
      ipv6PrefixBits: 64,
    });
    expect(ids).toEqual({ ok: true, ids: { api_key: null, ip: null, user: null } });
  });

  it("formats RFC 5952 text: the longest zero run compressed, the first on a tie, never a single group", () => {
    expect(formatIpv6(parseIpv6("2001:0:0:1:0:0:0:1")!)).toBe("2001:0:0:1::1");
    expect(formatIpv6(parseIpv6("2001:0:0:1:1:0:0:1")!)).toBe("2001::1:1:0:0:1");
    expect(formatIpv6(parseIpv6("2001:db8:0:1:1:1:1:1")!)).toBe("2001:db8:0:1:1:1:1:1");
  });
});

describe("user", () => {
  const opts = { userHeader: "x-account-user", ipv6PrefixBits: 64 };
  it("reads the configured trusted header only", () => {
    const user = (init: Record<string, string>) => {
      const r = identitiesOf(h(init), opts);
      return r.ok ? r.ids.user : r.detail;
    };
    expect(user({ "X-Account-User": " u_42 " })).toBe("u_42");
    expect(user({ "X-User-Id": "u_42" })).toBeNull();
    expect(user({ "X-Account-User": "" })).toBeNull();
    expect(user({ "X-Account-User": "x".repeat(257) })).toBeNull();
    expect(user({ "X-Account-User": "u_42, u_42" })).toContain("x-account-user is repeated");
  });
});

// Issue 35: a key in `Authorization: Basic base64(key:)` or `?api_key=` was not seen, so an upstream that reads keys
// there (Stripe takes the key as the Basic user; many APIs take `?api_key=`) got 6 admitted on a key's limit of 3.
describe("api key places: Basic and the query", () => {
  const basic = (userPass: string) => `Basic ${btoa(userPass)}`;
  const q = (search: string) => new URLSearchParams(search);
  const names = ["api_key"];

  it.each([
    ["the key as the Basic user, empty password (Stripe)", { Authorization: basic("sk_live_abc:") }, "", "sk_live_abc"],
    ["the key as the Basic password, empty user", { Authorization: basic(":sk_live_abc") }, "", "sk_live_abc"],
    ["a login (user and password) is no key", { Authorization: basic("alice:secret") }, "", null],
    ["Basic that is no base64 is no key", { Authorization: "Basic a" }, "", null],
    ["?api_key=", {}, "?api_key=sk_q", "sk_q"],
    ["?api_key= twice, the same key", {}, "?api_key=sk_q&api_key=sk_q", "sk_q"],
    ["?api_key= empty is no key", {}, "?api_key=", null],
    ["the same key in Bearer and the query", { Authorization: "Bearer sk_q" }, "?api_key=sk_q", "sk_q"],
    ["the same key in Basic and X-API-Key", { Authorization: basic("sk_b:"), "X-API-Key": "sk_b" }, "", "sk_b"],
    ["a login beside X-API-Key: the header's key", { Authorization: basic("alice:secret"), "X-API-Key": "k" }, "", "k"],
  ])("%s", (_name, headers, search, expected) => {
    expect(apiKeyOf(h(headers), q(search), names)).toBe(expected);
  });

  it.each([
    ["Basic and X-API-Key naming different keys", { Authorization: basic("sk_a:"), "X-API-Key": "sk_b" }, ""],
    ["Bearer and ?api_key= naming different keys", { Authorization: "Bearer sk_a" }, "?api_key=sk_b"],
    ["?api_key= twice with different keys", {}, "?api_key=sk_a&api_key=sk_b"],
    ["a malformed ?api_key= beside a key", { "X-API-Key": "sk_a" }, "?api_key=a%20b"],
    ["two Basic credentials", { Authorization: `${basic("sk_a:")}, ${basic("sk_b:")}` }, ""],
  ])("%s: 400, one identity too many", (_name, headers, search) => {
    expect(apiKeyOf(h(headers), q(search), names)).toMatchObject({ error: expect.stringContaining("more than one") });
  });

  it("the query is read only under the configured names (API_KEY_QUERY)", () => {
    expect(apiKeyOf(h({}), q("?api_key=sk_q"), [])).toBeNull();
    expect(apiKeyOf(h({}), q("?key=sk_q"), ["key", "api_key"])).toBe("sk_q");
    const ids = identitiesOf(
      h({}),
      { userHeader: "x-user-id", ipv6PrefixBits: 64, apiKeyQuery: ["api_key"] },
      q("?api_key=k1"),
    );
    expect(ids).toEqual({ ok: true, ids: { api_key: "k1", ip: null, user: null } });
  });
});
