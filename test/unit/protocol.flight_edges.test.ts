/**
 * The flight credit at its edges (src/protocol/flight_credit.ts; protocol.flight_credit.test.ts has its table): a last
 * renewal's round trip below 0 (a clock stepped back) or of 0, and a window share's parts, whatever its record says,
 * counting as none held. Whole tokens per part of the split (parts gained, parts held) show where a split differs.
 */
import { describe, expect, it } from "vitest";
import { flightCredit, flightMs } from "../../src/protocol/flight_credit.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
// 5 tokens a ms, burst 1000: 1,000 parts refill 5 tokens a ms, 100 parts one every 2 ms.
const params = tokenBucket(5000, 1000, 1000);

describe("flight credit edges", () => {
  it("flightMs: a last round trip below 0 is not one (this ask's counts); one of 0 is the smallest", () => {
    // [last renewal's round trip, this one] -> flight
    const table: [number, number, number][] = [
      [-5, 30, 15],
      [0, 100, 0],
      [1, 100, 0],
      [2, 100, 1],
    ];
    for (const [last, rtt, want] of table) {
      const old = { kind: "rate" as const, parts: 10, endsAtMs: T0 + 1000, rttMs: last };
      expect([last, rtt, flightMs(old, T0 - rtt, T0)]).toEqual([last, rtt, want]);
    }
  });

  it("a window share's parts count as none held: the whole grant is gained, one refill", () => {
    // A flight of 1 ms: 400 parts refill 2 tokens. Counted as 300 held (a rate share's, still live: its own bucket
    // refills them) it would be 100 gained, 0 whole tokens; the held ones from the flight's start, 1 more.
    const window = { kind: "window" as const, parts: 300, endsAtMs: T0 + 1000 };
    expect(flightCredit(params, 400, window, T0 - 3, T0)).toBe(2);
    expect(flightCredit(params, 400, { ...window, kind: "rate" }, T0 - 3, T0)).toBe(0);
  });
});
