/**
 * The dashboard at /_sluice/ in a real browser: Debian's Chromium driven by playwright-core, against a real
 * `wrangler dev` on a free port of 127.0.0.1. A client is denied at login, then the page is loaded, a wrong token is
 * refused, the right one logs in, the denial shows up in the isolate's ring, the client's key is looked up and reset
 * (and its next login is admitted again). The page makes no request outside this origin and never puts the token in
 * a URL. Run by `npm run test:browser`; UPDATE_SCREENSHOT=1 rewrites docs/dashboard.png.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "browser-admin-token-0123456789abcdef";
const CLIENT_IP = "198.51.100.23";
const persistTo = mkdtempSync(join(tmpdir(), "sluice-browser-"));
let server: WranglerDev | null = null;
let browser: Browser | null = null;
/** Evaluated in the page (a string, since the tests are type-checked without the DOM library). */
const TOKEN_IN_STORAGE = `sessionStorage.getItem("sluice-admin-token")`;

beforeAll(async () => {
  server = await startWrangler(persistTo, { LIMITER_TIMEOUT_MS: "5000", ADMIN_TOKEN });
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
  if (server !== null) await stopWrangler(server);
  rmSync(persistTo, { recursive: true, force: true });
});

const login = () => fetch(`${server!.base}/v1/login`, { method: "POST", headers: { "CF-Connecting-IP": CLIENT_IP } });

/** The value of one row of the key result table. */
const field = (page: Page, name: string) => page.locator(`#key-result tr[data-field="${name}"] td`);

describe("dashboard in Chromium", () => {
  it("logs in with the token, shows rules, counters and the denial, looks up a key and resets it", async () => {
    // login-per-ip admits 5 per 60 s: the sixth is denied, and lands in this isolate's ring of recent denials.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await login();
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);

    const context = await browser!.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const requested: string[] = [];
    const problems: string[] = [];
    page.on("request", (r) => requested.push(r.url()));
    page.on("console", (m) => {
      if (m.type() === "error" && !m.text().includes("401")) problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(String(e)));

    await page.goto(`${server!.base}/_sluice/`);
    await expect.poll(() => page.locator("#login").isVisible()).toBe(true);
    expect(await page.locator("#app").isVisible()).toBe(false);

    await page.fill("#token", "not-the-admin-token-at-all");
    await page.click("#login-button");
    await page.locator("#login-error").filter({ hasText: "The token was refused." }).waitFor();
    expect(await page.evaluate(TOKEN_IN_STORAGE)).toBeNull();

    await page.fill("#token", ADMIN_TOKEN);
    await page.click("#login-button");
    await page.locator("#rules-body tr", { hasText: "login-per-ip" }).waitFor();
    expect(await page.locator("#per-isolate").textContent()).toContain("Counters are per isolate.");
    expect(await page.locator("#rules-body tr").count()).toBeGreaterThanOrEqual(10);
    const denial = page.locator("#denials-body tr", { hasText: "login-per-ip" });
    await denial.waitFor();
    expect(await denial.locator("td").nth(3).textContent()).toMatch(/^\d+(\.\d)? m?s$/);
    expect(Number(await page.locator('[data-stat="denials"] .mono').textContent())).toBeGreaterThanOrEqual(1);

    await page.selectOption("#key-rule", "login-per-ip");
    await page.fill("#key-value", CLIENT_IP);
    await page.click("#lookup");
    await expect.poll(() => field(page, "remaining").textContent()).toBe("0");
    expect(await field(page, "quota").textContent()).toBe("5 (the rule's)");
    expect(await field(page, "retry after").textContent()).toMatch(/^\d+(\.\d)? m?s$/);

    if (process.env.UPDATE_SCREENSHOT === "1") {
      await page.screenshot({ path: join(ROOT, "docs", "dashboard.png"), fullPage: true });
    }

    await page.click("#reset");
    await expect.poll(() => field(page, "reset").textContent()).toBe("state forgotten");
    await page.click("#lookup");
    await expect.poll(() => field(page, "remaining").textContent()).toBe("5");
    const afterReset = await login();
    await afterReset.arrayBuffer();
    expect(afterReset.status).toBe(200);

    // The token survives a reload (session storage) and is gone after logging out.
    await page.reload();
    await page.locator("#rules-body tr", { hasText: "login-per-ip" }).waitFor();
    await page.click("#logout");
    await expect.poll(() => page.locator("#login").isVisible()).toBe(true);
    expect(await page.evaluate(TOKEN_IN_STORAGE)).toBeNull();

    expect(problems).toEqual([]);
    expect(requested.length).toBeGreaterThan(4);
    for (const url of requested) {
      expect(url.startsWith(`${server!.base}/`) || url.startsWith("data:"), url).toBe(true);
      expect(url).not.toContain(ADMIN_TOKEN);
    }
    await context.close();
  });
});
