/** The ring of recent denials: bounded, newest first, repeats of the newest (rule, key) folded into one entry. */
import { describe, expect, it } from "vitest";
import { RecentDenials } from "../../src/isolate/recent_denials.ts";

const denial = (atMs: number, rule: string, key: string) => ({ atMs, rule, key, retryAfterMs: 100, source: "object" });

describe("RecentDenials", () => {
  it("keeps the newest `capacity` entries, newest first", () => {
    const ring = new RecentDenials(3);
    expect(ring.list()).toEqual([]);
    for (let i = 1; i <= 5; i++) ring.record(denial(i, "r", `k${i}`));
    expect(ring.list().map((d) => d.key)).toEqual(["k5", "k4", "k3"]);
    expect(ring.list().every((d) => d.count === 1)).toBe(true);
  });

  it("folds a repeat of the newest (rule, key) into it: the count grows, time and retry move on", () => {
    const ring = new RecentDenials(3);
    ring.record(denial(1, "r", "a"));
    ring.record(denial(2, "r", "b"));
    for (let t = 3; t <= 10; t++) ring.record({ ...denial(t, "r", "b"), retryAfterMs: 1000 - t, source: "cache" });
    expect(ring.list()).toEqual([
      { atMs: 10, rule: "r", key: "b", retryAfterMs: 990, source: "cache", count: 9 },
      { atMs: 1, rule: "r", key: "a", retryAfterMs: 100, source: "object", count: 1 },
    ]);
  });

  it("the same key under another rule, or an older entry's key, takes a new slot", () => {
    const ring = new RecentDenials(4);
    ring.record(denial(1, "r1", "a"));
    ring.record(denial(2, "r2", "a"));
    ring.record(denial(3, "r1", "a"));
    expect(ring.list().map((d) => `${d.rule}:${d.key}:${d.count}`)).toEqual(["r1:a:1", "r2:a:1", "r1:a:1"]);
  });

  it("a flood from one key keeps the others: memory stays at capacity entries", () => {
    const ring = new RecentDenials(2);
    ring.record(denial(1, "r", "quiet"));
    for (let t = 2; t < 100_000; t++) ring.record(denial(t, "r", "flood"));
    expect(ring.list().map((d) => [d.key, d.count])).toEqual([
      ["flood", 99_998],
      ["quiet", 1],
    ]);
  });

  it("refuses a capacity below 1", () => {
    expect(() => new RecentDenials(0)).toThrow(RangeError);
  });
});
