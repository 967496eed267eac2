/**
 * The simulation's links (src/sim/network.ts `linkOf`): common random numbers. Stands for the fairness of every
 * comparison the cluster SIMULATION makes on the same arrivals (the tier against one call per request at 10 req/s,
 * an ablated mechanism against all on): a link's delays and losses must not depend on what other links carried, or two
 * runs differ by the network's draws rather than by what is compared.
 */
import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/cli/gen.ts";
import { LOST_MESSAGE_RATE, linkOf } from "../../src/sim/network.ts";

const draws = (link: ReturnType<typeof linkOf>, n: number) =>
  Array.from({ length: n }, () => [link(), link.lost?.() ?? null] as const);

describe("a link's own stream (src/sim/network.ts linkOf)", () => {
  it("draws the same delays and losses whatever other links drew before", () => {
    const alone = draws(linkOf(7, "isolate 3.0 to key", 150, mulberry32), 50);
    const other = linkOf(7, "isolate 4.0 to key", 150, mulberry32);
    for (let i = 0; i < 500; i++) other();
    expect(draws(linkOf(7, "isolate 3.0 to key", 150, mulberry32), 50)).toEqual(alone);
  });

  it("differs by name and by seed", () => {
    const a = draws(linkOf(7, "isolate 3.0 to key", 150, mulberry32), 20);
    expect(draws(linkOf(7, "isolate 3.1 to key", 150, mulberry32), 20)).not.toEqual(a);
    expect(draws(linkOf(8, "isolate 3.0 to key", 150, mulberry32), 20)).not.toEqual(a);
  });

  it("keeps the world's figures: delays around half the round trip, about 0.1% lost", () => {
    const link = linkOf(1, "isolate 0.0 to key", 100, mulberry32);
    const n = 200_000;
    const delays: number[] = [];
    let lost = 0;
    for (let i = 0; i < n; i++) {
      delays.push(link());
      if (link.lost?.() === true) lost++;
    }
    delays.sort((x, y) => x - y);
    expect(delays[n / 2]).toBeGreaterThanOrEqual(48);
    expect(delays[n / 2]).toBeLessThanOrEqual(52);
    expect(delays[Math.floor(n * 0.99)]).toBeGreaterThanOrEqual(5 * 50 * 0.9);
    expect(lost / n).toBeGreaterThan(LOST_MESSAGE_RATE / 2);
    expect(lost / n).toBeLessThan(LOST_MESSAGE_RATE * 2);
  });
});
