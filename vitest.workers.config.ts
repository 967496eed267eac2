import { spawnSync } from "node:child_process";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// The Worker imports the compiled rules: validate and compile them first, so invalid rules stop the tests with the
// validator's messages (and a fresh checkout needs no separate step).
const compiled = spawnSync(process.execPath, ["bin/sluice.mjs", "compile"], { encoding: "utf8" });
if (compiled.status !== 0) {
  process.stderr.write(compiled.stderr);
  throw new Error("sluice compile failed: the rules are invalid (see above)");
}

// Workers-runtime tests: the Worker and its Durable Object in workerd, with the wrangler.toml bindings.
export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        // Limiter calls get a generous budget here: a test machine under load must not turn a decision into a
        // fail-open. The failure paths are tested by injecting faults, not by racing the clock.
        // ADMIN_TOKEN is a secret in production (`wrangler secret put`); the tests give it a fixed test value.
        // ECHO_ORIGIN: admitted requests are answered by the echo origin, as under `npm start`.
        // KEY_LOOKUPS_PER_MIN: the tests send hundreds of fresh keys from no client address under a frozen clock; the
        // per-address budget is tested on its own (test/integration/unverified.test.ts) with the production value.
        bindings: {
          LIMITER_TIMEOUT_MS: "10000",
          ECHO_ORIGIN: "true",
          ADMIN_TOKEN: "test-admin-token-0123456789abcdef",
          KEY_LOOKUPS_PER_MIN: "1000000",
        },
      },
    }),
  ],
  test: {
    include: ["test/integration/**/*.test.ts"],
    testTimeout: 30_000,
  },
});
