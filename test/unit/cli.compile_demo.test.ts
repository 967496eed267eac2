/** `sluice compile` as a deploy's build step refuses the demo rules (test/e2e/deploy_demo.test.ts runs it for real). */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEMO_MARKER, demoRefusals, isDemo } from "../../src/cli/compile.ts";

const dir = mkdtempSync(join(tmpdir(), "sluice-demo-unit-"));
const demo = join(dir, "demo.yaml");
const mine = join(dir, "mine.yaml");
writeFileSync(demo, `# a header\n${DEMO_MARKER}\n# more\n- id: a\n`);
writeFileSync(mine, `- id: b\n# ${DEMO_MARKER.slice(2)} only in a later comment\n${DEMO_MARKER}\n`);

describe("the demo marker", () => {
  it("counts only in the file's opening comment", () => {
    expect(isDemo(`${DEMO_MARKER}\n- id: a\n`)).toBe(true);
    expect(isDemo(`# x\n\n${DEMO_MARKER}\n`)).toBe(true);
    expect(isDemo(`- id: a\n${DEMO_MARKER}\n`)).toBe(false);
    expect(isDemo("# sluice: demonstration\n")).toBe(false);
  });

  it("stops a deploy's build (any wrangler command but dev), not npm start, wrangler dev or SLUICE_DEPLOY_DEMO=1", () => {
    expect(demoRefusals([demo, mine], { WRANGLER_COMMAND: "deploy" })).toEqual([
      expect.stringMatching(new RegExp(`^${demo}: the demo API's rules \\(marked "# sluice: demo"\\), not yours`)),
    ]);
    expect(demoRefusals([demo], { WRANGLER_COMMAND: "versions upload" })).toHaveLength(1);
    expect(demoRefusals([demo], {})).toEqual([]);
    expect(demoRefusals([demo], { WRANGLER_COMMAND: "dev" })).toEqual([]);
    expect(demoRefusals([demo], { WRANGLER_COMMAND: "deploy", SLUICE_DEPLOY_DEMO: "1" })).toEqual([]);
  });
});
