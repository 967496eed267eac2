/**
 * The package other projects install (`npm pack`): only the client, built with its types, and the types a consumer
 * compiles against say what the binding takes and answers.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const scratch = mkdtempSync(join(tmpdir(), "sluice-package-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("npm pack", () => {
  it("lists only the built client, its types, the README and the bin (which needs a checkout, and says so)", () => {
    const packed = spawnSync("npm", ["pack", "--dry-run", "--json"], { cwd: ROOT, encoding: "utf8" });
    expect(packed.status, packed.stderr).toBe(0);
    const [{ files }] = JSON.parse(packed.stdout) as [{ files: { path: string }[] }];
    const modules = ["hono", "index", "respond", "time", "types", "with_sluice"];
    expect(files.map((f) => f.path).sort()).toEqual(
      [
        "README.md",
        "bin/sluice.mjs",
        "package.json",
        ...modules.flatMap((m) => [`lib/client/${m}.d.ts`, `lib/client/${m}.js`]),
      ].sort(),
    );
  }, 60_000);

  it("the shipped types check a consumer's code, and refuse a wrong call", () => {
    // Runs after the pack above, which built lib/client (prepack).
    const consumer = join(scratch, "consumer.ts");
    writeFileSync(
      consumer,
      `import { type SluiceBinding, withSluice } from "${ROOT}/lib/client/index.js";
import { sluice } from "${ROOT}/lib/client/hono.js";
declare const env: { SLUICE: SluiceBinding };
export async function run(): Promise<number | null> {
  const { success, remaining, headers } = await env.SLUICE.limit({ key: "k", rule: "login-per-ip", cost: 2 });
  const checked = await env.SLUICE.check({ url: "https://a.test/", headers: { "cf-connecting-ip": "192.0.2.1" } });
  void [success, headers["RateLimit"], checked.problem?.status, sluice(), withSluice(async () => new Response("ok"))];
  // @ts-expect-error limit takes a key
  await env.SLUICE.limit({ rule: "login-per-ip" });
  return remaining;
}
`,
    );
    const tsc = spawnSync(
      process.execPath,
      [
        join(ROOT, "node_modules/typescript/bin/tsc"),
        "--noEmit",
        "--strict",
        "--skipLibCheck",
        "--target",
        "ES2022",
        "--module",
        "ESNext",
        "--moduleResolution",
        "Bundler",
        "--types",
        "@cloudflare/workers-types",
        "--typeRoots",
        join(ROOT, "node_modules"),
        consumer,
      ],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.status).toBe(0);
  }, 60_000);
});
