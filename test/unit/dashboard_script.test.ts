/** The dashboard script's number formatting, run from the page's own source (the page in a browser: test/browser). */
import { describe, expect, it } from "vitest";
import { SCRIPT } from "../../src/edge/admin/dashboard_script.ts";

/** The page's `pct` helper, taken from the script as shipped. */
function pagePct(): (part: number, whole: number) => string {
  const source = /const pct = (\(part, whole\) => \{[\s\S]*?\n {2}\});/.exec(SCRIPT)?.[1];
  expect(source, "pct in dashboard_script.ts").toBeDefined();
  return new Function(`return ${source};`)() as (part: number, whole: number) => string;
}

describe("the page's percentages", () => {
  const pct = pagePct();
  it.each([
    [12, 2_916_000, "0.00041%"],
    [1, 1000, "0.1%"],
    [3, 10_000, "0.030%"],
    [0, 500, "0.0%"],
    [51, 100, "51.0%"],
    [1, 0, "-"],
  ])("%i of %i is %s: a small share keeps its digits", (part, whole, shown) => {
    expect(pct(part, whole)).toBe(shown);
  });

  it("the page gives up on the Worker after a while, and says so", () => {
    expect(SCRIPT).toContain("signal: AbortSignal.timeout(CALL_TIMEOUT_MS)");
    expect(SCRIPT).toContain('"the Worker did not answer " + why');
  });

  it("takes the stale fleet chart down when the fleet view fails", () => {
    expect(SCRIPT).toMatch(
      /\$\("fleet-data"\)\.hidden = true;\s*\$\("fleet-source"\)\.textContent = "";\s*\$\("fleet-error"\)\.textContent = "Fleet view failed: "/,
    );
  });
});

describe("the page's counters", () => {
  it("say when they count rule decisions (one per rule a request asks), which can exceed requests", async () => {
    const { VIEWS } = await import("../../src/edge/admin/dashboard_views.ts");
    expect(VIEWS).toContain('batched_requests: ["total", "rule decisions sent to an object in a batch of 2 or more');
    const { BODY } = await import("../../src/edge/admin/dashboard_markup.ts");
    expect(BODY).toContain("rule decisions: one per rule a request asks");
  });
});
