/** Durations and rates: the written forms, their exact integer values, and the reduced rate. */
import { describe, expect, it } from "vitest";
import { parseDuration, parseRate, rateOf } from "../../src/rules/duration.ts";

describe("parseDuration", () => {
  it.each([
    ["250ms", 250],
    ["ms", 1],
    ["s", 1_000],
    ["3s", 3_000],
    ["min", 60_000],
    ["10min", 600_000],
    ["h", 3_600_000],
    ["d", 86_400_000],
    ["30d", 2_592_000_000],
    ["12725d", 1_099_440_000_000],
    ["1099511627776ms", 2 ** 40],
  ])("%s is %i ms", (text, ms) => {
    expect(parseDuration(text)).toEqual({ ms });
  });

  it.each([
    ["", "must be a duration"],
    ["0s", "positive integer"],
    ["03s", "without leading zeros"],
    ["-1s", "must be a duration"],
    ["1.5s", "must be a duration"],
    ["10 s", "must be a duration"],
    ["10sec", "must be a duration"],
    ["10m", "must be a duration"],
    ["1S", "must be a duration"],
    ["month", "must be a duration"],
    ["1099511627777ms", "too long"],
    ["12726d", "too long"],
    ["99999999999999999999d", "too long"],
  ])("%j is an error (%s)", (text, fragment) => {
    const result = parseDuration(text);
    expect("error" in result && result.error).toContain(fragment);
  });
});

describe("parseRate", () => {
  it.each([
    ["10/s", 10, 1_000, 1, 100],
    ["100/min", 100, 60_000, 1, 600],
    ["7/3s", 7, 3_000, 7, 3_000],
    ["1/d", 1, 86_400_000, 1, 86_400_000],
    ["1000000/s", 1_000_000, 1_000, 1_000, 1],
    ["50/s", 50, 1_000, 1, 20],
    ["120/min", 120, 60_000, 1, 500],
    ["3/ms", 3, 1, 3, 1],
    ["1000/d", 1_000, 86_400_000, 1, 86_400],
    ["6/4s", 6, 4_000, 3, 2_000],
  ])("%s is %i per %i ms, reduced %i per %i ms", (text, amount, periodMs, tokens, perMs) => {
    expect(parseRate(text)).toEqual({ amount, periodMs, tokens, perMs });
  });

  it.each([
    ["10", "must be a rate"],
    ["/s", "must be a rate"],
    ["0/s", "positive integer"],
    ["010/s", "without leading zeros"],
    ["1.5/s", "must be a rate"],
    ["10/sec", 'bad period in rate "10/sec"'],
    ["10/0s", 'bad period in rate "10/0s"'],
    ["10 / s", "must be a rate"],
    ["1125899906842625/s", "too large for exact arithmetic"],
    ["1/12726d", "too long"],
  ])("%j is an error (%s)", (text, fragment) => {
    const result = parseRate(text);
    expect("error" in result && result.error).toContain(fragment);
  });

  it("rateOf reduces by the gcd and keeps what was written", () => {
    expect(rateOf(10, 1_000)).toEqual({ amount: 10, periodMs: 1_000, tokens: 1, perMs: 100 });
    expect(rateOf(7, 3_000)).toEqual({ amount: 7, periodMs: 3_000, tokens: 7, perMs: 3_000 });
  });
});
