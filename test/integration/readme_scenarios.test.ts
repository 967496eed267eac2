/**
 * The scenarios of the README and docs/rules.md, end to end through the Worker (SELF) with the shipped Shiplane rules (test/fixtures/shipped/),
 * on a frozen clock: the Free-plan burst, bulk labels costing 10, login attempts per IP, and the NGINX queue table
 * with its delays measured for real.
 */
import { SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, freshIp, freshKey, itemOf, knownKey, req, seedAccount, setNow, T0 } from "./helpers.ts";

const QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const TITLE = "Request cannot be satisfied as assigned quota has been exceeded";
const FREE_POLICY = `"free-global";q=20;w=2, "free-daily";q=10000;w=86400`;

afterEach(() => vi.useRealTimers());

async function send(request: Request) {
  const response = await SELF.fetch(request);
  const text = await response.text();
  return { response, status: response.status, headers: response.headers, text };
}

describe("Free plan burst: token bucket 10/s, burst 20", () => {
  it("25 at t=0 -> 20 allowed, 5 denied (retry 100 ms); 8 at 0.5 s -> 5 and 3; 1 at 2.5 s -> allowed, 19 left", async () => {
    const key = await knownKey("sk_free");
    await seedAccount(key, "free");
    setNow(T0);
    const first = [];
    for (let i = 0; i < 25; i++) first.push(await send(req("GET", "/v1/quotes", bearer(key))));
    expect(first.map((r) => r.status)).toEqual([...Array(20).fill(200), ...Array(5).fill(429)]);

    // An admitted request: the echo origin answers; one RateLimit item per enforcing rule, in rule order.
    const ok = first[0]!;
    expect(ok.headers.get("RateLimit-Policy")).toBe(FREE_POLICY);
    expect(ok.headers.get("RateLimit")).toBe(`"free-global";r=19;t=1, "free-daily";r=9999;t=43200`);
    expect(JSON.parse(ok.text)).toMatchObject({ echo: true, method: "GET", path: "/v1/quotes", plan: "free" });
    expect(first[19]!.headers.get("RateLimit")).toBe(`"free-global";r=0;t=2, "free-daily";r=9980;t=43200`);

    // A denied request: headers and body exact. free-daily admitted it and was refunded (r stays 9980).
    const denied = first[20]!;
    expect(denied.headers.get("Retry-After")).toBe("1");
    expect(denied.headers.get("Content-Type")).toBe("application/problem+json");
    expect(denied.headers.get("RateLimit-Policy")).toBe(FREE_POLICY);
    expect(denied.headers.get("RateLimit")).toBe(`"free-global";r=0;t=2, "free-daily";r=9980;t=43200`);
    expect(JSON.parse(denied.text)).toEqual({
      type: QUOTA_EXCEEDED,
      title: TITLE,
      status: 429,
      detail: "Rate limit exceeded (free-global); retry in 100 ms.",
      "violated-policies": ["free-global"],
      retry_after_ms: 100,
    });

    setNow(T0 + 500);
    const second = [];
    for (let i = 0; i < 8; i++) second.push(await send(req("GET", "/v1/quotes", bearer(key))));
    expect(second.map((r) => r.status)).toEqual([...Array(5).fill(200), ...Array(3).fill(429)]);
    expect(JSON.parse(second[5]!.text).retry_after_ms).toBe(100);

    setNow(T0 + 2500);
    const last = await send(req("GET", "/v1/quotes", bearer(key)));
    expect(last.status).toBe(200);
    // 26 admitted in all: the 8 denials cost free-daily nothing.
    expect(last.headers.get("RateLimit")).toBe(`"free-global";r=19;t=1, "free-daily";r=9974;t=43198`);
  });

  it("an anonymous caller or an unknown key gets the default plan (free), counted by its address", async () => {
    setNow(T0);
    const ip = freshIp();
    const unknown = await send(
      req("GET", "/v1/quotes", { "X-API-Key": freshKey("sk_unknown"), "CF-Connecting-IP": ip }),
    );
    expect(unknown.status).toBe(200);
    expect(JSON.parse(unknown.text).plan).toBe("free");
    expect(unknown.headers.get("RateLimit-Policy")).toBe(FREE_POLICY);
    expect(itemOf(unknown.headers.get("RateLimit"), "free-global")).toBe(`"free-global";r=19;t=1`);
    // Another made-up key, or none, from the same address: the same budget.
    const other = await send(req("GET", "/v1/quotes", { "X-API-Key": freshKey("sk_unknown"), "CF-Connecting-IP": ip }));
    expect(itemOf(other.headers.get("RateLimit"), "free-global")).toBe(`"free-global";r=18;t=1`);
    const anonymous = await send(req("GET", "/v1/quotes", { "CF-Connecting-IP": ip }));
    expect(itemOf(anonymous.headers.get("RateLimit"), "free-global")).toBe(`"free-global";r=17;t=1`);
    // Without a client address (never on Cloudflare, which always sets CF-Connecting-IP) there is nothing to count by.
    const nowhere = await send(req("GET", "/v1/quotes"));
    expect(nowhere.status).toBe(200);
    expect(JSON.parse(nowhere.text).decisions).toEqual([]);
  });
});

