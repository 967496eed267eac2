/**
 * The replay's queue of charges not yet due (src/replay/due_queue.ts): a `count_when` charge is applied at its
 * response's end, so charges must come out by due time, and two due at the same millisecond in the order their
 * requests came (the order the key's object would apply them). Checked against a sort of the same entries, past the
 * queue's first growth.
 */
import { describe, expect, it } from "vitest";
import { DueQueue } from "../../src/replay/due_queue.ts";

describe("DueQueue", () => {
  it("gives charges back by due time, ties in arrival order, across growth", () => {
    const q = new DueQueue();
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const pushed: { dueMs: number; arrival: number }[] = [];
    const out: number[] = [];
    const expected: number[] = [];
    for (let i = 0; i < 500; i++) {
      // Few distinct due times, so ties are common.
      const dueMs = 1000 + Math.floor(random() * 20);
      q.push(dueMs, i % 3, i, 1);
      pushed.push({ dueMs, arrival: i });
      // Now and then take out what is due before a time, as `settle` does.
      if (i % 50 === 49) {
        const beforeMs = 1000 + Math.floor(random() * 20);
        const due = pushed.filter((p) => p.dueMs < beforeMs).sort((a, b) => a.dueMs - b.dueMs || a.arrival - b.arrival);
        for (const p of due) pushed.splice(pushed.indexOf(p), 1);
        expected.push(...due.map((p) => p.arrival));
        while (q.firstDueMs < beforeMs) {
          q.pop();
          out.push(q.poppedKey);
        }
      }
    }
    expect(out.length).toBeGreaterThan(100);
    expect(out).toEqual(expected);
    expect(q.size).toBe(pushed.length);
  });

  it("carries each entry's rule, key, units and due time out whole", () => {
    const q = new DueQueue();
    q.push(20, 2, 7, 3);
    q.push(10, 1, 9, 5);
    q.pop();
    expect([q.poppedDueMs, q.poppedRule, q.poppedKey, q.poppedCost]).toEqual([10, 1, 9, 5]);
    q.pop();
    expect([q.poppedDueMs, q.poppedRule, q.poppedKey, q.poppedCost]).toEqual([20, 2, 7, 3]);
    expect(q.firstDueMs).toBe(Number.POSITIVE_INFINITY);
  });

  it("carries a renewal's end out with it, and NaN for an entry without one (a release, a charge)", () => {
    const q = new DueQueue();
    q.push(30, 0, 1, 1_700_000_000_000_123, 90);
    q.push(10, 0, 1, 1_700_000_000_000_123);
    q.pop();
    expect([q.poppedDueMs, q.poppedCost, q.poppedUntilMs]).toEqual([10, 1_700_000_000_000_123, Number.NaN]);
    q.pop();
    expect([q.poppedDueMs, q.poppedCost, q.poppedUntilMs]).toEqual([30, 1_700_000_000_000_123, 90]);
  });
});
