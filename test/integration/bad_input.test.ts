/**
 * Bad input through the Worker (SELF, with the compiled Shiplane rules): each gets a defined answer, never a 500.
 * An identity that cannot be read is no identity (rules keyed on it do not apply; the request is forwarded as
 * anonymous and the origin judges the credential); everything else is matched, counted and forwarded as usual.
 */
import { SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, freshKey, knownKey, req, seedAccount, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

interface Echo {
  plan: string;
  decisions: { rule: string; key: string }[];
}

async function echoOf(request: Request) {
  const response = await SELF.fetch(request);
  expect(response.status).toBe(200);
  return response.json<Echo>();
}

describe("API keys", () => {
  it.each([
    ["a 64 KB bearer token", { Authorization: `Bearer ${"k".repeat(65_536)}` }],
    ["a 64 KB X-API-Key", { "X-API-Key": "k".repeat(65_536) }],
    ["a non-ASCII key", { Authorization: "Bearer sk_caf\u00e9" }],
    ["a non-ASCII X-API-Key", { "X-API-Key": "\u00ff\u00fe" }],
    ["an empty bearer token", { Authorization: "Bearer " }],
    ["an empty X-API-Key", { "X-API-Key": "" }],
    ["a bare scheme", { Authorization: "Bearer" }],
    ["two tokens", { Authorization: "Bearer a b" }],
    ["another scheme", { Authorization: "Digest username=x" }],
    ["a lone comma", { Authorization: "," }],
  ])("%s: forwarded as anonymous, no api_key rule applies", async (_name, headers) => {
    setNow(T0);
    const echo = await echoOf(req("GET", "/v1/quotes", headers as Record<string, string>));
    expect(echo.plan).toBe("free");
    expect(echo.decisions).toEqual([]);
  });

  it("a key at the 512-character limit is a key", async () => {
    setNow(T0);
    const key = `${freshKey()}${"x".repeat(480)}`.slice(0, 512);
    await seedAccount(key, "free");
    const echo = await echoOf(req("GET", "/v1/quotes", bearer(key)));
    expect(echo.decisions.map((d) => d.rule)).toEqual(["free-global", "free-daily"]);
  });
});

describe("client addresses", () => {
  const login = (ip: string | null) =>
    SELF.fetch(req("POST", "/v1/login", ip === null ? {} : { "CF-Connecting-IP": ip }));

  it("IPv6 in every notation: one /64 is one budget (full, compressed, upper case, mixed, with spaces)", async () => {
    setNow(T0);
    const notations = [
      "2001:0db8:0007:0007:0000:0000:0000:0001",
      "2001:db8:7:7::1",
      "2001:DB8:7:7::FFFF",
      "2001:db8:7:7:1::1",
      " 2001:db8:7:7:abcd:ef01:2345:6789 ",
      "2001:db8:7:7::203.0.113.1",
    ];
    const statuses = [];
    for (const ip of notations) statuses.push((await login(ip)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    // Another /64 has its own budget.
    expect((await login("2001:db8:7:8::1")).status).toBe(200);
  });

  it("IPv4-mapped IPv6 is the IPv4 address, in either notation", async () => {
    setNow(T0);
    const statuses = [];
    for (const ip of ["198.51.100.77", "::ffff:198.51.100.77", "::FFFF:c633:644d", "0:0:0:0:0:ffff:198.51.100.77"])
      statuses.push((await login(ip)).status);
    for (const ip of ["198.51.100.77", "::ffff:198.51.100.77"]) statuses.push((await login(ip)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it("missing CF-Connecting-IP (never on Cloudflare): no ip rule applies; forwarded", async () => {
    setNow(T0);
    const r = await login(null);
    expect(r.status).toBe(200);
    expect((await r.json<Echo>()).decisions).toEqual([]);
  });

  it.each([
    ["empty", ""],
    ["a zone id", "2001:db8::1%eth0"],
    ["brackets", "[2001:db8::1]"],
    ["a port", "198.51.100.1:443"],
    ["too many groups", "1:2:3:4:5:6:7:8:9"],
    ["two ::", "1::2::3"],
    ["an octet above 255", "198.51.100.256"],
    ["garbage", "not-an-address"],
    ["a list (X-Forwarded-For style)", "198.51.100.1, 203.0.113.9"],
  ])(
    "%s CF-Connecting-IP: 400 problem+json, nothing counted or forwarded (never ip rules turned off)",
    async (_name, ip) => {
      setNow(T0);
      const r = await login(ip);
      expect(r.status).toBe(400);
      expect(r.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await r.json()).toMatchObject({ error: "two_identities" });
    },
  );
});

describe("methods and paths", () => {
  it.each([
    ["PURGE", "/v1/quotes", 200],
    ["REPORT", "/v1/quotes", 200],
    ["PROPFIND", "/v1/quotes", 200],
    ["patch", "/v1/quotes", 200],
    // A path that cannot be decoded is refused before any rule is asked (issue 9), as problem+json.
    ["GET", "/v1/%00/quotes", 400],
    ["GET", "/v1/%E2%9C%93/%F0%9F%98%80", 200],
    ["GET", "/v1/%ZZ", 400],
    ["GET", "/v1/%C3%28", 400],
    ["GET", "//v1//quotes//", 200],
    ["GET", "/v1/quotes/..%2F..%2Fetc%2Fpasswd", 400],
    ["GET", "/v1/labels:batch;jsessionid=1", 200],
    ["GET", "/a/a/a/... (8000 characters)", 200],
    ["POST", "/v1/labels:batch?x=%FF%FE", 200],
    ["OPTIONS", "*", 200],
  ])("%s %s: a defined answer (%i)", async (method, path, status) => {
    setNow(T0);
    const url =
      path === "*"
        ? "https://sluice.test/"
        : path.startsWith("/a/a/a/...")
          ? `https://sluice.test/${"a/".repeat(4000)}`
          : `https://sluice.test${path}`;
    const r = await SELF.fetch(new Request(url, { method, headers: bearer(freshKey()) }));
    expect(r.status).toBe(status);
    if (status === 400) {
      expect(r.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await r.json()).toMatchObject({ status: 400, title: "Bad Request" });
    } else await r.arrayBuffer();
  });
});

describe("a huge request body on a limited route", () => {
  it("is forwarded when admitted and refused unread when denied", async () => {
    setNow(T0);
    const key = await knownKey();
    const body = new Uint8Array(8 * 1024 * 1024).fill(0x61);
    const batch = () => SELF.fetch(req2("POST", "/v1/labels:batch", bearer(key), body));
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const r = await batch();
      statuses.push(r.status);
      await r.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 429]);
  });
});

function req2(method: string, path: string, headers: Record<string, string>, body: Uint8Array): Request {
  return new Request(`https://sluice.test${path}`, { method, headers, body });
}
