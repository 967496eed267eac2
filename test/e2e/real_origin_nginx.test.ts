/**
 * Sluice (`UPSTREAM_URL`) in front of Debian's NGINX as the origin server, which proxies to the recording origin:
 * the deployment most APIs have (test/support/nginx_origin.ts). The same suite as real_origin.test.ts
 * (test/support/forwarding_suite.ts): what reaches the application through both is what the client sent.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "vitest";
import { describeForwarding, SUITE_ADMIN_TOKEN, SUITE_RULES } from "../support/forwarding_suite.ts";
import { startNginxOrigin } from "../support/nginx_origin.ts";
import { startRecordingOrigin } from "../support/recording_origin.ts";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler } from "../support/wrangler_dev.ts";

const dir = projectCopy("sluice-e2e-nginx-", SUITE_RULES);
dropBuildStep(dir);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeForwarding(
  "UPSTREAM_URL: Sluice in front of NGINX in front of the application",
  async () => {
    const origin = await startRecordingOrigin();
    const nginx = await startNginxOrigin(origin.port);
    const sluice = await startWrangler(
      mkdtempSync(join(dir, ".state-")),
      { ECHO_ORIGIN: "false", ADMIN_TOKEN: SUITE_ADMIN_TOKEN, LIMITER_TIMEOUT_MS: "5000", UPSTREAM_URL: nginx.base },
      dir,
    );
    return {
      base: sluice.base,
      origin,
      stop: async () => {
        await stopWrangler(sluice);
        await nginx.stop();
        await origin.close();
      },
    };
  },
  { route: "sluice", seed: 354, webSocket: true, largeUpload: true },
);
