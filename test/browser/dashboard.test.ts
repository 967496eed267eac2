/**
 * The dashboard at /_sluice/ in a real browser: Debian's Chromium driven by playwright-core, against a real
 * `wrangler dev` on a free port of 127.0.0.1. Two Workers: one without Analytics Engine settings (the page says the
 * fleet view is off and shows this isolate), one whose AE_API_BASE points at a local server playing back the SQL
 * API's recorded responses (test/support/analytics_engine.ts), so the fleet view draws its chart and lists keys.
 *
 * Covered: two wrong tokens then the right one (one API call per login, the refused token never kept); the lockout
 * shown with its time left, and the right token working once it ends; acting on a denial row (look up, reset only
 * after confirming); a key's account and override; the fleet view; the token and raw keys in no URL; no console errors. Run by
 * `npm run test:browser`; UPDATE_SCREENSHOT=1 rewrites the screenshots in docs/.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AE_ACCOUNT_ID, AE_API_TOKEN, aeAnswer } from "../support/analytics_engine.ts";
import { ROOT, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "browser-admin-token-0123456789abcdef";
const CLIENT_IP = "198.51.100.23";
const OVERRIDE_KEY = "sk_browser_override";
/** Evaluated in the page (a string, since the tests are type-checked without the DOM library). */
const TOKEN_IN_STORAGE = `sessionStorage.getItem("sluice-admin-token")`;
const SCREENSHOTS = process.env.UPDATE_SCREENSHOT === "1";

const dirs: string[] = [];
let isolateOnly: WranglerDev | null = null;
let fleet: WranglerDev | null = null;
let aeServer: Server | null = null;
let browser: Browser | null = null;

beforeAll(async () => {
  const plain = mkdtempSync(join(tmpdir(), "sluice-browser-"));
  const withFleet = mkdtempSync(join(tmpdir(), "sluice-browser-fleet-"));
  dirs.push(plain, withFleet);
  const account = spawnSync(
    process.execPath,
    ["bin/sluice.mjs", "accounts", "--key", OVERRIDE_KEY, "--plan", "growth", "--persist-to", plain].concat([
      "--limit",
      "growth-global.rate=250/s",
      "--limit",
      "growth-global.burst=500",
    ]),
    { cwd: ROOT, encoding: "utf8" },
  );
  expect(account.status, account.stderr).toBe(0);
  aeServer = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (c: Buffer) => chunks.push(c));
    request.on("end", async () => {
      const url = `http://${request.headers.host}${request.url}`;
      const answer = aeAnswer(
        url,
        request.headers.authorization ?? null,
        Buffer.concat(chunks).toString(),
        Date.now() / 1000,
      );
      response.writeHead(answer.status, { "Content-Type": answer.headers.get("Content-Type") ?? "text/plain" });
      response.end(await answer.text());
    });
  });
  await new Promise<void>((resolve) => aeServer!.listen(0, "127.0.0.1", resolve));
  const aePort = (aeServer.address() as AddressInfo).port;
  isolateOnly = await startWrangler(plain, { LIMITER_TIMEOUT_MS: "5000", ADMIN_TOKEN });
  fleet = await startWrangler(withFleet, {
    LIMITER_TIMEOUT_MS: "5000",
    ADMIN_TOKEN,
    AE_ACCOUNT_ID,
    AE_API_TOKEN,
    AE_API_BASE: `http://127.0.0.1:${aePort}/client/v4`,
  });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox", // sessions and CI run as root
      "--headless",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  if (isolateOnly !== null) await stopWrangler(isolateOnly);
  if (fleet !== null) await stopWrangler(fleet);
  await new Promise((resolve) => (aeServer === null ? resolve(null) : aeServer.close(resolve)));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A page in its own context, from one client address, recording what it requests and any console error. */
