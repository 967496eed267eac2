/**
 * Times and durations as charts and tables print them (the command line's grammar is in `../cli/time_flag.ts`).
 * Everything is integer milliseconds since the Unix epoch; clock times are UTC.
 */
import { UNIT_MS } from "../rules/duration.ts";

/** A duration for prose: `60 s`, `1 s`, `250 ms`, `10 min`, `2 h`, `1 d` (seconds below 10 minutes). */
export function formatSpan(ms: number): string {
  if (ms < 1000 || (ms < 600_000 && ms % 1000 !== 0)) return ms < 1000 ? `${ms} ms` : `${trimNumber(ms / 1000, 3)} s`;
  if (ms < 600_000) return `${ms / 1000} s`;
  for (const unit of ["d", "h", "min", "s"] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]} ${unit}`;
  }
  return `${trimNumber(ms / 1000, 3)} s`;
}

/** How to print times: seconds from zero (`2.5 s`), or UTC time of day (`12:00:50`). */
export type TimeStyle = "seconds" | "clock";

/** Clock time for traces far from zero (real timestamps, or clock times from `sluice gen`), seconds otherwise. */
export function defaultTimeStyle(firstMs: number): TimeStyle {
  return firstMs >= 3_600_000 ? "clock" : "seconds";
}

/** `t` for a table: `2.5 s`, or `12:01:00.000`. */
export function formatTime(ms: number, style: TimeStyle): string {
  if (style === "seconds") return `${trimNumber(ms / 1000, 3)} s`;
  return `${clockOf(ms)}.${String(mod(ms, 1000)).padStart(3, "0")}`;
}

/** `t` for an axis tick: `2.5 s`, or `12:01:00` (milliseconds only when the tick has them). */
export function formatTick(ms: number, style: TimeStyle): string {
  if (style === "seconds") return `${trimNumber(ms / 1000, 3)} s`;
  const frac = mod(ms, 1000);
  return frac === 0 ? clockOf(ms) : `${clockOf(ms)}.${String(frac).padStart(3, "0")}`;
}

function clockOf(ms: number): string {
  const secondsOfDay = Math.floor(mod(ms, 86_400_000) / 1000);
  const h = Math.floor(secondsOfDay / 3600);
  const m = Math.floor(secondsOfDay / 60) % 60;
  const s = secondsOfDay % 60;
  return [h, m, s].map((n) => String(n).padStart(2, "0")).join(":");
}

function mod(n: number, d: number): number {
  return ((n % d) + d) % d;
}

/** A number with at most `digits` decimals and no trailing zeros (`2.5`, `0`, `16.667`). Never `-0`. */
export function trimNumber(n: number, digits: number): string {
  const text = n.toFixed(digits).replace(/\.?0+$/, "");
  return text === "-0" ? "0" : text;
}

/** Tick steps that read well both as seconds and on a clock face. */
const STEPS_MS = [
  1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
  600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];

/** Round tick positions in [fromMs, toMs]: the smallest step giving at most `maxTicks` of them. */
export function ticks(fromMs: number, toMs: number, maxTicks = 9): number[] {
  const span = Math.max(1, toMs - fromMs);
  let step = STEPS_MS.find((s) => span / s <= maxTicks - 1);
  if (step === undefined) step = Math.ceil(span / (maxTicks - 1) / 86_400_000) * 86_400_000;
  const out: number[] = [];
  for (let t = Math.ceil(fromMs / step) * step; t <= toMs; t += step) out.push(t);
  return out;
}

/** The tick step `ticks` would use, for padding a range out to round values. */
export function tickStep(fromMs: number, toMs: number, maxTicks = 9): number {
  const span = Math.max(1, toMs - fromMs);
  return STEPS_MS.find((s) => span / s <= maxTicks - 1) ?? Math.ceil(span / (maxTicks - 1) / 86_400_000) * 86_400_000;
}
