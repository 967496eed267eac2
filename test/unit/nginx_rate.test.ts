/**
 * The model of NGINX's limit_req arithmetic that `npm run test:nginx` judges by (src/migrate/nginx_rate.ts), with an
 * explicit clock: NGINX's stored rate, a limit per key, an empty key skipping its limit, and a zone's copy.
 */
import { describe, expect, it } from "vitest";
import { NginxZone, nginxIntervalMs, nginxRequest, nginxStoredRate } from "../../src/migrate/nginx_rate.ts";

describe("NGINX's limit_req arithmetic", () => {
  it("stores r/m rounded down per 1000 s", () => {
    expect([nginxStoredRate(7, "min"), nginxIntervalMs(7, "min")]).toEqual([116, 8621]);
    expect([nginxStoredRate(10, "s"), nginxIntervalMs(10, "s")]).toEqual([10_000, 100]);
  });

  it("burst 0 at 10r/s: one request per 100 ms", () => {
    const zone = new NginxZone(nginxStoredRate(10, "s"));
    const limits = [{ zone, burst: 0, delay: 0 }];
    expect([0, 50, 99, 100, 150, 200].map((t) => nginxRequest(limits, "a", t).allowed)).toEqual([
      true,
      false,
      false,
      true,
      false,
      true,
    ]);
  });

  it("a limit's own key; an empty key skips the limit, as NGINX does; a denial charges no limit", () => {
    const zone = new NginxZone(nginxStoredRate(1, "s"));
    const other = new NginxZone(nginxStoredRate(1, "s"));
    const limit = (key: string) => [
      { zone, burst: 0, delay: 0, key },
      { zone: other, burst: 0, delay: 0, key: "x" },
    ];
    expect(nginxRequest(limit("t1"), "ignored", 0).allowed).toBe(true);
    expect(nginxRequest(limit("t2"), "ignored", 10).allowed).toBe(false);
    expect(other.lastMs("x")).toBe(0);
    expect(zone.lastMs("t2")).toBeNull();
    expect(nginxRequest([{ zone, burst: 0, delay: 0, key: "" }], "ignored", 20)).toEqual({ allowed: true, delayMs: 0 });
  });

  it("a clone is a copy: trying a request on it leaves the zone as it was", () => {
    const zone = new NginxZone(nginxStoredRate(5, "s"));
    nginxRequest([{ zone, burst: 0, delay: 0 }], "a", 0);
    const copy = zone.clone();
    expect(nginxRequest([{ zone: copy, burst: 0, delay: 0 }], "a", 250).allowed).toBe(true);
    expect(zone.lastMs("a")).toBe(0);
    expect(copy.lastMs("a")).toBe(250);
  });
});
