/**
 * A route that ends a path (`* /**.php`, NGINX's `location ~ \.php$` as `sluice import nginx` writes it) through the
 * gateway in the Workers runtime: it matches the canonical path (case folded, dot segments resolved, one trailing
 * slash ignored), and a prefix rule's `except` of it leaves those paths to it, as NGINX's regexes win over prefixes.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { gatewayFetch, rulesFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

let run = 0;
/** `php-N`: one `.php` request an hour per address; `api-N`: one request under /api/ an hour, `.php` left out. */
function rules() {
  run++;
  return rulesFrom(`
- id: php-${run}
  match: { route: "* /**.php", identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
- id: api-${run}
  match: { route: "* /api/**", except: "* /**.php", identity: ip }
  algorithm: fixed_window
  limit: 1
  window: h
`);
}

const get = (path: string, address = "192.0.2.40") =>
  new Request(`https://api.example.com${path}`, { headers: { "CF-Connecting-IP": address } });

describe("a route that ends a path (`* /**.php`)", () => {
  it.each<[string, string, number]>([
    ["/index.php", "/wp/admin/index.php", 429],
    ["/index.php", "/WP/INDEX.PHP", 429],
    ["/index.php", "/x.php/", 429],
    ["/index.php", "/a/./b/../c.php", 429],
    ["/index.php", "/index.phpx", 200],
    ["/index.php", "/index.php/x", 200],
    ["/index.php", "/php", 200],
  ])("after %s, %s: %i", async (first, second, status) => {
    const compiled = rules();
    setNow(T0);
    expect((await gatewayFetch(compiled, get(first))).status).toBe(200);
    expect((await gatewayFetch(compiled, get(second))).status).toBe(status);
  });

  it("a prefix rule's except leaves the ending's paths to it: /api/x.php spends only the .php budget", async () => {
    const compiled = rules();
    setNow(T0);
    expect((await gatewayFetch(compiled, get("/api/x.php"))).status).toBe(200);
    // The /api/ budget is untouched by it, and the .php one is spent.
    expect((await gatewayFetch(compiled, get("/api/list"))).status).toBe(200);
    expect((await gatewayFetch(compiled, get("/api/list"))).status).toBe(429);
    expect((await gatewayFetch(compiled, get("/api/y.php"))).status).toBe(429);
  });
});
