/**
 * A delegate's credit for the refill of the parts a rate grant adds while its answer was on its way
 * (src/protocol/flight_credit.ts): half the smallest of this round trip and the last renewal's, at most
 * `FLIGHT_CREDIT_MAX_MS`, only for the parts gained, by the algorithm's own refill.
 */
import { describe, expect, it } from "vitest";
import { flightCredit, flightMs } from "../../src/protocol/flight_credit.ts";
import { FLIGHT_CREDIT_MAX_MS } from "../../src/protocol/tunables.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
// 5 tokens a ms, burst 1000: a part of 1,000 refills 1 token every 200 ms.
const params = tokenBucket(5000, 1000, 1000);
const held = (parts: number, over: { endsAtMs?: number; rttMs?: number; kind?: "rate" | "window" } = {}) => ({
  kind: over.kind ?? ("rate" as const),
  parts,
  endsAtMs: over.endsAtMs ?? T0 + 1000,
  ...(over.rttMs === undefined ? {} : { rttMs: over.rttMs }),
});

describe("flightMs", () => {
  it.each([
    ["a first ask: half its round trip", null, 30, 15],
    ["a round trip smaller than the last", held(10, { rttMs: 300 }), 30, 15],
    ["the last round trip smaller (this ask met a queue)", held(10, { rttMs: 20 }), 30, 10],
    ["an odd round trip, rounded down", null, 7, 3],
    ["a clock stepping back: none", null, -5, 0],
    ["at most FLIGHT_CREDIT_MAX_MS, however long the round trip", null, 100, FLIGHT_CREDIT_MAX_MS],
  ])("%s", (_name, old, rttMs, want) => {
    expect(flightMs(old, T0 - rttMs, T0)).toBe(want);
  });
});

describe("flightCredit", () => {
  it.each([
    // parts granted, what the holder held, round trip, tokens: gained parts x 5/1000 a ms x half the round trip
    // (20 ms: FLIGHT_CREDIT_MAX_MS at most).
    ["a first grant: every part", 400, null, 40, 40],
    ["a renewal: only the parts gained", 400, held(300), 40, 10],
    ["no part gained", 300, held(300), 40, 0],
    ["fewer parts", 100, held(300), 40, 0],
    ["a share that ended before the flight held none", 400, held(300, { endsAtMs: T0 - 60 }), 40, 40],
    ["a share that ended during the flight: its parts from then", 400, held(300, { endsAtMs: T0 - 10 }), 40, 25],
    ["a cut share that ended during the flight: the new parts from then", 100, held(300, { endsAtMs: T0 - 10 }), 40, 5],
    ["a window share held no parts", 400, held(300, { kind: "window" }), 40, 40],
    ["the last renewal's smaller round trip", 400, held(0, { rttMs: 20 }), 40, 20],
    ["an answer at once: nothing", 400, null, 0, 0],
    ["every part over a long flight: FLIGHT_CREDIT_MAX_MS of it", 1000, null, 1000, 5 * FLIGHT_CREDIT_MAX_MS],
  ])("%s", (_name, parts, old, rttMs, want) => {
    expect(flightCredit(params, parts, old, T0 - rttMs, T0)).toBe(want);
  });

  it("credits nothing for a rule that takes no rate share", () => {
    expect(flightCredit(fixedWindow(100, 60_000), 500, null, T0 - 100, T0)).toBe(0);
  });
});
