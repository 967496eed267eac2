/**
 * The cluster simulation's load shapes (src/sim/arrivals.ts): a flash crowd is 5% of the load, then all of it at a
 * quarter of the run; growth rises evenly from 0; steady runs draw exactly the arrivals they drew before shapes existed.
 */
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/cli/gen.ts";
import { arrivalsOf, loadShare } from "../../src/sim/arrivals.ts";

const RUN = { isolates: 100, loadPerS: 10_000, t0Ms: 1_000_000, durationMs: 8_000 };
const inSpan = (times: readonly number[], fromMs: number, toMs: number) =>
  times.filter((t) => t >= RUN.t0Ms + fromMs && t < RUN.t0Ms + toMs).length;

describe("load shapes", () => {
  it.each([
    ["flash crowd", 0, 0.05],
    ["flash crowd", 1_999, 0.05],
    ["flash crowd", 2_000, 1],
    ["growth", 0, 0],
    ["growth", 4_000, 0.5],
    ["growth", 8_000, 1],
    ["steady", 100, 1],
  ] as const)("%s at %i ms: %f of the load", (shape, elapsedMs, share) => {
    expect(loadShare(shape, elapsedMs, RUN.durationMs)).toBe(share);
  });

  it("a flash crowd: about 500 req/s for 2 s, then about 10,000", () => {
    const times = arrivalsOf({ ...RUN, shape: "flash crowd" }, mulberry32(7)).map((a) => a.atMs);
    expect(inSpan(times, 0, 2_000)).toBeGreaterThan(800);
    expect(inSpan(times, 0, 2_000)).toBeLessThan(1_200);
    expect(inSpan(times, 2_000, 3_000)).toBeGreaterThan(9_500);
    expect(inSpan(times, 2_000, 3_000)).toBeLessThan(10_500);
  });

  it("growth: the last second carries about 15 times the first", () => {
    const times = arrivalsOf({ ...RUN, shape: "growth" }, mulberry32(7)).map((a) => a.atMs);
    const first = inSpan(times, 0, 1_000);
    const last = inSpan(times, 7_000, 8_000);
    expect(first).toBeGreaterThan(500);
    expect(first).toBeLessThan(750);
    expect(last / first).toBeGreaterThan(12);
    expect(last / first).toBeLessThan(19);
  });

  it("steady: the same arrivals with or without a shape given (no extra random draw)", () => {
    expect(arrivalsOf({ ...RUN, shape: "steady" }, mulberry32(3))).toEqual(arrivalsOf(RUN, mulberry32(3)));
  });
});
