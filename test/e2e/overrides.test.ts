/**
 * Per-account overrides end to end: `sluice accounts` writes records into the local KV that a real `wrangler dev`
 * reads; the overridden account is limited at its own burst and the headers say so (test/integration/overrides.test.ts
 * shows the other accounts keep the rule's); raising the override while the key is spent carries its state over (still denied, under the new
 * quota) instead of resetting it; a record with an invalid override (written around the CLI's checks) is logged by
 * the Worker and the rule's own parameters apply.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  dropBuildStep,
  OFFLINE_ENV,
  projectCopy,
  shippedRules,
  startWrangler,
  stopWrangler,
  type WranglerDev,
} from "../support/wrangler_dev.ts";

const persistTo = mkdtempSync(join(tmpdir(), "sluice-e2e-overrides-"));
const COPY = projectCopy("sluice-e2e-overrides-copy-", shippedRules());
dropBuildStep(COPY);
let server: WranglerDev | null = null;

function sluice(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, ["bin/sluice.mjs", ...args], { cwd: COPY, encoding: "utf8" });
}

function account(key: string, ...limits: string[]): void {
  const args = ["accounts", "--key", key, "--plan", "growth", "--persist-to", persistTo];
  for (const limit of limits) args.push("--limit", limit);
  const r = sluice(...args);
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toContain("wrote it into the local ACCOUNTS namespace");
}

beforeAll(async () => {
  account("sk_e2e_big", "growth-global.rate=1/h", "growth-global.burst=3");
  // No account cache, so a changed record applies to the very next request.
  server = await startWrangler(persistTo, { LIMITER_TIMEOUT_MS: "5000", PLAN_CACHE_TTL_MS: "0" }, COPY);
});

afterAll(async () => {
  if (process.env.E2E_DEBUG === "1") process.stderr.write(server?.output.join("") ?? "");
  if (server !== null) await stopWrangler(server);
  rmSync(persistTo, { recursive: true, force: true });
  rmSync(COPY, { recursive: true, force: true });
});

async function get(key: string): Promise<Response> {
  const send = () => fetch(`${server!.base}/v1/quotes`, { headers: { Authorization: `Bearer ${key}` } });
  // After a long pause (a CLI run), the keep-alive socket fetch reuses may already be closed by the server: that
  // request never reached the Worker, so it is sent again once on a fresh connection.
  const r = await send().catch((error: Error & { cause?: { code?: string } }) => {
    if (error.cause?.code === "UND_ERR_SOCKET") return send();
    throw error;
  });
  await r.arrayBuffer();
  return r;
}

describe("per-account overrides through wrangler dev", () => {
  it("the overridden account gets its own limit, the headers say so, and a change carries its state over", async () => {
    const responses: Response[] = [];
    for (let i = 0; i < 4; i++) responses.push(await get("sk_e2e_big"));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    const policy = responses[3]!.headers.get("RateLimit-Policy");
    expect(policy).toMatch(/^"growth-global";q=3;w=10800, "growth-daily";q=\d+;w=86400$/);
    // Answered by the blocked-key cache this time: the same items as the object's denial.
    const denied = await get("sk_e2e_big");
    expect(denied.status).toBe(429);
    expect(denied.headers.get("RateLimit-Policy")).toBe(policy);

    // A bigger burst while the key is spent: it keeps its (empty) tokens, as on a redeploy, under the new quota.
    account("sk_e2e_big", "growth-global.rate=1/h", "growth-global.burst=6");
    const after = await get("sk_e2e_big");
    expect(after.status).toBe(429);
    expect(after.headers.get("RateLimit-Policy")).toContain(`"growth-global";q=6;w=21600`);
  });

  it("an invalid override stored around the CLI is logged by the Worker, and the rule's own parameters apply", async () => {
    const hash = createHash("sha256").update("sk_e2e_bad").digest("hex");
    const record = JSON.stringify({ plan: "growth", limits: { "growth-global": { rate: "1/h", burst: "lots" } } });
    const put = spawnSync(
      "npx",
      ["wrangler", "kv", "key", "put", "--binding", "ACCOUNTS", "--local", "--persist-to", persistTo, hash, record],
      { cwd: COPY, encoding: "utf8", env: { ...process.env, ...OFFLINE_ENV } },
    );
    expect(put.status, put.stderr).toBe(0);
    const r = await get("sk_e2e_bad");
    expect(r.status).toBe(200);
    expect(r.headers.get("RateLimit-Policy")).toContain(`"growth-global";q=100;w=2`);
    await expect
      .poll(() => server!.output.join(""), { timeout: 10_000 })
      .toContain(`growth-global.burst: must be a positive integer, got \\"lots\\"`);
    expect(server!.output.join("")).not.toContain("sk_e2e_bad");
  });
});
