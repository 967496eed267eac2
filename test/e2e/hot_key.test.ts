/**
 * One hot key through a real `wrangler dev` (a temp copy of the project with one rule compiled in, on a free port of
 * 127.0.0.1, stopped by killing the process group it started): 64 concurrent requests on one key make at most 0.25
 * object calls per request (`GET /_sluice/stats`: a coalesced batch is one call) and admit exactly the rule's limit.
 * A count, not a timing: however slow the machine, the isolate may only make fewer calls, never admit more.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef";
const LIMIT = 10;
// GCRA at 1 per hour: exactly LIMIT admitted at once, and no refill while the test runs.
const RULES = `- id: hot
  match: { route: "GET /hot", identity: ip }
  algorithm: gcra
  rate: 1/h
  burst: ${LIMIT}
`;

let dir = "";
let server: WranglerDev | null = null;

beforeAll(async () => {
  dir = projectCopy("sluice-e2e-hot-", { "hot.yaml": RULES });
  dropBuildStep(dir);
  // A generous call budget: a loaded machine must not turn a decision into a fail-open (which would admit more).
  server = await startWrangler(join(dir, ".state"), { LIMITER_TIMEOUT_MS: "10000", ADMIN_TOKEN }, dir);
});

afterAll(async () => {
  if (server !== null) await stopWrangler(server);
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

async function stats(): Promise<Record<string, number>> {
  const response = await fetch(`${server!.base}/_sluice/stats`, {
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(response.status).toBe(200);
  return response.json() as Promise<Record<string, number>>;
}

describe("one hot key in wrangler dev", () => {
  it("64 concurrent requests on one key: at most 0.25 object calls per request, and exactly the limit admitted", async () => {
    const rounds = ["198.51.100.21", "198.51.100.22", "198.51.100.23"];
    const before = await stats();
    for (const ip of rounds) {
      const statuses = await Promise.all(
        Array.from({ length: 64 }, async () => {
          const response = await fetch(`${server!.base}/hot`, { headers: { "CF-Connecting-IP": ip } });
          await response.arrayBuffer();
          return response.status;
        }),
      );
      const seen = `statuses for ${ip}: ${statuses.join(",")}`;
      expect(statuses.filter((s) => s === 200).length, seen).toBe(LIMIT);
      expect(statuses.filter((s) => s === 429).length, seen).toBe(64 - LIMIT);
    }
    const after = await stats();
    const requests = after.requests! - before.requests!;
    const calls = after.object_calls! - before.object_calls!;
    expect(requests).toBe(64 * rounds.length);
    expect(after.fail_open! - before.fail_open!).toBe(0);
    expect(calls / requests, `${calls} object calls for ${requests} requests`).toBeLessThanOrEqual(0.25);
    expect(calls).toBeGreaterThan(0);
  });
});
