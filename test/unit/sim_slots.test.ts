/**
 * The hot concurrency key of the cluster simulation (src/sim/slots.ts): requests holding a slot never exceed the
 * limit, and the key's object never holds more; a failed take goes on uncounted with `on_error: open` only.
 */
import { describe, expect, it } from "vitest";
import { runSlots, type SlotRun } from "../../src/sim/slots.ts";

const BASE: Omit<SlotRun, "loadPerS" | "onError" | "durationMs"> = {
  limit: 5,
  slotTtlMs: 60_000,
  isolates: 200,
  holdMs: 200,
  seed: 7,
};

describe("a hot concurrency key, simulated", () => {
  it("at a load the object serves: never more than the limit in flight, both ways", async () => {
    for (const onError of ["open", "closed"] as const) {
      const out = await runSlots({ ...BASE, loadPerS: 60, durationMs: 3_000, onError });
      expect(out.admitted).toBeGreaterThan(20);
      expect(out.refused).toBeGreaterThan(0);
      expect(out.maxInFlightWithSlot).toBeLessThanOrEqual(5);
      expect(out.maxHeldAtObject).toBe(5);
      if (onError === "closed" || out.failed === 0) expect(out.overLimit).toBe(0);
    }
  });

  it("past the object's capacity, failed takes exceed the limit with on_error open, never with closed", async () => {
    const open = await runSlots({ ...BASE, loadPerS: 2_500, durationMs: 1_000, onError: "open" });
    const closed = await runSlots({ ...BASE, loadPerS: 2_500, durationMs: 1_000, onError: "closed" });
    expect(open.failed).toBeGreaterThan(0);
    expect(open.overLimit).toBeGreaterThan(0);
    expect(open.maxInFlightWithSlot).toBeLessThanOrEqual(5);
    expect(closed.overLimit).toBe(0);
    expect(closed.maxInFlight).toBeLessThanOrEqual(5);
  });
});
