/**
 * The dashboard's "Active bans" table in a real browser: Debian's Chromium (playwright-core) against a real
 * `wrangler dev` on a free port of 127.0.0.1, in front of a real origin (test/support/recording_origin.ts) that answers
 * the logins 401. Failed logins cross a `block_for` rule's limit; the ban shows in the table (rule, hashed key, time
 * left), and its Reset button, once confirmed, lifts it: the table empties and the address's next login reaches the
 * origin again. Run by `npm run test:browser` (not part of `npm test`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RecordingOrigin, startRecordingOrigin } from "../support/recording_origin.ts";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "browser-bans-token-0123456789abcdef";
const CLIENT_IP = "203.0.113.41";
const RULES = {
  "logins.yaml": `
- id: failed-logins
  match: { route: "POST /v1/login", identity: ip }
  algorithm: sliding_log
  limit: 2
  window: 15min
  count_when: { status: [401, 403] }
  block_for: 15min
`,
};

let dir: string;
let persistTo: string;
let origin: RecordingOrigin;
let sluice: WranglerDev | null = null;
let browser: Browser | null = null;

beforeAll(async () => {
  dir = projectCopy("sluice-browser-bans-", RULES);
  dropBuildStep(dir);
  persistTo = mkdtempSync(join(tmpdir(), "sluice-browser-bans-state-"));
  origin = await startRecordingOrigin();
  sluice = await startWrangler(
    persistTo,
    { ECHO_ORIGIN: "false", UPSTREAM_URL: origin.base, LIMITER_TIMEOUT_MS: "5000", ADMIN_TOKEN },
    dir,
  );
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
});

afterAll(async () => {
  await browser?.close();
  if (sluice !== null) await stopWrangler(sluice);
  await origin?.close();
  for (const d of [dir, persistTo]) if (d !== undefined) rmSync(d, { recursive: true, force: true });
});

const login = async (respond: string) => {
  const r = await fetch(`${sluice!.base}/v1/login`, {
    method: "POST",
    headers: { "CF-Connecting-IP": CLIENT_IP, "x-test-respond": respond },
  });
  await r.arrayBuffer();
  return r.status;
};
const originLogins = () => origin.received.filter((r) => r.target === "/v1/login").length;

describe("dashboard in Chromium: active bans", () => {
  it("lists a block_for ban with its hashed key, and Reset lifts it after confirming", async () => {
    expect([await login("status:401"), await login("status:401")]).toEqual([401, 401]);
    // The second failure is charged after its response: refused (and banned) once that charge has landed.
    let refused = false;
    for (let i = 0; i < 20 && !refused; i++) refused = (await login("status:401")) === 429;
    expect(refused).toBe(true);
    const seen = originLogins();
    expect(await login("status:200")).toBe(429);
    expect(originLogins()).toBe(seen);

    const context = await browser!.newContext({ extraHTTPHeaders: { "CF-Connecting-IP": "192.0.2.30" } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("pageerror", (e) => problems.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    await page.goto(`${sluice!.base}/_sluice/`);
    await page.fill("#token", ADMIN_TOKEN);
    await page.click("#login-button");
    const ban = page.locator("#bans-body tr", { hasText: "failed-logins" });
    await ban.waitFor();
    expect(await page.locator("#bans-body tr").count()).toBe(1);
    expect(await page.locator("#bans-empty").isVisible()).toBe(false);
    const cells = ban.locator("td");
    // The key is the address's hash (never the address), shown shortened with the whole hash as its title.
    const keyHash = await cells.nth(1).getAttribute("title");
    expect(keyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(await page.content()).not.toContain(CLIENT_IP);
    // Time left: block_for (15 min) from the refusal, less the few seconds since.
    const left = /^(\d+(?:\.\d)?) s$/.exec((await cells.nth(2).textContent()) ?? "");
    expect(Number(left?.[1])).toBeGreaterThan(800);
    expect(Number(left?.[1])).toBeLessThanOrEqual(900);

    // Reset asks first; cancelling leaves the ban.
    await ban.locator('button[data-action="reset"]').click();
    await page.locator("#confirm").waitFor();
    expect(await page.locator("#confirm-text").textContent()).toContain("under failed-logins?");
    await page.click("#confirm-no");
    expect(await login("status:200")).toBe(429);
    await ban.locator('button[data-action="reset"]').click();
    await page.click("#confirm-yes");
    // The table empties (at once or at the next refresh) and the address reaches the origin again.
    await expect.poll(() => page.locator("#bans-body tr").count(), { timeout: 20_000 }).toBe(0);
    expect(await page.locator("#bans-empty").isVisible()).toBe(true);
    expect(await login("status:200")).toBe(200);
    expect(originLogins()).toBe(seen + 1);
    expect(problems).toEqual([]);
    await context.close();
  });
});