async function open(server: WranglerDev, ip: string) {
  const context: BrowserContext = await browser!.newContext({
    viewport: { width: 1240, height: 900 },
    extraHTTPHeaders: { "CF-Connecting-IP": ip },
  });
  const page = await context.newPage();
  const requested: string[] = [];
  const problems: string[] = [];
  page.on("request", (r) => requested.push(r.url()));
  page.on("console", (m) => {
    // Chromium reports every refused token (401), lockout (429) and failed fleet query (502) answer as a failed
    // resource load: expected here.
    const expected = /Failed to load resource: the server responded with a status of (401|429|502)/.test(m.text());
    if (m.type() === "error" && !expected) problems.push(m.text());
  });
  page.on("pageerror", (e) => problems.push(String(e)));
  await page.goto(`${server.base}/_sluice/`);
  await expect.poll(() => page.locator("#login").isVisible()).toBe(true);
  const apiCalls = () =>
    requested.filter((u) => new URL(u).pathname.startsWith("/_sluice/") && new URL(u).pathname !== "/_sluice/");
  return { context, page, requested, problems, apiCalls };
}

async function logIn(page: Page, token: string) {
  await page.fill("#token", token);
  await page.click("#login-button");
}

/** The value of one row of the key result table. */
const field = (page: Page, name: string) => page.locator(`#key-result tr[data-field="${name}"] td`);

function expectNoTokenInUrls(requested: readonly string[], server: WranglerDev) {
  expect(requested.length).toBeGreaterThan(3);
  for (const url of requested) {
    expect(url.startsWith(`${server.base}/`) || url.startsWith("data:"), url).toBe(true);
    expect(url).not.toContain(ADMIN_TOKEN);
    expect(url).not.toContain("not-the-admin-token");
    // A raw key typed into the lookup form travels in a header, as the token does (URLs reach request logs).
    expect(url).not.toContain(OVERRIDE_KEY);
    expect(url).not.toMatch(/[?&]key=/);
  }
}

