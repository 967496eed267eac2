import { defineConfig } from "vitest/config";

// The dashboard in a real browser (Debian's chromium, driven by playwright-core) against a real `wrangler dev`.
// Run by `npm run test:browser` (scripts/test-browser.mjs checks for Chromium first); not part of `npm test`.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    environment: "node",
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
