/** Epoch-aligned windows: window i of W ms covers [i·W, (i+1)·W); `month` windows are UTC calendar months. */

import { floorDiv } from "./arith.ts";
import type { Window } from "./params.ts";

/** The index of the window containing `nowMs` (months count from January 1970). */
export function windowIndex(window: Window, nowMs: number): number {
  if (window.kind === "ms") return floorDiv(nowMs, window.ms);
  return monthIndex(floorDiv(nowMs, 86_400_000));
}

/**
 * The UTC month (from January 1970) of day `days` since the epoch, in integers: Hinnant's `civil_from_days`
 * (March-based years of 365.2425 days, in 400-year eras). What `new Date(ms)`'s UTC year and month say, without
 * a `Date` made per decision.
 */
function monthIndex(days: number): number {
  const z = days + 719_468; // days since 0000-03-01
  const era = floorDiv(z, 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const m = Math.floor((5 * dayOfYear + 2) / 153); // 0 = March ... 11 = February
  const year = yearOfEra + era * 400 + (m >= 10 ? 1 : 0);
  const month = m < 10 ? m + 2 : m - 10; // 0 = January
  return (year - 1970) * 12 + month;
}

/** The first ms of window `index`. */
export function windowStartMs(window: Window, index: number): number {
  if (window.kind === "ms") return index * window.ms;
  const year = 1970 + floorDiv(index, 12);
  return Date.UTC(year, index - (year - 1970) * 12, 1);
}