describe("dashboard in Chromium, without Analytics Engine", () => {
  it("two wrong tokens, then the right one: one call per login, the refused token never kept", async () => {
    const { context, page, requested, problems, apiCalls } = await open(isolateOnly!, "192.0.2.10");
    expect(await page.locator("#app").isVisible()).toBe(false);
    expect(await page.locator("#refresh").isVisible()).toBe(false);
    for (let attempt = 1; attempt <= 2; attempt++) {
      await logIn(page, `not-the-admin-token-${attempt}`);
      await page.locator("#login-error").filter({ hasText: "The token was refused." }).waitFor();
      expect(apiCalls()).toHaveLength(attempt);
      expect(await page.evaluate(TOKEN_IN_STORAGE)).toBeNull();
      expect(await page.locator("#app").isVisible()).toBe(false);
    }
    await logIn(page, ADMIN_TOKEN);
    await page.locator("#rules-body tr", { hasText: "login-per-ip" }).waitFor();
    expect(await page.evaluate(TOKEN_IN_STORAGE)).toBe(ADMIN_TOKEN);
    expect(await page.locator("#refresh").isVisible()).toBe(true);
    // Without Analytics Engine the page says which view it shows and how to enable the fleet one.
    await expect.poll(() => page.locator("#view").textContent()).toBe("this isolate only");
    expect(await page.locator("#view").isVisible()).toBe(true);
    await page.locator("#fleet-off").waitFor();
    expect(await page.locator("#fleet-steps").textContent()).toContain("npx wrangler secret put AE_API_TOKEN");
    // Counters say what they count; the rules table splits mode, scope and on_error; numbers have separators.
    const requests = page.locator('#stats-body tr[data-stat="requests"] td');
    expect(await requests.first().textContent()).toBe("requests through the gateway (admin requests excluded)");
    await expect.poll(() => requests.nth(2).textContent(), { timeout: 20_000 }).toMatch(/^\d+(\.\d+)?$/);
    const monthly = page.locator("#rules-body tr", { hasText: "scale-monthly" }).locator("td");
    expect(await monthly.nth(1).textContent()).toBe("fixed_window 2,000,000 per month");
    expect(await monthly.nth(6).textContent()).toBe("global");
    expect(await monthly.nth(7).textContent()).toBe("open");
    // A deny rule is listed after the limits, with its status and what its match tests (no identity, scope or on_error).
    const deny = page.locator("#rules-body tr", { hasText: "admin-office-only" }).locator("td");
    expect(await deny.nth(1).textContent()).toBe("deny, status 403; except_address 203.0.113.0/28");
    expect(await deny.nth(3).textContent()).toBe("* /v1/admin/**");
    expect(await deny.nth(4).textContent()).toBe("-");
    await expect.poll(() => page.locator("#updated").textContent()).toMatch(/^updated \d\d:\d\d:\d\d UTC$/);
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, "docs", "dashboard-isolate.png"), fullPage: true });
    expect(problems).toEqual([]);
    expectNoTokenInUrls(requested, isolateOnly!);
    await context.close();
  });

  it("acts on a denial row: looks it up, resets it only after confirming; shows a key's override", async () => {
    const login = () =>
      fetch(`${isolateOnly!.base}/v1/login`, { method: "POST", headers: { "CF-Connecting-IP": CLIENT_IP } });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await login();
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);

    const { context, page, requested, problems } = await open(isolateOnly!, "192.0.2.11");
    await logIn(page, ADMIN_TOKEN);
    const denial = page.locator("#denials-body tr", { hasText: "login-per-ip" });
    await denial.waitFor();
    expect(await denial.locator("td").first().textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    await denial.locator('button[data-action="lookup"]').click();
    await expect.poll(() => field(page, "remaining").textContent()).toBe("0");
    expect(await field(page, "quota").textContent()).toBe("5 (the rule's)");

    // Reset asks first; cancelling changes nothing.
    await denial.locator('button[data-action="reset"]').click();
    await page.locator("#confirm").waitFor();
    expect(await page.locator("#confirm-text").textContent()).toContain("under login-per-ip?");
    await page.click("#confirm-no");
    expect(await page.locator("#confirm").isVisible()).toBe(false);
    const stillDenied = await login();
    await stillDenied.arrayBuffer();
    expect(stillDenied.status).toBe(429);
    await denial.locator('button[data-action="reset"]').click();
    await page.click("#confirm-yes");
    await expect.poll(() => field(page, "reset").textContent()).toBe("state forgotten");
    const afterReset = await login();
    await afterReset.arrayBuffer();
    expect(afterReset.status).toBe(200);

    // A key's account and its override, from the form (the raw key).
    await page.selectOption("#key-rule", "growth-global");
    await page.fill("#key-value", OVERRIDE_KEY);
    await page.click("#lookup");
    await expect.poll(() => field(page, "account").textContent()).toBe("plan growth");
    expect(await field(page, "overrides").textContent()).toBe("growth-global: gcra 250/s, burst 500");
    expect(await field(page, "quota").textContent()).toBe("500 (this account's own limit)");
    await page.click("#reset");
    await page.locator("#confirm").waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, "docs", "dashboard-key.png"), fullPage: true });
    await page.click("#confirm-no");

    // The token survives a reload (session storage) and is gone after logging out.
    await page.reload();
    await page.locator("#rules-body tr", { hasText: "login-per-ip" }).waitFor();
    await page.click("#logout");
    await expect.poll(() => page.locator("#login").isVisible()).toBe(true);
    expect(await page.evaluate(TOKEN_IN_STORAGE)).toBeNull();
    expect(problems).toEqual([]);
    expectNoTokenInUrls(requested, isolateOnly!);
    await context.close();
  });

  it("shows a lockout as a lockout with its time left; the right token works once it ends", async () => {
    const { context, page, requested, problems, apiCalls } = await open(isolateOnly!, "192.0.2.12");
    for (let attempt = 1; attempt <= 5; attempt++) {
      await logIn(page, `not-the-admin-token-${attempt}`);
      await page.locator("#login-error").filter({ hasText: "The token was refused." }).waitFor();
    }
    await logIn(page, "not-the-admin-token-6");
    await page.locator("#lockout").waitFor();
    expect(apiCalls()).toHaveLength(6);
    expect(await page.locator("#lockout").textContent()).toContain("Locked out.");
    expect(await page.locator("#lockout-left").textContent()).toMatch(/^\d+ s$/);
    expect(await page.locator("#login-button").isDisabled()).toBe(true);
    expect(await page.locator("#app").isVisible()).toBe(false);
    expect(await page.evaluate(TOKEN_IN_STORAGE)).toBeNull();
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, "docs", "dashboard-lockout.png") });
    await page.locator("#login-error").filter({ hasText: "The lockout has ended" }).waitFor({ timeout: 30_000 });
    await logIn(page, ADMIN_TOKEN);
    await page.locator("#rules-body tr", { hasText: "login-per-ip" }).waitFor();
    expect(problems).toEqual([]);
    expectNoTokenInUrls(requested, isolateOnly!);
    await context.close();
  });
});