describe("bulk labels cost 10 (labels-bulk: token bucket 10/s, burst 20)", () => {
  it("two batches spend the burst; the third is denied for 1000 ms and refunded everywhere else", async () => {
    const key = await knownKey("sk_free");
    await seedAccount(key, "free");
    setNow(T0);
    const batch = () => send(req("POST", "/v1/labels:batch", bearer(key)));
    const a = await batch();
    const b = await batch();
    const c = await batch();
    expect([a.status, b.status, c.status]).toEqual([200, 200, 429]);
    const policy = `"free-global";q=20;w=2, "labels-bulk";q=20;w=2, "free-daily";q=10000;w=86400`;
    expect(a.headers.get("RateLimit-Policy")).toBe(policy);
    expect(a.headers.get("RateLimit")).toBe(
      `"free-global";r=19;t=1, "labels-bulk";r=10;t=1, "free-daily";r=9999;t=43200`,
    );
    expect(JSON.parse(a.text).decisions.map((d: { rule: string; cost: number }) => [d.rule, d.cost])).toEqual([
      ["free-global", 1],
      ["labels-bulk", 10],
      ["free-daily", 1],
    ]);
    expect(b.headers.get("RateLimit")).toBe(
      `"free-global";r=18;t=1, "labels-bulk";r=0;t=2, "free-daily";r=9998;t=43200`,
    );
    // Refunded: free-global and free-daily report what they had before the denied batch.
    expect(c.headers.get("RateLimit")).toBe(
      `"free-global";r=18;t=1, "labels-bulk";r=0;t=2, "free-daily";r=9998;t=43200`,
    );
    expect(c.headers.get("Retry-After")).toBe("1");
    expect(JSON.parse(c.text)).toMatchObject({ "violated-policies": ["labels-bulk"], retry_after_ms: 1000 });

    setNow(T0 + 999);
    expect((await batch()).status).toBe(429);
    setNow(T0 + 1000);
    expect((await batch()).status).toBe(200);
  });

  it("a Growth key is limited by growth-global (GCRA) and labels-bulk", async () => {
    const key = await knownKey("sk_growth");
    await seedAccount(key, "growth");
    setNow(T0);
    const r = await send(req("POST", "/v1/labels:batch", bearer(key)));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).plan).toBe("growth");
    expect(r.headers.get("RateLimit-Policy")).toBe(
      `"labels-bulk";q=20;w=2, "growth-global";q=100;w=2, "growth-daily";q=500000;w=86400`,
    );
    expect(r.headers.get("RateLimit")).toBe(
      `"labels-bulk";r=10;t=1, "growth-global";r=99;t=1, "growth-daily";r=499999;t=43200`,
    );
  });
});

