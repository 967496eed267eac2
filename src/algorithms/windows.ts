/** Epoch-aligned windows: window i of W ms covers [i·W, (i+1)·W); `month` windows are UTC calendar months. */

import { floorDiv } from "./arith.ts";
import type { Window } from "./params.ts";

/** The index of the window containing `nowMs` (months count from January 1970). */
export function windowIndex(window: Window, nowMs: number): number {
  if (window.kind === "ms") return floorDiv(nowMs, window.ms);
  const d = new Date(nowMs);
  return (d.getUTCFullYear() - 1970) * 12 + d.getUTCMonth();
}

/** The first ms of window `index`. */
export function windowStartMs(window: Window, index: number): number {
  if (window.kind === "ms") return index * window.ms;
  const year = 1970 + floorDiv(index, 12);
  return Date.UTC(year, index - (year - 1970) * 12, 1);
}
