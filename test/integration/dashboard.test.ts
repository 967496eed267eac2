/**
 * The dashboard: the page at /_sluice/ (self-contained, no data, no token needed to load it, but 404 with the admin
 * surface off; a CSP that admits exactly its own script and style) and /_sluice/denials, the isolate's ring of recent
 * denials with hashed keys. The page's behaviour in a real browser is test/browser/dashboard.test.ts.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/edge/hash.ts";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { bearer, gatewayFetch, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

const TOKEN = "test-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };

afterEach(() => {
  vi.useRealTimers();
});

const rules = rulesFrom(`
- id: dash-per-key
  match: { identity: api_key }
  algorithm: token_bucket
  rate: 1/min
  burst: 2
`);

async function call(method: string, path: string, headers: Record<string, string> = admin, e: Env = env) {
  const ctx = createExecutionContext();
  const response = await handleRequest(req(method, path, headers), e, ctx, rules, isolate);
  await waitOnExecutionContext(ctx);
  return response;
}

const base64 = (bytes: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(bytes)));
const sha256Base64 = async (text: string) =>
  base64(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));

describe("the page", () => {
  it("is served at /_sluice/ and /_sluice without a token, and carries no data", async () => {
    for (const path of ["/_sluice/", "/_sluice"]) {
      const r = await call("GET", path, {});
      expect(r.status).toBe(200);
      expect(r.headers.get("Content-Type")).toBe("text/html; charset=utf-8");
      expect(r.headers.get("Cache-Control")).toBe("no-store");
      const html = await r.text();
      expect(html).toContain("Counters are per isolate.");
      expect(html).not.toContain("dash-per-key");
      expect(html).not.toContain(TOKEN);
    }
  });

  it("is self-contained: no external script, style, image or font, and no absolute URL at all", async () => {
    const html = await (await call("GET", "/_sluice/", {})).text();
    expect(html).not.toMatch(/\ssrc=/i);
    // The SVG namespace names the chart's elements; it is never fetched.
    expect(html.replaceAll('"http://www.w3.org/2000/svg"', "")).not.toMatch(/https?:\/\//i);
    expect([...html.matchAll(/\shref="([^"]*)"/gi)].map((m) => m[1])).toEqual(["data:,"]);
    expect(html.match(/<script>/g)).toHaveLength(1);
    expect(html.match(/<style>/g)).toHaveLength(1);
  });

  it("its CSP admits exactly the page's one script and one style (by hash), this origin, and no form submission", async () => {
    const r = await call("GET", "/_sluice/", {});
    const html = await r.text();
    const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
    const style = /<style>([\s\S]*)<\/style>/.exec(html)![1]!;
    const csp = r.headers.get("Content-Security-Policy")!;
    expect(csp).toContain(`script-src 'sha256-${await sha256Base64(script)}';`);
    expect(csp).toContain(`style-src 'sha256-${await sha256Base64(style)}';`);
    for (const directive of [
      "default-src 'none'",
      "connect-src 'self'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ])
      expect(csp).toContain(directive);
    expect(r.headers.get("X-Frame-Options")).toBe("DENY");
    expect(r.headers.get("Referrer-Policy")).toBe("no-referrer");
  });

  it("sends the token only as a Bearer header from fetch, keeps it in sessionStorage, never in a URL", async () => {
    const html = await (await call("GET", "/_sluice/", {})).text();
    expect(html).toContain(`headers: { ...headers, Authorization: "Bearer " + token }`);
    expect(html).toContain("sessionStorage.setItem(TOKEN_KEY, token)");
    expect(html).not.toContain("localStorage");
    expect(html).not.toMatch(/[?&]token=/);
  });

  it("sends a raw key typed into the lookup form in the X-Sluice-Key header, never in a URL (only a hash may be)", async () => {
    const html = await (await call("GET", "/_sluice/", {})).text();
    expect(html).toContain(`{ "X-Sluice-Key": key.key }`);
    expect(html).not.toMatch(/[?&]key=/);
    expect(html).toContain(`"&key_hash=" + encodeURIComponent(key.key_hash)`);
  });

  it("answers only GET, and is 404 like the rest of the surface when ADMIN_TOKEN is unset", async () => {
    const post = await call("POST", "/_sluice/", {});
    expect(post.status).toBe(405);
    expect(post.headers.get("Allow")).toBe("GET");
    const off = { ...env, ADMIN_TOKEN: undefined } as Env;
    expect((await call("GET", "/_sluice/", {}, off)).status).toBe(404);
    expect((await call("GET", "/_sluice/", admin, off)).status).toBe(404);
  });
});

describe("GET /_sluice/denials", () => {
  it("needs the token", async () => {
    const r = await call("GET", "/_sluice/denials", {});
    expect(r.status).toBe(401);
  });

  it("lists this isolate's denials newest first, with hashed keys; a blocked key's repeats share one entry", async () => {
    const key = await knownKey();
    setNow(T0);
    for (let i = 0; i < 2; i++) expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(200);
    // Denied by the object, then twice by this isolate's blocked-key cache.
    for (let i = 0; i < 3; i++) expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(429);
    const r = await call("GET", "/_sluice/denials");
    expect(r.status).toBe(200);
    const body = await r.json<{ capacity: number; denials: Record<string, unknown>[] }>();
    expect(body.capacity).toBe(100);
    expect(body.denials[0]).toEqual({
      at_ms: T0,
      rule: "dash-per-key",
      key: await sha256Hex(key),
      retry_after_ms: 60_000,
      source: "cache",
      count: 3,
    });
    expect(JSON.stringify(body)).not.toContain(key);
    expect((await call("POST", "/_sluice/denials")).status).toBe(405);
  });
});
