/**
 * resume.ts: a waiting request takes up another request's answer only from timers of its own, and few of them: the
 * first sleeps through about half of what recent waits took, the next back off from 1 ms to `POLL_MAX_MS`. Driven by
 * a fake clock and a fake timer (no real time): each timer advances the clock by its length.
 */
import { describe, expect, it } from "vitest";
import { ownContextResumer, POLL_MAX_MS } from "../../src/isolate/resume.ts";

/** A resumer on a fake clock; `waitFor(answerAtMs)` resumes a wait whose answer comes `answerAtMs` after it starts. */
function fake() {
  let nowMs = 0;
  const sleeps: number[] = [];
  let settle: (() => void) | null = null;
  let answerAtMs = 0;
  let startMs = 0;
  const wait = async (ms: number) => {
    sleeps.push(ms);
    nowMs += ms;
    if (settle !== null && nowMs - startMs >= answerAtMs) settle();
  };
  const resume = ownContextResumer(() => nowMs, wait);
  return {
    sleeps,
    now: () => nowMs,
    async waitFor(afterMs: number, fail = false): Promise<{ value: string; sleeps: number[]; lateMs: number }> {
      sleeps.length = 0;
      startMs = nowMs;
      answerAtMs = afterMs;
      const settled = new Promise<string>((resolve, reject) => {
        settle = () => (fail ? reject(new Error("no")) : resolve("answer"));
      });
      const value = await resume(settled);
      settle = null;
      return { value, sleeps: [...sleeps], lateMs: nowMs - startMs - afterMs };
    },
  };
}

describe("resuming in a request's own context", () => {
  it("with no wait seen yet, polls from 1 ms, backing off to POLL_MAX_MS", async () => {
    const f = fake();
    const got = await f.waitFor(20);
    expect(got.value).toBe("answer");
    expect(got.sleeps.slice(0, 4)).toEqual([1, 1, 2, 4]);
    expect(Math.max(...got.sleeps)).toBe(POLL_MAX_MS);
    expect(got.lateMs).toBeLessThan(POLL_MAX_MS);
  });

  it("after waits of 40 ms, sleeps through up to 16 ms of one first, then takes fewer timers", async () => {
    const f = fake();
    const first = await f.waitFor(40);
    for (let i = 0; i < 20; i++) await f.waitFor(40);
    const later = await f.waitFor(40);
    expect(later.sleeps[0]).toBeGreaterThanOrEqual(15);
    expect(later.sleeps[0]).toBeLessThanOrEqual(20);
    // 40 ms from 1 ms polls backing off to 4: 1, 1, 2, 4 × 9 (12 timers); after 16 ms asleep: 1, 2, 4 × 6 (9 in all).
    expect(first.sleeps).toHaveLength(12);
    expect(later.sleeps).toHaveLength(9);
    expect(later.lateMs).toBeLessThan(POLL_MAX_MS);
  });

  it("never sleeps past an answer by POLL_MAX_MS or more, whatever came before", async () => {
    const f = fake();
    for (let i = 0; i < 10; i++) await f.waitFor(60);
    for (const afterMs of [1, 3, 9, 30, 64, 200]) expect((await f.waitFor(afterMs)).lateMs).toBeLessThan(20);
    const quick = await f.waitFor(2);
    expect(quick.sleeps[0]).toBeLessThanOrEqual(16);
  });

  it("rethrows the other request's failure from its own timer", async () => {
    const f = fake();
    await expect(f.waitFor(5, true)).rejects.toThrow("no");
  });
});
