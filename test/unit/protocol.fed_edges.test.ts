/**
 * Exact edges of a rate share's parts (share_grant.ts `fedParts`): never fewer than the least parts whose slice holds a
 * whole unit of the burst, and never leaving the direct slice fewer than those. The same function as share_fed.test.ts
 * tables, here with both sides of each comparison, in the protocol's mutation set (vitest.mutation.protocol.config.ts
 * runs `protocol.*.test.ts`, not share_fed.test.ts). Stands for issue 36's bound with no unit per share: a rule whose
 * rate cannot feed every delegate feeds as many as it can, first come.
 */
import { describe, expect, it } from "vitest";
import { fedParts } from "../../src/protocol/share_grant.ts";

describe("fedParts: parts, room, least -> fed", () => {
  const cases: [string, number, number, number, number][] = [
    // A free-global rule (burst 20: 50 parts the least) whose fair share is 27 parts: raised to 50, room allowing.
    ["raised to the least", 27, 1000, 50, 50],
    // Its fair share is exactly the least: those.
    ["exactly the least", 50, 1000, 50, 50],
    // 60 parts of room: after 50, 10 would be left to the direct slice, which could not use them: all 60.
    ["the direct slice's last parts too", 27, 60, 50, 60],
    // Exactly the least parts of room: all of them.
    ["room of exactly the least", 27, 50, 50, 50],
    // 40 parts of room, fewer than the least: none (the delegate refuses from what it knows until its short term ends).
    ["no room for the least", 27, 40, 50, 0],
    // No demand: none.
    ["no parts asked", 0, 1000, 50, 0],
    // 300 of 1,000: enough for it, and 700 left for the direct slice.
    ["enough, and room left", 300, 1000, 50, 300],
    // 300 of 320: the 20 left would be under the least: all 320.
    ["the rest under the least", 300, 320, 50, 320],
    // 300 of 350: 50 left, exactly the least: the direct slice keeps them.
    ["the rest exactly the least", 300, 350, 50, 300],
    // 300 of 349: 49 left: all 349.
    ["the rest one under the least", 300, 349, 50, 349],
    // A large burst (1 part the least): 5 parts are 5.
    ["a large burst", 5, 1000, 1, 5],
    // A burst of 1 (every part the least): one part asked takes all 1,000.
    ["a burst of 1", 1, 1000, 1000, 1000],
  ];
  it.each(cases)("%s", (_name, parts, room, least, fed) => {
    expect(fedParts(parts, room, least)).toBe(fed);
  });
});
