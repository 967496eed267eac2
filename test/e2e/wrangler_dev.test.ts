/**
 * End to end against a real `wrangler dev` process (started here on a free port of 127.0.0.1, with its state in a
 * temporary directory, stopped by killing its process group): a burst answered by 429 with Retry-After, a retry at
 * that time succeeding, limiter state surviving a restart of the process, and the admin API.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  dropBuildStep,
  projectCopy,
  ROOT,
  shippedRules,
  startWrangler as startWith,
  stopWrangler,
  type WranglerDev,
} from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef";
const persistTo = mkdtempSync(join(tmpdir(), "sluice-e2e-"));
const dir = projectCopy("sluice-e2e-copy-", shippedRules());
dropBuildStep(dir);
let server: WranglerDev | null = null;

const startWrangler = () =>
  startWith(
    persistTo,
    {
      // A cold start on a loaded machine must not turn a decision into a fail-open.
      LIMITER_TIMEOUT_MS: "5000",
      // A secret in production (`wrangler secret put ADMIN_TOKEN`); a var here, for the admin API test.
      ADMIN_TOKEN,
    },
    dir,
  );

beforeAll(async () => {
  const seeded = spawnSync(process.execPath, ["scripts/seed-accounts.mjs", "--persist-to", persistTo], {
    cwd: ROOT,
    encoding: "utf8",
  });
  expect(seeded.status, seeded.stderr).toBe(0);
  server = await startWrangler();
});

afterAll(async () => {
  if (server !== null) await stopWrangler(server);
  rmSync(persistTo, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

const get = (path: string, headers: Record<string, string>) => fetch(`${server!.base}${path}`, { headers });

describe("wrangler dev", () => {
  it("a Free-plan burst gets 429 with Retry-After, and a retry at that time succeeds", async () => {
    const auth = { Authorization: "Bearer sk_free_demo" };
    const started = Date.now();
    const burst = await Promise.all(Array.from({ length: 30 }, () => get("/v1/quotes", auth)));
    const elapsedMs = Date.now() - started;
    const admitted = burst.filter((r) => r.status === 200);
    const denied = burst.filter((r) => r.status === 429);
    // Burst 20, refilling at 10/s while the burst is in flight.
    const seen = `statuses ${burst.map((r) => r.status).join(",")} in ${elapsedMs} ms`;
    expect(admitted.length, seen).toBeGreaterThanOrEqual(20);
    expect(admitted.length, seen).toBeLessThanOrEqual(20 + Math.ceil(elapsedMs / 100));
    expect(denied.length, seen).toBeGreaterThan(0);

    const first = denied[0]!;
    const problem = (await first.json()) as { retry_after_ms: number; "violated-policies": string[]; plan?: string };
    expect(first.headers.get("Content-Type")).toBe("application/problem+json");
    expect(problem["violated-policies"]).toEqual(["free-global"]);
    expect(problem.retry_after_ms).toBeGreaterThanOrEqual(1);
    expect(problem.retry_after_ms).toBeLessThanOrEqual(100);
    const retryAfterS = Number(first.headers.get("Retry-After"));
    expect(retryAfterS).toBe(Math.ceil(problem.retry_after_ms / 1000));
    expect(first.headers.get("RateLimit-Policy")).toBe(`"free-global";q=20;w=2, "free-daily";q=10000;w=86400`);
    await Promise.all(burst.map((r) => (r.bodyUsed ? null : r.arrayBuffer())));

    await sleep(retryAfterS * 1000);
    const retry = await get("/v1/quotes", auth);
    expect(retry.status).toBe(200);
    const echo = (await retry.json()) as { plan: string };
    expect(echo.plan).toBe("free");
  });

  it("limiter state survives a restart of the process (login: 5 per 60 s per IP)", async () => {
    const client = { "CF-Connecting-IP": "198.51.100.77" };
    const login = () => fetch(`${server!.base}/v1/login`, { method: "POST", headers: client });
    const firstLoginAtMs = Date.now();
    let firstAnsweredAtMs = 0;
    for (let i = 0; i < 5; i++) {
      const r = await login();
      await r.arrayBuffer();
      expect(r.status).toBe(200);
      if (i === 0) firstAnsweredAtMs = Date.now();
    }
    await stopWrangler(server!);
    server = await startWrangler();

    const sixthSentAtMs = Date.now();
    const sixth = await login();
    expect(sixth.status).toBe(429);
    // The lock runs 60 s from the first login, however long the restart took (a loaded machine can take tens of s).
    const elapsedS = (Date.now() - firstLoginAtMs) / 1000;
    const retryAfterS = Number(sixth.headers.get("Retry-After"));
    expect(retryAfterS).toBeGreaterThanOrEqual(Math.floor(60 - elapsedS));
    expect(retryAfterS).toBeLessThanOrEqual(60);
    // And not from the restart on (a log whose times the restart moved, a window begun again): at most what was left
    // of the 60 s when the sixth was sent, counted from the first login's answer.
    expect(retryAfterS).toBeLessThanOrEqual(Math.ceil(60 - (sixthSentAtMs - firstAnsweredAtMs) / 1000));
    // Anonymous callers are also counted by address under the Free-plan rules (free-global, free-daily).
    expect(sixth.headers.get("RateLimit")).toMatch(/(^|, )"login-per-ip";r=0;t=\d+(, |$)/);
    expect(((await sixth.json()) as { "violated-policies": string[] })["violated-policies"]).toEqual(["login-per-ip"]);
  });

  it("admin API: 401 without the token; with it, a key's state (not charged) and its reset", async () => {
    const ip = "198.51.100.77";
    const admin = { Authorization: `Bearer ${ADMIN_TOKEN}` };
    const noToken = await get("/_sluice/stats", {});
    expect(noToken.status).toBe(401);
    await noToken.arrayBuffer();

    const statePath = "/_sluice/state?rule=login-per-ip";
    const withKey = { ...admin, "X-Sluice-Key": ip };
    const state = (await (await get(statePath, withKey)).json()) as Record<string, unknown>;
    expect(state).toMatchObject({ rule: "login-per-ip", scope: "global", remaining: 0 });
    expect(state.retry_after_ms).toBeGreaterThan(0);
    expect(await (await get(statePath, withKey)).json()).toMatchObject({ remaining: 0 });

    const reset = await fetch(`${server!.base}/_sluice/reset?rule=login-per-ip`, {
      method: "POST",
      headers: withKey,
    });
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    const login = await fetch(`${server!.base}/v1/login`, { method: "POST", headers: { "CF-Connecting-IP": ip } });
    await login.arrayBuffer();
    expect(login.status).toBe(200);

    const stats = (await (await get("/_sluice/stats", admin)).json()) as Record<string, number>;
    expect(stats.object_calls).toBeGreaterThan(0);
  });

  it("key rotation from one address is limited; two known keys behind one address are not merged", async () => {
    const ip = "203.0.113.177";
    const send = (key: string) =>
      get("/v1/quotes", { "CF-Connecting-IP": ip, Authorization: `Bearer ${key}` }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    const known = async (key: string) => {
      const r = await get("/v1/quotes", { "CF-Connecting-IP": ip, Authorization: `Bearer ${key}` });
      await r.arrayBuffer();
      expect(r.status).toBe(200);
      return r.headers.get("RateLimit") ?? "";
    };
    // Two known Free keys behind one address: budgets of their own, not merged (the daily quota counts exactly:
    // the second key's request does not spend the first key's).
    expect(await known("sk_free_demo_2")).toMatch(/"free-daily";r=9999;/);
    await known("sk_free_demo");
    expect(await known("sk_free_demo_2")).toMatch(/"free-daily";r=9998;/);
    // 40 made-up keys at once from that address: one Free-plan budget (burst 20, 10/s) between them.
    const started = Date.now();
    const rotated = await Promise.all(Array.from({ length: 40 }, (_, i) => send(`sk_made_up_${i}_${started}`)));
    const elapsedMs = Date.now() - started;
    const seen = `${rotated.join(",")} in ${elapsedMs} ms`;
    expect(rotated.filter((s) => s === 429).length, seen).toBeGreaterThan(0);
    expect(rotated.filter((s) => s === 200).length, seen).toBeLessThanOrEqual(20 + Math.ceil(elapsedMs / 100));
    // The rotation did not touch the known key's budget (nor evict its account from the account cache).
    expect(await known("sk_free_demo_2")).toMatch(/"free-daily";r=9997;/);
  });

  it("HEAD spends a GET rule's budget; a path spelled differently counts against the same rule", async () => {
    const ip = "203.0.113.178";
    const head = await fetch(`${server!.base}/v1/public/quote`, {
      method: "HEAD",
      headers: { "CF-Connecting-IP": ip },
    });
    expect(head.status).toBe(200);
    expect(head.headers.get("RateLimit")).toMatch(/"anon-per-ip";r=299;/);
    const get2 = await get("/V1//public/%71uote;x=1", { "CF-Connecting-IP": ip });
    expect(get2.status).toBe(200);
    expect(get2.headers.get("RateLimit")).toMatch(/"anon-per-ip";r=298;/);
    await get2.arrayBuffer();
  });
});
