/**
 * Durations and rates as written in rule files, turned into exact integers.
 *
 * A duration is an optional positive integer and a unit: `250ms`, `s`, `3s`, `min`, `10min`, `h`, `d`.
 * A rate is `<amount>/<duration>`: `10/s`, `100/min`, `7/3s`, `1/d`. Nothing here is ever a float.
 */
import { gcd, MAX_SCALED } from "../algorithms/arith.ts";
import type { Rate } from "../algorithms/params.ts";

/** Milliseconds per unit. */
export const UNIT_MS = { ms: 1, s: 1_000, min: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export type DurationUnit = keyof typeof UNIT_MS;

/** The longest period or window, ms: 2^40 ms, about 34.8 years. Keeps window indices and time sums far below 2^53. */
export const MAX_PERIOD_MS = 2 ** 40;

/** The largest amount of a rate (and the largest integer a rule field takes): `MAX_SCALED`, 2^50. */
export const MAX_AMOUNT = MAX_SCALED;

const DURATION_RE = /^([0-9]*)(ms|s|min|h|d)$/;
const RATE_RE = /^([0-9]+)\/(.*)$/;

export const DURATION_HINT =
  "a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d)";

/** `text` as a whole number of ms, or why it is not a duration. */
export function parseDuration(text: string): { readonly ms: number } | { readonly error: string } {
  const m = DURATION_RE.exec(text);
  if (m === null) return { error: `must be ${DURATION_HINT}, got ${JSON.stringify(text)}` };
  const digits = m[1] ?? "";
  const unit = m[2] as DurationUnit;
  if (digits !== "" && !/^[1-9][0-9]*$/.test(digits)) {
    return {
      error: `the count in a duration must be a positive integer without leading zeros, got ${JSON.stringify(text)}`,
    };
  }
  const count = digits === "" ? 1 : Number(digits);
  const ms = count * UNIT_MS[unit];
  // Checked on the product, which is exact whenever it is within 2^40 (both factors are exact integers).
  if (!Number.isSafeInteger(count) || ms > MAX_PERIOD_MS) {
    return { error: `${JSON.stringify(text)} is too long (max 2^40 ms, about 34 years)` };
  }
  return { ms };
}

/** The exact rate `amount` per `periodMs`, with its reduced form. Both arguments are positive integers. */
export function rateOf(amount: number, periodMs: number): Rate {
  const g = gcd(amount, periodMs);
  return { amount, periodMs, tokens: amount / g, perMs: periodMs / g };
}

/** `text` (`<amount>/<duration>`) as an exact rate, or why it is not one. */
export function parseRate(text: string): Rate | { readonly error: string } {
  const m = RATE_RE.exec(text);
  if (m === null) {
    return { error: `must be a rate "<amount>/<duration>" such as 10/s, 100/min or 7/3s, got ${JSON.stringify(text)}` };
  }
  const digits = m[1] ?? "";
  if (!/^[1-9][0-9]*$/.test(digits)) {
    return {
      error: `the amount of a rate must be a positive integer without leading zeros, got ${JSON.stringify(text)}`,
    };
  }
  const amount = Number(digits);
  if (amount > MAX_AMOUNT) {
    return { error: `the amount of ${JSON.stringify(text)} is too large for exact arithmetic (max 2^50)` };
  }
  const period = parseDuration(m[2] ?? "");
  if ("error" in period) {
    return { error: `bad period in rate ${JSON.stringify(text)}: ${period.error}` };
  }
  return rateOf(amount, period.ms);
}

/** A duration as rule files write it: `s`, `3s`, `min`, `250ms` (the largest unit that divides it). */
export function formatDurationUnit(ms: number): string {
  for (const unit of ["d", "h", "min", "s"] as const) {
    const size = UNIT_MS[unit];
    if (ms % size === 0) return ms === size ? unit : `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
