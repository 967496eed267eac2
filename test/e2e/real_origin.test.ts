/**
 * Sluice in front of a real origin, three ways (issue 35): a Node HTTP server that records every byte it receives
 * (test/support/recording_origin.ts) behind Sluice's `UPSTREAM_URL`, behind `PASS_THROUGH` (wrangler dev's
 * `--local-upstream` stands for the zone's origin), and behind a caller Worker that asks the binding's `check` and
 * then fetches the origin itself. The suite is test/support/forwarding_suite.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "vitest";
import { describeForwarding, SUITE_ADMIN_TOKEN, SUITE_RULES } from "../support/forwarding_suite.ts";
import { startRecordingOrigin } from "../support/recording_origin.ts";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler } from "../support/wrangler_dev.ts";

const dir = projectCopy("sluice-e2e-origin-", SUITE_RULES);
dropBuildStep(dir);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sluiceVars = { ECHO_ORIGIN: "false", ADMIN_TOKEN: SUITE_ADMIN_TOKEN, LIMITER_TIMEOUT_MS: "5000" };

async function front(vars: Record<string, string>, args: (port: number) => string[] = () => []) {
  const origin = await startRecordingOrigin();
  const sluice = await startWrangler(
    mkdtempSync(join(dir, ".state-")),
    { ...vars, ...(vars.UPSTREAM_URL === "" ? { UPSTREAM_URL: origin.base } : {}) },
    dir,
    args(origin.port),
  );
  return {
    base: sluice.base,
    origin,
    stop: async () => {
      await stopWrangler(sluice);
      await origin.close();
    },
  };
}

describeForwarding(
  "UPSTREAM_URL: Sluice as the proxy in front of an API",
  () => front({ ...sluiceVars, UPSTREAM_URL: "" }),
  {
    route: "sluice",
    seed: 351,
    webSocket: true,
    // The 100 MiB upload runs through NGINX (real_origin_nginx.test.ts), the shorter file, in parallel with this one.
    largeUpload: false,
  },
);

describeForwarding(
  "PASS_THROUGH: Sluice on a zone route in front of the zone's origin",
  () =>
    front({ ...sluiceVars, PASS_THROUGH: "true" }, (port) => [
      "--local-upstream",
      `127.0.0.1:${port}`,
      "--upstream-protocol",
      "http",
    ]),
  { route: "sluice", seed: 352, webSocket: true, largeUpload: false },
);

/** A caller Worker: `withSluice` (the binding's `check`) around its own fetch of the origin, as a user writes it. */
const CALLER = `
import { withSluice } from "../src/client/with_sluice.ts";
export default {
  fetch: withSluice(async (request, env) => {
    const url = new URL(request.url);
    return fetch(new Request(env.ORIGIN + url.pathname + url.search, request), { redirect: "manual" });
  }),
};
`;

describeForwarding(
  "the binding's check, then the caller's own fetch",
  async () => {
    const origin = await startRecordingOrigin();
    mkdirSync(join(dir, "caller"), { recursive: true });
    writeFileSync(join(dir, "caller", "index.js"), CALLER);
    writeFileSync(
      join(dir, "caller", "wrangler.toml"),
      `name = "caller"\nmain = "index.js"\ncompatibility_date = "2026-04-20"\n[vars]\nORIGIN = "${origin.base}"\n` +
        `[[services]]\nbinding = "SLUICE"\nservice = "sluice"\nentrypoint = "RateLimiter"\n`,
    );
    const sluice = await startWrangler(mkdtempSync(join(dir, ".state-")), { ORIGIN: origin.base }, dir, [
      "-c",
      "caller/wrangler.toml",
      "-c",
      "wrangler.toml",
    ]);
    return {
      base: sluice.base,
      origin,
      stop: async () => {
        await stopWrangler(sluice);
        await origin.close();
      },
    };
  },
  { route: "caller", seed: 353, webSocket: false, largeUpload: false },
);
