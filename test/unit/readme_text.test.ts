/**
 * What a newcomer looks for in the README is there (test/e2e/readme.test.ts runs its commands): a table of contents,
 * the test command in the Quick start, how to check a rule before shipping, the terms it uses explained, the Node
 * version package.json requires, and NGINX commands that write nothing into the live rule set or the repository root.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const readme = readFileSync(join(ROOT, "README.md"), "utf8");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } };
/** `## ` headings' GitHub anchors. */
const anchors = [...readme.matchAll(/^## (.+)$/gm)].map(([, title]) =>
  title!
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, "")
    .replace(/ /g, "-"),
);
const section = (title: string) => {
  const start = readme.indexOf(`## ${title}\n`);
  expect(start, title).toBeGreaterThanOrEqual(0);
  const end = readme.indexOf("\n## ", start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
};

describe("the README", () => {
  it("opens with a table of contents linking every section", () => {
    const contents = /\*\*Contents:\*\*([\s\S]*?)\n\n/.exec(readme)?.[1] ?? "";
    for (const anchor of anchors) expect(contents, anchor).toContain(`(#${anchor})`);
  });

  it('says to run the tests in its Quick start, and has a "Check a rule before you ship" section', () => {
    expect(section("Quick start")).toContain("Run the tests: `npm test`");
    expect(anchors).toContain("check-a-rule-before-you-ship");
    expect(section("Check a rule before you ship")).toContain("npx sluice plan");
  });

  it("asks for the Node version package.json's engines requires", () => {
    const engines = /^>=(\d+(?:\.\d+)*)$/.exec(pkg.engines.node)?.[1];
    expect(engines).toBeDefined();
    expect(section("Quick start")).toContain(`You need Node ${engines} or newer`);
  });

  it("explains its terms: isolate, GCRA, shadow, local, on_error and its default, flip", () => {
    const words = section("Words used here");
    for (const term of ["**Isolate**", "**GCRA**", "**Shadow**", "**Local**", "**on_error**", "**Flip**"])
      expect(words, term).toContain(term);
    expect(words).toMatch(/`open` \(the default\)/);
  });

  it("says the shipped rules are a demo, and how a deploy treats them", () => {
    expect(section("Quick start")).toContain("`rules/shiplane.yaml` is a **demo**");
    expect(section("Deploy to Cloudflare")).toMatch(/delete the demo, `rules\/shiplane\.yaml`/);
  });

  it("has NGINX commands that write into out/, never into rules/ or the repository root", () => {
    const nginx = section("Coming from NGINX or Envoy");
    const outs = [...nginx.matchAll(/--out (\S+)/g)].map(([, path]) => path!);
    expect(outs.length).toBeGreaterThan(0);
    for (const path of outs) expect(path).toMatch(/^out\//);
    // `--trace` is read, not written: NGINX's own access log (plan --from nginx:) or a trace written into out/.
    for (const [, path] of nginx.matchAll(/--trace (\S+)/g)) expect(path).toMatch(/^(out\/|\/var\/log\/nginx\/)/);
  });

  it("shows check() with requestForCheck, which leaves the request's body to the handler", () => {
    const binding = section("Use it from your Worker");
    expect(binding).toContain("check(await requestForCheck(request))");
    expect(binding).not.toMatch(/check\(request\)/);
  });
});

describe("examples/README.md", () => {
  it("runs its recipe offline, on a port it names", () => {
    const recipe = readFileSync(join(ROOT, "examples", "README.md"), "utf8");
    const dev = /```sh\n([\s\S]*?)```/.exec(recipe)?.[1] ?? "";
    expect(dev).toContain("CLOUDFLARE_CF_FETCH_ENABLED=false");
    expect(dev).toContain("--port 8787");
    expect(dev).toContain("http://127.0.0.1:8787/");
  });
});
