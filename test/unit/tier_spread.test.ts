/**
 * The shard hand-over in the cluster simulation (src/sim/cluster.ts runs the real coalescers, delegates and key's
 * object): a busy first shard's spread moves only as many of a region's isolates as bring it under
 * `DELEGATE_BUSY_CALLS_PER_S` (to about `DELEGATE_AIM_CALLS_PER_S`), not all of them (every isolate used to move, leaving shard 0 a quarter of the region:
 * the isolates whose own shard was 0). Deterministic: simulated time, a fixed seed.
 */
import { describe, expect, it } from "vitest";
import { DELEGATE_AIM_CALLS_PER_S, DELEGATE_BUSY_CALLS_PER_S, DELEGATE_SHARDS } from "../../src/protocol/tunables.ts";
import { REGIONS, simulateCluster } from "../../src/sim/cluster.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1, 0, 0, 5);

describe("a busy first shard's spread", () => {
  it("moves part of a region (1,000 isolates at 10k req/s): shard 0 keeps about its aim, under 500 calls/s", async () => {
    const rule = { id: "hot-rate", params: tokenBucket(5000, 1000, 1000), version: 1 };
    const run = { rule, lowered: rule, isolates: 1000, loadPerS: 10_000, durationMs: 4000, t0Ms: T0, tier: true };
    const out = await simulateCluster({ ...run, scenario: "steady", seed: 71_000 });
    // The last 1.5 s (shard 0 says busy from about 1.75 s in: 250 calls in a calendar second).
    const from = T0 + 2500;
    const calls = out.delegates.map((d) => d.server.appliedAtMs.filter((at) => at >= from).length / 1.5);
    const firsts: number[] = [];
    for (let r = 0; r < REGIONS.length; r++) {
      const region = calls.slice(r * DELEGATE_SHARDS, (r + 1) * DELEGATE_SHARDS);
      firsts.push(region[0]!);
      // Some isolates moved (the first shard was busy), and the first shard is under issue 18's 500 calls/s.
      expect(region.slice(1).some((c) => c > 0)).toBe(true);
      expect(region[0]!).toBeLessThan(2 * DELEGATE_BUSY_CALLS_PER_S);
    }
    // Every isolate moving would leave shard 0 a quarter of its region's 500-590 calls a second (120-150); the spread
    // keeps it about DELEGATE_AIM_CALLS_PER_S (180-284 by region here, 227 on average).
    expect(DELEGATE_AIM_CALLS_PER_S).toBe(200);
    expect(firsts.reduce((a, b) => a + b, 0) / firsts.length).toBeGreaterThan(0.9 * DELEGATE_AIM_CALLS_PER_S);
    expect(Math.min(...firsts)).toBeGreaterThan(0.75 * DELEGATE_AIM_CALLS_PER_S);
  });
});
