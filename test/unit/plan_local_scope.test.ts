/** `sluice plan` on `scope: global -> local` says what its one-isolate replay cannot show. */
import { describe, expect, it } from "vitest";
import { formatPlan, LOCAL_FLEET_NOTE } from "../../src/replay/plan_report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const rule = (scope: string) => {
  const parsed = parseRules(
    `- id: per-ip\n  match: { identity: ip }\n  algorithm: gcra\n  rate: 10/s\n  burst: 20\n  scope: ${scope}\n`,
    "rules/x.yaml",
  );
  expect(parsed.errors).toEqual([]);
  return parsed.rules[0]!;
};

describe("sluice plan, scope: global -> local", () => {
  it("says the replay (one isolate) cannot show the fleet effect, up to the limit per isolate", () => {
    const text = formatPlan([{ id: "per-ip", before: rule("global"), after: rule("local") }], "a", "b", null, "t");
    expect(text).toContain(`  fleet: ${LOCAL_FLEET_NOTE}\n`);
    expect(LOCAL_FLEET_NOTE).toContain("cannot show this change's effect");
  });

  it("says nothing of the kind for local -> global", () => {
    const text = formatPlan([{ id: "per-ip", before: rule("local"), after: rule("global") }], "a", "b", null, "t");
    expect(text).not.toContain("fleet:");
  });
});
