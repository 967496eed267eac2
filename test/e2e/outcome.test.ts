/**
 * Counting by the response through `wrangler dev`, in front of a real origin (a plain `node:http` server,
 * test/support/recording_origin.ts) that answers 401: only the failed logins count, the charge comes after each
 * response, and once the limit is crossed the address is banned and the origin sees nothing more.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RecordingOrigin, startRecordingOrigin } from "../support/recording_origin.ts";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const RULES = {
  "logins.yaml": `
- id: failed-logins
  match: { route: "POST /v1/login", identity: ip }
  algorithm: sliding_log
  limit: 2
  window: min
  count_when: { status: [401, 403] }
  block_for: min
`,
};

let dir: string;
let origin: RecordingOrigin;
let sluice: WranglerDev;

beforeAll(async () => {
  dir = projectCopy("sluice-e2e-outcome-", RULES);
  dropBuildStep(dir);
  origin = await startRecordingOrigin();
  sluice = await startWrangler(
    mkdtempSync(join(dir, ".state-")),
    { ECHO_ORIGIN: "false", UPSTREAM_URL: origin.base, LIMITER_TIMEOUT_MS: "5000" },
    dir,
  );
}, 90_000);

afterAll(async () => {
  await stopWrangler(sluice);
  await origin.close();
  rmSync(dir, { recursive: true, force: true });
});

const login = (ip: string, respond: string) =>
  fetch(`${sluice.base}/v1/login`, {
    method: "POST",
    headers: { "CF-Connecting-IP": ip, "x-test-respond": respond },
  });

describe("failed logins per address, against a real origin that answers 401", () => {
  it("successes never count; failures do, after their response; then a ban the origin never sees past", async () => {
    const ip = "198.51.100.34";
    for (let i = 0; i < 4; i++) expect((await login(ip, "status:200")).status).toBe(200);
    expect((await login(ip, "status:401")).status).toBe(401);
    expect((await login(ip, "status:401")).status).toBe(401);
    // The second failure's charge runs after its response: wait for it, without ever sending a request that could
    // be admitted again (the probe below reaches the origin only while the key still has room).
    let refused: Response | null = null;
    for (let i = 0; i < 20 && refused === null; i++) {
      const r = await login(ip, "status:401");
      if (r.status === 429) refused = r;
    }
    expect(refused?.status).toBe(429);
    const retryAfterS = Number(refused?.headers.get("Retry-After"));
    expect(retryAfterS).toBeGreaterThanOrEqual(59);
    expect(retryAfterS).toBeLessThanOrEqual(60);
    const seen = origin.received.filter((r) => r.headers["cf-connecting-ip"] === ip || r.target === "/v1/login").length;
    for (let i = 0; i < 3; i++) expect((await login(ip, "status:200")).status).toBe(429);
    expect(origin.received.filter((r) => r.headers["cf-connecting-ip"] === ip || r.target === "/v1/login").length).toBe(
      seen,
    );
    // Another address is untouched.
    expect((await login("198.51.100.35", "status:200")).status).toBe(200);
  });
});
