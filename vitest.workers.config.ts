import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { buildSync } from "esbuild";
import { kCurrentWorker } from "miniflare";
import { defineConfig } from "vitest/config";
import { QUIET_WORKERS } from "./test/support/quiet.ts";

// The Worker imports the compiled rules (src/generated/rules.ts). Here it gets a copy of the shipped example
// (test/fixtures/shipped/), compiled into a module of its own, so that a user's edits to rules/ never change what
// these tests see, and a running `npm start` never sees the tests' rules.
const TEST_RULES = join(import.meta.dirname, "src", "generated", "test-rules.ts");
const compiled = spawnSync(
  process.execPath,
  ["bin/sluice.mjs", "compile", "--rules", "test/fixtures/shipped", "--out", TEST_RULES],
  { encoding: "utf8" },
);
if (compiled.status !== 0) {
  process.stderr.write(compiled.stderr);
  throw new Error("sluice compile failed: the test rules are invalid (see above)");
}

// wrangler.toml as the tests read it, from a folder of its own: wrangler reads `.dev.vars` beside the configuration,
// and a developer's `.dev.vars` (the admin token `npm start` wrote, a KEY_HASH_SECRET) must not change what the tests
// see. The copy names the Worker's entry by its absolute path and has no [build] step (the rules are compiled above).
// One per checkout: node_modules may be shared (a git worktree's a link to the main checkout's), and a test run of
// one checkout must not rewrite the configuration another's run reads (its `main` names that checkout's sources).
const CACHE_DIR = join(
  import.meta.dirname,
  "node_modules",
  ".cache",
  `sluice-${createHash("sha256")
    .update(import.meta.dirname)
    .digest("hex")
    .slice(0, 12)}`,
);
const TEST_CONFIG_DIR = join(CACHE_DIR, "test-config");
const TEST_CONFIG = join(TEST_CONFIG_DIR, "wrangler.toml");
{
  const toml = readFileSync(join(import.meta.dirname, "wrangler.toml"), "utf8")
    .replace(/^main = "(.*)"$/m, (_, main: string) => `main = ${JSON.stringify(join(import.meta.dirname, main))}`)
    .replace(/^\[build\]\n(?:[a-z_]+ = .*\n)+/m, "");
  if (toml.includes("[build]") || !toml.includes(`main = "${import.meta.dirname}`))
    throw new Error("vitest.workers.config.ts: could not rewrite wrangler.toml for the tests (main, [build])");
  mkdirSync(TEST_CONFIG_DIR, { recursive: true });
  writeFileSync(TEST_CONFIG, toml);
}

// The example consumers (examples/), bundled as `wrangler deploy` would, with sluice/client and sluice/hono from their
// sources. They run as auxiliary Workers beside the one under test and bind to its `RateLimiter` entrypoint.
const CONSUMERS_DIR = join(CACHE_DIR, "consumers");
for (const name of ["plain-worker", "hono-api"]) {
  buildSync({
    entryPoints: [`examples/${name}/src/index.ts`],
    outfile: `${CONSUMERS_DIR}/${name}.mjs`,
    bundle: true,
    format: "esm",
    platform: "neutral",
    conditions: ["sluice-source", "workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    external: ["cloudflare:*"],
    logLevel: "error",
  });
}
/** The Worker under test, as the pool names it for the project named `workers` (the consumers bind to it). */
const SLUICE = "vitest-pool-workers-runner-workers";
const consumer = (
  name: string,
  serviceBindings: Record<string, { name: string; entrypoint: string; props?: Record<string, unknown> }>,
) => ({
  name,
  modules: true,
  scriptPath: `${CONSUMERS_DIR}/${name}.mjs`,
  compatibilityDate: "2026-04-20",
  serviceBindings,
});

// Workers-runtime tests: the Worker and its Durable Object in workerd, with the wrangler.toml bindings.
export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: TEST_CONFIG },
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
        // The service binding as a consumer sees it (test/integration/binding.test.ts), and the example consumers.
        serviceBindings: {
          SLUICE: { name: kCurrentWorker, entrypoint: "RateLimiter" },
          SLUICE_LOGIN: { name: kCurrentWorker, entrypoint: "RateLimiter", props: { rule: "login-per-ip" } },
          PLAIN_WORKER: "plain-worker",
          HONO_API: "hono-api",
        },
        workers: [
          consumer("plain-worker", {
            MY_RATE_LIMITER: { name: SLUICE, entrypoint: "RateLimiter", props: { rule: "login-per-ip" } },
            SLUICE: { name: SLUICE, entrypoint: "RateLimiter" },
          }),
          consumer("hono-api", { SLUICE: { name: SLUICE, entrypoint: "RateLimiter" } }),
        ],
      },
    }),
  ],
  resolve: { alias: [{ find: /^.*\/generated\/rules\.ts$/, replacement: TEST_RULES }] },
  test: {
    name: "workers",
    include: ["test/integration/**/*.test.ts"],
    // Only the summary when every test passes (test/support/quiet.ts): the Worker logs a JSON line per denial and
    // workerd logs every fault a test injects; both are shown when a test fails.
    ...QUIET_WORKERS,
    testTimeout: 30_000,
    // Two test files at a time, each in a workerd of its own (vitest's default is one fewer than the cores: one here).
    // A file's time is mostly starting its runtime and importing the Worker into it, so two overlap well on 2 cores.
    // (`isolate: false`, one runtime for every file, was tried: vitest-pool-workers 0.15 wraps the module runner once
    // more for every file it runs, and the suite took over 8 minutes instead of under 2.)
    maxWorkers: 2,
  },
});
