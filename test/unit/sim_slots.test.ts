/**
 * The hot concurrency key of the cluster simulation (src/sim/slots.ts): requests holding a slot never exceed the
 * limit, and the key's object never holds more; a busy take (overloaded, late, lost) is refused with either
 * `on_error`, and the slot a late answer took is given back.
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

  it("past the object's capacity, busy takes are refused with on_error open too: never over the limit", async () => {
    for (const onError of ["open", "closed"] as const) {
      const out = await runSlots({ ...BASE, loadPerS: 2_500, durationMs: 1_000, onError });
      expect(out.failed).toBeGreaterThan(0);
      expect(out.overLimit).toBe(0);
      expect(out.maxInFlight).toBeLessThanOrEqual(5);
      expect(out.maxHeldAtObject).toBeLessThanOrEqual(5);
    }
  });

  it("a slot a late answer took is given back at once, not held until slot_ttl", async () => {
    // Far regions' takes time out while the object still grants them: each such slot is released by its id.
    const out = await runSlots({ ...BASE, limit: 50, loadPerS: 300, durationMs: 2_000, onError: "open" });
    expect(out.overLimit).toBe(0);
    expect(out.lateReleases).toBeGreaterThan(0);
    expect(out.releasesLost).toBeLessThan(out.lateReleases);
  });
});
