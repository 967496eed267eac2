/**
 * Requests with bodies through Sluice to a real origin once an admin token is set (issue 35's first finding): the
 * deployment shape of every production Sluice with `UPSTREAM_URL` and `ADMIN_TOKEN`. The origin is a plain Node HTTP
 * server that reads and records every body byte (test/support/recording_origin.ts), not the echo origin, which never
 * reads one. The admin token comes from this test's own `--var`, never from a developer's .dev.vars (a project copy
 * has none).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { send } from "../support/raw_client.ts";
import { type RecordingOrigin, startRecordingOrigin } from "../support/recording_origin.ts";
import {
  dropBuildStep,
  projectCopy,
  shippedRules,
  startWrangler,
  stopWrangler,
  type WranglerDev,
} from "../support/wrangler_dev.ts";

const ADMIN_TOKEN = "e2e-forwarding-admin-token-0123456789";
const persistTo = mkdtempSync(join(tmpdir(), "sluice-e2e-fwd-"));
const dir = projectCopy("sluice-e2e-fwd-copy-", shippedRules());
dropBuildStep(dir);
let origin: RecordingOrigin;
let sluice: WranglerDev | null = null;

beforeAll(async () => {
  origin = await startRecordingOrigin();
  sluice = await startWrangler(
    persistTo,
    { UPSTREAM_URL: origin.base, ECHO_ORIGIN: "false", ADMIN_TOKEN, LIMITER_TIMEOUT_MS: "5000" },
    dir,
  );
});

afterAll(async () => {
  if (sluice !== null) await stopWrangler(sluice);
  await origin?.close();
  rmSync(persistTo, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

const address = (n: number) => ["CF-Connecting-IP", `203.0.113.${n}`] as const;

describe("bodies reach a real origin with ADMIN_TOKEN set (was 502 'ReadableStream is disturbed')", () => {
  // What an API client does all day: create, replace, patch with a JSON body, and delete with an empty one.
  const cases: [string, Buffer | undefined][] = [
    ["POST", Buffer.from('{"name":"a"}')],
    ["PUT", Buffer.from('{"name":"b"}')],
    ["PATCH", Buffer.from('{"name":"c"}')],
    ["DELETE", Buffer.alloc(0)],
  ];
  for (const [method, body] of cases) {
    it(`${method} with a ${body?.length ?? 0}-byte body arrives whole`, async () => {
      const id = `${method}-${Date.now()}`;
      const r = await send(sluice!.base, {
        method,
        target: `/v1/things/${id}?x=1`,
        headers: [address(7), ["Content-Type", "application/json"], ["X-Test-Id", id]],
        body,
      });
      expect(r.status, r.body.toString()).toBe(200);
      const got = origin.received.find((x) => x.headers["x-test-id"] === id);
      expect(got?.method).toBe(method);
      expect(got?.target).toBe(`/v1/things/${id}?x=1`);
      expect(got?.body?.toString()).toBe(body?.toString());
    });
  }

  it("the admin token itself is stripped while the body still arrives", async () => {
    const id = `token-${Date.now()}`;
    const r = await send(sluice!.base, {
      method: "POST",
      target: "/v1/things",
      headers: [address(8), ["X-Test-Id", id], ["X-Leak", `Bearer ${ADMIN_TOKEN}`]],
      body: Buffer.from("payload"),
    });
    expect(r.status, r.body.toString()).toBe(200);
    const got = origin.received.find((x) => x.headers["x-test-id"] === id);
    expect(got?.body?.toString()).toBe("payload");
    expect(got?.headers["x-leak"]).toBeUndefined();
  });
});
