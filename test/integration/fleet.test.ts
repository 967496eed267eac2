/**
 * The admin surface around the dashboard, in the Workers runtime: the fleet view (`/_sluice/fleet`) from the
 * Analytics Engine SQL API played back from recorded responses, or how to enable it; one failed check per login
 * (the page's login is one call, `LOGIN_CHECK_PATH`); acting on a denial row by its hashed key; a key's account
 * and overrides (`/_sluice/account`).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { dashboardPage } from "../../src/edge/admin/dashboard.ts";
import { LOGIN_CHECK_PATH } from "../../src/edge/admin/dashboard_script.ts";
import { fleetPeriodOf, fleetView } from "../../src/edge/admin/fleet.ts";
import { FLEET_PERIODS, fleetQueries } from "../../src/edge/admin/fleet_sql.ts";
import { sha256Hex } from "../../src/edge/hash.ts";
import type { Env } from "../../src/edge/settings.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { AE_ACCOUNT_ID, AE_API_TOKEN, aeFetcher } from "../support/analytics_engine.ts";
import { bearer, gatewayFetch, isolate, knownKey, req, rulesFrom, setNow, T0 } from "./helpers.ts";

const TOKEN = "test-admin-token-0123456789abcdef";
const admin = { Authorization: `Bearer ${TOKEN}` };
const withFleet = { ...env, AE_ACCOUNT_ID, AE_API_TOKEN } as Env;

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const rules = rulesFrom(`
- id: growth-global
  match: { plan: growth, identity: api_key }
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

describe("GET /_sluice/fleet", () => {
  it("without Analytics Engine settings says the fleet view is off and how to enable it", async () => {
    const r = await call("GET", "/_sluice/fleet");
    expect(r.status).toBe(200);
    const body = await r.json<{ configured: boolean; how_to: { summary: string; steps: string[] } }>();
    expect(body.configured).toBe(false);
    const text = [body.how_to.summary, ...body.how_to.steps].join("\n");
    for (const words of ["AE_ACCOUNT_ID", "npx wrangler secret put AE_API_TOKEN", "Account Analytics: Read", "METRICS"])
      expect(text).toContain(words);
  });

  it("with them, sends the three queries of fleet_sql.ts with the token and answers what the API recorded", async () => {
    setNow(T0);
    const { fetcher, calls } = aeFetcher();
    vi.spyOn(globalThis, "fetch").mockImplementation(fetcher);
    const r = await call("GET", "/_sluice/fleet?period=1h", admin, withFleet);
    expect(r.status).toBe(200);
    const body = await r.json<Record<string, unknown> & { rules: Record<string, unknown>[] }>();
    const queries = fleetQueries("sluice_decisions", fleetPeriodOf("1h")!);
    expect(calls.map((c) => c.body).sort()).toEqual(
      [queries.denialsOverTime, queries.topDeniedKeys, queries.ruleTotals].map((q) => `${q}\nFORMAT JSON`).sort(),
    );
    for (const c of calls) {
      expect(c.url).toBe(`https://api.cloudflare.com/client/v4/accounts/${AE_ACCOUNT_ID}/analytics_engine/sql`);
      expect(c.authorization).toBe(`Bearer ${AE_API_TOKEN}`);
    }
    expect(body).toMatchObject({
      configured: true,
      dataset: "sluice_decisions",
      period: "1h",
      bucket_s: 60,
      as_of_ms: T0,
    });
    expect(body.rules[0]).toEqual({
      rule: "free-global",
      decisions: 1_284_000,
      allowed: 1_281_400,
      denied: 2600,
      shadow_denied: 0,
      fail_open: 0,
      fail_closed: 0,
    });
    const top = body.top_denied_keys as { key_hash: string; denials: number; mean_retry_after_ms: number }[];
    expect(top).toHaveLength(5);
    expect(top[0]).toMatchObject({ rule: "free-global", plan: "free", denials: 1840, mean_retry_after_ms: 742 });
    const points = body.denials_over_time as { t_ms: number; rule: string; denials: number }[];
    expect(points.length).toBeGreaterThan(100);
    expect(points.every((p) => p.t_ms % 60_000 === 0 && p.denials > 0)).toBe(true);
  });

  it("an error of the SQL API is a 502 that says what it answered; a bad period is a 400", async () => {
    vi.spyOn(globalThis, "fetch").mockImplementation(aeFetcher().fetcher);
    const wrongToken = { ...withFleet, AE_API_TOKEN: "a-revoked-token" } as Env;
    const r = await call("GET", "/_sluice/fleet", admin, wrongToken);
    expect(r.status).toBe(502);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    expect((await r.json<{ detail: string }>()).detail).toBe(
      "the Analytics Engine SQL API answered 403: Authorization error (Analytics Engine refused the credentials: " +
        "check that the secret AE_API_TOKEN is an API token with Account Analytics: Read, and that AE_ACCOUNT_ID, " +
        `now ${withFleet.AE_ACCOUNT_ID}, is the account it was made for)`,
    );
    const bad = await call("GET", "/_sluice/fleet?period=1y", admin, withFleet);
    expect(bad.status).toBe(400);
    expect((await bad.json<{ detail: string }>()).detail).toBe("period= must be one of 1h, 6h, 24h, 7d.");
  });

  it("reads counts quoted as strings or as numbers, and refuses rows that are neither", async () => {
    const fleet = { accountId: AE_ACCOUNT_ID, dataset: "sluice_decisions", apiToken: "t", apiBase: "https://x" };
    const answer = (data: unknown[]) =>
      (async () => new Response(JSON.stringify({ meta: [], data, rows: data.length }))) as unknown as typeof fetch;
    const row = { rule: "r", decisions: 10, allowed: "9", denied: 1, shadow_denied: "0", fail_open: 0, fail_closed: 0 };
    const view = await fleetView(fleet, FLEET_PERIODS[0]!, T0, answer([]));
    expect(view).toMatchObject({ configured: true, rules: [] });
    const totals = fleetView(fleet, FLEET_PERIODS[0]!, T0, answer([{ ...row, t: 60, denials: "3" }]));
    await expect(totals).rejects.toThrow("a row's key_hash is not text: undefined");
    await expect(
      fleetView(fleet, FLEET_PERIODS[0]!, T0, answer([{ t: "soon", rule: "r", denials: 1 }])),
    ).rejects.toThrow('a row\'s t is not a number: "soon"');
  });
});

describe("logging in from the page", () => {
  it("is one call, so each wrong token is one failed check: two wrong, then the right one works", async () => {
    setNow(T0);
    const html = await (await dashboardPage()).text();
    expect(html).toContain(`const LOGIN_CHECK = "${LOGIN_CHECK_PATH}";`);
    // The login function sends exactly one request.
    const loginFn = /async function login\(token\) \{[\s\S]*?\n {2}\}\n/.exec(html)![0];
    expect(loginFn.match(/\bcall\(/g)).toHaveLength(1);

    const from = (token: string) => ({ Authorization: `Bearer ${token}`, "CF-Connecting-IP": "198.51.100.77" });
    const wrong = from("a-mistyped-token-0123456789abcdef");
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++) statuses.push((await call("GET", `/_sluice${LOGIN_CHECK_PATH}`, wrong)).status);
    statuses.push((await call("GET", `/_sluice${LOGIN_CHECK_PATH}`, from(TOKEN))).status);
    expect(statuses).toEqual([401, 401, 200]);
    // The logged-in page's own calls with the right token cost nothing.
    for (const path of ["/stats", "/denials", "/fleet"])
      expect((await call("GET", `/_sluice${path}`, from(TOKEN))).status).toBe(200);
    // Two failures spent of five: three more wrong logins are refused as wrong, and only the next is locked out.
    const more: number[] = [];
    for (let i = 0; i < 4; i++) more.push((await call("GET", `/_sluice${LOGIN_CHECK_PATH}`, wrong)).status);
    expect(more).toEqual([401, 401, 401, 429]);
    const locked = await call("GET", `/_sluice${LOGIN_CHECK_PATH}`, from(TOKEN));
    expect(locked.status).toBe(429);
    const leftS = Number(locked.headers.get("Retry-After"));
    expect(leftS).toBeGreaterThanOrEqual(1);
    // The right token works as soon as the lockout ends.
    setNow(T0 + leftS * 1000);
    expect((await call("GET", `/_sluice${LOGIN_CHECK_PATH}`, from(TOKEN))).status).toBe(200);
  });
});

describe("acting on a denial row and a key's account", () => {
  it("looks up and resets a key by the hash the denial ring shows", async () => {
    setNow(T0);
    const key = await knownKey("sk_row", "growth");
    for (let i = 0; i < 3; i++) await gatewayFetch(rules, req("GET", "/x", bearer(key)));
    const denials = await (await call("GET", "/_sluice/denials")).json<{ denials: { rule: string; key: string }[] }>();
    const row = denials.denials.find((d) => d.rule === "growth-global")!;
    // Without KEY_HASH_SECRET a key's hash is its plain SHA-256, which is also its account record's key.
    expect(row.key).toBe(await sha256Hex(key));
    const state = await (await call("GET", `/_sluice/state?rule=${row.rule}&key_hash=${row.key}`)).json<
      Record<string, unknown>
    >();
    expect(state).toMatchObject({ rule: "growth-global", key: row.key, remaining: 0, quota: 2, override: false });
    const reset = await call("POST", `/_sluice/reset?rule=${row.rule}&key_hash=${row.key}`);
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    expect((await gatewayFetch(rules, req("GET", "/x", bearer(key)))).status).toBe(200);
    expect((await call("GET", "/_sluice/state?rule=growth-global&key_hash=ABC")).status).toBe(400);
    expect((await call("GET", `/_sluice/state?rule=growth-global&key_hash=${row.key}&key=${key}`)).status).toBe(400);
  });

  it("shows a key's account: its plan and each override with its limits", async () => {
    const key = "sk_with_override_for_admin";
    await env.ACCOUNTS.put(
      await sha256Hex(key),
      // Versioned, as `sluice accounts` writes it: the version is stamped on the key's other rules too, which are
      // not overrides and must not be listed as such.
      JSON.stringify({
        plan: "growth",
        limits: { "growth-global": { rate: "250/s", burst: 500 } },
        version: 9_000_000_000_000,
      }),
    );
    const r = await call("GET", "/_sluice/account", { ...admin, "X-Sluice-Key": key });
    expect(r.status).toBe(200);
    const body = await r.json<{ found: boolean; plan: string; overrides: Record<string, unknown>[] }>();
    expect(body).toMatchObject({ account: await sha256Hex(key), found: true, plan: "growth" });
    expect(body.overrides).toHaveLength(1);
    expect(body.overrides[0]).toMatchObject({ id: "growth-global", algorithm: "token_bucket", burst: 500 });
    const nobody = { ...admin, "X-Sluice-Key": "sk_nobody" };
    const none = await (await call("GET", "/_sluice/account", nobody)).json<Record<string, unknown>>();
    expect(none).toEqual({ account: await sha256Hex("sk_nobody"), found: false, plan: "free", overrides: [] });
    expect((await call("GET", "/_sluice/account")).status).toBe(400);
    expect((await call("GET", "/_sluice/account", { "X-Sluice-Key": "x" })).status).toBe(401);
  });
});
