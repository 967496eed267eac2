import { describe, expect, it } from "vitest";
import { ablate, MECHANISMS, uses } from "../../src/protocol/mechanisms.ts";

// Switching a mechanism off is for this process (the ablation bench runs one per process), so this file does it once.
describe("the tier's mechanisms (src/protocol/mechanisms.ts)", () => {
  it("are all on until the ablation switches one off, and then only that one is off", () => {
    expect(MECHANISMS).toHaveLength(12);
    for (const m of MECHANISMS) expect(uses(m)).toBe(true);
    ablate("windowAhead");
    expect(uses("windowAhead")).toBe(false);
    expect(MECHANISMS.filter((m) => !uses(m))).toEqual(["windowAhead"]);
  });
});