describe("dashboard in Chromium, with the fleet view (recorded Analytics Engine responses)", () => {
  it("draws denials per rule over time, lists the top keys and each rule's traffic beside its limit", async () => {
    const { context, page, requested, problems } = await open(fleet!, "192.0.2.13");
    await logIn(page, ADMIN_TOKEN);
    await expect.poll(() => page.locator("#view").textContent()).toBe("fleet view + this isolate");
    expect(await page.locator("#view").isVisible()).toBe(true);
    await page.locator("#fleet-chart polyline").first().waitFor();
    expect(await page.locator("#fleet-chart polyline").count()).toBe(5);
    // The chart says what a point is and how wide a bucket is, with more than two labels on each axis.
    expect(await page.locator("#fleet-chart-unit").textContent()).toBe(
      "Each point: the denials per 1-minute bucket, summed over every isolate and key (sampling-weighted).",
    );
    expect(await page.locator('#fleet-chart text[data-axis="y-title"]').textContent()).toBe(
      "denials per 1-minute bucket",
    );
    expect(await page.locator('#fleet-chart text[data-axis="y"]').count()).toBeGreaterThan(2);
    expect(await page.locator('#fleet-chart text[data-axis="x"]').count()).toBe(7);
    expect(await page.locator('#fleet-chart text[data-axis="x"]').first().textContent()).toMatch(/^\d\d:\d\d$/);
    const points = await page.locator('#fleet-chart polyline[data-rule="free-global"]').getAttribute("points");
    expect(points!.split(" ")).toHaveLength(60);
    expect(await page.locator("#fleet-legend").textContent()).toContain("free-global");
    expect(await page.locator("#fleet-keys-body tr").count()).toBe(5);
    expect(await page.locator("#fleet-keys-body tr").first().locator("td").nth(3).textContent()).toBe("1,840");
    expect(await page.locator("#fleet-legend").textContent()).toContain("free-global (2,600 in the period)");
    // Fleet-wide decisions in one table; the limits they were made under (each key's own) apart, saying whose.
    const free = page.locator("#fleet-rules-body tr", { hasText: "free-global" }).locator("td");
    expect(await free.nth(1).textContent()).toBe("1,284,000");
    expect(await free.nth(2).textContent()).toBe("357");
    expect(await free.nth(3).textContent()).toBe("2,600");
    expect(await free.nth(4).textContent()).toBe("0.2%");
    const growth = page.locator("#fleet-rules-body tr", { hasText: "growth-global" }).locator("td");
    expect(await growth.nth(6).textContent()).toBe("0.00041%");
    const limit = page.locator("#fleet-limits-body tr", { hasText: "free-global" }).locator("td");
    expect(await limit.nth(1).textContent()).toBe("token_bucket 10/s, burst 20");
    expect(await limit.nth(2).textContent()).toBe("each key on its own");
    expect(await page.locator("#fleet-source").textContent()).toMatch(/queried at \d\d:\d\d:\d\d UTC/);
    if (SCREENSHOTS) await page.screenshot({ path: join(ROOT, "docs", "dashboard.png"), fullPage: true });
    // A failing fleet query (the recordings answer only 1h) takes the chart down; the period stays to choose from.
    await page.selectOption("#fleet-period", "6h");
    await page.locator("#fleet-error").filter({ hasText: "Fleet view failed: " }).waitFor();
    expect(await page.locator("#fleet-data").isVisible()).toBe(false);
    expect(await page.locator("#fleet-source").textContent()).toBe("");
    await page.selectOption("#fleet-period", "1h");
    await page.locator("#fleet-data").waitFor();
    expect(await page.locator("#fleet-error").textContent()).toBe("");
    expect(problems).toEqual([]);
    expectNoTokenInUrls(requested, fleet!);
    await context.close();
  });
});