describe("login: 5 per 60 s per IP (sliding log)", () => {
  it("the 6th attempt inside 60 s is denied, hammering does not extend the lock, and 60 s after the first it passes", async () => {
    const ip = freshIp();
    const login = () => send(req("POST", "/v1/login", { "CF-Connecting-IP": ip }));
    for (let i = 0; i < 5; i++) {
      setNow(T0 + i * 1000);
      const r = await login();
      expect(r.status).toBe(200);
      expect(itemOf(r.headers.get("RateLimit"), "login-per-ip")).toBe(`"login-per-ip";r=${4 - i};t=60`);
    }
    setNow(T0 + 5000);
    const sixth = await login();
    expect(sixth.status).toBe(429);
    expect(sixth.headers.get("Retry-After")).toBe("55");
    expect(itemOf(sixth.headers.get("RateLimit-Policy"), "login-per-ip")).toBe(`"login-per-ip";q=5;w=60`);
    expect(itemOf(sixth.headers.get("RateLimit"), "login-per-ip")).toBe(`"login-per-ip";r=0;t=59`);
    expect(JSON.parse(sixth.text)).toEqual({
      type: QUOTA_EXCEEDED,
      title: TITLE,
      status: 429,
      detail: "Rate limit exceeded (login-per-ip); retry in 55000 ms.",
      "violated-policies": ["login-per-ip"],
      retry_after_ms: 55000,
    });
    setNow(T0 + 30_000);
    expect(JSON.parse((await login()).text).retry_after_ms).toBe(30_000);
    setNow(T0 + 59_999);
    expect(JSON.parse((await login()).text).retry_after_ms).toBe(1);
    setNow(T0 + 60_000);
    expect((await login()).status).toBe(200);
  });

  it("keys by CF-Connecting-IP only: X-Forwarded-For is ignored, IPv4-mapped IPv6 is IPv4, IPv6 shares a /64", async () => {
    setNow(T0);
    const spend = async (headers: Record<string, string>, n: number) => {
      const statuses = [];
      for (let i = 0; i < n; i++) statuses.push((await send(req("POST", "/v1/login", headers))).status);
      return statuses;
    };
    const ip = freshIp();
    await spend({ "CF-Connecting-IP": ip, "X-Forwarded-For": "198.51.100.1" }, 3);
    expect(await spend({ "CF-Connecting-IP": `::ffff:${ip}` }, 3)).toEqual([200, 200, 429]);
    expect(await spend({ "CF-Connecting-IP": "198.51.100.1" }, 1)).toEqual([200]);

    expect(await spend({ "CF-Connecting-IP": "2001:db8:1:2::1" }, 3)).toEqual([200, 200, 200]);
    expect(await spend({ "CF-Connecting-IP": "2001:db8:1:2:ffff:ffff:ffff:ffff" }, 3)).toEqual([200, 200, 429]);
    expect(await spend({ "CF-Connecting-IP": "2001:db8:1:3::1" }, 1)).toEqual([200]);
    // An address that does not parse is refused: it never turns the per-IP rule off.
    const noIp = await send(req("POST", "/v1/login", { "CF-Connecting-IP": "not-an-ip" }));
    expect(noIp.status).toBe(400);
    expect(noIp.headers.get("RateLimit")).toBeNull();
  });
});

describe("shaping: leaky queue, measured delays", () => {
  it("carrier-sync-shaping (10/s, burst 20, delay 5): 25 at once -> 6 at once, 15 held 100..1500 ms, 4 denied", async () => {
    const key = await knownKey("sk_growth");
    await seedAccount(key, "growth");
    setNow(T0);
    const results = await Promise.all(
      Array.from({ length: 25 }, async () => {
        const started = performance.now();
        const r = await send(req("POST", "/v1/carrier-sync", bearer(key)));
        return { ...r, elapsedMs: performance.now() - started };
      }),
    );
    const admitted = results.filter((r) => r.status === 200);
    const denied = results.filter((r) => r.status === 429);
    expect(admitted).toHaveLength(21);
    expect(denied).toHaveLength(4);
    const delays = admitted.map((r) => JSON.parse(r.text).delayed_ms as number).sort((x, y) => x - y);
    expect(delays).toEqual([0, 0, 0, 0, 0, 0, ...Array.from({ length: 15 }, (_, i) => (i + 1) * 100)]);
    for (const r of admitted) {
      const delay = JSON.parse(r.text).delayed_ms as number;
      // Held at least its delay; no upper bound on real time (shaping.test.ts checks the exact waits asked for).
      expect(r.elapsedMs).toBeGreaterThanOrEqual(delay - 1);
    }
    for (const r of denied)
      expect(JSON.parse(r.text)).toMatchObject({ "violated-policies": ["carrier-sync-shaping"], retry_after_ms: 100 });
  });
});
